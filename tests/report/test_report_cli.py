#!/usr/bin/env python3
"""kb export, kb compare and kb report as commands: outputs that read back, exit statuses, usage errors.

usage: test_report_cli.py KB
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

KB = sys.argv[1]
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)


def kb(*args):
    return subprocess.run([KB, *args], capture_output=True, text=True)


def line(uuid, m, solution, status, latency=0.0, reference=0.0, log="", extra=None):
    ev = {"status": status, "environment": {"hardware": "Test CPU"}, "timestamp": "2025-01-01T00:00:00", "log": log}
    if status == "PASSED":
        ev["correctness"] = {"max_relative_error": 0.0, "max_absolute_error": 0.5}
        ev["performance"] = {"latency_ms": latency, "reference_latency_ms": reference, "speedup_factor": reference / latency}
        if extra:
            ev["performance"]["extra"] = extra
    return json.dumps({"definition": "gemm_t", "workload": {"uuid": uuid, "axes": {"M": m}, "inputs": {}},
                       "solution": solution, "evaluation": ev})


def main():
    work = tempfile.mkdtemp(prefix="kb_report_cli_")
    try:
        old, new = os.path.join(work, "old.jsonl"), os.path.join(work, "new.jsonl")
        with open(old, "w") as f:
            f.write(line("a", 1, "s", "PASSED", 1.0, 2.0, extra={"rel_noise": 0.01}) + "\n")
            f.write(line("b", 2, "s", "PASSED", 1.0, 2.0, extra={"min_ms": 0.9, "max_ms": 1.1}) + "\n")
            f.write(line("a", 1, "cc", "COMPILE_ERROR", log="k.cu(1): error: boom") + "\n")
        with open(new, "w") as f:
            f.write(line("a", 1, "s", "PASSED", 0.5, 2.0, extra={"rel_noise": 0.01}) + "\n")
            f.write(line("b", 2, "s", "PASSED", 1.05, 2.0) + "\n")

        # export: JSON lines, each a Benchmark Result kb validate accepts.
        out = os.path.join(work, "results.jsonl")
        r = kb("export", "--benchmark-result", "--out", out, old)
        check(r.returncode == 0, "export exits 0: " + r.stderr)
        results = [json.loads(x) for x in open(out)]
        check([x["source"] for x in results] == ["cc", "s"], "export: one result per solution %s" % results)
        check(results[0] == {"device": {"name": "Test CPU"}, "kernel_id": "gemm_t", "source": "cc", "compiled": False,
                             "compile_error": "k.cu(1): error: boom"}, "export: the compile failure %s" % results[0])
        check(results[1]["time"] == 1.0 and results[1]["speedup"] == 2.0 and results[1]["max_diff"] == 0.5,
              "export: time, speedup, max_diff %s" % results[1])
        for i, x in enumerate(results):
            path = os.path.join(work, "result%d.json" % i)
            with open(path, "w") as f:
                json.dump(x, f)
            v = kb("validate", path)
            check(v.returncode == 0, "kb validate accepts exported result %d: %s" % (i, v.stdout + v.stderr))
        r = kb("export", old)
        check(r.returncode == 2 and "--benchmark-result" in r.stderr, "export without a format: usage error")
        r = kb("export", "--benchmark-result", os.path.join(work, "missing"))
        check(r.returncode == 1 and "no such file or folder" in r.stderr, "export of a missing path: " + r.stderr)

        # compare: exit 0 whatever changed, a table and a summary; JSON the same.
        r = kb("compare", old, new)
        check(r.returncode == 0, "compare exits 0: " + r.stderr)
        check("faster" in r.stdout and "within noise" in r.stdout and "only in old" in r.stdout, "compare table:\n" + r.stdout)
        check("3 rows: 1 faster, 1 within noise, 1 only in old" in r.stdout, "compare summary:\n" + r.stdout)
        r = kb("compare", "--json", old, new)
        c = json.loads(r.stdout)
        check(c["summary"]["faster"] == 1 and c["summary"]["within_noise"] == 1 and c["summary"]["only_old"] == 1,
              "compare --json summary %s" % c["summary"])
        check(kb("compare", old).returncode == 2, "compare needs two sets")

        # report: the files it says it wrote.
        rep = os.path.join(work, "rep")
        r = kb("report", "--out", rep, old, new)
        check(r.returncode == 0, "report exits 0: " + r.stderr)
        for name in ("index.html", "report.md", "results.csv", "solutions.csv", "authors.csv", "fast_p.csv", "report.json"):
            check(os.path.isfile(os.path.join(rep, name)) and "wrote " + os.path.join(rep, name) in r.stdout, "report wrote " + name)
        data = json.load(open(os.path.join(rep, "report.json")))
        check(data["records"] == 5 and data["definitions"][0]["name"] == "gemm_t", "report.json %s" % data["records"])
        check(kb("report", old).returncode == 2, "report needs --out")
        # --agent-traces takes the .json files after it; the .jsonl after them is traces.
        agent = os.path.join(work, "agent.json")
        with open(agent, "w") as f:
            json.dump({"model": "m", "conversation": [{"role": "user", "content": "hi"}]}, f)
        r = kb("report", "--out", os.path.join(work, "rep2"), "--agent-traces", agent, old)
        check(r.returncode == 0 and "1 agent traces" in r.stdout and "3 records" in r.stdout,
              "report with an agent trace before the traces: " + r.stdout + r.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%d failures" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
