// The npm tiktoken side of tiktoken_crosscheck_test.sh: ground-truth ids
// (encode_ordinary) compared, text by text, with `meshloom tokenize` output.
//   node tiktoken_compare.mjs split JSONL DIR
//       writes each line's "text" to DIR/refNN_NAME.txt (UTF-8)
//   node tiktoken_compare.mjs probe FILE
//       writes "X,z\n" for every code point X below U+40000 and in
//       U+E0000-U+E0FFF: ",z" is one token (o200k, cl100k) only when X is a
//       letter, mark, number or space, so a Unicode table unlike tiktoken's
//       (Unicode 16.0) shows
//   node tiktoken_compare.mjs compare ENCODING IDS FILE...
//       IDS: meshloom's ids for FILE..., one line each. Prints a summary line;
//       for each differing text, the first differing token with its
//       neighbours on both sides (ids and bytes), then exits 1.
import { readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { loadTiktoken } from "../../scripts/dev/tiktoken_npm.mjs";

const [mode, ...args] = process.argv.slice(2);

function split(jsonl, dir) {
  const lines = readFileSync(jsonl, "utf8").split("\n").filter((l) => l.trim());
  lines.forEach((line, i) => {
    const { name, text } = JSON.parse(line);
    writeFileSync(join(dir, `ref${String(i + 1).padStart(2, "0")}_${name}.txt`), text);
  });
}

function probe(file) {
  const lines = [];
  const planes = [[0, 0x40000], [0xe0000, 0xe1000]];  // the rest: unassigned or private
  for (const [first, end] of planes)
    for (let c = first; c < end; ++c)
      if (c < 0xd800 || c > 0xdfff) lines.push(`${String.fromCodePoint(c)},z\n`);
  writeFileSync(file, lines.join(""));
}

function compare(encoding, idsPath, files) {
  const enc = loadTiktoken().get_encoding(encoding);
  const lines = readFileSync(idsPath, "utf8").split("\n");
  if (lines.at(-1) === "") lines.pop();  // the last line's newline
  if (lines.length !== files.length) {
    console.error(`${encoding}: meshloom printed ${lines.length} lines for ${files.length} files`);
    return 1;
  }
  // Strict: node would turn invalid UTF-8 into U+FFFD where meshloom sees the bytes.
  const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
  const loose = new TextDecoder("utf-8", { ignoreBOM: true });
  const bytesOf = (ids) => enc.decode(Uint32Array.from(ids));
  const piece = (id) => {
    if (id === undefined) return "";
    try {
      return `${id} ${JSON.stringify(loose.decode(bytesOf([id])))}`;
    } catch {
      return `${id} <not a token>`;
    }
  };
  let failed = 0, tokens = 0, bytes = 0;
  files.forEach((file, i) => {
    const name = basename(file, ".txt");
    const raw = readFileSync(file);
    let text;
    try {
      text = strict.decode(raw);
    } catch {
      console.error(`${encoding}: ${name} is not valid UTF-8`);
      ++failed;
      return;
    }
    const want = Array.from(enc.encode_ordinary(text));
    const got = lines[i] === "" ? [] : lines[i].split(" ").map(Number);
    tokens += want.length;
    bytes += raw.length;
    let k = 0;
    while (k < want.length && k < got.length && want[k] === got[k]) ++k;
    if (k === want.length && k === got.length) return;
    ++failed;
    const at = bytesOf(want.slice(0, k)).length;  // the equal prefix's bytes
    const context = loose.decode(raw.subarray(Math.max(0, at - 40), at + 40));
    console.log(`FAIL ${encoding} ${name} (${raw.length} bytes): meshloom ${got.length} tokens, ` +
                `tiktoken ${want.length}; first difference at token ${k}, byte ${at}`);
    // The character before the first differing token: the culprit in the probe.
    const before = [...loose.decode(raw.subarray(Math.max(0, at - 4), at))].at(-1);
    const hex = before?.codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
    console.log(`  text around byte ${at}: ${JSON.stringify(context)}` +
                (before ? `; character before it: U+${hex}` : ""));
    console.log(`  ${"token".padStart(7)}  ${"meshloom".padEnd(30)}  tiktoken`);
    for (let j = Math.max(0, k - 3); j < k + 5 && (j < got.length || j < want.length); ++j)
      console.log(`${j === k ? ">" : " "} ${String(j).padStart(7)}  ${piece(got[j]).padEnd(30)}  ` +
                  piece(want[j]));
  });
  enc.free();
  console.log(`${encoding}: ${files.length - failed} of ${files.length} texts identical ` +
              `(${tokens} tiktoken tokens, ${bytes} bytes)`);
  return failed ? 1 : 0;
}

if (mode === "split" && args.length === 2) {
  split(...args);
} else if (mode === "probe" && args.length === 1) {
  probe(args[0]);
} else if (mode === "compare" && args.length >= 3) {
  process.exitCode = compare(args[0], args[1], args.slice(2));
} else {
  console.error("usage: tiktoken_compare.mjs split JSONL DIR | probe FILE | " +
                "compare ENCODING IDS FILE...");
  process.exitCode = 2;
}
