#!/usr/bin/env python3
"""The quality-target mode against its strongest alternative at the same real evaluations
(issue 36 item 2): `windquant quantize --max-ppl-increase EPS` over paired seeds, each run's
report.json carrying RL's returned plan and the bisections over bits to EPS with RL's count
of real evaluations ("lagrange-bisect", "screened-bisect", job/bisection_baseline.h), all
measured on the config's held-out range (text no method chose on: plans are chosen on the
selection slice). Prints, per EPS, a table per method (effective bits, held-out degradation
d, selection d within EPS, real evaluations) and the paired ratios RL / bisection (of the
bits and of the held-out perplexity, same seed, same report) with a bootstrap 95 % interval
(scripts/rl-results-doc.py's), and whether lambda settled in each RL run (the last 20 % of
its updates within 10 % of their mean, each strictly inside (0, lambda_max)).
A run whose report.json is already in OUT/eps-EPS/s-SEED is not run again (--table-only
runs nothing).
usage: scripts/quality-target-compare.py [--bin build/dev/cli/windquant]
       [--config configs/final/stories260k.yaml] [--eps 0.02 0.2] [--seeds 0 1 2 3 4]
       [--cap 8] [--updates 16] [--eta 2] [--threads 0] [--out runs/quality-target]
       [--set key=value ...] [--table-only]"""
import argparse, importlib.util, math, os, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METHODS = ["rl", "lagrange-bisect", "screened-bisect"]
LABELS = {"rl": "RL (the RL run's plan)", "lagrange-bisect": "Lagrangian bisection",
          "screened-bisect": "screened-search bisection"}
SETTLE_TAIL = 0.2   # the last 20 % of the updates
SETTLE_BAND = 0.10  # each within 10 % of their mean


def rl_results_doc():
    """scripts/rl-results-doc.py as a module (its bootstrap interval and text)."""
    spec = importlib.util.spec_from_file_location(
        "rl_results_doc", os.path.join(ROOT, "scripts", "rl-results-doc.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_dir(out, eps, seed):
    return os.path.join(out, f"eps-{eps:g}", f"s-{seed}")


def run_one(a, eps, seed):
    d = run_dir(a.out, eps, seed)
    if os.path.exists(os.path.join(d, "report.json")):
        return
    os.makedirs(os.path.dirname(d), exist_ok=True)
    argv = [a.bin, "quantize", "--config", a.config, "--no-export", "--max-ppl-increase",
            f"{eps:g}", "--set", f"curriculum.target_bits=[{a.cap:g}]",
            "--set", f"curriculum.min_updates={a.updates}",
            "--set", f"curriculum.max_updates={a.updates}", "--set", f"lagrange.eta={a.eta:g}",
            "--set", f"training.seed={seed}", "--set", f"model.threads={a.threads}",
            "--set", f"output.dir={d}"]
    for s in a.set or []:
        argv += ["--set", s]
    t0 = time.time()
    print(f"=== eps {eps:g} seed {seed} -> {d} ({time.strftime('%H:%M:%S', time.gmtime())} UTC)",
          file=sys.stderr, flush=True)
    with open(d + ".log", "w") as log:
        rc = subprocess.call(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    print(f"    rc {rc}, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)


def load(path):
    import json
    with open(path) as f:
        return json.load(f)


def lambda_settled(lambdas, lambda_max):
    """(settled, text): the last 20 % of the updates within 10 % of their mean, strictly
    inside (0, lambda_max)."""
    if not lambdas:
        return False, "-"
    k = max(1, math.ceil(SETTLE_TAIL * len(lambdas)))
    tail = lambdas[-k:]
    mean = statistics.fmean(tail)
    inside = all(0 < x < lambda_max for x in tail)
    band = mean > 0 and all(abs(x - mean) <= SETTLE_BAND * mean for x in tail)
    return inside and band, f"{mean:.3g} ({'settled' if inside and band else 'not settled'})"


def nan_if_none(x):
    return math.nan if x is None else x


def method_rows(report):
    q = report["quality_target"]
    return {m["plan"]: m for m in q.get("methods", [])}


def table(a, eps, doc):
    reports = {}
    for seed in a.seeds:
        p = os.path.join(run_dir(a.out, eps, seed), "report.json")
        if os.path.exists(p):
            reports[seed] = load(p)
    lines = [f"### EPS {eps:g} (cap {a.cap:g} bits, {len(reports)} of {len(a.seeds)} seeds)\n"]
    if not reports:
        return "\n".join(lines + ["No run has landed yet.\n"])
    rng = __import__("random").Random(doc.BOOTSTRAP_SEED)
    lines += ["| method | mean bits | mean held-out d | within EPS on selection | "
              "mean real evaluations | RL / method bits [95 %] | RL / method held-out PPL "
              "[95 %] |", "|---|---|---|---|---|---|---|"]
    for m in METHODS:
        bits, dh, within, ev, rb, rp = [], [], 0, [], [], []
        for seed, r in sorted(reports.items()):
            rows = method_rows(r)
            row, rl = rows.get(m), rows.get("rl")
            if row is None or rl is None:
                continue
            bits.append(row["bits"])
            dh.append(nan_if_none(row["heldout_degradation"]))
            sel = row["selection_degradation"]
            within += sel is not None and sel <= eps
            ev.append(row["evaluations"])
            rb.append(rl["bits"] / row["bits"])
            rp.append((1 + nan_if_none(rl["heldout_degradation"])) / (1 + dh[-1]))
        if not bits:
            lines.append(f"| {LABELS[m]} | | | | | | |")
            continue
        if m == "rl":
            ratios = ("-", "-")
        else:
            ratios = tuple(f"{statistics.fmean(x):.3f} {doc.interval_text(*doc.bootstrap_interval(x, rng))}"
                           for x in (rb, rp))
        lines.append(f"| {LABELS[m]} | {statistics.fmean(bits):.4f} | {statistics.fmean(dh):.4f} | "
                     f"{within} of {len(bits)} | {statistics.fmean(ev):.1f} | {ratios[0]} | "
                     f"{ratios[1]} |")
    lines += ["", "| seed | " + " | ".join(f"{m} bits / held-out d / evals" for m in METHODS) +
              " | returned | lambda, last 20 % mean |", "|---" * (len(METHODS) + 3) + "|"]
    settled = 0
    for seed, r in sorted(reports.items()):
        rows = method_rows(r)
        cells = []
        for m in METHODS:
            x = rows.get(m)
            cells.append("-" if x is None else
                         f"{x['bits']:.4f} / {nan_if_none(x['heldout_degradation']):.4f} / "
                         f"{x['evaluations']}")
        ok, text = lambda_settled(r["quality_target"]["lambda_per_update"], a.lambda_max)
        settled += ok
        lines.append(f"| {seed} | " + " | ".join(cells) +
                     f" | {r['quality_target']['returned']['plan']} | {text} |")
    commits = sorted({r.get("commit", "?") for r in reports.values()})
    lines += ["", f"lambda settled in {settled} of {len(reports)} RL runs; commit(s) "
              f"{', '.join(commits)}; FP held-out PPL "
              f"{next(iter(reports.values()))['fp']['heldout_ppl']:.4f}."]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build/dev/cli/windquant"))
    p.add_argument("--config", default="configs/final/stories260k.yaml")
    p.add_argument("--eps", type=float, nargs="+", default=[0.02, 0.2])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--cap", type=float, default=8.0)
    p.add_argument("--updates", type=int, default=16)
    p.add_argument("--eta", type=float, default=2.0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--lambda-max", type=float, default=100.0)
    p.add_argument("--out", default=os.path.join(ROOT, "runs/quality-target"))
    p.add_argument("--set", action="append", help="another --set for quantize (repeatable)")
    p.add_argument("--table-only", action="store_true")
    a = p.parse_args()
    if not a.table_only:
        for seed in a.seeds:  # seeds outermost: every EPS gets its pairs as time allows
            for eps in a.eps:
                run_one(a, eps, seed)
    doc = rl_results_doc()
    print("\n".join(table(a, eps, doc) for eps in a.eps))


if __name__ == "__main__":
    main()
