#!/usr/bin/env python3
"""The capacity model of docs/capacity.md: LLaMA-3-8B and LLaMA-3-70B on nodes of 8 GPUs
with 80 GB each, from numbers measured on the 2-core development machine (MEASURED, each
with the command it came from in docs/capacity.md) and the assumptions in ASSUMED.

    python3 scripts/capacity-model.py                    # the tables of docs/capacity.md
    python3 scripts/capacity-model.py --precision bf16   # GEMMs in BF16 instead of TF32
    python3 scripts/capacity-model.py --gpu h100         # H100-SXM5-80GB
    python3 scripts/capacity-model.py --as-coded         # plan applied on the CPU + PCIe (today)

Nothing here was measured on a GPU. The GPU forward is the FLOP count of the forward as
implemented (common/model/llama_model.cc: dense T x T attention) at the GPU's spec FLOP/s
times an assumed efficiency; the output names the factor between that and this CPU's
measured forward GFLOP/s.
"""
import argparse
import math

# ---- measured on this machine (2 cores; docs/capacity.md, "Measurements") -------------
MEASURED = {
    # build/dev/bench/stage_bench --layers=1 --chunk=256 --batch=1 --seq=2048 --iters=1
    "cpu_matmul_gflops": 97.45,  # at::matmul 2048^3, same run
    "cpu_forward_gflops": 60.03,  # FP ForwardLayers of one 1B-shaped layer, 2048 tokens
    "cpu_forward_tokens_per_s_1b_layer": 433.7,
    "fit_bytes_per_weight": 0.0797,  # StageFits::ParamBytes / weights at chunk 256
    "hidden_bytes_per_token_per_h": 4.0,  # windquant.v1.HiddenStates: float32
    # build/dev/common/quant/fit_bench --model=llama1b --layers=1 --chunk=256
    "fit_ns_per_weight_2threads": 51.3,  # 3.120 s / 60.817M weights
    # stage_bench --seq=512: plan linears (widen BF16 -> FP32 + dequantize every unit)
    "cpu_apply_ns_per_weight_2threads": 3.3,  # 60.8M weights in 0.199 s (mixed plan)
    # build/dev/bench/rl_bench --tables 8b,70b --minibatch 1024
    "transition_bytes": 81.0,  # TransitionBatch incl. its plan, per transition
    "table_bytes_per_unit": 180.0,  # windquant.v1.UnitTable on the wire
    "plan_bytes_per_unit": 1.0,  # windquant.v1.Plan: one varint per unit (81.0 - 80.0)
    "ppo_samples_per_s": {"8b": 2424, "70b": 2480},  # PpoLearner::Update, 128x128 policy
    "env_steps_per_s": {"8b": 100111, "70b": 136512},  # 16 episodes stepped together
}

# ---- assumed (docs/capacity.md, "Assumptions") ----------------------------------------
GPUS = {  # dense spec FLOP/s (no structured sparsity) and HBM bytes/s
    "a100": {"name": "A100-SXM4-80GB", "fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12,
             "hbm": 2.039e12},
    "h100": {"name": "H100-SXM5-80GB", "fp32": 66.9e12, "tf32": 494.7e12, "bf16": 989.4e12,
             "hbm": 3.35e12},
}
ASSUMED = {
    "gpu_flop_efficiency": 0.5,  # of dense spec, on 4096-8192-token micro-batches
    "gpu_hbm_efficiency": 0.7,  # of HBM bandwidth, for the elementwise plan application
    # plan application on the GPU, per weight per forward: read BF16 (2), write FP32 (4),
    # dequantize in place (read + write 8), the GEMM reads FP32 (4)
    "apply_bytes_per_weight": 18,
    "pcie_bytes_per_s": 25e9,  # PCIe 4.0 x16, each way (the as-coded plan application)
    "gpus_per_node": 8,
    "usable_gpu_bytes": 0.9 * 80e9,  # less CUDA context, cuBLAS workspace, fragmentation
    "actor_cpu_cores": 8,  # per actor pod (fits and, as coded, plan application)
    "learner_ppo_speedup": 1.0,  # learner pod vs the measured 2 threads (PPO is overhead-bound)
    "weights_load_bytes_per_s": 1e9,  # shared volume -> host -> GPU
    "final_plans": 6,  # FP reference, best RL plan, uniform, greedy, Lagrangian, random
    "final_eval_tokens": 300_000,  # about WikiText-2 test under the LLaMA-3 tokenizer
    "policy_params": 15 * 128 + 128 + 128 * 128 + 128 + 128 * 7 + 7 + 128 * 1 + 1,
}

MODELS = {
    "8b": {"name": "LLaMA-3-8B", "h": 4096, "i": 14336, "nh": 32, "nkv": 8, "hd": 128,
           "layers": 32, "vocab": 128256},
    "70b": {"name": "LLaMA-3-70B", "h": 8192, "i": 28672, "nh": 64, "nkv": 8, "hd": 128,
            "layers": 80, "vocab": 128256},
}

# The settings of configs/llama3-8b.yaml and configs/llama3-70b.yaml.
RUNS = {
    "8b": {"stages": 1, "replicas": 7, "chunk": 256, "salient": 0.005, "context": 2048,
           "batch": 4, "calib_slice": 16384, "eval_slice": 32768, "episodes": 21,
           "curriculum": 3, "min_updates": 5, "max_updates": 12, "calib_tokens": 128 * 2048},
    "70b": {"stages": 3, "replicas": 2, "chunk": 256, "salient": 0.005, "context": 2048,
            "batch": 2, "calib_slice": 16384, "eval_slice": 32768, "episodes": 12,
            "curriculum": 3, "min_updates": 5, "max_updates": 12, "calib_tokens": 128 * 2048},
}


def layer_params(m):
    q, kv = m["nh"] * m["hd"], m["nkv"] * m["hd"]
    return 2 * m["h"] * q + 2 * m["h"] * kv + 3 * m["h"] * m["i"]


def units_per_layer(m, chunk):
    q = m["nh"] * m["hd"]
    return sum(math.ceil(c / chunk) for c in [m["h"]] * 3 + [q] + [m["h"]] * 2 + [m["i"]])


def stage_split(layers, stages):  # actor::StageLayers: earlier stages take the remainder
    base, extra = divmod(layers, stages)
    return [base + (1 if s < extra else 0) for s in range(stages)]


def stage_memory(m, r, layers):  # the formula of tests/cluster_configs_test.cc
    p = layer_params(m)
    w = p * layers
    b, t = r["batch"], r["context"]
    attention = 2 * b * m["nh"] * t * t * 4  # scores + probabilities, FP32
    mlp = 3 * b * t * m["i"] * 4  # gate, up, their product
    act = max(attention, mlp) + 4 * b * t * m["h"] * 4
    fits = w * (14 / r["chunk"] + 5 * r["salient"])
    return [2 * w, fits, 4 * p, act, 2 * w + fits + 4 * p + act]


def gb(x):
    return f"{x / 1e9:.2f}"


def run_model(key, gpu, precision, as_coded):
    m, r = MODELS[key], RUNS[key]
    s, rep = r["stages"], r["replicas"]
    actors = s * rep
    eff = gpu[precision] * ASSUMED["gpu_flop_efficiency"]
    p = layer_params(m)
    units = units_per_layer(m, r["chunk"]) * m["layers"]
    stage_layers = max(stage_split(m["layers"], s))
    stage_w = p * stage_layers
    t = r["context"]
    flop_token = 2 * p * m["layers"] + 4 * t * m["nh"] * m["hd"] * m["layers"]
    mb_tokens = r["batch"] * t
    plan_tokens = r["calib_slice"] + r["eval_slice"]
    mbs = math.ceil(plan_tokens / mb_tokens)
    t_gemm = mb_tokens * flop_token / s / eff
    if as_coded:
        # quant::PlanLinears: BF16 GPU -> CPU (2 B), widen + dequantize on the CPU,
        # FP32 CPU -> GPU (4 B), every layer of every forward.
        t_apply = (stage_w * MEASURED["cpu_apply_ns_per_weight_2threads"] * 1e-9 * 2 /
                   ASSUMED["actor_cpu_cores"] + stage_w * 6 / ASSUMED["pcie_bytes_per_s"])
    else:
        t_apply = stage_w * ASSUMED["apply_bytes_per_weight"] / (
            gpu["hbm"] * ASSUMED["gpu_hbm_efficiency"])
    t_mb = t_gemm + t_apply
    t_plan = (mbs + s - 1) * t_mb
    # Each actor rolls out ceil(E / actors) episodes per policy version
    # (actor/actor_node.cc), the learner adds its greedy candidate after each update.
    episodes = actors * math.ceil(r["episodes"] / actors)
    plans = episodes + 1
    rounds = math.ceil(plans / rep)
    t_eval = rounds * t_plan
    samples = r["episodes"] * units
    t_ppo = samples / (MEASURED["ppo_samples_per_s"][key] * ASSUMED["learner_ppo_speedup"])
    t_roll = math.ceil(r["episodes"] / actors) * units / (MEASURED["env_steps_per_s"][key] / 16)
    t_update = t_roll + t_eval + t_ppo
    t_load = stage_w * 2 / ASSUMED["weights_load_bytes_per_s"]
    calib_mbs = math.ceil(r["calib_tokens"] / mb_tokens)
    t_calib = (calib_mbs + s - 1) * t_gemm
    t_fit = (stage_w * MEASURED["fit_ns_per_weight_2threads"] * 1e-9 * 2 /
             ASSUMED["actor_cpu_cores"])
    final_mbs = math.ceil(ASSUMED["final_eval_tokens"] / mb_tokens)
    t_final = math.ceil(ASSUMED["final_plans"] / rep) * (final_mbs + s - 1) * t_mb
    t_setup = t_load + t_calib + t_fit
    gpus = ASSUMED["gpus_per_node"] * math.ceil((actors + 1) / ASSUMED["gpus_per_node"])
    hidden = plans * plan_tokens * 2 * s * MEASURED["hidden_bytes_per_token_per_h"] * m["h"]
    return dict(m=m, r=r, p=p, units=units, stage_w=stage_w, flop_token=flop_token,
                mb_tokens=mb_tokens, plan_tokens=plan_tokens, mbs=mbs, t_gemm=t_gemm,
                t_apply=t_apply, t_mb=t_mb, t_plan=t_plan, episodes=episodes, plans=plans,
                rounds=rounds, t_eval=t_eval, samples=samples, t_ppo=t_ppo, t_roll=t_roll,
                t_update=t_update, t_load=t_load, t_calib=t_calib, t_fit=t_fit,
                t_final=t_final, t_setup=t_setup, gpus=gpus, hidden=hidden,
                transitions=samples * MEASURED["transition_bytes"],
                plan_bytes=plans * units * MEASURED["plan_bytes_per_unit"] * (1 + s),
                policy_bytes=ASSUMED["policy_params"] * 4 * actors)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu", choices=sorted(GPUS), default="a100")
    ap.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="tf32")
    ap.add_argument("--as-coded", action="store_true",
                    help="plan application on the CPU + PCIe (quant::PlanLinears today)")
    return ap.parse_args()


def print_header(args, gpu):
    eff = gpu[args.precision] * ASSUMED["gpu_flop_efficiency"]
    print(f"GPU {gpu['name']}, {args.precision} {gpu[args.precision] / 1e12:.1f} TFLOP/s x "
          f"{ASSUMED['gpu_flop_efficiency']} = {eff / 1e12:.1f} TFLOP/s effective; this CPU: "
          f"matmul {MEASURED['cpu_matmul_gflops']} GFLOP/s, forward "
          f"{MEASURED['cpu_forward_gflops']} GFLOP/s; scaling factor GPU / CPU forward = "
          f"{eff / (MEASURED['cpu_forward_gflops'] * 1e9):.0f}"
          f"{' (plan applied on the CPU + PCIe, as coded)' if args.as_coded else ''}\n")


def print_layout(row):
    print("| | LLaMA-3-8B | LLaMA-3-70B |\n|---|---|---|")
    row("decoder layers x weights per layer", lambda x: f"{x['m']['layers']} x "
        f"{x['p'] / 1e6:.1f}M = {x['p'] * x['m']['layers'] / 1e9:.2f}B")
    row("units (chunk 256)", lambda x: f"{x['units']}")
    row("stages x replicas (+ evaluator)", lambda x: f"{x['r']['stages']} x "
        f"{x['r']['replicas']} + 1 = {x['r']['stages'] * x['r']['replicas'] + 1} GPUs "
        f"(node of {x['gpus']})")
    row("layers per stage", lambda x: "/".join(
        str(n) for n in stage_split(x['m']['layers'], x['r']['stages'])))


def print_memory(row):
    print("\nMemory per stage (GB), largest stage:\n")
    print("| | LLaMA-3-8B | LLaMA-3-70B |\n|---|---|---|")
    names = ["BF16 weights (2 B/weight)", "fits (14/256 + 5 x 0.005 B/weight)",
             "one layer widened to FP32 (4 B/weight)", "activations of one micro-batch (FP32)",
             "total"]
    for i, n in enumerate(names):
        row(n, lambda x, i=i: gb(stage_memory(x['m'], x['r'], max(stage_split(
            x['m']['layers'], x['r']['stages'])))[i]))
    row("one stage fewer (total)", lambda x: "n/a" if x['r']['stages'] == 1 else gb(
        stage_memory(x['m'], x['r'], max(stage_split(x['m']['layers'],
                                                     x['r']['stages'] - 1)))[4]))
    print(f"\n(usable per GPU: {ASSUMED['usable_gpu_bytes'] / 1e9:.0f} GB)\n")


def print_timing(row):
    print("Time per plan evaluation and per PPO update:\n")
    print("| | LLaMA-3-8B | LLaMA-3-70B |\n|---|---|---|")
    row("GFLOP per token in the stages (2 x weights + attention)",
        lambda x: f"{x['flop_token'] / 1e9:.2f}")
    row("tokens per plan = micro-batches x tokens", lambda x: f"{x['plan_tokens']} = "
        f"{x['mbs']} x {x['mb_tokens']}")
    row("micro-batch on one stage: GEMMs", lambda x: f"{x['t_gemm']:.3f} s")
    row("micro-batch on one stage: plan application", lambda x: f"{x['t_apply']:.3f} s")
    row("one plan: (micro-batches + stages - 1) x stage time", lambda x: f"({x['mbs']} + "
        f"{x['r']['stages']} - 1) x {x['t_mb']:.3f} = {x['t_plan']:.1f} s")
    row("plans per update (episodes + greedy candidate)", lambda x: f"{x['episodes']} + 1 = "
        f"{x['plans']}")
    row("evaluation: rounds of replicas x plan time", lambda x: f"{x['rounds']} x "
        f"{x['t_plan']:.1f} = {x['t_eval']:.0f} s")
    row("PPO update (learner CPU)", lambda x: f"{x['samples']} samples / "
        f"{MEASURED['ppo_samples_per_s']['8b' if x['m']['layers'] == 32 else '70b']}/s = "
        f"{x['t_ppo']:.0f} s")
    row("rollouts (actor CPU)", lambda x: f"{x['t_roll']:.1f} s")
    row("**minutes per PPO update**", lambda x: f"**{x['t_update'] / 60:.2f}**")


def print_run(row):
    print("\nPer plan (one run):\n")
    print("| | LLaMA-3-8B | LLaMA-3-70B |\n|---|---|---|")
    row("setup: load + calibration + fits", lambda x: f"{x['t_load']:.0f} + "
        f"{x['t_calib']:.0f} + {x['t_fit']:.0f} = {x['t_setup']:.0f} s")
    row("final measurements (6 plans x 300k tokens)", lambda x: f"{x['t_final']:.0f} s")
    for label, attr in (("fewest", "min_updates"), ("most", "max_updates")):
        row(f"updates ({label}: 3 curriculum stages x {attr})",
            lambda x, attr=attr: f"{3 * x['r'][attr]}")

        def hours(x, attr=attr):
            wall = x['t_setup'] + 3 * x['r'][attr] * x['t_update'] + x['t_final']
            return f"{wall / 60:.0f} min x {x['gpus']} = **{wall / 3600 * x['gpus']:.1f}**"
        row(f"wall x GPUs held = GPU-hours ({label})", hours)


def print_network(row):
    print("\nNetwork per PPO update:\n")
    print("| | LLaMA-3-8B | LLaMA-3-70B |\n|---|---|---|")
    row("hidden states (plans x tokens x 2 x stages x 4H B)", lambda x: f"{gb(x['hidden'])} GB")
    row("transitions (samples x 81 B)", lambda x: f"{x['transitions'] / 1e6:.1f} MB")
    row("plans (to the evaluator and each stage)", lambda x: f"{x['plan_bytes'] / 1e6:.2f} MB")
    row("policy snapshots (to every actor)", lambda x: f"{x['policy_bytes'] / 1e6:.2f} MB")
    row("average rate over the update",
        lambda x: f"{(x['hidden'] + x['transitions']) / x['t_update'] / 1e6:.0f} MB/s")


def main():
    args = parse_args()
    gpu = GPUS[args.gpu]
    print_header(args, gpu)
    res = {k: run_model(k, gpu, args.precision, args.as_coded) for k in ("8b", "70b")}

    def row(label, fn):
        print(f"| {label} | " + " | ".join(fn(res[k]) for k in ("8b", "70b")) + " |")

    print_layout(row)
    print_memory(row)
    print_timing(row)
    print_run(row)
    print_network(row)


if __name__ == "__main__":
    main()
