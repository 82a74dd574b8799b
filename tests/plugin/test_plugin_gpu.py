#!/usr/bin/env python3
"""GPU faults of outside solutions: a kernel that never ends is TIMEOUT (the worker is killed), an
illegal memory access is RUNTIME_ERROR naming the CUDA error (the worker is replaced), and a good
CUDA solution passes after each; the example CUDA plugin passes on rmsnorm_h4096. Skips (exit 77)
with the reason when kb was built without CUDA or no device is usable.

usage: test_plugin_gpu.py KB KB_WORKER DATASET BUILD_DIR cuda|nocuda [HOSTILE_CUDA.so EXAMPLE_CUDA.so]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

kb, worker, dataset, build_dir, cuda = sys.argv[1:6]
if cuda != "cuda":
    print("skipped: no CUDA device (kb was built without CUDA: -Dcuda=disabled or no nvcc)")
    sys.exit(77)
hostile, example = sys.argv[6:8]
env = dict(os.environ, KB_WORKER=worker)
dev = subprocess.run([kb, "devices"], capture_output=True, text=True, env=env)
if dev.returncode != 0:
    print("skipped: no CUDA device: " + (dev.stderr or dev.stdout).strip())
    sys.exit(77)

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def traces(out):
    recs = []
    for root, _, files in os.walk(os.path.join(out, "traces")):
        for f in files:
            with open(os.path.join(root, f)) as fh:
                recs += [json.loads(line) for line in fh]
    return recs


tmp = tempfile.mkdtemp(prefix="kb-plugin-gpu-", dir=build_dir)
out = os.path.join(tmp, "out")
order = ("hostile_cuda_kernel_hang,hostile_cuda_good,hostile_cuda_illegal_address,hostile_cuda_write_past_output,"
         "hostile_cuda_other_stream")
r = subprocess.run([kb, "bench", "--plugin", hostile, dataset, "--device", "cuda", "--solutions", order,
                    "--timeout", "5", "--trials", "2", "--no-time", "--out", out],
                   capture_output=True, text=True, env=env, timeout=600)
print(r.stdout[-3000:], r.stderr[-2000:])
got = {}
for t in traces(out):
    got.setdefault(t["solution"], []).append(t["evaluation"])
for e in got.get("hostile_cuda_kernel_hang", []):
    check(e["status"] == "TIMEOUT", f"kernel hang: {e['status']}")
for e in got.get("hostile_cuda_illegal_address", []):
    check(e["status"] == "RUNTIME_ERROR" and "cudaError" in e["log"], f"illegal address: {e['status']} {e['log'][-300:]}")
for e in got.get("hostile_cuda_write_past_output", []):
    check(e["status"] == "RUNTIME_ERROR" and "wrote outside output" in e["log"], f"write past output: {e['status']}")
for e in got.get("hostile_cuda_other_stream", []):
    check(e["status"] == "RUNTIME_ERROR" and "stream other than" in e["log"], f"other stream: {e['status']}")
for e in got.get("hostile_cuda_good", []):
    check(e["status"] == "PASSED", f"good CUDA solution: {e['status']} {e['log'][-300:]}")
check(all(k in got for k in order.split(",")), f"every solution recorded: {sorted(got)}")

# Timed: a result remembered from an earlier call fails once rotations are judged again.
out3 = os.path.join(tmp, "out3")
r3 = subprocess.run([kb, "bench", "--plugin", hostile, dataset, "--device", "cuda", "--solutions",
                     "hostile_cuda_stale,hostile_cuda_good", "--timeout", "10", "--trials", "2", "--out", out3],
                    capture_output=True, text=True, env=env, timeout=600)
print(r3.stdout[-3000:], r3.stderr[-2000:])
for t in traces(out3):
    e = t["evaluation"]
    if t["solution"] == "hostile_cuda_stale":
        check(e["status"] == "INCORRECT_NUMERICAL", f"stale outputs: {e['status']} {e['log'][-300:]}")
    if t["solution"] == "hostile_cuda_good":
        check(e["status"] == "PASSED" and e.get("performance", {}).get("extra", {}).get("timing") == "cuda_events",
              f"good CUDA solution timed in the worker: {e['status']} {e['log'][-300:]}")

out2 = os.path.join(tmp, "out2")
r2 = subprocess.run([kb, "bench", "--plugin", example, "--device", "cuda", "--definitions", "rmsnorm_h4096",
                     "--solutions", "example_cuda_rmsnorm_h4096", "--out", out2, "--cupti"],
                    capture_output=True, text=True, env=env, timeout=600)
recs = traces(out2)
check(r2.returncode == 0 and recs and all(t["evaluation"]["status"] == "PASSED" for t in recs),
      f"example CUDA plugin: {r2.stdout[-2000:]} {r2.stderr[-1000:]}")
# --cupti reaches kb-worker: every timed record carries CUPTI's kernel time, or `cupti` with the reason it could not
for t in recs:
    extra = t["evaluation"].get("performance", {}).get("extra", {})
    check(isinstance(extra.get("cupti_kernel_ms"), float) and 0 < extra["cupti_kernel_ms"] or isinstance(extra.get("cupti"), str),
          f"--cupti on an outside CUDA solution: {extra}")
if not failures:
    shutil.rmtree(tmp, ignore_errors=True)
print("ok" if not failures else f"{len(failures)} failures")
sys.exit(1 if failures else 0)
