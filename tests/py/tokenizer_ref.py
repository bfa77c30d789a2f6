#!/usr/bin/env python3
"""The field's own tokenizer references for windquant's C++ Tokenizer tests.

Hugging Face `tokenizers` and Google's `sentencepiece` (PyPI, pinned in
scripts/requirements.txt, installed into .venv by scripts/install-deps.sh)
train small LLaMA-style tokenizers on the project's text and encode text with
them; the C++ tests (common/model/tokenizer_test.cc, tokenizer_llama3_test.cc,
through common/testing/py_reference.h) compare our ids with theirs.

  tokenizer_ref.py train-llama2 --text IN --vocab-size N --out-dir DIR
      SentencePiece BPE with byte fallback, trained as LLaMA-2's was
      (identity normalization, dummy prefix, split digits): DIR/tokenizer.model,
      and DIR/tokenizer.json, its Hugging Face form as LLaMA-2 publishes it
      (normalizer Prepend+Replace "▁", BPE byte_fallback fuse_unk, merges from
      the pieces' scores, decoder Replace/ByteFallback/Fuse/Strip).
  tokenizer_ref.py train-llama3 --text IN --vocab-size N --out OUT.json
      byte-level BPE with LLaMA-3's pre-tokenizer (Split on LLaMA-3's regex,
      then ByteLevel without its own regex), ignore_merges, LLaMA-3's first
      special tokens after the vocab (<|begin_of_text|> is the BOS).
  tokenizer_ref.py encode (--tokenizer T.json | --spm-model M.model) IN OUT
      one JSON array of ids per line of IN (split on "\\n" only) into OUT
  tokenizer_ref.py encode-file (--tokenizer T.json | --spm-model M.model) IN OUT
      the ids of all of IN as one text: one JSON array into OUT
IN may be "-" for stdin. Ids never include BOS/EOS. Training is seeded and
deterministic: the same text gives the same tokenizer. Train commands print
a one-line JSON summary. Exit status 3 (with one line on stderr) when a
module is missing, 2 for bad usage or input.
"""
import argparse
import json
import os
import sys
import time

LLAMA3_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# LLaMA-3's ids 128000..128009, in its order; here they follow the trained vocab.
LLAMA3_SPECIAL_TOKENS = [
    "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>", "<|start_header_id|>", "<|end_header_id|>",
    "<|reserved_special_token_2|>", "<|reserved_special_token_3|>",
    "<|reserved_special_token_4|>", "<|eot_id|>",
]
SPM_SEED = 20240601
METASPACE = "\u2581"


def fail(message, code=2):
    print(f"tokenizer_ref.py: {message}", file=sys.stderr)
    sys.exit(code)


def import_references():
    """Imports tokenizers and sentencepiece, or exits 3 naming the missing ones."""
    missing, modules = [], {}
    for name in ("tokenizers", "sentencepiece"):
        try:
            modules[name] = __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        fail(f"{sys.executable} lacks the Python module(s) {', '.join(missing)} "
             "(pinned in scripts/requirements.txt): run bash scripts/install-deps.sh", code=3)
    return modules["tokenizers"], modules["sentencepiece"]


def read_text(path):
    # Bytes, decoded strictly: no newline translation ("\r\n" stays).
    data = sys.stdin.buffer.read() if path == "-" else open(path, "rb").read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(f"{path}: not UTF-8 ({e})")


def write_text(path, text):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def hf_llama2_json(sp):
    """LLaMA-2's tokenizer.json layout for the SentencePiece BPE model `sp`.

    SentencePiece's BPE merges, at each step, the adjacent pair whose
    concatenation is the best-scored piece; the HF equivalent lists every split
    (left, right) of each normal piece into two vocab pieces, ranked by the
    piece's score (ties in the order of the parts' ids), as transformers'
    SentencePieceExtractor does.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, processors

    n = sp.get_piece_size()
    vocab = {sp.id_to_piece(i): i for i in range(n)}
    normal = {sp.id_to_piece(i) for i in range(n)
              if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i) or sp.is_unused(i))}
    ranked = []
    for i in range(n):
        piece = sp.id_to_piece(i)
        if piece not in normal:
            continue
        local = [(piece[:k], piece[k:]) for k in range(1, len(piece))
                 if piece[:k] in normal and piece[k:] in normal]
        local.sort(key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
        ranked.extend((-sp.get_score(i), i, lr) for lr in local)
    ranked.sort(key=lambda e: (e[0], e[1]))  # stable: best score first
    merges = [lr for _, _, lr in ranked]

    unk = sp.id_to_piece(sp.unk_id())
    bos, eos = sp.id_to_piece(sp.bos_id()), sp.id_to_piece(sp.eos_id())
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=unk, fuse_unk=True,
                               byte_fallback=True))
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in (unk, bos, eos)])
    tok.normalizer = normalizers.Sequence(
        [normalizers.Prepend(METASPACE), normalizers.Replace(" ", METASPACE)])
    tok.decoder = decoders.Sequence([decoders.Replace(METASPACE, " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, sp.bos_id())])
    return tok, len(merges)


def train_llama2(args):
    _, spm = import_references()
    os.makedirs(args.out_dir, exist_ok=True)
    t0 = time.time()
    spm.set_random_generator_seed(SPM_SEED)
    prefix = os.path.join(args.out_dir, "tokenizer")
    spm.SentencePieceTrainer.train(
        input=args.text, model_prefix=prefix, model_type="bpe", vocab_size=args.vocab_size,
        byte_fallback=True, character_coverage=0.9995, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, split_digits=True,
        allow_whitespace_only_pieces=True, max_sentence_length=1 << 16, input_sentence_size=0,
        shuffle_input_sentence=False, num_threads=1, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        minloglevel=2)
    os.remove(prefix + ".vocab")
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    tok, n_merges = hf_llama2_json(sp)
    tok.save(os.path.join(args.out_dir, "tokenizer.json"))
    print(json.dumps({"model": prefix + ".model", "json": prefix + ".json",
                      "vocab_size": sp.get_piece_size(), "merges": n_merges,
                      "seconds": round(time.time() - t0, 2)}))


def train_llama3(args):
    import_references()
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers,
                            processors, trainers)

    t0 = time.time()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=args.vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train([args.text], trainer)
    tok.model.ignore_merges = True
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True)
                            for t in LLAMA3_SPECIAL_TOKENS])
    bos = LLAMA3_SPECIAL_TOKENS[0]
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                      special_tokens=[(bos, tok.token_to_id(bos))]),
    ])
    tok.save(args.out)
    print(json.dumps({"json": args.out, "vocab_size": tok.get_vocab_size(),
                      "bos_id": tok.token_to_id(bos),
                      "seconds": round(time.time() - t0, 2)}))


def encoder(args):
    """A function text list -> id lists from --tokenizer (HF) or --spm-model."""
    tk, spm = import_references()
    if args.spm_model:
        sp = spm.SentencePieceProcessor(model_file=args.spm_model)
        return lambda texts: sp.encode(texts, out_type=int)
    tok = tk.Tokenizer.from_file(args.tokenizer)
    return lambda texts: [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


def encode_lines(args):
    encode = encoder(args)
    lines = read_text(args.input).split("\n")
    write_text(args.output, "".join(json.dumps(ids) + "\n" for ids in encode(lines)))


def encode_file(args):
    encode = encoder(args)
    write_text(args.output, json.dumps(encode([read_text(args.input)])[0]))


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train-llama2", help="SentencePiece BPE + its HF tokenizer.json")
    p.add_argument("--text", required=True, help="UTF-8 training text")
    p.add_argument("--vocab-size", type=int, default=1024)
    p.add_argument("--out-dir", required=True, help="gets tokenizer.model and tokenizer.json")
    p.set_defaults(run=train_llama2)
    p = sub.add_parser("train-llama3", help="byte-level BPE with LLaMA-3's pre-tokenizer")
    p.add_argument("--text", required=True, help="UTF-8 training text")
    p.add_argument("--vocab-size", type=int, default=4096)
    p.add_argument("--out", required=True, help="the tokenizer.json to write")
    p.set_defaults(run=train_llama3)
    for name, run, what in (("encode", encode_lines, "ids of each line (JSON lines)"),
                            ("encode-file", encode_file, "ids of the whole text (JSON)")):
        p = sub.add_parser(name, help=what)
        which = p.add_mutually_exclusive_group(required=True)
        which.add_argument("--tokenizer", help="a Hugging Face tokenizer.json")
        which.add_argument("--spm-model", help="a SentencePiece .model")
        p.add_argument("input", help="UTF-8 text, or - for stdin")
        p.add_argument("output")
        p.set_defaults(run=run)
    args = parser.parse_args()
    try:
        args.run(args)
    except Exception as e:  # the libraries raise bare Exceptions for bad files
        fail(f"{args.command}: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
