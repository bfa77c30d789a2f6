#!/usr/bin/env python3
"""Summarises scripts/rl-results.sh output (report.json per run) as the tables of
docs/results-rl-history.md: per target and seed, the held-out perplexity of the RL plan and of
the search baseline at the RL run's count of real plan evaluations, their ratio, and
the Lagrangian reference. usage: scripts/rl-results-table.py [runs/rl-results ...]"""
import glob, json, os, statistics, sys

roots = sys.argv[1:] or ["runs/rl-results"]
for root in roots:
    by_target = {}
    for path in sorted(glob.glob(os.path.join(root, "*", "report.json"))):
        r = json.load(open(path))
        by_target.setdefault(r["target_bits"], []).append(
            (os.path.basename(os.path.dirname(path)), r))
    for target, runs in sorted(by_target.items()):
        print(f"\n### {root}: target {target} bits\n")
        print("| run | RL origin | RL bits | RL held-out | search held-out | RL / search "
              "| lagrange held-out | evaluations RL / search | final lambda |")
        print("|---|---|---|---|---|---|---|---|---|")
        ratios, rls, ss, wins = [], [], [], 0
        for name, r in runs:
            plans = {p["name"]: p for p in r["plans"]}
            rl, s, lg = plans["rl"], plans.get("search"), plans.get("lagrange")
            sh = s["heldout_ppl"] if s else float("nan")
            ratio = rl["heldout_ppl"] / sh
            ratios.append(ratio); rls.append(rl["heldout_ppl"]); ss.append(sh)
            wins += rl["heldout_ppl"] < sh
            ev = r.get("search", {}).get("evaluations", "-")
            print(f"| {name} | {r.get('returned_plan_origin', r['rl']['source'])} | "
                  f"{rl['bits']:.4f} | {rl['heldout_ppl']:.3f} | {sh:.3f} | {ratio:.3f} | "
                  f"{lg['heldout_ppl'] if lg else float('nan'):.3f} | "
                  f"{r['rl_real_evaluations']} / {ev} | {r['lambda']:.3f} |")
        if len(runs) > 1:
            print(f"| mean | | | {statistics.mean(rls):.3f} | {statistics.mean(ss):.3f} | "
                  f"{statistics.mean(rls) / statistics.mean(ss):.3f} | | | |")
        print(f"\nRL better than search in {wins} of {len(runs)} seeds; "
              f"FP held-out {runs[0][1]['fp']['heldout_ppl']:.3f}.")
