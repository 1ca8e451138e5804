// The npm `tiktoken` package (OpenAI's Rust tokenizer compiled to WASM) that
// scripts/setup.sh installs into third_party/npm: the benchmark's baseline and
// the tokenizer tests' ground truth. Missing, it is a broken setup: say so
// and exit 1 rather than throw a bare MODULE_NOT_FOUND.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const packageDir = join(dirname(fileURLToPath(import.meta.url)),
                        "../../third_party/npm/node_modules/tiktoken");

export function loadTiktoken() {
  try {
    return createRequire(import.meta.url)(packageDir);
  } catch (e) {
    console.error(`npm tiktoken cannot be loaded from ${packageDir} (${e.code ?? e.message}); ` +
                  "run scripts/setup.sh");
    process.exit(1);
  }
}
