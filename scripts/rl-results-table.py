#!/usr/bin/env python3
"""Summarises scripts/rl-results.sh output (report.json per run) as the markdown
table of docs/results-rl.md: per target, RL mean +- std over seeds next to the
baselines of the seed-0 run. usage: scripts/rl-results-table.py [runs/rl-results]"""
import glob, json, os, statistics, sys

root = sys.argv[1] if len(sys.argv) > 1 else "runs/rl-results"
by_target = {}
for path in sorted(glob.glob(os.path.join(root, "*", "report.json"))):
    r = json.load(open(path))
    by_target.setdefault(r["target_bits"], []).append((os.path.basename(os.path.dirname(path)), r))

def ms(xs):
    if len(xs) > 1 and max(xs) - min(xs) > 1e-9:
        return f"{statistics.mean(xs):.3f} ± {statistics.stdev(xs):.3f}"
    return f"{xs[0]:.3f}" if len(xs) == 1 or True else ""

for target, runs in sorted(by_target.items()):
    print(f"\n### target {target} bits ({len(runs)} runs: {', '.join(n for n, _ in runs)})\n")
    print("| plan | bits | selection PPL | whole-text PPL | held-out PPL | wall s |")
    print("|---|---|---|---|---|---|")
    fp = runs[0][1]["fp"]
    print(f"| FP | 16 | {fp['selection_ppl']:.3f} | {fp['whole_ppl']:.3f} | {fp['heldout_ppl']:.3f} | |")
    rl = [r["plans"][0] for _, r in runs]
    walls = [r["wall_time_s"]["total"] for _, r in runs]
    trains = [r["wall_time_s"]["train"] for _, r in runs]
    print(f"| RL (mean ± std over {len(rl)} seeds) | {ms([p['bits'] for p in rl])} | "
          f"{ms([p['selection_ppl'] for p in rl])} | {ms([p['whole_ppl'] for p in rl])} | "
          f"{ms([p['heldout_ppl'] for p in rl])} | train {ms(trains)} |")
    for name, r in runs:
        p = r["plans"][0]
        print(f"| RL {name} (best from {r['rl']['source']}, update {r['rl']['update']}) | {p['bits']:.4f} | "
              f"{p['selection_ppl']:.3f} | {p['whole_ppl']:.3f} | {p['heldout_ppl']:.3f} | {r['wall_time_s']['total']:.0f} |")
    baselines = {}
    for name, r in runs:
        for p in r["plans"][1:]:
            baselines.setdefault(p["name"], []).append(p)
    for bname, ps in baselines.items():
        print(f"| {bname} ({len(ps)} run{'s' if len(ps) > 1 else ''}) | {ms([p['bits'] for p in ps])} | "
              f"{ms([p['selection_ppl'] for p in ps])} | {ms([p['whole_ppl'] for p in ps])} | "
              f"{ms([p['heldout_ppl'] for p in ps])} | |")
