#!/usr/bin/env python3
"""The measured proxy against the rounding proxy and uniform quantization (issue 36 item 4):
for each uniform action A and each calibration seed s (calibration.seed: which calibration
windows the unit table, the GPTQ Hessians and so every plan come from; nothing else in these
methods is random), at uniform A's own effective bits b:
  uniform A; the Lagrangian plan on the unit table (rounding proxy); `--method measured`
  (the Lagrangian plan on the measured proxy, job/measured_proxy.h); N random plans,
all measured on the config's held-out range (plans are chosen on the selection slice only).
Prints per A the mean held-out perplexities, the paired ratios to uniform (bootstrap 95 %
interval over the seeds, scripts/rl-results-doc.py's) and, per seed, Spearman's rank
correlation of each proxy against held-out perplexity among the plans at b (uniform,
Lagrangian, measured, random): the issue's test of a proxy for compensated plans.
A plan folder that already has result.json is not run again (--table-only runs nothing).
usage: scripts/measured-proxy-compare.py [--bin build/dev/cli/windquant]
       [--config configs/stories260k.yaml] [--actions 2 3] [--seeds 0 1 2 3 4]
       [--random 4] [--rounds 2] [--out runs/measured-proxy] [--set key=value ...]
       [--table-only]"""
import argparse, importlib.util, json, os, random, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))


def load_module(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "scripts", file))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


RANK = load_module("proxy_rank", "proxy-rank.py")
DOC = load_module("rl_results_doc", "rl-results-doc.py")


def baseline(a, seed, d, flags):
    """One `windquant baseline` run into folder d (its --json line in d/result.json)."""
    res = os.path.join(d, "result.json")
    if os.path.exists(res):
        with open(res) as f:
            return json.load(f)
    if a.table_only:
        return None
    argv = [a.bin, "baseline", "--config", a.config, "--set", f"calibration.seed={seed}",
            *sum((["--set", s] for s in a.set or []), []), *flags, "--out", d, "--force",
            "--json"]
    t0 = time.time()
    print(" ".join(argv), file=sys.stderr, flush=True)
    out = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit(f"measured-proxy-compare: rc {out.returncode}: {' '.join(argv)}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["wall_s"] = time.time() - t0
    with open(res, "w") as f:
        json.dump(row, f, sort_keys=True)
    return row


def run_seed(a, action, seed):
    """{name: result row} of one seed at uniform `action`'s bits."""
    base = os.path.join(a.out, action, f"s-{seed}")
    os.makedirs(base, exist_ok=True)
    rows = {"uniform": baseline(a, seed, os.path.join(base, "uniform"),
                                ["--method", "uniform", "--action", action])}
    if rows["uniform"] is None:
        return None
    bits = f"{rows['uniform']['effective_bits']:.17g}"
    rows["lagrange"] = baseline(a, seed, os.path.join(base, "lagrange"),
                                ["--method", "lagrange", "--bits", bits])
    rows["measured"] = baseline(a, seed, os.path.join(base, "measured"),
                                ["--method", "measured", "--bits", bits,
                                 "--rounds", str(a.rounds)])
    for k in range(a.random):
        rows[f"random-{k}"] = baseline(a, seed, os.path.join(base, f"random-{k}"),
                                       ["--method", "random", "--bits", bits, "--seed", str(k)])
    if any(r is None for r in rows.values()):
        return None
    # The rounding proxy's table: the session's own (the unit-table cache of this seed).
    plain = os.path.join(base, "table.pb")
    if not os.path.exists(plain):
        subprocess.run([a.bin, "table", "build", "--config", a.config, "--set",
                        f"calibration.seed={seed}", *sum((["--set", s] for s in a.set or []), []),
                        "--out", plain], cwd=ROOT, check=True, stdout=sys.stderr)
    tables = {"rounding": RANK.load_table(a.bin, plain),
              "measured": RANK.load_table(a.bin, os.path.join(base, "measured",
                                                              "measured_table.pb"))}
    plans = {}
    for name in rows:
        with open(os.path.join(base, name, "plan.json")) as f:
            plans[name] = json.load(f)
    names = sorted(rows)
    ppl = [rows[n]["perplexity"] for n in names]
    rho = {k: RANK.spearman([RANK.proxy(t, plans[n]) for n in names], ppl)
           for k, t in tables.items()}
    return {"rows": rows, "spearman": rho, "plans": len(names)}


def report(a, action, seeds):
    done = {s: r for s, r in seeds.items() if r is not None}
    if not done:
        return f"### uniform {action}-bit: no seed done\n"
    rng = random.Random(0)
    u = [r["rows"]["uniform"] for r in done.values()]
    lines = [f"### uniform {action}-bit at its own bits ({len(done)} calibration seeds: "
             f"{' '.join(str(s) for s in done)})", "",
             f"Budget {statistics.fmean(x['effective_bits'] for x in u):.4f} bits "
             f"(mean over seeds); uniform {action}-bit held-out perplexity "
             f"{statistics.fmean(x['perplexity'] for x in u):.3f} (mean).", "",
             "| plan | mean bits | mean held-out PPL | plan / uniform [95 %] | lower in | "
             "plans measured (selection) |", "|---|---|---|---|---|---|"]
    for name, label in [("measured", "measured proxy (`--method measured`)"),
                        ("lagrange", "Lagrangian on the rounding proxy"),
                        ("random-0", "random (seed 0)")]:
        if any(name not in r["rows"] for r in done.values()):
            continue  # --random 0
        ratios = [r["rows"][name]["perplexity"] / r["rows"]["uniform"]["perplexity"]
                  for r in done.values()]
        lo, hi = DOC.bootstrap_interval(ratios, rng)
        evals = [r["rows"][name].get("measured_proxy", {}).get("evaluations", 0)
                 for r in done.values()]
        lines.append(
            f"| {label} | {statistics.fmean(r['rows'][name]['effective_bits'] for r in done.values()):.4f} "
            f"| {statistics.fmean(r['rows'][name]['perplexity'] for r in done.values()):.3f} "
            f"| {statistics.fmean(ratios):.3f} {DOC.interval_text(lo, hi)} "
            f"| {sum(x < 1 for x in ratios)} of {len(ratios)} "
            f"| {statistics.fmean(evals):.0f} |")
    lines += ["", "Per seed (held-out perplexity; Spearman of each proxy against held-out "
              "perplexity over the plans at these bits):", "",
              "| calibration seed | uniform | Lagrangian | measured | plans ranked | "
              "Spearman rounding | Spearman measured |", "|---|---|---|---|---|---|---|"]
    for s, r in done.items():
        x = r["rows"]
        lines.append(f"| {s} | {x['uniform']['perplexity']:.3f} | "
                     f"{x['lagrange']['perplexity']:.3f} | {x['measured']['perplexity']:.3f} | "
                     f"{r['plans']} | {r['spearman']['rounding']:.3f} | "
                     f"{r['spearman']['measured']:.3f} |")
    for k in ("rounding", "measured"):
        v = [r["spearman"][k] for r in done.values()]
        lo, hi = DOC.bootstrap_interval(v, rng)
        lines.append(f"\nSpearman, {k} proxy: mean {statistics.fmean(v):.3f} "
                     f"{DOC.interval_text(lo, hi)}")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default="build/dev/cli/windquant")
    p.add_argument("--config", default="configs/stories260k.yaml")
    p.add_argument("--actions", nargs="+", default=["2", "3"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    p.add_argument("--random", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", default="runs/measured-proxy")
    p.add_argument("--set", action="append")
    p.add_argument("--table-only", action="store_true")
    a = p.parse_args()
    for action in a.actions:
        seeds = {s: run_seed(a, action, s) for s in a.seeds}
        print(report(a, action, seeds), flush=True)


if __name__ == "__main__":
    main()
