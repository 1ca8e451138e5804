// Builds the texts of tests/tokenizer/hf_reference.jsonl (run once; the
// texts are then kept in that file, and hf_reference.mjs recomputes the ids):
//   node tests/tokenizer/hf_corpus.mjs > /tmp/hf_texts.jsonl
//   node tests/tokenizer/hf_reference.mjs /tmp/hf_texts.jsonl > tests/tokenizer/hf_reference.jsonl
// Sources, all offline (Debian packages that scripts/setup.sh installs, plus
// unicode-data): the texts of reference.jsonl beside this file, Python's
// documentation (prose and code), this repository's C++/Python/shell code,
// fortunes, the King James Bible, NormalizationTest.txt (NFC cases), and
// generated multilingual, emoji, digit and whitespace texts (fixed seed).
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const docs = [];
const add = (name, text) => docs.push({ name, text });
const cap = (text, n = 1500) => (text.length > n ? text.slice(0, n) : text);

let seed = 12345;
const rand = (n) => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed % n;
};
const pick = (a) => a[rand(a.length)];

// 1. The hand-picked edge cases of reference.jsonl.
for (const line of readFileSync(join(here, "reference.jsonl"), "utf8").split("\n"))
  if (line.trim()) add("ref_" + JSON.parse(line).name, JSON.parse(line).text);

// 2. Python documentation: 120 files, a slice of each (prose with code blocks).
const pyDocs = "/usr/share/doc/python3.11/html/_sources/library";
const pyFiles = readdirSync(pyDocs).filter((f) => f.endsWith(".rst.txt")).sort();
for (let i = 0; i < 120; ++i) {
  const f = pyFiles[(i * 7) % pyFiles.length];
  const t = readFileSync(join(pyDocs, f), "utf8");
  const start = rand(Math.max(1, t.length - 1500));
  add(`pydoc_${i}_${f}`, cap(t.slice(start)));
}

// 3. Code: this repository's sources (C++, Python, shell, CMake, YAML).
const code = [];
const walk = (d) => {
  for (const e of readdirSync(d).sort()) {
    const p = join(d, e);
    if (statSync(p).isDirectory()) walk(p);
    else if (/\.(cpp|hpp|cu|py|sh|txt|yaml|mjs)$/.test(e)) code.push(p);
  }
};
for (const d of ["lib", "app", "scripts", "kernels"]) walk(join(root, d));
for (let i = 0; i < 110; ++i) {
  const p = code[(i * 13) % code.length];
  const t = readFileSync(p, "utf8");
  add(`code_${i}_${p.slice(root.length + 1)}`, cap(t.slice(rand(Math.max(1, t.length - 1200)))));
}

// 4. Fortunes (short) and Bible chapters (long prose).
const fortunes = readFileSync("/usr/share/games/fortunes/fortunes", "utf8").split("\n%\n");
for (let i = 0; i < 60; ++i) add(`fortune_${i}`, fortunes[(i * 31) % fortunes.length]);
for (const [i, ref] of ["gen1", "ps23", "ps119:1-40", "john1", "rev22", "job38", "matt5"].entries())
  add(`bible_${i}`, cap(execFileSync("bible", [ref], { encoding: "utf8" }), 4000));

// 5. NFC: source strings of NormalizationTest.txt, 40 per document.
const norm = execFileSync("bzcat", ["/usr/share/unicode/NormalizationTest.txt.bz2"], {
  encoding: "utf8",
  maxBuffer: 1 << 26,
})
  .split("\n")
  .filter((l) => /^[0-9A-F]/.test(l))
  .map((l) => String.fromCodePoint(...l.split(";")[0].split(" ").map((h) => parseInt(h, 16))));
for (let i = 0; i < 40; ++i) {
  const parts = [];
  for (let k = 0; k < 40; ++k) parts.push(norm[rand(norm.length)]);
  add(`nfc_${i}`, parts.join(pick([" ", "", "a", "\n", "1"])));
}

// 6. Multilingual prose, emoji, digits and whitespace, mixed at random.
const phrases = [
  "机器学习是人工智能的一个分支。", "今日は良い天気ですね、散歩に行きましょう。",
  "한국어 텍스트도 잘 처리되어야 합니다.", "Привет, мир! Как дела?", "Ελληνικά γράμματα: αβγδε.",
  "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "Tiếng Việt có dấu: ắ ằ ẳ ẵ ặ",
  "Ça va? Déjà vu, naïve café, Ångström, Øresund.", "Straße, Größe, Fußgänger",
  "e\u0301 a\u0300 o\u0308 n\u0303 \u1100\u1161\u11a8", "Ǆ ǅ ǆ ﬁ ﬂ Ⅻ ①②③ ¹²³", "It'S HE'LL they'RE we'VE",
  "ſ'ſ 'ſ I'ſ", "😀😃😄 👩‍👩‍👧‍👦 🏳️‍🌈 👍🏽 🇺🇸🇯🇵", "1234567890 ٠١٢٣٤٥ ०१२३ 12,345.678",
  "<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|im_start|>",
  "<|im_end|>", "<think>", "</think>", "<tool_call>", "<|fim_prefix|>", "<|reserved_special_token_7|>",
  "<|endoftext", "<think", "\t\t", "    ", "\n\n\n", "\r\n", " \u00a0 ", "\u3000", "\u2003\u2009",
  "\u0085", "\ufeff", "\u200b", "x = f(y) + g[z]; // comment", "def f(x):\n    return x**2\n",
  "https://example.com/path?q=1&r=2#frag", "user@example.org", "$100.00 €50 ¥1000", "—–-…“”‘’",
];
for (let i = 0; i < 150; ++i) {
  const parts = [];
  const k = 3 + rand(25);
  for (let j = 0; j < k; ++j) parts.push(pick(phrases) + pick(["", " ", "  ", "\n", ""]));
  add(`mixed_${i}`, parts.join(""));
}

for (const d of docs) console.log(JSON.stringify(d));
