#!/usr/bin/env python3
"""Checks schemas/*.schema.json against real files: every shipped
FlashInfer-Bench definition and workload line, kb's bundled dataset, and what
kb itself writes (`kb format`). Known-bad documents must be rejected, so the
schemas are not vacuous.

usage: test_schemas.py KB SCHEMAS_DIR SHARED_DIR PROJECT_DIR
Needs the jsonschema module (Debian: python3-jsonschema, installed by tools/setup.sh).
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    # The pyenv python may lack it; Debian's python has it after tools/setup.sh.
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])
    print("jsonschema is not installed (apt-get install python3-jsonschema)", file=sys.stderr)
    sys.exit(1)

kb, schemas, shared, project = sys.argv[1:5]


def load_schema(name):
    with open(os.path.join(schemas, name)) as f:
        s = json.load(f)
    jsonschema.Draft202012Validator.check_schema(s)
    return jsonschema.Draft202012Validator(s)


definition = load_schema("definition.schema.json")
trace = load_schema("trace.schema.json")
solution = load_schema("solution.schema.json")
failures = 0
counts = {"definitions": 0, "trace lines": 0, "kb-written": 0, "rejected": 0}


def expect_valid(validator, doc, where):
    global failures
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        failures += 1
        print(f"FAIL {where}: {errors[0].message} at {list(errors[0].path)}")


def expect_invalid(validator, doc, where):
    global failures
    if validator.is_valid(doc):
        failures += 1
        print(f"FAIL {where}: schema accepted a bad document")
    counts["rejected"] += 1


def kb_format(path):
    p = subprocess.run([kb, "format", path], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"kb format {path}: {p.stderr}")
    return p.stdout


def_files = sorted(glob.glob(os.path.join(shared, "flashinfer-trace", "definitions", "*", "*.json")))
def_files += sorted(glob.glob(os.path.join(project, "kernels", "*", "definitions", "*.json")))
wl_files = sorted(glob.glob(os.path.join(shared, "flashinfer-trace", "workloads", "*", "*.jsonl")))
wl_files += sorted(glob.glob(os.path.join(project, "kernels", "*", "workloads", "*.jsonl")))

for f in def_files:
    with open(f) as fh:
        expect_valid(definition, json.load(fh), f)
    counts["definitions"] += 1
for f in wl_files:
    with open(f) as fh:
        for i, line in enumerate(fh, 1):
            if line.strip():
                expect_valid(trace, json.loads(line), f"{f}:{i}")
                counts["trace lines"] += 1

# What kb writes: every definition (including seed-001 input converted), trace lines with evaluations, solutions.
with tempfile.TemporaryDirectory() as tmp:
    for f in def_files[::8]:
        expect_valid(definition, json.loads(kb_format(f)), f"kb format {f}")
        counts["kb-written"] += 1
    for f in wl_files:
        for i, line in enumerate(kb_format(f).splitlines(), 1):
            expect_valid(trace, json.loads(line), f"kb format {f}:{i}")
            counts["kb-written"] += 1
    ev = os.path.join(tmp, "ev.jsonl")
    with open(ev, "w") as g:
        for status, corr, perf in [("PASSED", True, True), ("INCORRECT_NUMERICAL", True, False),
                                   ("RUNTIME_ERROR", False, False), ("TIMEOUT", False, False)]:
            e = {"status": status, "environment": {"hardware": "NVIDIA H100 80GB HBM3", "libs": {"cuda": "13.0"}},
                 "timestamp": "2026-11-22T10:00:00Z", "log": "x\ny"}
            if corr:
                e["correctness"] = {"max_relative_error": 0.5, "max_absolute_error": 0.25, "extra": {"k": 1}}
            if perf:
                e["performance"] = {"latency_ms": 0.1, "reference_latency_ms": 0.2, "speedup_factor": 2.0}
            g.write(json.dumps({"definition": "d", "solution": "s", "evaluation": e,
                                "workload": {"uuid": "u", "axes": {"M": 1},
                                             "inputs": {"a": {"type": "scalar", "value": 1.0}}}}) + "\n")
    for i, line in enumerate(kb_format(ev).splitlines(), 1):
        expect_valid(trace, json.loads(line), f"kb format evaluated trace {i}")
        counts["kb-written"] += 1
    seed = os.path.join(tmp, "seed.json")
    with open(seed, "w") as g:
        json.dump({"id": "s", "op_type": "rmsnorm", "axes": {"H": {"type": "const", "value": 4}},
                   "assumptions": ["H > 0"], "inputs": {"x": {"shape": ["H"], "dtype": "float8_e4m3"},
                                                        "eps": {"shape": []}},
                   "outputs": {"y": {"shape": ["H"]}}, "reference_code": "def run(x, eps):\n    pass\n"}, g)
    expect_valid(definition, json.loads(kb_format(seed)), "kb format seed-001 definition")
    sol = os.path.join(project, "tests", "fuzz", "corpus", "schema", "solution.json")
    expect_valid(solution, json.loads(kb_format(sol)), "kb format solution")
    counts["kb-written"] += 2

# The schemas reject what kb rejects.
with open(def_files[0]) as fh:
    good = json.load(fh)
bad = dict(good, inputs={"x": {"shape": ["M"], "dtype": "float17"}})
expect_invalid(definition, bad, "bad dtype")
expect_invalid(definition, {k: v for k, v in good.items() if k != "reference"}, "missing reference")
expect_invalid(definition, dict(good, reference="x = 1"), "reference without def run")
expect_invalid(definition, dict(good, axes={"M": {"type": "const"}}), "const axis without value")
expect_invalid(trace, {"definition": "d", "workload": {"uuid": "u", "axes": {"M": -3}, "inputs": {}}}, "negative axis")
expect_invalid(trace, {"definition": "d", "solution": "s", "workload": {"uuid": "u", "axes": {}, "inputs": {}},
                       "evaluation": {"status": "PASSED", "environment": {"hardware": "h"}, "timestamp": "t",
                                      "correctness": {}}}, "PASSED without performance")
expect_invalid(trace, {"definition": "d", "workload": {"uuid": "u", "axes": {}, "inputs": {
    "a": {"type": "safetensors", "path": "../x", "tensor_key": "a"}}}}, "path escaping the dataset")
expect_invalid(solution, {"name": "s", "definition": "d", "author": "a", "sources": [{"path": "a", "content": ""}],
                          "spec": {"language": "fortran", "target_hardware": [], "entry_point": "a::run"}}, "language")

print(", ".join(f"{v} {k}" for k, v in counts.items()))
print(f"{failures} failed")
sys.exit(1 if failures else 0)
