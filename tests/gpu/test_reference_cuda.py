"""kb's GPU oracles against the definitions' own PyTorch references on the same CUDA device: `kb bench
--reference torch --device cuda --solutions reference_cuda`, the smallest workload of every shipped definition that
has a GPU oracle and whose inputs fit MAX_BYTES, and kb's bundled definitions of the op types no shipped one covers.
Every evaluation must PASS, and each op type of the definitions chosen must have one that did.
Skips (77) without a CUDA device or without a python3 whose torch sees one.
usage: test_reference_cuda.py KB SHARED_DIR KERNELS_DIR"""
import glob
import json
import math
import os
import subprocess
import sys
import tempfile

MAX_BYTES = 2 << 30  # inputs of one workload; the reference gets them through a safetensors file
GPU_ORACLE_OPS = {"gemm", "rmsnorm", "silu_and_mul", "rope", "gqa_paged", "mla_paged", "gqa_ragged", "mla_ragged",
                  "moe", "gdn", "mamba_ssu", "dsa_paged"}
SIZES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "int64": 8, "int32": 4,
         "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "float4_e2m1": 0.5}

kb, shared, kernels = sys.argv[1:4]
probe = subprocess.run([kb, "devices"], capture_output=True, text=True)
if probe.returncode != 0:
    print("skipped: no CUDA device")
    sys.exit(77)
python = os.environ.get("KB_PYTHON", "python3")
try:
    torch_ok = subprocess.run([python, "-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"],
                              capture_output=True, timeout=120).returncode == 0
except (OSError, subprocess.TimeoutExpired):
    torch_ok = False
if not torch_ok:
    print(f"skipped: {python} has no torch with CUDA")
    sys.exit(77)


def input_bytes(d, axes):
    total = 0
    for spec in d["inputs"].values():
        n = 1
        for dim in spec.get("shape") or []:
            a = d["axes"].get(dim) if isinstance(dim, str) else None
            n *= a["value"] if a and a.get("type") == "const" else axes.get(dim, 1) if isinstance(dim, str) else dim
        total += n * SIZES.get(spec["dtype"], 4)
    return total


# The shipped definitions with a GPU oracle and a workload small enough: named to kb bench, smallest first.
chosen, too_big, expected_ops = [], [], set()
for path in sorted(glob.glob(os.path.join(shared, "flashinfer-trace", "definitions", "*", "*.json"))):
    with open(path) as f:
        d = json.load(f)
    if d.get("op_type") not in GPU_ORACLE_OPS:
        continue
    wpath = path.replace(os.sep + "definitions" + os.sep, os.sep + "workloads" + os.sep)[:-5] + ".jsonl"
    if not os.path.exists(wpath):
        continue
    with open(wpath) as f:
        sizes = [input_bytes(d, json.loads(x)["workload"]["axes"]) for x in f if x.strip()]
    if sizes and min(sizes) <= MAX_BYTES:
        chosen.append(d["name"])
        expected_ops.add(d["op_type"])
    elif sizes:
        too_big.append(f"{d['name']} ({min(sizes) / 2**30:.1f} GiB)")

# kb's bundled definitions of the op types no shipped one covers (each with its own torch reference).
bundled = []
for path in sorted(glob.glob(os.path.join(kernels, "*", "definitions", "*.json"))):
    with open(path) as f:
        d = json.load(f)
    if d.get("op_type") in GPU_ORACLE_OPS and d["op_type"] not in expected_ops:
        bundled.append(d["name"])
for name in bundled:
    expected_ops.add(next(json.load(open(p))["op_type"] for p in glob.glob(os.path.join(kernels, "*", "definitions",
                                                                                        name + ".json"))))
failures = 0
seen_ops = {}
with tempfile.TemporaryDirectory() as out:
    runs = [([os.path.join(shared, "flashinfer-trace"), "--definitions", ",".join(chosen)], "shipped"),
            ([kernels, "--definitions", ",".join(bundled)], "bundled")]
    for args, what in runs:
        if not args[-1]:
            continue
        cmd = [kb, "bench"] + args + ["--reference", "torch", "--device", "cuda", "--solutions", "reference_cuda",
                                      "--max-workloads", "1", "--trials", "1", "--no-time", "--out",
                                      os.path.join(out, what)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
        print(f"{what}: kb bench exit {r.returncode}")
        if r.returncode not in (0, 1):
            print(r.stdout[-3000:] + r.stderr[-3000:])
            failures += 1
    for path in sorted(glob.glob(os.path.join(out, "*", "traces", "**", "*.jsonl"), recursive=True)):
        with open(path) as f:
            for line in f:
                t = json.loads(line)
                ev = t["evaluation"]
                op = path.split(os.sep)[-2]
                ok = ev["status"] == "PASSED"
                seen_ops[op] = seen_ops.get(op, 0) + ok
                corr = ev.get("correctness") or {}
                print(f"{'ok  ' if ok else 'FAIL'} {t['definition']} {t['workload']['axes']}: {ev['status']} "
                      f"max_abs={corr.get('max_absolute_error')} max_rel={corr.get('max_relative_error')}"
                      + ("" if ok else "\n    " + ev.get("log", "").strip().replace("\n", "\n    ")[-1500:]))
                failures += not ok
missing = sorted(expected_ops - {op for op, n in seen_ops.items() if n})
if missing:
    print(f"FAIL no passing evaluation of op type(s) {', '.join(missing)}")
    failures += 1
for name in too_big:
    print(f"not run (inputs over {MAX_BYTES >> 30} GiB): {name}")
print(f"{failures} failure(s)")
sys.exit(1 if failures else 0)
