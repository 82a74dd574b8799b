#!/usr/bin/env python3
"""kb_cuda_gemm's race on made-up gemm shapes: every candidate's median, per problem.

Writes a dataset of gemm definitions (N in --n, one K, one dtype; M in --m as
workloads), runs `kb bench --no-time --trials 1 --solutions kb_cuda_gemm` on
it with KB_CUBLASLT_LOG=1 (each problem's first call races the candidates and
prints a "kb gemm race:" note with every median), and writes a markdown table:
per problem, each candidate's median, the winner, and the static rule's form
over the fastest (what capture or KB_GEMM_RACE=0 would cost). Correctness is
judged as in any kb bench run; a failed evaluation makes the exit non-zero.

With --ab VAR=value, SOLUTION is then timed by kb bench twice on the same
shapes in the same process order, first with VAR=value set, then without,
and the table gains both latencies and their ratio (e.g. --ab
KB_GEMM_LONG_K=chunks --ab-solution kb_cublaslt_gemm: the batched chunks
against the static rule).

usage: race_sweep.py --kb PATH --n 32,96,256 --m 17,128 --k 28672 --dtype float16 --out DIR
                     [--ab VAR=value [--ab-solution NAME]]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import uuid

NOTE = re.compile(r"kb gemm race: (\S+) M=(\d+) N=(\d+) K=(\d+): ([^;]+); median of \d+ cold samples: (.*?) "
                  r"\(static rule: ([^)]*)\)(.*)")
ITEM = re.compile(r"(.*) ([\d.]+) us$")

p = argparse.ArgumentParser()
p.add_argument("--kb", required=True)
p.add_argument("--n", required=True, help="comma-separated N values")
p.add_argument("--m", required=True, help="comma-separated M values")
p.add_argument("--k", type=int, required=True)
p.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
p.add_argument("--out", required=True)
p.add_argument("--ab", default="", help="VAR=value: time --ab-solution with it set, then without")
p.add_argument("--ab-solution", default="kb_cublaslt_gemm")
args = p.parse_args()

ns = [int(v) for v in args.n.split(",")]
ms = [int(v) for v in args.m.split(",")]
data = os.path.join(args.out, "dataset")
os.makedirs(os.path.join(data, "definitions"), exist_ok=True)
os.makedirs(os.path.join(data, "workloads"), exist_ok=True)
for n in ns:
    name = f"sweep_{args.dtype}_n{n}_k{args.k}"
    definition = {
        "name": name, "op_type": "gemm", "description": "race sweep shape (tools/gpu/race_sweep.py)",
        "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": n}, "K": {"type": "const", "value": args.k}},
        "inputs": {"A": {"shape": ["M", "K"], "dtype": args.dtype}, "B": {"shape": ["N", "K"], "dtype": args.dtype}},
        "outputs": {"C": {"shape": ["M", "N"], "dtype": args.dtype}},
        "reference": "import torch\n\ndef run(A, B):\n    return torch.matmul(A.float(), B.float().t()).to(A.dtype)\n",
    }
    with open(os.path.join(data, "definitions", name + ".json"), "w") as fh:
        json.dump(definition, fh, indent=1)
    with open(os.path.join(data, "workloads", name + ".jsonl"), "w") as fh:
        for m in ms:
            wl = {"uuid": str(uuid.uuid4()), "axes": {"M": m}, "inputs": {"A": {"type": "random"}, "B": {"type": "random"}}}
            fh.write(json.dumps({"definition": name, "workload": wl, "solution": None, "evaluation": None}) + "\n")

env = dict(os.environ, KB_CUBLASLT_LOG="1")
cmd = [args.kb, "bench", data, "--device", "cuda", "--trials", "1", "--no-time", "--solutions", "kb_cuda_gemm",
       "--out", os.path.join(args.out, "traces")]
r = subprocess.run(cmd, env=env, capture_output=True, text=True)
with open(os.path.join(args.out, "kb_bench.log"), "w") as fh:
    fh.write(r.stdout + r.stderr)


def timed(side, extra_env):
    """{(N, M): latency ms} of --ab-solution, timed by kb bench with extra_env."""
    out = os.path.join(args.out, "ab_" + side)
    t = subprocess.run([args.kb, "bench", data, "--device", "cuda", "--trials", "1", "--solutions", args.ab_solution,
                        "--out", out], env=dict(os.environ, **extra_env), capture_output=True, text=True)
    with open(out + ".log", "w") as fh:
        fh.write(t.stdout + t.stderr)
    lat = {}
    for root, _, files in os.walk(out):
        for f in files:
            for line in open(os.path.join(root, f)):
                tr = json.loads(line)
                ev = tr.get("evaluation") or {}
                n = int(re.search(r"_n(\d+)_", tr["definition"])[1])
                if ev.get("status") == "PASSED":
                    lat[(n, tr["workload"]["axes"]["M"])] = ev["performance"]["latency_ms"]
    return lat, t.returncode


ab_a, ab_b, ab_rc = {}, {}, 0
if args.ab:
    var, _, value = args.ab.partition("=")
    ab_a, rc_a = timed("a", {var: value})
    ab_b, rc_b = timed("b", {})
    ab_rc = rc_a or rc_b

rows = []
for line in (r.stdout + r.stderr).splitlines():
    m = NOTE.search(line)
    if not m:
        continue
    medians, rule = {}, None
    for item in m[6].split(", "):
        is_rule = item.endswith(" (rule)")
        i = ITEM.match(item.replace(" (rule)", ""))
        if i:
            medians[i[1]] = float(i[2])
            if is_rule:
                rule = i[1]
    # the static rule names its form (long K), "the gemv" (its rule plan) or why it takes cuBLASLt
    static = rule if m[7] == "the gemv" else m[7] if m[7] in medians else "cuBLASLt"
    rows.append(dict(dtype=m[1], M=int(m[2]), N=int(m[3]), K=int(m[4]), winner=m[5], medians=medians, static=static))

forms = []
for row in rows:
    for f in row["medians"]:
        if f not in forms:
            forms.append(f)
lines = [f"# kb_cuda_gemm's race, {args.dtype}, K = {args.k}", "",
         f"`{' '.join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))}`", "",
         "Medians of the race's cold samples (us). static / best: the static rule's form over the fastest.", "",
         "| M | N | " + " | ".join(forms) + " | winner | static rule | static / best |" +
         (f" {args.ab_solution} us, {args.ab} | without | without / with |" if args.ab else ""),
         "| ---: | ---: | " + " | ".join("---:" for _ in forms) + " | --- | --- | ---: |" +
         (" ---: | ---: | ---: |" if args.ab else "")]
if args.ab:
    lines[4] += f" The last three columns: {args.ab_solution} timed by kb bench with {args.ab} set, then without."
for row in sorted(rows, key=lambda x: (x["N"], x["M"])):
    best = min(row["medians"].values())
    s = row["medians"].get(row["static"])
    cells = " | ".join(f"{row['medians'][f]:.1f}" if f in row["medians"] else "-" for f in forms)
    ratio = f"{s / best:.3f}" if s else "-"
    line = f"| {row['M']} | {row['N']} | {cells} | {row['winner']} | {row['static']} | {ratio} |"
    if args.ab:
        a, b = ab_a.get((row["N"], row["M"])), ab_b.get((row["N"], row["M"]))
        line += f" {a * 1e3:.1f} |" if a else " - |"
        line += f" {b * 1e3:.1f} |" if b else " - |"
        line += f" {b / a:.3f} |" if a and b else " - |"
    lines.append(line)
with open(os.path.join(args.out, "race_sweep.md"), "w") as fh:
    fh.write("\n".join(lines) + "\n")
print("\n".join(lines))
if args.ab:
    ratios = sorted(ab_b[k] / ab_a[k] for k in ab_a if k in ab_b)
    if ratios:
        print(f"without / with {args.ab}: median {ratios[len(ratios) // 2]:.3f}, {ratios[0]:.3f}-{ratios[-1]:.3f} "
              f"over {len(ratios)} rows")
print(f"kb bench exit {r.returncode}{f', A/B exits {ab_rc}' if args.ab else ''}; {len(rows)} race notes")
sys.exit(1 if r.returncode != 0 or ab_rc != 0 else 0)
