#!/usr/bin/env python3
"""kb bench with outside solutions, end to end: --plugin libraries (the hostile one, the example),
Solution JSON in the dataset (built, refused, unsupported), a valid trace file whatever happened,
and two kb processes building the same solutions into one cache at once.

usage: test_plugin_cli.py KB KB_WORKER HOSTILE.so EXAMPLE.so DATASET BUILD_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

kb, worker, hostile, example, dataset, build_dir = sys.argv[1:7]
env = dict(os.environ, KB_WORKER=worker)
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def run(args, **kw):
    return subprocess.run([kb] + args, capture_output=True, text=True, env=env, timeout=600, **kw)


def traces(out):
    recs = []
    for root, _, files in os.walk(os.path.join(out, "traces")):
        for f in files:
            with open(os.path.join(root, f)) as fh:
                for n, line in enumerate(fh, 1):
                    try:
                        recs.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        check(False, f"{f}:{n} is not JSON: {e}")
    return recs


tmp = tempfile.mkdtemp(prefix="kb-plugin-cli-", dir=build_dir)
try:
    out = os.path.join(tmp, "out")
    cache = os.path.join(tmp, "cache")
    r = run(["bench", "--plugin", hostile, "--plugin", example, dataset, "--out", out, "--timeout", "1",
             "--trials", "2", "--no-time", "--cache", cache, "--smallest"])
    check(r.returncode == 1, f"kb bench with hostile solutions exits 1, got {r.returncode}: {r.stderr}")
    expected = {
        "hostile_good": "PASSED", "hostile_segfault": "RUNTIME_ERROR", "hostile_abort": "RUNTIME_ERROR",
        "hostile_hang": "TIMEOUT", "hostile_write_past_output": "RUNTIME_ERROR",
        "hostile_write_input": "RUNTIME_ERROR", "hostile_overrun_6k": "RUNTIME_ERROR", "hostile_stale": "INCORRECT_NUMERICAL",
        "hostile_wrong_shape": "INCORRECT_SHAPE", "hostile_wrong_dtype": "INCORRECT_DTYPE",
        "hostile_error": "RUNTIME_ERROR", "hostile_chatty": "PASSED", "example_c_rmsnorm_h64": "PASSED",
        "kb_cpu_rmsnorm": "PASSED", "cpp_good": "PASSED", "cpp_two_files": "PASSED",
        "cpp_compile_error": "COMPILE_ERROR", "cpp_missing_symbol": "COMPILE_ERROR",
        "cpp_wrong_arity": "COMPILE_ERROR", "cpp_include_device": "COMPILE_ERROR", "cpp_segfault": "RUNTIME_ERROR", "cpp_nonzero_return": "RUNTIME_ERROR",
    }
    recs = traces(out)
    got = {t["solution"]: t["evaluation"] for t in recs}
    for name, status in expected.items():
        check(name in got and got[name]["status"] == status,
              f"{name}: expected {status}, got {got.get(name, {}).get('status')}")
    check(len(recs) == len(got), "one trace line per (solution, workload)")
    for name in ("python_solution", "triton_solution"):
        check(name not in got, f"{name} must not be recorded as if it ran")
        check(f"not run (unsupported): {name}" in r.stdout, f"{name} is reported as unsupported: {r.stdout}")
    check("2 solutions in languages kb cannot run" in r.stdout, "the summary counts unsupported languages")
    if "cpp_compile_error" in got:
        check("this is not C++" in got["cpp_compile_error"]["log"], "COMPILE_ERROR log holds the compiler output")
    if "hostile_segfault" in got:
        check("SIGSEGV" in got["hostile_segfault"]["log"], "the crash names its signal")
    if "hostile_abort" in got:
        check("hostile: about to abort" in got["hostile_abort"]["log"], "stderr of the solution is in the log")
    if "hostile_chatty" in got:
        check(len(got["hostile_chatty"]["log"]) < 20000, "captured output is bounded")

    # --resume after all that: nothing is evaluated twice.
    r2 = run(["bench", "--plugin", hostile, "--plugin", example, dataset, "--out", out, "--timeout", "1",
              "--trials", "2", "--no-time", "--cache", cache, "--smallest", "--resume"])
    check("0 evaluations" in r2.stdout and "already recorded" in r2.stdout, f"--resume skips all: {r2.stdout[-400:]}")

    # The example plugin on kb's bundled rmsnorm (bfloat16, hidden 4096), timed.
    out3 = os.path.join(tmp, "out3")
    r3 = run(["bench", "--plugin", example, "--solutions", "example_c_rmsnorm_h4096", "--definitions",
              "rmsnorm_h4096", "--smallest", "--device", "cpu", "--out", out3, "--trials", "2"])
    check(r3.returncode == 0, f"the example plugin passes on rmsnorm_h4096: {r3.stdout} {r3.stderr}")
    recs3 = traces(out3)
    check(len(recs3) == 1 and recs3[0]["evaluation"]["status"] == "PASSED"
          and recs3[0]["evaluation"]["performance"]["latency_ms"] > 0, f"timed PASSED record: {recs3}")

    # Plugins refused at load stop kb bench with the library's name and a non-zero status.
    bad = os.path.join(build_dir, "libkb_bad_table_1.so")
    r4 = run(["bench", "--plugin", bad, dataset, "--out", os.path.join(tmp, "out4")])
    check(r4.returncode == 1 and bad in r4.stderr and "plugin ABI version 99" in r4.stderr,
          f"ABI mismatch refused: {r4.returncode} {r4.stderr}")
    r5 = run(["bench", "--plugin", os.path.join(tmp, "missing.so"), dataset])
    check(r5.returncode == 1 and "missing.so: cannot open" in r5.stderr, f"missing plugin: {r5.stderr}")
    r6 = run(["bench", "--timeout", "0", dataset])
    check(r6.returncode == 2 and "--timeout must be positive" in r6.stderr, f"bad --timeout: {r6.stderr}")

    # Two kb processes, one fresh cache, the same Solution JSON: both finish with the same verdicts.
    cache2 = os.path.join(tmp, "cache2")
    procs = []
    for k in range(2):
        args = [kb, "bench", dataset, "--solutions", "cpp_good,cpp_two_files,cpp_compile_error", "--no-time",
                "--trials", "1", "--smallest", "--cache", cache2, "--out", os.path.join(tmp, f"race{k}")]
        procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    results = [p.communicate(timeout=600) for p in procs]
    verdicts = []
    for k, p in enumerate(procs):
        recs = traces(os.path.join(tmp, f"race{k}"))
        verdicts.append(sorted((t["solution"], t["evaluation"]["status"]) for t in recs))
        check(p.returncode == 1, f"race {k}: exit 1 (one compile error), got {p.returncode}: {results[k][1]}")
    check(verdicts[0] == verdicts[1] == [("cpp_compile_error", "COMPILE_ERROR"), ("cpp_good", "PASSED"),
                                         ("cpp_two_files", "PASSED")], f"race verdicts: {verdicts}")
    leftovers = [n for n in os.listdir(os.path.join(cache2, "solutions")) if ".tmp." in n]
    check(not leftovers, f"no temporary build directories left: {leftovers}")
finally:
    if not failures:
        shutil.rmtree(tmp, ignore_errors=True)

print("ok" if not failures else f"{len(failures)} failures")
sys.exit(1 if failures else 0)
