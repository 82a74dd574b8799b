#!/usr/bin/env python3
"""kb bench --device cpu judges kb's own CPU solutions for rope and the
attention op types (gqa_paged, gqa_ragged, mla_paged, mla_ragged) against the
oracle, on every shipped definition of those op types:

  - definitions with shipped workloads: their smallest workload (--smallest);
  - definitions without any: one small workload written here (every input
    random, so kb builds valid index tensors; sm_scale 1/sqrt(head dim)).

One trial each: the smallest shipped mla_paged workloads have caches of
989669 pages, whose seeded random generation alone takes about half a minute
a trial. Every row must read PASSED for the op type's kb_cpu_ solution, and every
definition must have its row.

usage: test_cpu_bench.py KB SHARED_DIR
Exits 77 (skipped) when KB_SKIP_SLOW_BENCH is set: unoptimised / sanitized
builds, where the shipped workloads' multi-gigabyte inputs take too long.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

OP_TYPES = ["rope", "gqa_paged", "gqa_ragged", "mla_paged", "mla_ragged"]

kb, shared = sys.argv[1:3]
if os.environ.get("KB_SKIP_SLOW_BENCH"):
    print(f"skipped: {os.environ['KB_SKIP_SLOW_BENCH']}")
    sys.exit(77)

dataset = os.path.join(shared, "flashinfer-trace")
failures = 0


def check(name, cond, detail=""):
    global failures
    if cond:
        print(f"ok   {name}")
    else:
        failures += 1
        print(f"FAIL {name}: {detail}")


def bench(root, names, out):
    args = [kb, "bench", root, "--device", "cpu", "--smallest", "--no-time", "--trials", "1", "--out", out,
            "--definitions", ",".join(names)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    print(p.stdout, end="")
    return p.returncode, p.stdout, p.stderr


def rows(out):
    """definition -> (solution, status) of each table row."""
    got = {}
    for line in out.splitlines()[1:]:
        f = line.split()
        if len(f) >= 4 and not line.startswith(("skipped:", " ")) and f[0] in wanted:
            # columns: definition, axes (one or more key=value words), solution, status, ...
            sol = next((x for x in f[1:] if x.startswith("kb_cpu_") or x == "reference"), None)
            status = f[f.index(sol) + 1] if sol else "?"
            got.setdefault(f[0], []).append((sol, status))
    return got


defs = {}  # name -> (op_type, definition json)
for op in OP_TYPES:
    folder = os.path.join(dataset, "definitions", op)
    for fn in sorted(os.listdir(folder)):
        with open(os.path.join(folder, fn)) as f:
            d = json.load(f)
        defs[d["name"]] = (op, d)
wanted = set(defs)
check("shipped definitions found", len(defs) >= 45, str(len(defs)))


def has_workloads(name, op):
    path = os.path.join(dataset, "workloads", op, name + ".jsonl")
    return os.path.exists(path) and os.path.getsize(path) > 0


with_wl = sorted(n for n, (op, _) in defs.items() if has_workloads(n, op))
without = sorted(n for n in defs if n not in with_wl)


def judge(label, out, rc, names):
    got = rows(out)
    for n in names:
        op = defs[n][0]
        r = got.get(n, [])
        check(f"{label}: {n}", (f"kb_cpu_{op}", "PASSED") in r and all(s == "PASSED" for _, s in r),
              f"rows {r}")
    check(f"{label}: kb bench exits 0", rc == 0, f"exit {rc}")


with tempfile.TemporaryDirectory() as tmp:
    # 1. The smallest shipped workload of each definition that has workloads.
    rc, out, err = bench(dataset, with_wl, os.path.join(tmp, "shipped"))
    judge("shipped smallest", out, rc, with_wl)
    if rc != 0:
        print(err[-3000:])

    # 2. A small workload for each definition shipped without one.
    small = {"batch_size": 3, "len_indptr": 4, "total_q": 9, "total_kv": 40, "num_tokens": 9, "num_qo_heads": 4,
             "num_kv_heads": 2, "max_seq_len": 64}
    root = os.path.join(tmp, "synthetic")
    for n in without:
        op, d = defs[n]
        page = d["axes"].get("page_size", {}).get("value", 1)
        pages = 40 if page == 1 else 3
        axes = {}
        for a, spec in d["axes"].items():
            if spec["type"] != "var":
                continue
            axes[a] = {"num_kv_indices": pages, "num_pages": pages + 5}.get(a, small.get(a))
            check(f"synthetic axis {n}.{a}", axes[a] is not None, "no size for it")
        head = next((d["axes"][a]["value"] for a in ("head_dim", "qk_dim") if a in d["axes"]), 192)
        inputs = {}
        for i, spec in d["inputs"].items():
            inputs[i] = {"type": "scalar", "value": 1 / math.sqrt(head)} if spec["shape"] is None else {"type": "random"}
        os.makedirs(os.path.join(root, "definitions", op), exist_ok=True)
        os.makedirs(os.path.join(root, "workloads", op), exist_ok=True)
        with open(os.path.join(root, "definitions", op, n + ".json"), "w") as f:
            json.dump(d, f)
        line = {"definition": n, "solution": None, "evaluation": None,
                "workload": {"uuid": f"cpu-bench-{n}", "axes": axes, "inputs": inputs}}
        with open(os.path.join(root, "workloads", op, n + ".jsonl"), "w") as f:
            f.write(json.dumps(line) + "\n")
    rc, out, err = bench(root, without, os.path.join(tmp, "synthetic-out"))
    judge("synthetic small", out, rc, without)
    if rc != 0:
        print(err[-3000:])

print(f"{failures} failed")
sys.exit(1 if failures else 0)
