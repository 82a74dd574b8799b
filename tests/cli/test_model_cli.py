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
for f in sorted(os.listdir(models)):
    rec = json.load(open(os.path.join(models, f)))
    check(f"{f} names its source and architecture", rec.get("source", "").startswith("https://huggingface.co/") and
          rec.get("architecture") and "Not in this record" in rec.get("notes", ""), f)
with tempfile.TemporaryDirectory() as tmp:
    p = subprocess.run([sys.executable, os.path.join(project, "tools", "models", "make_records.py"), shared, tmp],
                       capture_output=True, text=True, timeout=TIMEOUT_S)
    same = p.returncode == 0 and sorted(os.listdir(tmp)) == sorted(os.listdir(models)) and all(
        open(os.path.join(tmp, f)).read() == open(os.path.join(models, f)).read() for f in os.listdir(models))
    check("models/ is what tools/models/make_records.py writes", same, p.stdout + p.stderr)

sys.exit(1 if failures else 0)
