#!/usr/bin/env python3
"""kb validate on Kernel Calling Records, Benchmark Results and Agent traces, and kb estimate,
as a user meets them: summaries, messages with file:line: json.path, exit codes.

usage: test_model_cli.py KB SHARED_DIR PROJECT_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

kb, shared, project = sys.argv[1:4]
failures = 0
TIMEOUT_S = 300 * float(os.environ.get("KB_TEST_TIMEOUT_SCALE", "1"))
fi_trace = os.path.join(shared, "flashinfer-trace")
corpus = os.path.join(project, "tests", "fuzz", "corpus", "model")


def run(*args):
    p = subprocess.run([kb, *args], capture_output=True, text=True, timeout=TIMEOUT_S)
    return p.returncode, p.stdout, p.stderr


def check(name, cond, detail=""):
    global failures
    if cond:
        print(f"ok   {name}")
    else:
        failures += 1
        print(f"FAIL {name}: {detail}")


def write(path, obj_or_text):
    with open(path, "w") as f:
        f.write(obj_or_text if isinstance(obj_or_text, str) else json.dumps(obj_or_text, indent=2))


# ---- kb validate ----

# The schema set's examples (tests/fuzz/corpus/model holds them) are recognized by their fields.
rc, out, err = run("validate", corpus)
check("examples validate", rc == 0, out + err)
check("examples counted by kind",
      "1 calling record, 2 benchmark results, 3 agent traces: 0 errors" in out, out)
check("kernel ids unchecked without definitions: a warning says so",
      "calling_record.json: warning: kernels: kernel ids not checked: no definitions were loaded" in err, err)

with tempfile.TemporaryDirectory() as tmp:
    rec = {"model": "meta-llama/Llama-3.1-8B", "framework": "SGLang",
           "kernels": [{"id": "rmsnorm_h4096", "count": 65, "axes": {"batch_size": 1}},
                       {"id": "rmsnorm_h4069", "count": 1, "axes": {"batch_size": 1}},
                       {"id": "gemm_n4096_k4096", "count": 32, "axes": {"M": 1, "N": 4097}}]}
    write(os.path.join(tmp, "rec.json"), rec)
    rc, out, err = run("validate", fi_trace, os.path.join(tmp, "rec.json"))
    check("unknown kernel id against the shipped definitions", rc == 1 and
          f"{tmp}/rec.json:13: kernels[1].id: no definition \"rmsnorm_h4069\" among the 132 loaded; did you mean "
          "rmsnorm_h4096" in err, err)
    check("const axis given with another value", f"{tmp}/rec.json:24: kernels[2].axes.N: axis \"N\" of "
          "\"gemm_n4096_k4096\" is const 4096, not 4097" in err, err)
    check("counts with the dataset", "validated 132 definitions, 663 workloads, 0 solutions, 0 traces, 1 calling "
          "record: 2 errors" in out, out)

    bad = dict(rec, framework="sglang")
    write(os.path.join(tmp, "bad.json"), bad)
    rc, out, err = run("validate", os.path.join(tmp, "bad.json"))
    check("framework spelled wrong", rc == 1 and
          f"{tmp}/bad.json:3: framework: unknown framework \"sglang\"; did you mean \"SGLang\"?" in err, err)

    write(os.path.join(tmp, "result.json"), {"device": {"name": "NVIDIA H100"}, "kernel_id": "gemm", "source": "kb",
                                             "compiled": False, "time": 1.0})
    rc, out, err = run("validate", os.path.join(tmp, "result.json"))
    check("benchmark result rules", rc == 1 and
          f"{tmp}/result.json:1: compile_error: required when compiled is false" in err and
          f"{tmp}/result.json:8: time: a result that did not compile has no time, speedup or max_diff" in err, err)

    write(os.path.join(tmp, "agent.json"), [{"type": "tool_call", "tool_name": "ls", "arguments": {}, "result": 3}])
    rc, out, err = run("validate", os.path.join(tmp, "agent.json"))
    check("agent trace rules", rc == 1 and f"{tmp}/agent.json:6: [0].result: expected a string, got integer 3" in err, err)

# ---- the bundled calling records (models/) ----

models = os.path.join(project, "models")
rc, out, err = run("validate", fi_trace, models)
check("bundled calling records validate against the shipped definitions", rc == 0 and
      "8 calling records: 0 errors" in out, out + err[-2000:])
check("bundled calling records give every var axis (no warnings about them)", f"{models}/" not in err, err[-2000:])
records = sorted(f for f in os.listdir(models) if f.endswith(".json"))
for f in records:
    rec = json.load(open(os.path.join(models, f)))
    check(f"{f} names its source and architecture", rec.get("source", "").startswith("https://huggingface.co/") and
          rec.get("architecture") and "Not in this record" in rec.get("notes", ""), f)
with tempfile.TemporaryDirectory() as tmp:
    p = subprocess.run([sys.executable, os.path.join(models, "make_records.py"), shared, tmp],
                       capture_output=True, text=True, timeout=TIMEOUT_S)
    same = p.returncode == 0 and sorted(os.listdir(tmp)) == records and all(
        open(os.path.join(tmp, f)).read() == open(os.path.join(models, f)).read() for f in records)
    check("models/ is what models/make_records.py writes", same, p.stdout + p.stderr)

# ---- kb estimate on a bundled record and traces made here ----


def trace_line(definition, axes, solution, latency, reference, hardware="NVIDIA H100 80GB HBM3", status="PASSED"):
    ev = {"status": status, "environment": {"hardware": hardware}, "timestamp": "2025-01-01T00:00:00"}
    if status in ("PASSED", "INCORRECT_NUMERICAL"):
        ev["correctness"] = {"max_relative_error": 0.0, "max_absolute_error": 0.0}
    if status == "PASSED":
        ev["performance"] = {"latency_ms": latency, "reference_latency_ms": reference,
                             "speedup_factor": reference / latency}
    return json.dumps({"definition": definition, "workload": {"uuid": "u", "axes": axes, "inputs": {}},
                       "solution": solution, "evaluation": ev})


llama = os.path.join(models, "llama-3.1-8b_decode.json")
with tempfile.TemporaryDirectory() as tmp:
    # The record's calls: gemms at M=32 (recorded there), fused_add_rmsnorm at batch 32 (recorded at 64 only).
    # By hand: qkv 32 x 0.015 = 0.48 against 32 x 0.012 = 0.384; norm 64 x 0.004 = 0.256 against 64 x 0.003 =
    # 0.192; step 0.736 against 0.576 ms: 1.28x (0.736 / 0.576 = 1.2777...).
    write(os.path.join(tmp, "t.jsonl"), "\n".join([
        trace_line("gemm_n6144_k4096", {"M": 32}, "kb_cublaslt", 0.012, 0.015),
        trace_line("gemm_n6144_k4096", {"M": 32}, "fast_but_wrong", 0.001, 0.015, status="INCORRECT_NUMERICAL"),
        trace_line("gemm_n6144_k4096", {"M": 32}, "fast_but_wrong", 0.001, 0.015),
        trace_line("fused_add_rmsnorm_h4096", {"batch_size": 64}, "kb_cuda_rmsnorm", 0.003, 0.004),
    ]) + "\n")
    rc, out, err = run("estimate", llama, tmp)
    check("estimate runs", rc == 0, out + err)
    check("estimate names the model, step, device and baseline",
          "model meta-llama/Llama-3.1-8B (SGLang), step decode" in out and
          "4 trace records on NVIDIA H100 80GB HBM3; baseline: the reference latency the records carry" in out, out)
    qkv = [l for l in out.splitlines() if l.startswith("gemm_n6144_k4096 ")]
    check("a kernel's row: count, workload, latencies, best PASSED solution, speedup, shares",
          len(qkv) == 1 and qkv[0].split() == ["gemm_n6144_k4096", "32", "M=32", "0.0150", "0.0120", "kb_cublaslt",
                                               "1.25x", "65.2%", "66.7%"], qkv)
    check("a nearest workload is marked and explained",
          "~batch_size=64" in out and "fused_add_rmsnorm_h4096: call batch_size=32, recorded batch_size=64 (distance 1.00)"
          in out, out)
    check("kernels without records are listed, not dropped",
          "not measured (6 of 8 kernels):" in out and
          "gqa_paged_decode_h32_kv8_d128_ps1 x32 (batch_size=32 num_pages=65536 len_indptr=33 num_kv_indices=65536): "
          "no trace records of this definition" in out, out)
    check("the step total and speedup",
          "step (2 of 8 kernels): baseline 0.7360 ms, best 0.5760 ms, estimated speedup 1.28x" in out, out)

    rc, out, err = run("estimate", "--json", llama, os.path.join(tmp, "t.jsonl"))
    est = json.loads(out) if rc == 0 else {}
    check("--json: the same estimate", rc == 0 and est["kernels_measured"] == 2 and est["kernels_total"] == 8 and
          abs(est["baseline_ms"] - 0.736) < 1e-12 and abs(est["best_ms"] - 0.576) < 1e-12 and
          abs(est["speedup"] - 0.736 / 0.576) < 1e-12, out + err)
    check("--json: per kernel", rc == 0 and est["kernels"][0]["id"] == "gemm_n6144_k4096" and
          est["kernels"][0]["best_solution"] == "kb_cublaslt" and est["kernels"][0]["exact"] is True and
          est["kernels"][4]["measured"] is False, out)

    write(os.path.join(tmp, "other.jsonl"), trace_line("gemm_n4096_k4096", {"M": 32}, "s", 0.01, 0.02, "NVIDIA H200") + "\n")
    rc, out, err = run("estimate", llama, tmp)
    check("traces of two devices are refused", rc == 1 and "the traces come from 2 devices (NVIDIA H100 80GB HBM3, "
          "NVIDIA H200)" in err, err)
    rc, out, err = run("estimate", "--hardware", "NVIDIA H200", llama, tmp)
    check("--hardware chooses one", rc == 0 and "step (1 of 8 kernels): baseline 0.6400 ms, best 0.3200 ms, "
          "estimated speedup 2.00x" in out, out + err)
    rc, out, err = run("estimate", "--baseline", "nobody", llama, tmp, "--hardware", "NVIDIA H200")
    check("nothing measured exits 1", rc == 1 and "step: no kernel measured, no estimate" in out, out + err)

rc, out, err = run("estimate", llama)
check("estimate without traces is a usage error", rc == 2 and "needs a calling record and at least one traces" in err, err)
rc, out, err = run("estimate", "--frob", llama, models)
check("estimate unknown option", rc == 2 and "unknown option --frob" in err, err)
rc, out, err = run("estimate", "--help")
check("estimate --help", rc == 0 and "usage: kb estimate" in out, out)
rc, out, err = run("estimate", os.path.join(corpus, "benchmark_result.json"), models)
check("estimate of a file that is not a calling record names the problem", rc == 1 and
      "benchmark_result.json:1: framework: required field is missing" in err, err)

sys.exit(1 if failures else 0)
