#!/usr/bin/env python3
"""How well the unit table's error proxy ranks plans: Spearman rank correlation of a
plan's proxy error (sum_u n_u/N * error_u[action_u], common/search/baselines.h) against
its measured held-out perplexity.

  measure: runs `windquant baseline` for the plan set of docs/results-quant.md
           (uniform 8 4 3 2 1.58 1; greedy and lagrange at 3.0 2.5 2.0; random seeds
           0 1 2 at the same budgets: 21 plans) with one quant.compensation, writing
           OUT/<plan>/plan.json, OUT/results.jsonl (one baseline --json line per plan)
           and OUT/table.pb (`windquant table build`: the table the plans were chosen on).
           CPU-heavy: run it under `flock /tmp/wq-heavy.lock`.
  score:   reads the plans of one or more measure folders (their perplexities) and
           scores every plan with the proxy of TABLE.pb; prints the Spearman rank
           correlation over all plans and over the plans of each budget with more than
           two plans (ties get average ranks).

usage:
  scripts/proxy-rank.py measure --bin build/dev/cli/windquant --config FILE \\
      --compensation none|gptq --out DIR [--set K=V]... [--only greedy,lagrange]
  scripts/proxy-rank.py score --table TABLE.pb [--bin WINDQUANT] DIR[:METHODS] [...]
           (DIR:uniform,random takes only those methods' plans of DIR)
No third-party Python packages.
"""
import argparse
import json
import os
import subprocess
import sys

ACTIONS = ["16", "8", "4", "3", "2", "1.58", "1"]  # action index order of the table
UNIFORM = ["8", "4", "3", "2", "1.58", "1"]
BUDGETS = ["3.0", "2.5", "2.0"]


def plan_set():
    for a in UNIFORM:
        yield f"uniform-{a}", ["--method", "uniform", "--action", a]
    for b in BUDGETS:
        for m in ["greedy", "lagrange"]:
            yield f"{m}-{b}", ["--method", m, "--bits", b]
        for s in ["0", "1", "2"]:
            yield f"random-{b}-s{s}", ["--method", "random", "--bits", b, "--seed", s]


def measure(args):
    os.makedirs(args.out, exist_ok=True)
    common = ["--config", args.config, "--set", f"quant.compensation={args.compensation}"]
    for kv in args.set or []:
        common += ["--set", kv]
    table = os.path.join(args.out, "table.pb")
    subprocess.run([args.bin, "table", "build", *common, "--out", table], check=True,
                   stdout=sys.stderr)
    only = set(args.only.split(",")) if args.only else None
    with open(os.path.join(args.out, "results.jsonl"), "w") as out:
        for name, flags in plan_set():
            if only is not None and flags[1] not in only:
                continue
            cmd = [args.bin, "baseline", *common, *flags, "--out",
                   os.path.join(args.out, name), "--force", "--json"]
            print(" ".join(cmd), file=sys.stderr)
            res = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
            row = json.loads(res.stdout.strip().splitlines()[-1])
            row["name"] = name
            out.write(json.dumps(row, sort_keys=True) + "\n")
            out.flush()
            print(f"{name}: bits {row['effective_bits']:.4f} proxy {row['proxy_error']:.5g} "
                  f"ppl {row['perplexity']:.3f}", file=sys.stderr)


def load_table(bin_path, table):
    res = subprocess.run([bin_path, "table", "dump", table, "--json"], check=True,
                         stdout=subprocess.PIPE, text=True)
    units = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    return {u["id"]: u for u in units}


def proxy(units, plan):
    total = sum(u["rows"] * u["cols"] for u in units.values())
    err = 0.0
    for pu in plan["units"]:
        u = units[pu["id"]]
        err += u["rows"] * u["cols"] / total * u["error"][ACTIONS.index(pu["action"])]
    return err


def ranks(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return r


def spearman(xs, ys):
    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    return cov / (vx * vy) ** 0.5 if vx > 0 and vy > 0 else float("nan")


def score(args):
    units = load_table(args.bin, args.table)
    rows = []
    for spec in args.dirs:
        d, _, methods = spec.partition(":")
        keep = set(methods.split(",")) if methods else None
        with open(os.path.join(d, "results.jsonl")) as f:
            for line in f:
                row = json.loads(line)
                if keep is not None and row["method"] not in keep:
                    continue
                with open(os.path.join(d, row["name"], "plan.json")) as pf:
                    plan = json.load(pf)
                row["proxy"] = proxy(units, plan)
                row["dir"] = d
                rows.append(row)
    for r in rows:
        print(f"{r['dir']}/{r['name']}: bits {r['effective_bits']:.4f} "
              f"proxy {r['proxy']:.5g} ppl {r['perplexity']:.3f}")
    groups = {"all": rows}
    for b in BUDGETS:
        g = [r for r in rows if r["name"].endswith(f"-{b}") or f"-{b}-s" in r["name"]]
        if len(g) > 2:
            groups[f"budget {b}"] = g
    result = {}
    for k, g in groups.items():
        rho = spearman([r["proxy"] for r in g], [r["perplexity"] for r in g])
        result[k] = rho
        print(f"spearman {k} ({len(g)} plans): {rho:.3f}")
    print(json.dumps(result, sort_keys=True))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--bin", default="build/dev/cli/windquant")
    m.add_argument("--config", required=True)
    m.add_argument("--compensation", choices=["none", "gptq"], required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--set", action="append")
    m.add_argument("--only", help="comma-separated methods to run (e.g. greedy,lagrange: "
                   "the plans that depend on the proxy); default all")
    s = sub.add_parser("score")
    s.add_argument("--bin", default="build/dev/cli/windquant")
    s.add_argument("--table", required=True)
    s.add_argument("dirs", nargs="+")
    args = p.parse_args()
    measure(args) if args.verb == "measure" else score(args)


if __name__ == "__main__":
    main()
