// Regenerates tests/tokenizer/reference.jsonl: for every line's "text" (and
// "special_allowed", the special tokens that line may contain), the ids of the
// real GPT-2 and cl100k_base tokenizers, from the npm tiktoken package that
// scripts/setup.sh installs (OpenAI's Rust tokenizer compiled to WASM).
// Texts and names are kept; ids and utf8_bytes are recomputed. Add a case by
// appending {"name": ..., "text": ...} and running:
//   node scripts/dev/tokenizer_reference.mjs tests/tokenizer/reference.jsonl > new.jsonl
// The test tokenizer.reference_regenerates checks that the file in the
// repository is exactly what this script writes.
import { readFileSync } from "node:fs";
import { loadTiktoken } from "./tiktoken_npm.mjs";

const [path] = process.argv.slice(2);
if (!path) {
  console.error("usage: node scripts/dev/tokenizer_reference.mjs REFERENCE.jsonl > OUT.jsonl");
  process.exit(2);
}
const tiktoken = loadTiktoken();
const encodings = ["gpt2", "cl100k_base"].map((name) => [name, tiktoken.get_encoding(name)]);
const encoder = new TextEncoder();

const lines = readFileSync(path, "utf8").split("\n").filter((l) => l.trim());
for (const [i, line] of lines.entries()) {
  let entry;
  try {
    entry = JSON.parse(line);
  } catch (e) {
    console.error(`${path}:${i + 1}: not JSON (${e.message})`);
    process.exit(1);
  }
  const { name, text, special_allowed: special } = entry;
  const out = { name, text, utf8_bytes: encoder.encode(text).length };
  if (special) out.special_allowed = special;
  for (const [encName, enc] of encodings)
    out[encName] = Array.from(special ? enc.encode(text, special) : enc.encode_ordinary(text));
  console.log(JSON.stringify(out));
}
for (const [, enc] of encodings) enc.free();
