// Baseline for scripts/bench/bench_tokenizer.sh: GPT-2 encode throughput of the npm
// `tiktoken` package (Rust compiled to WASM) on one thread.
//   node scripts/bench/bench_tokenizer.mjs [--encoding gpt2] [--reps N] FILE...
// Prints one line: "tiktoken-wasm <encoding> <bytes> <tokens> <seconds> <MB/s>".
import { readFileSync } from "node:fs";
import { loadTiktoken } from "../dev/tiktoken_npm.mjs";

const { get_encoding } = loadTiktoken();

let encodingName = "gpt2";
let reps = 1;
const files = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; ++i) {
  if (argv[i] === "--encoding") encodingName = argv[++i];
  else if (argv[i] === "--reps") reps = Number(argv[++i]);
  else files.push(argv[i]);
}
if (files.length === 0) {
  console.error("usage: bench_tokenizer.mjs [--encoding gpt2] [--reps N] FILE...");
  process.exit(2);
}

// Read and decode before timing: the C++ side also times encode() only.
const texts = files.map((f) => readFileSync(f, "utf8"));
const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t, "utf8"), 0);
const enc = get_encoding(encodingName);
enc.encode_ordinary(texts[0].slice(0, 10000));  // warm up the WASM instance

let tokens = 0;
const t0 = process.hrtime.bigint();
for (let r = 0; r < reps; ++r)
  for (const t of texts) tokens += enc.encode_ordinary(t).length;
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
enc.free();
console.log(`tiktoken-wasm ${encodingName} ${bytes * reps} ${tokens} ${seconds.toFixed(3)} ` +
            `${(bytes * reps / seconds / 1e6).toFixed(2)}`);
