#!/usr/bin/env python3
"""Allocation against uniform quantization at uniform's own bits (issue 36 item 4): for each
uniform action A (2-bit by default), its effective bits b_A (`windquant baseline --method
uniform --action A --json`), then `windquant quantize` with the budget b_A over paired seeds.
Each run's report.json has the uniform A-bit plan (the uniform row within the budget) and
every allocating method at the same bits (RL, the searches, the Lagrangian and greedy plans,
quantize's returned plan), all measured on the config's held-out range (plans are chosen on
the selection slice only). Prints per A a table: each method's mean held-out perplexity and
its paired ratio to uniform's (same seed, same report; bootstrap 95 % interval as
scripts/rl-results-doc.py), and whether the goal (at least 10 % lower, i.e. the interval's
upper end below 0.9) is met. A run whose report.json is already in OUT/A/s-SEED is not run
again (--table-only runs nothing).
usage: scripts/uniform-compare.py [--bin build/dev/cli/windquant]
       [--config configs/stories260k.yaml] [--actions 2] [--seeds 0 1 2 3 4]
       [--threads 0] [--out runs/uniform-compare] [--set key=value ...] [--table-only]"""
import argparse, json, os, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METHODS = ["rl", "returned", "screened-search", "search", "lagrange", "greedy"]
LABELS = {"rl": "RL (the RL run's plan)", "returned": "quantize's returned plan",
          "screened-search": "screened search", "search": "search with restarts",
          "lagrange": "Lagrangian", "greedy": "greedy"}
GOAL = 0.9  # at least 10 % lower held-out perplexity than uniform


def uniform_bits(a, action):
    argv = [a.bin, "baseline", "--config", a.config, "--method", "uniform", "--action", action,
            "--json", "--set", f"model.threads={a.threads}"] + sum((["--set", s] for s in a.set or []), [])
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"uniform-compare: {' '.join(argv)}: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout)["effective_bits"]


def run_one(a, action, bits, seed):
    d = os.path.join(a.out, action, f"s-{seed}")
    if os.path.exists(os.path.join(d, "report.json")):
        return
    os.makedirs(os.path.dirname(d), exist_ok=True)
    argv = [a.bin, "quantize", "--config", a.config, "--no-export",
            "--set", f"curriculum.target_bits=[{bits:.17g}]", "--set", f"training.seed={seed}",
            "--set", f"model.threads={a.threads}", "--set", f"output.dir={d}"]
    for s in a.set or []:
        argv += ["--set", s]
    t0 = time.time()
    print(f"=== uniform {action} at {bits:.4f} bits, seed {seed} -> {d} "
          f"({time.strftime('%H:%M:%S', time.gmtime())} UTC)", file=sys.stderr, flush=True)
    with open(d + ".log", "w") as log:
        rc = subprocess.call(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    print(f"    rc {rc}, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)


def heldout(report):
    """{row name: held-out perplexity}, quantize's returned plan as "returned"."""
    rows = {p["name"]: p["heldout_ppl"] for p in report["plans"]}
    rows["returned"] = report["returned"]["heldout_ppl"]
    return rows


def table(a, action, doc):
    reports = {}
    for seed in a.seeds:
        p = os.path.join(a.out, action, f"s-{seed}", "report.json")
        if os.path.exists(p):
            with open(p) as f:
                reports[seed] = json.load(f)
    head = f"### uniform {action}-bit at its own bits ({len(reports)} of {len(a.seeds)} seeds)\n"
    if not reports:
        return head + "\nNo run has landed yet.\n"
    anchor = f"uniform-{action}"
    any_report = next(iter(reports.values()))
    bits = next(p["bits"] for p in any_report["plans"] if p["name"] == anchor)
    rng = __import__("random").Random(doc.BOOTSTRAP_SEED)
    lines = [head, f"Budget {bits:.4f} bits; uniform {action}-bit held-out perplexity "
             f"{heldout(any_report)[anchor]:.3f}; FP {any_report['fp']['heldout_ppl']:.3f}.", "",
             "| method | mean bits | mean held-out PPL | method / uniform [95 %] | lower in | "
             "goal (<= 0.9) |", "|---|---|---|---|---|---|"]
    for m in METHODS:
        ppl, ratio, b = [], [], []
        for r in reports.values():
            rows = heldout(r)
            if rows.get(m) is None or rows.get(anchor) is None:
                continue
            ppl.append(rows[m])
            ratio.append(rows[m] / rows[anchor])
            name = r["returned"]["plan"] if m == "returned" else m
            b.append(next(p["bits"] for p in r["plans"] if p["name"] == name))
        if not ppl:
            continue
        lo, hi = doc.bootstrap_interval(ratio, rng)
        goal = "met" if hi == hi and hi <= GOAL else "not met"
        lines.append(f"| {LABELS[m]} | {statistics.fmean(b):.4f} | {statistics.fmean(ppl):.3f} | "
                     f"{statistics.fmean(ratio):.3f} {doc.interval_text(lo, hi)} | "
                     f"{sum(x < 1 for x in ratio)} of {len(ratio)} | {goal} |")
    commits = sorted({r.get("commit", "?") for r in reports.values()})
    lines += ["", f"Commit(s) {', '.join(commits)}; config digest(s) "
              f"{', '.join(sorted({r.get('config_digest', '?')[:16] for r in reports.values()}))}."]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build/dev/cli/windquant"))
    p.add_argument("--config", default="configs/stories260k.yaml")
    p.add_argument("--actions", nargs="+", default=["2"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--out", default=os.path.join(ROOT, "runs/uniform-compare"))
    p.add_argument("--set", action="append", help="another --set for both commands (repeatable)")
    p.add_argument("--table-only", action="store_true")
    a = p.parse_args()
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "rl_results_doc", os.path.join(ROOT, "scripts", "rl-results-doc.py"))
    doc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(doc)
    if not a.table_only:
        bits = {action: uniform_bits(a, action) for action in a.actions}
        for seed in a.seeds:  # seeds outermost: every action gets its pairs as time allows
            for action in a.actions:
                run_one(a, action, bits[action], seed)
    print("\n".join(table(a, action, doc) for action in a.actions))


if __name__ == "__main__":
    main()
