#!/usr/bin/env python3
"""The kb command as a user meets it: exit codes, help, summaries, and the
done-criterion of issue 2: the shipped FlashInfer-Bench dataset validates with
132 definitions, 663 workloads and 0 errors.

usage: test_cli.py KB SHARED_DIR PROJECT_DIR
"""
import os
import subprocess
import sys
import tempfile

kb, shared, project = sys.argv[1:4]
failures = 0


def run(*args, cwd=None):
    p = subprocess.run([kb, *args], capture_output=True, text=True, timeout=600, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def check(name, cond, detail=""):
    global failures
    if cond:
        print(f"ok   {name}")
    else:
        failures += 1
        print(f"FAIL {name}: {detail}")


# The shipped dataset: every definition and every workload line valid.
rc, out, err = run("validate", os.path.join(shared, "flashinfer-trace"))
check("shipped dataset validates", rc == 0, err[-2000:])
check("shipped dataset counts",
      "validated 132 definitions, 663 workloads, 0 solutions, 0 traces: 0 errors\n" in out, out)
check("missing blobs are warnings, one line per file", err.count("warning:") == 9 and err.count("name blobs that are not present") == 9 and
      "name blobs that are not present" in err, err[-2000:])
# Axis-only and shape constraints are evaluated; the tensor-value ones are counted as unchecked.
check("constraints evaluated", "0 violated" in out and " held" in out and " unchecked" in out, out)

# --strict turns absent blobs into errors.
rc, out, err = run("validate", "--strict", os.path.join(shared, "flashinfer-trace", "workloads", "gqa_ragged"))
check("--strict fails on missing blobs", rc == 1 and "blob ./blob/workloads/gqa_ragged" in err, err[:500])

# --verbose lists the unchecked constraints one by one.
rc, out, err = run("validate", "-v", os.path.join(shared, "flashinfer-trace", "workloads", "gqa_ragged"))
check("--verbose lists unchecked constraints",
      rc == 0 and "constraint `total_q == qo_indptr[-1].item()` unchecked" in err, err[:500])

# The bundled dataset (the README's main job).
rc, out, err = run("validate", os.path.join(project, "kernels"))
check("bundled dataset validates", rc == 0 and ": 0 errors" in out, out + err)
check("bundled dataset is not empty", "validated 0 definitions" not in out, out)

# Single files; a file inside a dataset is checked against its definitions.
wl = os.path.join(shared, "flashinfer-trace", "workloads", "rmsnorm", "rmsnorm_h128.jsonl")
rc, out, err = run("validate", wl)
check("single workload file", rc == 0 and "validated 0 definitions, 14 workloads" in out, out + err)

with tempfile.TemporaryDirectory() as tmp:
    # A workload whose axes contradict its definition, inside a copy of a dataset layout.
    os.makedirs(os.path.join(tmp, "definitions", "rmsnorm"))
    os.makedirs(os.path.join(tmp, "workloads", "rmsnorm"))
    src = os.path.join(shared, "flashinfer-trace", "definitions", "rmsnorm", "rmsnorm_h128.json")
    with open(src) as f, open(os.path.join(tmp, "definitions", "rmsnorm", "rmsnorm_h128.json"), "w") as g:
        g.write(f.read())
    with open(os.path.join(tmp, "workloads", "rmsnorm", "rmsnorm_h128.jsonl"), "w") as g:
        g.write('{"definition": "rmsnorm_h128", "solution": null, "evaluation": null, "workload": '
                '{"uuid": "a", "axes": {"batch_size": 2}, "inputs": {"hidden_states": {"type": "random"}, '
                '"weight": {"type": "random"}}}}\n')
        g.write('{"definition": "rmsnorm_h128", "solution": null, "evaluation": null, "workload": '
                '{"uuid": "b", "axes": {"batch_size": -3}, "inputs": {"hidden_states": {"type": "random"}, '
                '"weight": {"type": "random"}}}}\n')
    rc, out, err = run("validate", tmp)
    check("bad workload line fails with file:line and JSON path", rc == 1 and
          "workloads/rmsnorm/rmsnorm_h128.jsonl:2: workload.axes.batch_size: expected a non-negative integer, got -3"
          in err, err)
    check("summary counts errors", "validated 1 definitions, 2 workloads, 0 solutions, 0 traces: 1 error\n" in out, out)

rc, out, err = run("validate", "/nonexistent/x.json")
check("missing path is an error", rc == 1 and "/nonexistent/x.json: no such file or directory" in err, err)

# show
rc, out, err = run("show", "--dataset", os.path.join(shared, "flashinfer-trace"), "gqa_paged_decode_h16_kv2_d128_ps64")
check("show by name", rc == 0 and "sm_scale: float32 scalar" in out and "num_kv_indices == kv_indptr[-1].item()" in out,
      out + err)
rc, out, err = run("show", os.path.join(project, "kernels", "gemm", "definitions", "gemm_n4096_k4096.json"))
check("show by file", rc == 0 and "A: float16 [M, K]" in out and "N                    = 4096" in out, out + err)
rc, out, err = run("show", "no_such_definition")
check("show unknown name", rc == 1 and "no definition \"no_such_definition\"" in err, err)

# help and version on every command
for cmd in ([], ["validate"], ["show"], ["devices"], ["format"]):
    rc, out, err = run(*cmd, "--help")
    check(f"help {' '.join(cmd) or 'kb'}", rc == 0 and "usage: kb" in out, out + err)
rc, out, err = run("--version")
check("--version", rc == 0 and out.startswith("kb 0.1.0"), out)
rc, out, err = run("frobnicate")
check("unknown command exits 2", rc == 2 and "unknown command" in err, err)
rc, out, err = run("validate", "--frob")
check("unknown option exits 2", rc == 2 and "unknown option --frob" in err, err)
rc, out, err = run()
check("no command exits 2 with usage", rc == 2 and "usage: kb" in err, err)

# BackendBench: every real trace line parses (issue 5).
rc, out, err = run("backendbench", "parse", os.path.join(shared, "backendbench", "tritonbench-op-traces.txt"))
check("backendbench parse of the real file", rc == 0 and out.strip() == "parsed 12740 of 12740 lines", out + err[-500:])
with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    f.write("Operator: aten.add.Tensor\ncnt: 1, ((T([2, 3], f16), T([2, 3], f16)), {})\ncnt: 2, ((T([2, 3], f16),\n")
    bad = f.name
rc, out, err = run("backendbench", "parse", bad)
check("backendbench parse reports the line and column", rc == 1 and "parsed 1 of 2 lines" in out and ":3:" in err, out + err)
os.unlink(bad)

# devices: either lists GPUs or says why there are none; never crashes.
rc, out, err = run("devices")
check("devices answers cleanly", (rc == 0 and ": " in out) or (rc == 1 and "kb devices: " in err and
      ("no CUDA device" in err or "built without CUDA" in err)), out + err)

# bench: the bundled dataset on the CPU, traces valid, kill + --resume without duplicates.
import glob
import signal
import time

with tempfile.TemporaryDirectory() as tmp:
    rc, out, err = run("bench", "--device", "cpu", "--smallest", "--no-time", "--out", tmp)
    check("bench on the bundled dataset", rc == 0 and " passed, 0 failed, 0 could not run" in out, out + err)
    files = glob.glob(os.path.join(tmp, "traces", "*", "*", "*.jsonl"))
    check("bench writes traces", len(files) > 0, str(files))
    rc, vout, verr = run("validate", *files)
    check("bench traces validate", rc == 0 and ": 0 errors" in vout, vout + verr)

with tempfile.TemporaryDirectory() as tmp:
    # Small definitions only: this also runs under AddressSanitizer at -O0.
    subset = ["--definitions", "rmsnorm_h4096,fused_add_rmsnorm_h4096,silu_and_mul_i14336", "--no-time"]
    args = [kb, "bench", "--device", "cpu", "--out", tmp, "--trials", "2", *subset]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    lines = 0
    while time.time() < deadline and p.poll() is None:
        lines = sum(1 for f in glob.glob(os.path.join(tmp, "traces", "*", "*", "*.jsonl")) for _ in open(f))
        if lines >= 2:
            break
        time.sleep(0.01)
    killed = p.poll() is None
    if killed:
        p.send_signal(signal.SIGKILL)
    p.wait()
    check("bench was killed half-way", killed and lines >= 2, f"lines={lines}")
    files = glob.glob(os.path.join(tmp, "traces", "*", "*", "*.jsonl"))
    rc, vout, verr = run("validate", *files)
    check("killed run leaves valid JSONL", rc == 0, vout + verr)
    rc, out, err = run("bench", "--device", "cpu", "--out", tmp, "--trials", "2", "--resume", *subset)
    check("--resume completes", rc == 0 and "already recorded (--resume)" in out, out + err)
    keys = []
    for f in glob.glob(os.path.join(tmp, "traces", "*", "*", "*.jsonl")):
        for line in open(f):
            t = __import__("json").loads(line)
            keys.append((t["definition"], t["workload"]["uuid"], t["solution"]))
    rc2, out2, _ = run("bench", "--device", "cpu", "--out", tmp, "--trials", "1", "--resume", *subset)
    check("--resume leaves no duplicates", len(keys) == len(set(keys)) and out2.splitlines()[-1].startswith("0 evaluations")
          if out2 else False, f"{len(keys)} lines, {len(set(keys))} unique; {out2[-300:]}")

print(f"{failures} failed")
sys.exit(1 if failures else 0)
