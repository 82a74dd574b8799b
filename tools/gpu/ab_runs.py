#!/usr/bin/env python3
"""Two compare_torch.py runs of the same shapes side by side (A: a switch off,
B: on, run one after the other in one device call): per row and solution,
B's kb latency over A's, and each run's kb / torch. A solution both runs
leave unchanged (e.g. kb_cublaslt_gemm beside kb_cuda_gemm) shows the noise
between the runs.

usage: ab_runs.py A.json B.json --names static,race [--notes race_notes.txt] > ab.md
--notes: lines "... <dtype> M=<m> N=<n> K=<k>: <choice>; ..." (e.g. kb's
"kb gemm race:" log lines) whose choice is shown beside each gemm row.
"""
import argparse
import json
import re
import statistics


def rows_of(path):
    return {(r["definition"], r["value"], r["solution"]): r for r in json.load(open(path))["rows"]}


p = argparse.ArgumentParser()
p.add_argument("a")
p.add_argument("b")
p.add_argument("--names", default="A,B")
p.add_argument("--notes", default="")
args = p.parse_args()
name_a, name_b = args.names.split(",")
a, b = rows_of(args.a), rows_of(args.b)
keys = sorted(k for k in a if k in b and a[k]["status"] == b[k]["status"] == "PASSED")
choices = {}
if args.notes:
    for line in open(args.notes):
        m = re.search(r"M=(\d+) N=(\d+) K=(\d+): ([^;]+);", line)
        if m:
            choices[(int(m[1]), int(m[2]), int(m[3]))] = m[4]

print(f"# {name_b} against {name_a}: the same shapes, two runs in one device call\n")
print(f"Files: `{args.a.split('/')[-1]}` ({name_a}), `{args.b.split('/')[-1]}` ({name_b}). "
      f"{name_b} / {name_a}: kb's median latency in run {name_b} over run {name_a} (below 1: faster). "
      "kb / torch: each run's ratio to torch.matmul timed in that run.\n")
print(f"| solution | rows | {name_b} / {name_a}: median | range | < 0.97 | > 1.03 | kb / torch {name_a}: median, "
      f"range, > 1.03 | kb / torch {name_b}: median, range, > 1.03 |")
print("| --- | ---: | ---: | --- | ---: | ---: | --- | --- |")
for sol in sorted({k[2] for k in keys}):
    ks = [k for k in keys if k[2] == sol]
    x = [b[k]["kb_ms"] / a[k]["kb_ms"] for k in ks]

    def ratios(by):
        r = [by[k]["ratio"] for k in ks]
        return f"{statistics.median(r):.3f}, {min(r):.3f}-{max(r):.3f}, {sum(v > 1.03 for v in r)}"

    print(f"| {sol} | {len(ks)} | {statistics.median(x):.3f} | {min(x):.3f}-{max(x):.3f} | "
          f"{sum(v < 0.97 for v in x)} | {sum(v > 1.03 for v in x)} | {ratios(a)} | {ratios(b)} |")

print(f"\n| definition | M | solution | {name_a} us | {name_b} us | {name_b} / {name_a} | kb / torch {name_a} | "
      f"kb / torch {name_b} | choice in {name_b} |")
print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")
for k in keys:
    m = re.match(r"gemm_n(\d+)_k(\d+)$", k[0])
    choice = choices.get((k[1], int(m[1]), int(m[2])), "") if m and k[2] == "kb_cuda_gemm" else ""
    print(f"| {k[0]} | {k[1]} | {k[2]} | {a[k]['kb_ms'] * 1e3:.2f} | {b[k]['kb_ms'] * 1e3:.2f} | "
          f"{b[k]['kb_ms'] / a[k]['kb_ms']:.3f} | {a[k]['ratio']:.3f} | {b[k]['ratio']:.3f} | {choice} |")
