#!/usr/bin/env python3
"""The kb command as a user meets it: exit codes, help, summaries, and the
shipped FlashInfer-Bench dataset, which validates with 132 definitions, 663
workloads and 0 errors.

usage: test_cli.py KB SHARED_DIR PROJECT_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

kb, shared, project = sys.argv[1:4]
failures = 0


# A time limit per command; tools/test.sh scales it for the sanitized build (KB_TEST_TIMEOUT_SCALE).
TIMEOUT_S = 600 * float(os.environ.get("KB_TEST_TIMEOUT_SCALE", "1"))


def run(*args, cwd=None, env=None):
    start = time.monotonic()
    p = subprocess.run([kb, *args], capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd,
                       env=None if env is None else {**os.environ, **env})
    took = time.monotonic() - start
    if took > 10:  # where the test's time goes (the sanitized build runs it many times slower)
        print(f"time {took:.0f} s: kb {' '.join(args)}"[:200])
    return p.returncode, p.stdout, p.stderr


def is_ratio(cell):
    """A speedup cell that holds a measured ratio (two decimals and x), not the "-" of an untimed row."""
    return re.fullmatch(r"\d+\.\d\dx", cell) is not None


def speedup_cells(out):
    """The speedup cell of each row of kb bench's table (right-aligned under its header, 8 wide)."""
    lines = out.splitlines()
    head = next((l for l in lines if l.startswith("definition ") and " speedup " in l), None)
    if head is None:
        return []
    end = head.index(" speedup ") + len(" speedup")
    statuses = ("PASSED", "INCORRECT_NUMERICAL", "INCORRECT_SHAPE", "INCORRECT_DTYPE", "RUNTIME_ERROR",
                "COMPILE_ERROR", "TIMEOUT")
    rows = [l for l in lines[lines.index(head) + 1:]
            if len(l) >= end and not l.startswith(" ") and any(f" {st} " in l for st in statuses)]
    return [l[end - 8:end].strip() for l in rows]


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

# A folder of definitions: hidden folders and build trees under it are not read, each named in a warning.
with tempfile.TemporaryDirectory() as tmp:
    src = os.path.join(shared, "flashinfer-trace", "definitions", "rmsnorm", "rmsnorm_h128.json")
    shutil.copy(src, os.path.join(tmp, "rmsnorm_h128.json"))
    for sub, marker in ((".cache", None), ("build", "build.ninja"), ("cmake-out", "CMakeCache.txt")):
        os.makedirs(os.path.join(tmp, sub, "nested"))
        with open(os.path.join(tmp, sub, "nested", "broken.json"), "w") as g:
            g.write("{ not json")
        if marker:
            open(os.path.join(tmp, sub, marker), "w").close()
    rc, out, err = run("validate", tmp)
    check("hidden folders and build trees are not read, and say so",
          rc == 0 and "validated 1 definitions" in out and "broken.json" not in err and
          "not read: a hidden folder" in err and "not read: a build tree (it holds build.ninja)" in err and
          "not read: a build tree (it holds CMakeCache.txt)" in err, out + err)

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
with tempfile.TemporaryDirectory() as tmp:
    rc, out, err = run("bench", "/nonexistent/dataset", "--device", "cpu", "--out", tmp)
    check("kb bench of a missing dataset: the error, no table, a non-zero status",
          rc == 1 and "/nonexistent/dataset: no such file or directory" in err and "max_abs" not in out
          and out.startswith("0 evaluations"), out + err)

# show
rc, out, err = run("show", "--dataset", os.path.join(shared, "flashinfer-trace"), "gqa_paged_decode_h16_kv2_d128_ps64")
check("show by name", rc == 0 and "sm_scale: float32 scalar" in out and "num_kv_indices == kv_indptr[-1].item()" in out,
      out + err)
rc, out, err = run("show", os.path.join(project, "kernels", "gemm", "definitions", "gemm_n4096_k4096.json"))
check("show by file", rc == 0 and "A: float16 [M, K]" in out and "N                    = 4096" in out, out + err)
rc, out, err = run("show", "no_such_definition")
check("show unknown name", rc == 1 and "no definition \"no_such_definition\"" in err, err)

# help and version on every command
for cmd in ([], ["validate"], ["show"], ["devices"], ["format"], ["dispatch"], ["bench"]):
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

# BackendBench: every real trace line parses.
rc, out, err = run("backendbench", "parse", os.path.join(shared, "backendbench", "tritonbench-op-traces.txt"))
check("backendbench parse of the real file", rc == 0 and out.strip() == "parsed 12740 of 12740 lines", out + err[-500:])
with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    f.write("Operator: aten.add.Tensor\ncnt: 1, ((T([2, 3], f16), T([2, 3], f16)), {})\ncnt: 2, ((T([2, 3], f16),\n")
    bad = f.name
rc, out, err = run("backendbench", "parse", bad)
check("backendbench parse reports the line and column", rc == 1 and "parsed 1 of 2 lines" in out and ":3:" in err, out + err)
os.unlink(bad)
with tempfile.TemporaryDirectory() as tmp:
    good, bad = os.path.join(tmp, "good.txt"), os.path.join(tmp, "bad.txt")
    with open(good, "w") as f:
        f.write("Operator: aten.x\ncnt: 1, ((1,), {})\n")
    with open(bad, "w") as f:
        f.write("Operator: aten.x\ncnt: 1, ((1,), {})\ncnt: 1, ((1), {})\n")
    rc, out, err = run("backendbench", "parse", good)
    check("backendbench parse of a good file", rc == 0 and out == "parsed 1 of 1 lines\n" and err == "", out + err)
    rc, out, err = run("backendbench", "parse", bad)
    check("backendbench parse names the bad line", rc == 1 and out == "parsed 1 of 2 lines\n" and
          err == bad + ":3:10: a 1-tuple needs a trailing comma: (x,)\n", out + err)
    rc, out, err = run("backendbench", "parse", os.path.join(tmp, "missing.txt"))
    check("backendbench parse of a missing file exits 1", rc == 1 and "missing.txt" in err, err)
    for args in (["--help"], ["parse", "--help"], ["help"]):
        rc, out, err = run("backendbench", *args)
        check(f"backendbench {' '.join(args)}", rc == 0 and out.startswith("usage: kb backendbench parse FILE"), out + err)
    relu = os.path.join(tmp, "relu.txt")
    with open(relu, "w") as f:
        f.write("Operator: aten.relu.default\ncnt: 1, ((T([4], f32),), {})\n")
    for args in ([], ["parse"], ["parse", good, bad], ["parse", "--frobnicate", good], ["frobnicate"],
                 ["ops", "--device"], ["ops", "--bogus"], ["run", relu, "--device", "cuda", "--oracle-limit", "x"]):
        rc, out, err = run("backendbench", *args)
        check(f"backendbench {' '.join(args) or '(nothing)'} is a usage error", rc == 2 and "usage: kb backendbench" in err
              or rc == 2 and "unknown subcommand" in err, err)
rc, out, err = run("backendbench", "ops")
check("backendbench ops lists the overloads kb implements", rc == 0 and "aten.add.Tensor," in out, out + err)
rc, out, err = run("backendbench", "ops", "--device", "cuda")
check("backendbench ops --device cuda: none without a device, else elementwise, copy, reductions, norms, matmuls",
      rc == 0 and (out == "\n" or (out.count(",") + 1 >= 100 and "aten.mm.default" in out)), out + err)

# BackendBench import and run: the whole file as a dataset kb validate accepts, and a
# per-operator sample run on the CPU (the smallest line of each implemented operator).
trace_file = os.path.join(shared, "backendbench", "tritonbench-op-traces.txt")
with tempfile.TemporaryDirectory() as tmp:
    ds = os.path.join(tmp, "bb")
    rc, out, err = run("backendbench", "import", trace_file, "--out", ds)
    check("backendbench import of the real file", rc == 0 and "imported 12733 of 12740 lines of 166 operators" in out
          and "skipped 7 lines" in out, out + err)
    rc, out, err = run("validate", ds)
    check("kb validate accepts the imported dataset", rc == 0 and "12733 workloads" in out and ": 0 errors" in out,
          out + err[-2000:])
    with open(os.path.join(ds, "backendbench", "lines.jsonl")) as f:
        first = __import__("json").loads(f.readline())
    check("lines.jsonl keeps the original line", first["text"].startswith("cnt: ") and first["line"] >= 2, first)
    rc, out, err = run("backendbench", "ops", trace_file)
    check("backendbench ops FILE: every operator with its lines, cnt and where kb runs it",
          rc == 0 and out.startswith("operator ") and "12740 lines" in out
          and sum(1 for l in out.splitlines() if l.startswith("aten.")) >= 166, out[-3000:] + err)
    rc, out, err = run("backendbench", "run", trace_file, "--limit-per-op", "1")
    table = out.split("\nscore over")[0]
    rows = [l.split() for l in table.splitlines() if l.startswith("aten.") and len(l.split()) == 4]
    check("backendbench run: a sample of every implemented operator passes on the CPU",
          rc == 0 and len(rows) >= 60 and all(r[1] == r[2] == "1" for r in rows), out[-3000:] + err)
    check("backendbench run says what a CPU run proves", "judging numerical" in out and
          "correctness needs a second implementation" in out, out[:500])
    cov = [l for l in out.splitlines() if l.startswith("coverage:")]
    import re as _re
    m = _re.search(r"\(([0-9.]+)%\)", cov[0]) if cov else None
    check("backendbench run: coverage of at least 45% of the lines", m and float(m.group(1)) >= 45.0, cov)
    left = out.split("not implemented, by lines:")[-1]
    check("backendbench run: every operator of the shared trace is implemented, none listed as left",
          not any(l.startswith("aten.") for l in left.splitlines()), out[-1500:])
    base = os.path.join(tmp, "baseline.json")
    with open(base, "w") as f:
        __import__("json").dump({"format": "kb-backendbench-baseline-1", "device": "test",
                                 "times_ms": {"aten.relu.default": {**{str(i): 1000.0 for i in range(1, 52)}, "0": None}}}, f)
    rc, out, err = run("backendbench", "run", trace_file, "--ops", "aten.relu.default", "--limit-per-op", "1",
                       "--baseline", base)
    check("backendbench run --baseline prints speedups and the score", rc == 0 and "speedup" in out and
          "geomean speedup" in out and "perf@1 " in out and "fully correct 100.0%" in out and
          float(out.split("geomean speedup ")[1].split(",")[0]) > 1.0, out + err)
    with open(base, "w") as f:
        f.write('{"format": "kb-backendbench-baseline-1", "times_ms": {"aten.relu.default": {"x": 1}}}')
    rc, out, err = run("backendbench", "run", trace_file, "--baseline", base)
    check("a bad baseline is a clear error", rc == 1 and 'key "x" is not a line index' in err, err)
rc, out, err = run("backendbench", "run", trace_file, "--ops", "aten.add.Tensor,aten.nope.default", "--limit-per-op", "1")
check("backendbench run --ops with an unknown operator exits 2", rc == 2 and
      "aten.nope.default: kb does not implement this operator" in err, err)
rc, out, err = run("backendbench", "run", trace_file, "--ops", "aten.relu.defualt")
check("backendbench run --ops with a typo names the near matches before running", rc == 2 and
      "--ops aten.relu.defualt: kb does not implement this operator; did you mean aten.relu.default, " in err
      and out == "", out + err)
rc, out, err = run("backendbench", "run", trace_file, "--device", "cuda")
# here (no GPU) either the build lacks CUDA or there is no device: both a clear error, exit 1
check("backendbench run --device cuda without a GPU is a clear error", rc == 1 and
      ("built without CUDA" in err or "no CUDA device" in err), err)
rc, out, err = run("backendbench", "run", trace_file, "--device", "cuda:q")
check("backendbench run --device cuda:q is a usage error", rc == 2 and "--device takes cpu, cuda or cuda:N" in err, err)
rc, out, err = run("backendbench", "import", trace_file)
check("backendbench import without --out exits 2", rc == 2 and "--out" in err, err)

# devices: either lists GPUs or says why there are none; never crashes.
rc, out, err = run("devices")
check("devices answers cleanly", (rc == 0 and ": " in out) or (rc == 1 and "kb devices: " in err and
      ("no CUDA device" in err or "built without CUDA" in err)), out + err)

# bench --device: cpu, cuda or cuda:N; anything else is a usage error (2); a device that is not there is exit 1,
# named (here: no GPU or no CUDA build; with GPUs, an ordinal past the last one).
for bad in ["cuda:x", "cuda:-1", "cuda:", "gpu", "cuda:1:2"]:
    rc, out, err = run("bench", "--device", bad, "--smallest")
    check(f"bench --device {bad} is a usage error", rc == 2 and "--device is cpu, cuda or cuda:N" in err and
          f'"{bad}"' in err, err)
rc, out, err = run("bench", "--device", "cuda:4095", "--smallest", "--no-time")
check("bench --device cuda:4095 names the missing device", rc == 1 and "--device cuda:4095: " in err and
      ("no CUDA device" in err or "built without CUDA" in err or "CUDA device 4095 does not exist" in err), err)

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

    # --shard K/N: three shards into one folder write what the unsharded run wrote, each definition's file by one.
    def recorded(root):
        got = {}
        for f in glob.glob(os.path.join(root, "traces", "*", "*", "*.jsonl")):
            with open(f) as fh:
                got[os.path.relpath(f, root)] = sorted((r["workload"]["uuid"], r["solution"])
                                                       for r in map(json.loads, fh))
        return got
    whole = recorded(tmp)
    sharded = os.path.join(tmp, "sharded")
    per_shard = []
    for k in (1, 2, 3):
        rc, out, err = run("bench", "--device", "cpu", "--smallest", "--no-time", "--shard", f"{k}/3", "--out", sharded)
        per_shard.append(set(recorded(sharded)) - set().union(*per_shard))  # the files this shard added
        check(f"bench --shard {k}/3 runs its slice", rc == 0 and f"shard {k}/3: " in out and " 0 failed" in out, out + err)
    check("the three shards' files are disjoint and non-empty", all(per_shard) and
          sum(len(x) for x in per_shard) == len(set().union(*per_shard)), str([sorted(x) for x in per_shard]))
    check("the shards together record what one unsharded run records", recorded(sharded) == whole,
          f"{sorted(set(recorded(sharded)) ^ set(whole))}")
# --l2-flush: clean or write (the CUDA timer's flush; on the CPU it changes nothing), anything else a usage error,
# and so is a KB_L2_FLUSH the timer would not understand.
rc, out, err = run("bench", "--device", "cpu", "--definitions", "gemm_n128_k2048", "--smallest", "--no-time",
                   "--l2-flush", "write", "--out", os.path.join(tempfile.mkdtemp(), "o"))
check("bench --l2-flush write runs", rc == 0 and " 0 failed" in out, out + err)
for args, env in [(["--l2-flush", "dirty"], None), (["--l2-flush"], None), ([], {"KB_L2_FLUSH": "Clean"})]:
    rc, out, err = run("bench", "--device", "cpu", "--definitions", "gemm_n128_k2048", "--no-time", *args, env=env)
    check(f"bench {args} {env} is a usage error", rc == 2 and ("clean or write" in err or "needs a value" in err), err)
rc, out, err = run("bench", "--device", "cpu", "--definitions", "rmsnorm_h4096,no_such_definition", "--no-time")
check("bench --definitions with a name no dataset has is a usage error", rc == 2 and
      'kb bench: --definitions: no definition "no_such_definition" in ' in err and "evaluations" not in out, out + err)
rc, out, err = run("bench", "--device", "cpu", "--definitions", "rmsnorm_h409", "--no-time")
check("bench --definitions with a typo names the near matches", rc == 2 and
      err.endswith("; did you mean rmsnorm_h4096?\n"), err)
rc, out, err = run("bench", "--device", "cpu", "--solutions", "nope", "--no-time")
check("bench --solutions with an unknown name is a usage error naming what is known", rc == 2 and
      'kb bench: --solutions: no solution "nope" in kb, its plugins or ' in err and "; known: kb_" in err
      and "evaluations" not in out, out + err)
rc, out, err = run("bench", "--device", "cpu", "--solutions", "kb_cpu_rmsnorm,kb_cpu_gem", "--no-time")
check("bench --solutions with a typo names the near matches", rc == 2 and
      'no solution "kb_cpu_gem" in ' in err and "; did you mean kb_cpu_gemm" in err and err.endswith("?\n"), err)
for bad in ["0/3", "4/3", "1/0", "x", "1/", "/2", "1/2/3"]:
    rc, out, err = run("bench", "--device", "cpu", "--shard", bad)
    check(f"bench --shard {bad} is a usage error", rc == 2 and "--shard is K/N" in err, err)

# Only regular files are read: a FIFO or device, given or found in a dataset, is an error at once (a
# regression would block on the FIFO; the short timeout turns that into a failure).
with tempfile.TemporaryDirectory() as tmp:
    ds = os.path.join(tmp, "ds")
    os.makedirs(os.path.join(ds, "definitions", "rmsnorm"))
    os.makedirs(os.path.join(ds, "workloads", "rmsnorm"))
    with open(os.path.join(shared, "flashinfer-trace", "definitions", "rmsnorm", "rmsnorm_h128.json")) as f, \
            open(os.path.join(ds, "definitions", "rmsnorm", "rmsnorm_h128.json"), "w") as g:
        g.write(f.read())
    fifo = os.path.join(ds, "workloads", "rmsnorm", "rmsnorm_h128.jsonl")
    os.mkfifo(fifo)
    device = os.path.join(ds, "workloads", "rmsnorm", "zero.jsonl")
    os.symlink("/dev/zero", device)
    loose = os.path.join(tmp, "loose.json")
    os.mkfifo(loose)
    blob_ds = os.path.join(tmp, "blob_ds")  # a workload's safetensors blob that is a FIFO
    shutil.copytree(os.path.join(project, "tests", "malformed", "good", "tiny_dataset_blob"), blob_ds)
    blob = glob.glob(os.path.join(blob_ds, "blob", "**", "*.safetensors"), recursive=True)[0]
    os.remove(blob)
    os.mkfifo(blob)
    out_dir = os.path.join(tmp, "out")
    os.makedirs(os.path.join(out_dir, "traces", "kb", "rmsnorm"))
    os.mkfifo(os.path.join(out_dir, "traces", "kb", "rmsnorm", "rmsnorm_h128.jsonl"))
    for name, args, says in [
            ("validate of a FIFO", ["validate", loose], [f"{loose}: not a regular file (a FIFO)"]),
            ("validate of a dataset holding a FIFO and a device link", ["validate", ds],
             [f"{fifo}: not a regular file (a FIFO)", f"{device}: not a regular file (a character device)"]),
            ("bench of a dataset holding a FIFO and a device link",
             ["bench", ds, "--device", "cpu", "--no-time", "--out", os.path.join(tmp, "out2")],
             [f"{fifo}: not a regular file (a FIFO)", f"{device}: not a regular file (a character device)"]),
            ("validate of a dataset whose safetensors blob is a FIFO", ["validate", blob_ds],
             [f"{blob}: cannot read: not a regular file"]),
            ("bench --resume over a FIFO among the traces",
             ["bench", "--device", "cpu", "--no-time", "--definitions", "rmsnorm_h4096", "--resume", "--out", out_dir],
             ["rmsnorm_h128.jsonl: not a regular file (a FIFO)"])]:
        try:
            p = subprocess.run([kb, *args], capture_output=True, text=True, timeout=60)
            check(f"{name} is refused at once", p.returncode == 1 and all(s in p.stderr for s in says),
                  p.stdout + p.stderr)
        except subprocess.TimeoutExpired:
            check(f"{name} is refused at once", False, "kb blocked (timed out after 60 s)")

# Names that would put a trace outside --out are refused by validate and bench; the rest of the run goes on.
with tempfile.TemporaryDirectory() as tmp:
    ds, out_dir, target = os.path.join(tmp, "ds"), os.path.join(tmp, "out"), os.path.join(tmp, "target")
    os.makedirs(os.path.join(ds, "definitions", "rmsnorm"))
    os.makedirs(os.path.join(ds, "workloads", "rmsnorm"))
    os.makedirs(target)
    with open(os.path.join(shared, "flashinfer-trace", "definitions", "rmsnorm", "rmsnorm_h128.json")) as f:
        good = json.load(f)
    hostile = [("abs_def", os.path.join(target, "abs_def")),
               ("escaped_def", "../" * 12 + os.path.join(target, "escaped_def").lstrip("/"))]
    for stem, name in [("rmsnorm_h128", "rmsnorm_h128"), *hostile]:
        with open(os.path.join(ds, "definitions", "rmsnorm", stem + ".json"), "w") as g:
            json.dump({**good, "name": name}, g)
        with open(os.path.join(ds, "workloads", "rmsnorm", stem + ".jsonl"), "w") as g:
            g.write(json.dumps({"definition": name, "solution": None, "evaluation": None, "workload": {
                "uuid": "one", "axes": {"batch_size": 2},
                "inputs": {"hidden_states": {"type": "random"}, "weight": {"type": "random"}}}}) + "\n")
    # Messages cut a long name after 64 bytes.
    said = lambda err, name: (f'definition.name: "{name[:64]}' in err and
                              "is not usable as a file name: it contains '/'" in err)
    rc, out, err = run("validate", ds)
    for stem, name in hostile:
        check(f"validate refuses the definition name {stem}", rc == 1 and said(err, name), err)
    rc, out, err = run("bench", ds, "--device", "cpu", "--no-time", "--trials", "1", "--out", out_dir)
    check("bench reports the hostile names and exits non-zero", rc == 1 and
          all(said(err, name) for _, name in hostile), out + err)
    check("bench still runs the good definition", " 1 passed, 0 failed" in out and
          os.path.isfile(os.path.join(out_dir, "traces", "kb", "rmsnorm", "rmsnorm_h128.jsonl")), out + err)
    written = [os.path.join(r, f) for r, _, fs in os.walk(tmp) for f in fs]
    check("bench writes nothing outside --out", os.listdir(target) == [] and
          all(p.startswith(out_dir + os.sep) or p.startswith(ds + os.sep) for p in written), written)

# FlashInfer-Bench's evaluation flags: --num-trials, --warmup-runs, --iterations, --required-matched-ratio.
with tempfile.TemporaryDirectory() as tmp:
    rc, out, err = run("bench", "--device", "cpu", "--definitions", "rmsnorm_h4096", "--solutions", "kb_cpu_rmsnorm",
                       "--smallest", "--num-trials", "2", "--warmup-runs", "2", "--iterations", "9",
                       "--required-matched-ratio", "0.99", "--out", tmp)
    check("FlashInfer-Bench's flags are accepted", rc == 0 and "1 passed" in out, out + err)
    lines = [json.loads(l) for root, _, files in os.walk(tmp) for f in files if f.endswith(".jsonl")
             for l in open(os.path.join(root, f))]
    log = lines[0]["evaluation"]["log"] if lines else ""
    extra = (lines[0]["evaluation"].get("performance") or {}).get("extra") or {} if lines else {}
    check("--num-trials and --required-matched-ratio reach the judge", "trials=2 " in log and
          "required_matched_ratio=0.99" in log, log)
    check("--iterations sets the least number of timed samples", extra.get("samples", 0) >= 9, json.dumps(lines[:1]))
    rc, out, err = run("bench", "--device", "cpu", "--iterations", "0", "--smallest")
    check("--iterations 0 is bad usage", rc == 2 and "--iterations" in err, err)
    for flag, value, why in (("--required-matched-ratio", "1.5", "a fraction from 0 to 1"),
                             ("--atol", "-0.1", "a non-negative number"), ("--rtol", "nan", "a non-negative number")):
        rc, out, err = run("bench", "--device", "cpu", flag, value, "--smallest")
        check(f"{flag} {value} is bad usage", rc == 2 and f"{flag} expects {why}, got {value}" in err, err)

# --baseline: what the speedup column divides by, recorded in each trace.
def trace_lines(folder):
    return [json.loads(l) for root, _, files in os.walk(folder) for f in sorted(files) if f.endswith(".jsonl")
            for l in open(os.path.join(root, f))]

with tempfile.TemporaryDirectory() as tmp:
    for baseline, expect in (("reference", "reference"), ("kb_cpu_gemm", "kb_cpu_gemm"), ("none", None)):
        out_dir = os.path.join(tmp, baseline)
        rc, out, err = run("bench", "--device", "cpu", "--definitions", "gemm_n128_k2048", "--trials", "1",
                           "--max-workloads", "2", "--baseline", baseline, "--out", out_dir)
        cells = speedup_cells(out)
        recs = trace_lines(out_dir)
        extras = [(r["evaluation"].get("performance") or {}).get("extra") or {} for r in recs]
        if expect is None:
            check("--baseline none: no speedup, none recorded", rc == 0 and cells == ["-", "-"] and
                  all("baseline" not in e for e in extras) and
                  all(r["evaluation"]["performance"]["speedup_factor"] == 0 for r in recs), out + err)
        else:
            check(f"--baseline {baseline}: every row has its speedup, the trace names the baseline",
                  rc == 0 and len(cells) == 2 and all(is_ratio(c) for c in cells) and
                  all(e.get("baseline") == expect for e in extras) and len(recs) == 2, out + err)
        if baseline == "kb_cpu_gemm":
            check("a solution against itself is 1.00x", cells == ["1.00x", "1.00x"], out)
    rc, out, err = run("bench", "--device", "cpu", "--definitions", "gemm_n128_k2048", "--baseline", "kb_cpu_gem",
                       "--no-time", "--out", tmp)
    check("--baseline with a typo is bad usage naming the near match",
          rc == 2 and "--baseline: no solution \"kb_cpu_gem\" to time against; did you mean kb_cpu_gemm" in err, err)

# kb dispatch: what kb_dispatch would choose, from traces a timed kb bench just wrote (and from untimed ones).
with tempfile.TemporaryDirectory() as tmp:
    rc, out, err = run("bench", "--device", "cpu", "--definitions", "gemm_n128_k2048", "--trials", "1", "--out", tmp)
    check("a timed bench for kb dispatch", rc == 0 and "4 passed" in out, out + err)
    # One stalled sample can make a real ratio print as 0.00x: the cell must be a ratio, the trace's factor positive.
    check("timed against the CPU oracle, each row's speedup column holds the measured ratio",
          len(speedup_cells(out)) == 4 and all(is_ratio(c) for c in speedup_cells(out)) and
          all(r["evaluation"]["performance"]["speedup_factor"] > 0 for r in trace_lines(tmp)), out)
    rc, out, err = run("dispatch", "gemm_n128_k2048", tmp, "--call", "M=24")
    rows = [l.split() for l in out.splitlines() if l.startswith("  cpu")]
    check("kb dispatch lists one entry per recorded M", rc == 0 and [r[1] for r in rows] == ["M=1", "M=7", "M=16", "M=32"] and
          all(r[2] == "kb_cpu_gemm" for r in rows) and "4 records under" in out, out + err)
    check("kb dispatch --call M=24 takes the nearest recorded M (32, in log2)",
          "call M=24 on cpu: kb_cpu_gemm (recorded M=32, " in out and "call M=24 on cuda: the fallback" in out, out)
    rc, out, err = run("dispatch", "gemm_n128_k2048", tmp, "--call", "M=24", "--exact")
    check("kb dispatch --exact: no M=24 record, the fallback", rc == 0 and
          "call M=24 on cpu: the fallback (no exactly matching recorded workload)" in out, out + err)
    rc, out, err = run("dispatch", "gemm_n128_k2048", tmp, "--call", "M=24", "--tie-margin", "0")
    check("kb dispatch --tie-margin 0 (one CPU solution: the same choice)",
          rc == 0 and "call M=24 on cpu: kb_cpu_gemm (recorded M=32, " in out, out + err)
    rc, out, err = run("dispatch", "gemm_n128_k2048", tmp, "--call", "M=7", "--exact")
    check("kb dispatch --exact: M=7 is recorded", "call M=7 on cpu: kb_cpu_gemm (recorded M=7, exact" in out, out)
    rc, out, err = run("dispatch", "gemm_n128_k2048", tmp, "--hardware", "no such machine")
    check("kb dispatch --hardware leaves other machines' records out", rc == 0 and "(no entries" in out, out + err)
    untimed = os.path.join(tmp, "untimed")
    rc, out, err = run("bench", "--device", "cpu", "--definitions", "gemm_n128_k2048", "--trials", "1", "--no-time",
                       "--out", untimed)
    check("nothing timed to compare against: the speedup column says -, never 0.00x",
          rc == 0 and speedup_cells(out) == ["-"] * 4 and "0.00x" not in out, out + err)
    rc, out, err = run("dispatch", "gemm_n128_k2048", untimed)
    check("kb dispatch passes over untimed records", rc == 0 and "4 records under" in out and "(no entries" in out,
          out + err)
    torn = os.path.join(tmp, "torn.jsonl")
    with open(glob.glob(os.path.join(tmp, "traces", "*", "*", "gemm_n128_k2048.jsonl"))[0]) as f:
        first = f.readline()
    with open(torn, "w") as f:
        f.write(first + first[: len(first) // 2] + "\n")
    rc, out, err = run("dispatch", "gemm_n128_k2048", torn)
    check("kb dispatch names the torn line", rc == 1 and "torn.jsonl:2" in err, err)
    for bad, want in [(["gemm_n128_k2048"], "usage: kb dispatch"),
                      (["gemm_n128_k2048", tmp, "--call", "K=3"], "is not VAR_AXIS=N"),
                      (["gemm_n128_k2048", tmp, "--call", "M=x"], "is not VAR_AXIS=N"),
                      (["gemm_n128_k2048", tmp, "--call"], "--call needs a value"),
                      (["gemm_n128_k2048", tmp, "--tie-margin", "1.5"], "is not a number in [0, 1]"),
                      (["gemm_n128_k2048", tmp, "--tie-margin", "x"], "is not a number in [0, 1]"),
                      (["gemm_n128_k2048", tmp, "--tie-margin"], "--tie-margin needs a value"),
                      (["gemm_n128_k2048", tmp, "--bogus"], "unknown option --bogus")]:
        rc, out, err = run("dispatch", *bad)
        check(f"kb dispatch {' '.join(bad[2:]) or '(one argument)'} is a usage error", rc == 2 and want in err, err)
    rc, out, err = run("dispatch", "no_such_definition", tmp)
    check("kb dispatch of an unknown definition", rc == 1 and 'no definition "no_such_definition"' in err, err)
    rc, out, err = run("dispatch", "gemm_n128_k2048", os.path.join(tmp, "missing"))
    check("kb dispatch of a missing traces path", rc == 1 and "missing: no such file or folder" in err, err)

with tempfile.TemporaryDirectory() as tmp:
    # Small definitions only: this also runs under AddressSanitizer (several times slower).
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

# Sampling is judged by distribution; kb's CPU sampler passes on the shipped
# definitions (they ship without workloads: a two-row one is written here).
import json as _json
import re
with tempfile.TemporaryDirectory() as tmp:
    names = ["top_k_sampling_from_probs_v128256", "top_p_sampling_from_probs_v128256",
             "top_k_top_p_sampling_from_probs_v128256"]
    os.makedirs(os.path.join(tmp, "ds", "definitions", "sampling"))
    os.makedirs(os.path.join(tmp, "ds", "workloads", "sampling"))
    for n in names:
        with open(os.path.join(shared, "flashinfer-trace", "definitions", "sampling", n + ".json")) as f:
            d = _json.load(f)
        with open(os.path.join(tmp, "ds", "definitions", "sampling", n + ".json"), "w") as g:
            _json.dump(d, g)
        with open(os.path.join(tmp, "ds", "workloads", "sampling", n + ".jsonl"), "w") as g:
            g.write(_json.dumps({"definition": n, "solution": None, "evaluation": None, "workload": {
                "uuid": "two-rows", "axes": {"batch_size": 2},
                "inputs": {k: {"type": "random"} for k in d["inputs"]}}}) + "\n")
    rc, out, err = run("bench", os.path.join(tmp, "ds"), "--device", "cpu", "--solutions", "kb_cpu_sampling",
                       "--trials", "1", "--sampling-draws", "500", "--no-time", "--out", os.path.join(tmp, "out"))
    check("kb_cpu_sampling passes the shipped sampling definitions by distribution",
          rc == 0 and out.count("kb_cpu_sampling") == 3 and out.count("PASSED") == 3 and
          "3 passed, 0 failed" in out, out + err)
    traces = glob.glob(os.path.join(tmp, "out", "traces", "*", "*", "*.jsonl"))
    logs = [_json.loads(line)["evaluation"] for f in traces for line in open(f)]
    check("sampling traces record the TVD and the rule", len(logs) == 3 and
          all('"tvd"' in _json.dumps(e["correctness"]) and "judged by distribution" in e["log"] for e in logs),
          str(logs)[:1000])
    rc, out, err = run("bench", os.path.join(tmp, "ds"), "--sampling-draws", "10")
    check("--sampling-draws too few is refused", rc == 2 and "too few" in err, err)

rc, out, err = run("bench", "--reference", "tensorflow")
check("--reference takes native or torch", rc == 2 and "--reference is native or torch" in err, err)

# --reference torch: the definitions' own PyTorch code as the reference.
python = os.environ.get("KB_PYTHON", "python3")
probe = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
if probe.returncode != 0:
    print(f"skip --reference torch tests: {python} cannot import torch "
          f"({(probe.stderr.strip().splitlines() or ['?'])[-1]})")
else:
    with tempfile.TemporaryDirectory() as tmp:
        rc, out, err = run("bench", "--reference", "torch", "--device", "cpu", "--definitions", "rmsnorm_h4096",
                           "--trials", "1", "--no-time", "--smallest", "--out", tmp)
        check("--reference torch passes kb's CPU solution and the oracle", rc == 0 and
              re.search(r"\bkb_cpu_rmsnorm +PASSED", out) and re.search(r"\breference +PASSED", out) and
              "torch" in err, out + err)
        # A definition whose reference raises: a clear error, exit 1.
        os.makedirs(os.path.join(tmp, "ds", "definitions", "rmsnorm"))
        os.makedirs(os.path.join(tmp, "ds", "workloads", "rmsnorm"))
        with open(os.path.join(project, "kernels", "rmsnorm", "definitions", "rmsnorm_h4096.json")) as f:
            d = _json.load(f)
        d["reference"] = ("import torch\n\ndef run(hidden_states, weight):\n    EPS = 1e-6\n"
                          "    raise RuntimeError('deliberately broken')\n")
        with open(os.path.join(tmp, "ds", "definitions", "rmsnorm", "rmsnorm_h4096.json"), "w") as g:
            _json.dump(d, g)
        with open(os.path.join(tmp, "ds", "workloads", "rmsnorm", "rmsnorm_h4096.jsonl"), "w") as g:
            g.write(_json.dumps({"definition": "rmsnorm_h4096", "solution": None, "evaluation": None, "workload": {
                "uuid": "one", "axes": {"batch_size": 2},
                "inputs": {"hidden_states": {"type": "random"}, "weight": {"type": "random"}}}}) + "\n")
        rc, out, err = run("bench", os.path.join(tmp, "ds"), "--reference", "torch", "--device", "cpu",
                           "--trials", "1", "--no-time", "--out", os.path.join(tmp, "out2"))
        check("a reference that raises is a clear error", rc == 1 and
              "torch reference: the reference raised RuntimeError: deliberately broken" in err and
              "could not run" in out, out + err)
        rc, out, err = run("bench", "--reference", "torch", "--device", "cpu", "--definitions", "rmsnorm_h4096",
                           "--no-time", "--out", tmp, env={"KB_PYTHON": "/nonexistent/python3"})
        check("--reference torch without python is refused clearly", rc == 1 and
              "--reference torch: torch reference: cannot start /nonexistent/python3" in err, err)
        # --baseline torch: the definition's PyTorch reference timed as the speedup's baseline, named in the trace.
        out_dir = os.path.join(tmp, "torch_baseline")
        rc, out, err = run("bench", "--device", "cpu", "--definitions", "rmsnorm_h4096", "--trials", "1",
                           "--max-workloads", "2", "--solutions", "kb_cpu_rmsnorm", "--baseline", "torch",
                           "--out", out_dir)
        recs = trace_lines(out_dir)
        extras = [(r["evaluation"].get("performance") or {}).get("extra") or {} for r in recs]
        cells = speedup_cells(out)
        check("--baseline torch: every row's speedup is over the timed PyTorch reference", rc == 0 and len(recs) == 2
              and all(e.get("baseline") == "torch" for e in extras) and len(cells) == 2
              and all(is_ratio(c) for c in cells)
              and all(r["evaluation"]["performance"]["reference_latency_ms"] > 0 for r in recs), out + err)
        rc, out, err = run("bench", "--device", "cpu", "--definitions", "rmsnorm_h4096", "--baseline", "torch",
                           "--no-time", "--out", tmp, env={"KB_PYTHON": "/nonexistent/python3"})
        check("--baseline torch without python is bad usage, said clearly",
              rc == 2 and "--baseline: torch reference: cannot start /nonexistent/python3" in err, err)

print(f"{failures} failed")
sys.exit(1 if failures else 0)
