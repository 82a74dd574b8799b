#!/usr/bin/env python3
"""GPU faults of outside solutions: a kernel that never ends is TIMEOUT (the worker is killed), an
illegal memory access is RUNTIME_ERROR naming the CUDA error (the worker is replaced), and a good
CUDA solution passes after each; the example CUDA plugin passes on rmsnorm_h4096. Skips (exit 77)
with the reason when kb was built without CUDA or no device is usable.

usage: test_plugin_gpu.py KB KB_WORKER DATASET BUILD_DIR cuda|nocuda [HOSTILE_CUDA.so EXAMPLE_CUDA.so]
"""
import json
import os
import re
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

# Timed: a result remembered from an earlier call, or replayed from a device-side fingerprint cache, fails once
# timed calls on fresh inputs are judged.
out3 = os.path.join(tmp, "out3")
r3 = subprocess.run([kb, "bench", "--plugin", hostile, dataset, "--device", "cuda", "--solutions",
                     "hostile_cuda_stale,hostile_cuda_good,hostile_cuda_fingerprint_cache", "--timeout", "10",
                     "--trials", "2", "--out", out3],
                    capture_output=True, text=True, env=env, timeout=600)
print(r3.stdout[-3000:], r3.stderr[-2000:])
for t in traces(out3):
    e = t["evaluation"]
    if t["solution"] == "hostile_cuda_stale":
        check(e["status"] == "INCORRECT_NUMERICAL", f"stale outputs: {e['status']} {e['log'][-300:]}")
    if t["solution"] == "hostile_cuda_fingerprint_cache":
        check(e["status"] == "INCORRECT_NUMERICAL", f"fingerprint cache: {e['status']} {e['log'][-300:]}")
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


# Which GPU. `kb devices` names the physical GPU behind each ordinal; every CUDA record (kb's own solutions' and
# the worker's) names the device it ran on, and that is the device asked for. With two or more GPUs: --device cuda:1,
# and CUDA_VISIBLE_DEVICES=1, where ordinal 0 is the second GPU (NVML must find it by bus id, not take NVML's GPU 0).
def listed(extra_env=None):
    r = subprocess.run([kb, "devices"], capture_output=True, text=True, env=dict(env, **(extra_env or {})))
    devs = {}
    for line in r.stdout.splitlines():
        m = re.match(r"(\d+): .*, PCI ([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+)(?:, nvidia-smi (\d+))?\)$", line)
        if m:
            devs[int(m.group(1))] = (m.group(2).lower(), int(m.group(3)) if m.group(3) else None)
    return devs


def on_device(recs, ordinal, pci, what):
    for t in recs:
        extra = (t["evaluation"].get("performance") or {}).get("extra", {})
        check(extra.get("cuda_device") == ordinal and str(extra.get("pci_bus_id", "")).lower() == pci,
              f"{what}: {t['solution']} ran on device {extra.get('cuda_device')} ({extra.get('pci_bus_id')}), "
              f"expected {ordinal} ({pci})")


devs = listed()
print("devices:", devs)
check(devs and sorted(devs) == list(range(len(devs))), f"kb devices lists every ordinal with its PCI bus id: {devs}")
check(all(smi is not None for _, smi in devs.values()), f"kb devices gives nvidia-smi's index of every device: {devs}")
if 0 in devs:
    on_device(recs, 0, devs[0][0], "the example plugin on --device cuda")
r = subprocess.run([kb, "bench", "--device", f"cuda:{len(devs)}", "--smallest", "--no-time"], capture_output=True,
                   text=True, env=env, timeout=120)
check(r.returncode == 1 and f"CUDA device {len(devs)} does not exist ({len(devs)} present" in r.stderr,
      f"--device cuda:{len(devs)} (one past the last) is a clear error: {r.returncode} {r.stderr[-500:]}")
if len(devs) >= 2:
    both = ["--plugin", example, "--definitions", "rmsnorm_h4096", "--solutions",
            "example_cuda_rmsnorm_h4096,kb_cuda_rmsnorm", "--smallest"]
    out_dev1 = os.path.join(tmp, "out-device1")
    r3 = subprocess.run([kb, "bench", "--device", "cuda:1", *both, "--out", out_dev1], capture_output=True, text=True,
                        env=env, timeout=600)
    recs3 = traces(out_dev1)
    check(r3.returncode == 0 and {t["solution"] for t in recs3} == {"example_cuda_rmsnorm_h4096", "kb_cuda_rmsnorm"}
          and all(t["evaluation"]["status"] == "PASSED" for t in recs3),
          f"--device cuda:1, kb's and the worker's solutions: {r3.stdout[-1500:]} {r3.stderr[-800:]}")
    on_device(recs3, 1, devs[1][0], "--device cuda:1")
    seen = listed({"CUDA_VISIBLE_DEVICES": "1"})
    check(list(seen) == [0] and seen[0] == devs[1],
          f"CUDA_VISIBLE_DEVICES=1: ordinal 0 is the second GPU, PCI bus id and nvidia-smi index: {seen} vs {devs[1]}")
    out_cvd1 = os.path.join(tmp, "out-visible1")
    r4 = subprocess.run([kb, "bench", "--device", "cuda", *both, "--out", out_cvd1], capture_output=True, text=True,
                        env=dict(env, CUDA_VISIBLE_DEVICES="1"), timeout=600)
    recs4 = traces(out_cvd1)
    check(r4.returncode == 0 and len(recs4) == len(recs3), f"CUDA_VISIBLE_DEVICES=1 bench: {r4.stderr[-800:]}")
    on_device(recs4, 0, devs[1][0], "CUDA_VISIBLE_DEVICES=1")
else:
    print("skipped: the two-GPU cases (--device cuda:1, CUDA_VISIBLE_DEVICES=1) need two devices")
if not failures:
    shutil.rmtree(tmp, ignore_errors=True)
print("ok" if not failures else f"{len(failures)} failures")
sys.exit(1 if failures else 0)
