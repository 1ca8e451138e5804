// Baseline for scripts/bench/bench_tokenizer_hf.sh: encode throughput of
// Hugging Face's tokenizers (npm tokenizers, the Rust library's Node binding,
// native code) on one thread, awaiting each encode before the next.
//   node scripts/bench/bench_tokenizer_hf.mjs --file TOKENIZER.json [--reps N] FILE...
// Prints one line: "hf-tokenizers <bytes> <tokens> <seconds> <MB/s>".
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const npm = join(dirname(fileURLToPath(import.meta.url)), "../../third_party/npm/node_modules");
let Tokenizer;
try {
  ({ Tokenizer } = createRequire(import.meta.url)(join(npm, "tokenizers")));
} catch (e) {
  console.error(`npm tokenizers cannot be loaded from ${npm} (${e.code ?? e.message}); ` +
                "run scripts/setup.sh");
  process.exit(1);
}

let file = "";
let reps = 1;
const files = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; ++i) {
  if (argv[i] === "--file") file = argv[++i];
  else if (argv[i] === "--reps") reps = Number(argv[++i]);
  else files.push(argv[i]);
}
if (!file || files.length === 0) {
  console.error("usage: bench_tokenizer_hf.mjs --file TOKENIZER.json [--reps N] FILE...");
  process.exit(2);
}

// Read and decode before timing: the C++ side also times encode() only.
const texts = files.map((f) => readFileSync(f, "utf8"));
const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t, "utf8"), 0);
const tok = Tokenizer.fromFile(file);
const opts = { addSpecialTokens: false };
await tok.encode(texts[0].slice(0, 10000), null, opts);  // warm up

let tokens = 0;
const t0 = process.hrtime.bigint();
for (let r = 0; r < reps; ++r)
  for (const t of texts) tokens += (await tok.encode(t, null, opts)).getIds().length;
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(`hf-tokenizers ${bytes * reps} ${tokens} ${seconds.toFixed(3)} ` +
            `${(bytes * reps / seconds / 1e6).toFixed(2)}`);
