#!/usr/bin/env python3
"""docs/gguf.md's table (issue 37, "Done when"): per model and target bits, windquant's
packed export, its GGUF exact export, the GGUF export of a tensor-granular plan
(quant.granularity: tensor) and llama.cpp's own uniform Q2_K / Q3_K / Q4_0 made with
llama-quantize from windquant's FP16 GGUF export, each with its bits per weight and its
held-out perplexity.

Plans: the Lagrangian baseline (`windquant baseline --method lagrange --bits B`,
deterministic, no seed) at the config's chunk size and at quant.granularity: tensor; with
--search-evals N also the (1+1) search (`--method search --evals N --seed S`) at both
granularities (windquant's perplexity only: item 1's quality cost of the coarser units).
Perplexity: the config's held-out text and token range (evaluation.heldout) in windows of
evaluation.context (BOS + context-1 ids, every id scored: windquant's protocol), by
  windquant  `eval --quantized` (packed), `baseline`'s own held-out number (= `eval --plan`)
  llama.cpp  scripts/llama-cpp-logits.cc (llama.cpp's loader and forward, float32 KV cache)
             on the ids windquant reads from the FP16 GGUF export (`eval --logits-out`).
Bits per weight: every tensor byte of the file, of the decoder linears (over their
weights) and of the whole model (over all parameters); the packed export's linears: the
bytes of its unit tensors in quantized.safetensors.

usage: scripts/gguf-table.py [--model NAME=CONFIG ...] [--bits 2.0 2.5 3.0] [--work DIR]
                             [--windquant BIN] [--llama-bin DIR] [--search-evals N]
                             [--seeds 0 ...] [--json FILE]
  default models: stories260k=configs/stories260k.yaml default=configs/default.yaml
  (the default model: bash scripts/default-model.sh first; llama.cpp:
  bash scripts/build-llama-cpp.sh). Prints markdown tables; --json also writes the rows.
"""
import argparse
import json
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINEAR_KEYS = ("attn_q.", "attn_k.", "attn_v.", "attn_output.", "ffn_gate.", "ffn_up.",
               "ffn_down.")


def run(cmd, log):
    """Runs cmd (a list), appends its stderr to log; stdout back; exits on failure."""
    with open(log, "a") as err:
        err.write("$ " + " ".join(cmd) + "\n")
        err.flush()
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"gguf-table: failed ({log}): {' '.join(cmd)}")
    return r.stdout


def heldout_of(config):
    """The config's held-out text (resolved), token range and context."""
    import yaml
    c = yaml.safe_load(open(config))
    ev = c["evaluation"]
    text = ev["heldout"]["text"]
    if not os.path.isabs(text):
        text = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(config)), text))
    b, e = ev["heldout"].get("tokens", [0, 0])
    return text, f"{b}:{e}", int(ev.get("context", 256))


def gguf_bits(path):
    """Bits per weight of the linears and the whole file's tensors; linear types counted."""
    from gguf import GGUFReader
    lin_b = lin_w = all_b = all_w = 0
    types = {}
    for t in GGUFReader(path).tensors:
        n, b = int(t.n_elements), int(t.n_bytes)
        all_b, all_w = all_b + b, all_w + n
        if t.name.startswith("blk.") and any(k in t.name for k in LINEAR_KEYS):
            lin_b, lin_w = lin_b + b, lin_w + n
            types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    return 8 * lin_b / lin_w, 8 * all_b / all_w, types


def packed_bits(path, linear_weights, all_weights):
    """Bits per weight of a packed quantized.safetensors: its unit tensors over the linears'
    weights, every tensor over all parameters."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    units = every = 0
    for name, t in header.items():
        if name == "__metadata__":
            continue
        size = t["data_offsets"][1] - t["data_offsets"][0]
        every += size
        if not ("embed" in name or "norm" in name or "lm_head" in name):
            units += size
    return 8 * units / linear_weights, 8 * every / all_weights


class Model:
    """One model's rows: its plans, exports and measurements under work/NAME."""

    def __init__(self, args, name, config):
        self.a, self.name, self.config = args, name, config
        self.work = os.path.join(args.work, name)
        os.makedirs(self.work, exist_ok=True)
        self.log = os.path.join(self.work, "log.txt")
        self.text, self.range, self.context = heldout_of(config)
        self.rows = []

    def wq(self, *cmd):
        return run([self.a.windquant, *cmd], self.log)

    def cached(self, key, compute):
        """compute() once per key (a measurement of a file that is never rewritten), kept in
        work/NAME/measured.json so that a rerun measures only what is new."""
        path = os.path.join(self.work, "measured.json")
        memo = json.load(open(path)) if os.path.exists(path) else {}
        if key not in memo:
            memo[key] = compute()
            json.dump(memo, open(path, "w"), indent=1)
        return memo[key]

    def baseline(self, out, *flags, granularity="chunk"):
        """The plan in out/ (made once; baseline.json keeps its description and held-out
        perplexity, the number `eval --plan` gives)."""
        done = os.path.join(out, "baseline.json")
        if not os.path.exists(done):
            j = self.wq("baseline", "--config", self.config, "--set",
                        f"quant.granularity={granularity}", *flags, "--out", out, "--force",
                        "--json")
            open(done, "w").write(j)
        return json.load(open(done))

    def export(self, plan_dir, out, gguf, granularity="chunk"):
        if not os.path.isdir(out):
            self.wq("export", "--config", self.config, "--set", f"quant.granularity={granularity}",
                    "--plan", os.path.join(plan_dir, "plan.json"), "--out", out,
                    *(["--format", "gguf"] if gguf else []))
        return os.path.join(out, "gguf", "model.gguf") if gguf else os.path.join(out, "quantized")

    def llama_ppl(self, gguf):
        return self.cached("llama.cpp " + gguf, lambda: self.llama_ppl_now(gguf))

    def llama_ppl_now(self, gguf):
        out = subprocess.run([os.path.join(self.a.llama_bin, "llama-cpp-logits"), gguf, self.ids,
                              str(self.context), os.path.join(self.work, "ll.logits")],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if out.returncode != 0:
            sys.exit(f"gguf-table: llama.cpp cannot run {gguf}")
        return json.loads(out.stdout.strip().splitlines()[-1])["perplexity"]

    def eval_gguf(self, path):
        return self.cached("eval --gguf " + path, lambda: json.loads(self.wq(
            "eval", "--gguf", path, "--text", self.text, "--tokens", self.range, "--context",
            str(self.context), "--json")))

    def add(self, bits, kind, plan, path=None, lin=None, whole=None, types="", wq=None, ll=None,
            plan_bits=None, ppl_plan=None, decode=True):
        """One row; for a GGUF `path` its bits, types and windquant's perplexity of the file
        (`eval --gguf`, where windquant decodes every type of it)."""
        if path is not None:
            lin, whole, t = gguf_bits(path)
            types = ", ".join(f"{k} {v}" for k, v in sorted(t.items()))
            if wq is None and decode and set(t) <= {"F32", "F16", "Q8_0", "Q4_0", "Q4_1", "Q2_K", "Q3_K",
                                         "TQ1_0", "TQ2_0"}:
                wq = self.eval_gguf(path)["perplexity"]
        self.rows.append(dict(model=self.name, target=bits, kind=kind, plan=plan,
                              plan_bits=plan_bits, ppl_plan=ppl_plan, linear_bits=lin,
                              whole_bits=whole, types=types, ppl_windquant=wq, ppl_llama_cpp=ll))

    def fp16(self):
        plan = os.path.join(self.work, "fp16")
        if not os.path.exists(os.path.join(plan, "plan.json")):
            self.wq("baseline", "--config", self.config, "--method", "uniform", "--action",
                    "16", "--no-eval", "--out", plan, "--force")
        self.f16 = self.export(plan, os.path.join(self.work, "fp16-export"), True)
        logits = os.path.join(self.work, "fp16.logits")
        j = self.cached("eval --gguf --logits-out " + self.f16, lambda: json.loads(self.wq(
            "eval", "--gguf", self.f16, "--text", self.text, "--tokens", self.range, "--context",
            str(self.context), "--logits-out", logits, "--json")))  # the ids llama.cpp reads
        self.ids = logits + ".ids"
        self.add("-", "FP16 GGUF export (every unit 16 bit)", "uniform 16", path=self.f16,
                 wq=j["perplexity"], ll=self.llama_ppl(self.f16))

    def lagrange(self, bits):
        d = os.path.join(self.work, f"lagrange-{bits}")
        b = self.baseline(d, "--method", "lagrange", "--bits", bits)
        packed = self.export(d, d + "-packed", False)
        j = self.cached("eval --quantized " + packed, lambda: json.loads(self.wq(
            "eval", "--quantized", packed, "--text", self.text, "--tokens", self.range,
            "--context", str(self.context), "--json")))
        gg = self.export(d, d + "-gguf", True)
        g = json.load(open(os.path.join(d + "-gguf", "gguf", "gguf_export.json")))
        lin, whole = packed_bits(os.path.join(packed, "quantized.safetensors"),
                                 g["linear_weights"], g["all_weights"])
        self.add(bits, "windquant packed", "lagrange", lin=lin, whole=whole,
                 wq=j["perplexity"], plan_bits=b["effective_bits"],
                 ppl_plan=b["perplexity"])
        self.add(bits, "GGUF exact", "lagrange", path=gg, ll=self.llama_ppl(gg),
                 plan_bits=b["effective_bits"], ppl_plan=b["perplexity"])

    def tensor(self, bits):
        d = os.path.join(self.work, f"lagrange-tensor-{bits}")
        b = self.baseline(d, "--method", "lagrange", "--bits", bits, granularity="tensor")
        gg = self.export(d, d + "-gguf", True, granularity="tensor")
        self.add(bits, "GGUF tensor-granular", "lagrange, granularity tensor", path=gg,
                 ll=self.llama_ppl(gg), plan_bits=b["effective_bits"], ppl_plan=b["perplexity"])

    def search(self, bits):
        for seed in self.a.seeds:
            for g in ("chunk", "tensor"):
                d = os.path.join(self.work, f"search-{g}-{bits}-s{seed}")
                b = self.baseline(d, "--method", "search", "--bits", bits, "--evals",
                                  str(self.a.search_evals), "--seed", str(seed), granularity=g)
                self.add(bits, f"search plan, {g} units (no file)",
                         f"search {self.a.search_evals} evals, seed {seed}",
                         plan_bits=b["effective_bits"], ppl_plan=b["perplexity"])

    def llama_quantize(self, qtype):
        out = os.path.join(self.work, f"llama-{qtype}.gguf")
        if not os.path.exists(out):
            run([os.path.join(self.a.llama_bin, "llama-quantize"), self.f16, out, qtype], self.log)
        self.add("-", f"llama-quantize {qtype} of the FP16 export", "-", path=out,
                 ll=self.llama_ppl(out), decode=False)  # no tokenizer.json beside it


def fmt(v, digits):
    return "-" if v is None else (f"{v:.{digits}f}" if isinstance(v, float) else str(v))


def print_table(rows):
    print("| model | target | export | plan | plan bits (linears) | file bits (linears) | "
          "file bits (whole) | types of the linears | ppl `eval --plan` | ppl windquant "
          "(file) | ppl llama.cpp |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['target']} | {r['kind']} | {r['plan']} | "
              f"{fmt(r['plan_bits'], 3)} | {fmt(r['linear_bits'], 3)} | "
              f"{fmt(r['whole_bits'], 3)} | {r['types'] or '-'} | {fmt(r['ppl_plan'], 3)} | "
              f"{fmt(r['ppl_windquant'], 3)} | {fmt(r['ppl_llama_cpp'], 3)} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__)
    p.add_argument("--model", action="append", help="NAME=CONFIG (repeatable)")
    p.add_argument("--bits", nargs="+", default=["2.0", "2.5", "3.0"])
    p.add_argument("--work", default=os.path.join(ROOT, "runs", "gguf-table"))
    p.add_argument("--windquant", default=os.path.join(ROOT, "build", "dev", "cli", "windquant"))
    p.add_argument("--llama-bin", default=os.environ.get(
        "LLAMA_CPP_BIN", os.path.join(ROOT, ".cache", "llama.cpp", "build", "bin")))
    p.add_argument("--search-evals", type=int, default=0)
    p.add_argument("--seeds", nargs="+", default=["0"])
    p.add_argument("--json")
    a = p.parse_args()
    models = a.model or ["stories260k=configs/stories260k.yaml", "default=configs/default.yaml"]
    rows = []
    for spec in models:
        name, _, config = spec.partition("=")
        m = Model(a, name, config)
        m.fp16()
        for bits in a.bits:
            m.lagrange(bits)
            m.tensor(bits)
            if a.search_evals > 0:
                m.search(bits)
        for qtype in ("Q2_K", "Q3_K", "Q4_0"):
            m.llama_quantize(qtype)
        print(f"\n### {name} ({config}; held-out {m.text} ids [{m.range.replace(':', ', ')}), "
              f"context {m.context})\n")
        print_table(m.rows)
        sys.stdout.flush()
        rows += m.rows
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
