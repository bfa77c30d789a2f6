"""The invariants of tests/chaos_soak_test.sh over a finished run's files.

Reads OUT/logs (learner.log, actor-*.log), OUT/run/plans.jsonl, OUT/status.txt,
OUT/pulled/final/{report,plan}.json, OUT/run.json and OUT/plans-list.txt;
prints the summary table; exits 1 naming every invariant that does not hold.
"""
import argparse
import glob
import json
import os
import re
import sys


class Checks:
    def __init__(self):
        self.errors = []

    def __call__(self, ok, what):
        if not ok:
            self.errors.append(what)


def learner_incarnations(learner_log):
    """Per start of the learner: where it resumed, its last checkpoint, its updates.

    A start's first line is the store's (the run it works on), before it resumes
    from its checkpoint and serves. Returns (incarnations, update numbers logged)."""
    incarnations, logged = [], []
    for line in learner_log:
        if line.startswith("store: run "):
            first = not incarnations
            incarnations.append({"resumed": 0 if first else None, "last_checkpoint": 0, "updates": 0})
        if not incarnations:
            continue
        inc = incarnations[-1]
        m = re.search(r"learner: resumed from checkpoint at update (\d+)", line)
        if m:
            inc["resumed"] = int(m.group(1))
            inc["last_checkpoint"] = max(inc["last_checkpoint"], inc["resumed"])
        m = re.search(r"learner: checkpoint: update (\d+) written", line)
        if m:
            inc["last_checkpoint"] = int(m.group(1))
        m = re.search(r"learner: update (\d+) version", line)
        if m:
            logged.append(int(m.group(1)))
            inc["updates"] += 1
    return incarnations, logged


def check_updates(check, a, status, learner_log):
    """2. Every PPO update counted once ("checkpoint: update K written" comes
    right before "update K" in the learner's log)."""
    incarnations, logged = learner_incarnations(learner_log)
    twice = sorted({u for u in logged if logged.count(u) > 1})
    check(not twice, f"updates logged twice (run twice): {twice}")
    check(all(1 <= u <= a.updates for u in logged), f"update numbers out of 1..{a.updates}: {logged}")
    check(int(status.get("updates", -1)) == a.updates,
          f"status updates={status.get('updates')}, curriculum.max_updates={a.updates}")
    for prev, inc in zip(incarnations, incarnations[1:]):
        r = inc["resumed"]
        if r is None:  # killed before it resumed: the next one resumes for it
            inc["resumed"] = prev["resumed"]
            inc["last_checkpoint"] = max(inc["last_checkpoint"], prev["last_checkpoint"])
            continue
        # The last checkpoint written, or one more (killed between the checkpoint and its line).
        check(prev["last_checkpoint"] <= r <= prev["last_checkpoint"] + 1,
              f"a learner resumed at update {r}, the one before checkpointed {prev['last_checkpoint']}")
    last = incarnations[-1] if incarnations else {"resumed": 0}
    if a.last_updates_metric:
        ran = a.updates - (last["resumed"] or 0)
        check(float(a.last_updates_metric) == ran,
              f"the last learner's windquant_learner_ppo_updates_total={a.last_updates_metric}, "
              f"it ran {ran} updates (from {last['resumed']} to {a.updates})")
    return {"incarnations": len(incarnations), "twice": len(twice)}


def check_episodes(check, a, out, rows, learner_log):
    """3. No acknowledged episode lost, none recorded twice, every plan in budget."""
    ids = [r["episode_id"] for r in rows]
    check(len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} plans recorded twice in plans.jsonl")
    acked = {}
    for path in sorted(glob.glob(f"{out}/logs/actor-*.log")):
        name = os.path.basename(path)[: -len(".log")]
        for line in open(path):
            m = re.search(r": episode (\d+) accepted by the learner", line)
            if m:
                acked[int(m.group(1))] = name
    lost = sorted(set(acked) - set(ids))
    given_up = {int(m.group(1)) for l in learner_log
                for m in [re.search(r"learner: episode (\d+) given up", l)] if m}
    check(not lost, f"{len(lost)} acknowledged episodes never evaluated and recorded: "
          f"{[(i, acked[i], 'given up' if i in given_up else 'lost') for i in lost[:10]]}")
    check(all(r["effective_bits"] <= a.target_bits + 1e-9 for r in rows),
          "a recorded plan breaks the budget")
    return {"acked": len(acked), "lost": len(lost), "given_up": len(given_up)}


def check_evaluations(check, rows, report, status):
    """4. The real-evaluation count is the plans the evaluator measured; the
    learner's best plan is the best measured (none found between a checkpoint
    and a kill forgotten)."""
    measured = sum(1 for r in rows if r.get("cached") is False)
    cached = sum(1 for r in rows if r.get("cached") is True)
    check(measured + cached == len(rows), "plans.jsonl rows without their cached flag")
    check(report["rl_real_evaluations"] == measured,
          f"report.json rl_real_evaluations={report['rl_real_evaluations']}, "
          f"plans.jsonl has {measured} measured (uncached) evaluations")
    return {"measured": measured, "cached": cached}


def check_best(check, a, rows, status):
    feasible = [r["perplexity"] for r in rows if r["effective_bits"] <= a.target_bits + 1e-9]
    best = min(feasible) if feasible else float("nan")
    ppl = float(status.get("best_plan_perplexity", "nan"))
    check(abs(ppl - best) <= 1e-5 * best,
          f"the learner's best plan has perplexity {ppl}, the best measured {best}")
    return {"best_ppl": ppl, "best_measured": best}


def check_returned(check, a, out, report):
    """5. The returned plan: within the budget, its perplexity reproduced."""
    returned = report["returned"]
    plan_bits = json.load(open(f"{out}/pulled/final/plan.json"))["totals"]["effective_bits"]
    check(max(returned["bits"], plan_bits) <= a.target_bits + 1e-9,
          f"the returned plan has {returned['bits']} bits (plan.json {plan_bits}) > {a.target_bits}")
    got = json.load(open(a.eval))["perplexity"]
    want = report["exported"]["perplexity"]
    check(abs(got - want) <= 1e-6 * want,
          f"the returned plan evaluates to {got}, report.json's exported model {want}")
    check(abs(returned["selection_ppl"] - want) <= 1e-6 * want,
          f"report.json: returned plan {returned['selection_ppl']}, exported model {want}")
    # Which binary made the report: windquant-learner's commit, built in a checkout.
    check(re.fullmatch(r"[0-9a-f]{40}(-dirty)?", str(report.get("commit"))) is not None,
          f"report.json commit {report.get('commit')!r} is not the learner's build commit")
    check(re.fullmatch(r"[0-9a-f]{64}", str(report.get("config_digest"))) is not None,
          f"report.json config_digest {report.get('config_digest')!r} is not a sha256")
    return {"bits": returned["bits"], "ppl": want, "eval": got,
            "origin": report.get("returned_plan_origin", "?")}


def check_store(check, out):
    """6. run.json (done) names a best plan that is in the store (every listed
    plan pulled already)."""
    run = json.load(open(f"{out}/run.json"))
    listed = [l.split()[0] for l in open(f"{out}/plans-list.txt") if l.startswith("  ")]
    best = run.get("best_plan", "")
    check(any(p.endswith("/" + best) for p in listed), f"run.json's best plan {best!r} not in the store")
    check(run.get("state") == "done", f"run.json state {run.get('state')!r}")
    return {"listed": len(listed)}


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--out", "--eval", "--kills", "--seed"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--updates", type=int, required=True)
    ap.add_argument("--target-bits", type=float, required=True)
    ap.add_argument("--last-updates-metric", default="")
    ap.add_argument("--pulled", type=int, required=True)
    ap.add_argument("--chaos-seconds", type=int, required=True)
    a = ap.parse_args()
    out, check = a.out, Checks()
    status = dict(l.split("=", 1) for l in open(f"{out}/status.txt").read().split("\n") if "=" in l)
    learner_log = open(f"{out}/logs/learner.log").read().splitlines()
    rows = [json.loads(l) for l in open(f"{out}/run/plans.jsonl")]
    report = json.load(open(f"{out}/pulled/final/report.json"))
    check(status.get("done") == "true", f"the learner is not done: {status}")  # 1.
    u = check_updates(check, a, status, learner_log)
    e = check_episodes(check, a, out, rows, learner_log)
    v = check_evaluations(check, rows, report, status)
    b = check_best(check, a, rows, status)
    r = check_returned(check, a, out, report)
    s = check_store(check, out)
    kills = dict(k.split("=") for k in a.kills.split())
    print(f"chaos soak summary (seed {a.seed}, {a.chaos_seconds} s of chaos)")
    for k, val in [
        ("kills survived: learner", kills["learner"]),
        ("kills survived: evaluator", kills["evaluator"]),
        ("kills survived: actors", kills["actor"]),
        ("learner incarnations", u["incarnations"]),
        ("PPO updates completed", f"{status.get('updates')} of {a.updates}"),
        ("update numbers logged twice", u["twice"]),
        ("episodes acknowledged", e["acked"]),
        ("episodes acknowledged, lost", e["lost"]),
        ("episodes given up by the learner", e["given_up"]),
        ("plans recorded (episodes + candidates)", len(rows)),
        ("evaluations measured (plans.jsonl)", v["measured"]),
        ("evaluations from the cache", v["cached"]),
        ("rl_real_evaluations (report.json)", report["rl_real_evaluations"]),
        ("best plan ppl: learner / best measured", f"{b['best_ppl']:.6g} / {b['best_measured']:.6g}"),
        ("returned plan bits / ppl", f"{r['bits']:.4f} / {r['ppl']:.6g} (eval {r['eval']:.6g})"),
        ("returned plan origin", r["origin"]),
        ("plans in the store (all pulled)", f"{s['listed']} ({a.pulled} pulled)"),
    ]:
        print(f"  {k:<40} {val}")
    for err in check.errors:
        print(f"INVARIANT: {err}")
    return 1 if check.errors else 0


if __name__ == "__main__":
    sys.exit(main())
