#!/usr/bin/env python3
"""Does kb's timing agree with Nsight Compute's kernel duration?

For a few kernels that run longer than 20 us, this runs `kb bench` once as
usual (kb's median latency: CUDA events, L2 flushed before each sample) and
once under `ncu`, which times each launch of the solution's kernel with its
own hardware counter (gpu__time_duration), caches flushed before each launch
(--cache-control all) and clocks left alone (--clock-control none, as kb
leaves them). The bar: the two medians within 5%. kb's flush is its default
or KB_L2_FLUSH's (lib/cuda/timing.hpp L2Flush); the table says which.

Both runs use cuBLASLt's heuristic plan (KB_CUBLASLT_AUTOTUNE=0) and no
gemv-or-cuBLASLt race (KB_GEMM_RACE=0): under ncu every launch is serialized
and slowed, so kb's autotuning would time its candidates wrongly there and
could pick a different kernel than the plain run, and the check would compare
two kernels. The decode rows name kb_cuda_gemv, the kernel they check.

kb's run also records CUPTI's kernel time (kb bench --cupti: the kernel's own
start and end records, the same cold samples), which holds no launch: kb's
event latency does (about 3 us: kb's empty-kernel floor), and on kernels of
20-30 us that launch is 10-15% of it. ncu's SM clock for each launch is
recorded too. With --lib, ncu also times the kernel under kb's own L2 flush
(bench/ncu_flushed_launches.py, --cache-control none): ncu's full flush
left kb's gemv 1-2 us slower than CUPTI's time of kb's samples at the same
clock (H200), so the second table separates the two tools'
timers from the two flushes.

usage: nsight_check.py --kb PATH --definitions DIR --bundled DIR --out DIR [--lib LIBKB]
"""
import argparse
import csv
import glob
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid

# (definition, where it lives, axis, value, solution, ncu kernel-name regex)
CASES = [
    ("rmsnorm_h7168", "shipped", "batch_size", 32768, "kb_cuda_rmsnorm", "rmsnorm_(block|warp|loop)_kernel"),
    ("silu_and_mul_i14336", "bundled", "num_tokens", 8192, "kb_cuda_silu_and_mul", "silu_and_mul_(vec8|scalar)_kernel"),
    ("gemm_n4096_k4096", "shipped", "M", 8192, "kb_cublaslt_gemm", "nvjet|xmma|cutlass|sm90_"),
    # decode gemms (kb's gemv, 25-125 us): reads of 73-470 MB, where how the flush leaves the L2 shows most
    ("gemm_n7168_k5120", "shipped", "M", 1, "kb_cuda_gemv", "gemv_"),
    ("gemm_n4096_k14336", "shipped", "M", 1, "kb_cuda_gemv", "gemv_"),
    ("gemm_n8192_k28672", "shipped", "M", 1, "kb_cuda_gemv", "gemv_"),
]
UNIT_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9}

p = argparse.ArgumentParser()
p.add_argument("--kb", required=True)
p.add_argument("--definitions", required=True)
p.add_argument("--bundled", required=True)
p.add_argument("--out", required=True)
p.add_argument("--ncu", default=shutil.which("ncu") or "/usr/local/cuda/bin/ncu")
p.add_argument("--lib", help="libkb.so.1: also run ncu (--cache-control none) on bench/ncu_flushed_launches.py, "
                             "whose every launch follows kb's clean L2 flush, and report that comparison too")
args = p.parse_args()
os.makedirs(args.out, exist_ok=True)


def dataset_for(name, where, axis, value):
    src = (os.path.join(args.definitions, "*", name + ".json") if where == "shipped"
           else os.path.join(args.bundled, "*", "definitions", name + ".json"))
    found = glob.glob(src)
    if not found:
        sys.exit(f"nsight_check: no definition {name} under {src}")
    d = json.load(open(found[0]))
    definition_paths[name] = found[0]
    tmp = tempfile.mkdtemp(prefix="kb-nsight-")
    os.makedirs(os.path.join(tmp, "definitions"))
    os.makedirs(os.path.join(tmp, "workloads"))
    json.dump(d, open(os.path.join(tmp, "definitions", name + ".json"), "w"))
    wl = {"uuid": str(uuid.uuid4()), "axes": {axis: value}, "inputs": {k: {"type": "random"} for k in d["inputs"]}}
    with open(os.path.join(tmp, "workloads", name + ".jsonl"), "w") as fh:
        fh.write(json.dumps({"definition": name, "workload": wl, "solution": None, "evaluation": None}) + "\n")
    return tmp


definition_paths = {}


def ncu_launches(target, kernels, cache_control="all"):
    """ncu's duration (ns) and SM clock (MHz) of each profiled launch of `target` (a command) of the kernels whose
    names match the regex `kernels`."""
    cmd = [args.ncu, "--clock-control", "none", "--cache-control", cache_control, "-k", "regex:" + kernels,
           "--launch-count", "300", "--metrics", "gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second", "--csv",
           "--page", "details"]
    rn = subprocess.run(cmd + target, capture_output=True, text=True, timeout=240, env=env)
    durations_ns, clocks_mhz = [], []
    text = rn.stdout
    start = text.find('"ID"')
    if start >= 0:
        for rec in csv.DictReader(io.StringIO(text[start:])):
            if rec.get("Metric Name") == "gpu__time_duration.sum":
                unit = UNIT_NS.get(rec.get("Metric Unit", "nsecond"), 1.0)
                durations_ns.append(float(rec["Metric Value"].replace(",", "")) * unit)
            elif rec.get("Metric Name") == "sm__cycles_elapsed.avg.per_second":
                unit = rec.get("Metric Unit", "")  # cycle/nsecond, cycle/usecond, ... or cycle/second (Hz)
                hz = 1e9 if "nsecond" in unit else 1e6 if "usecond" in unit else 1e3 if "msecond" in unit else 1.0
                clocks_mhz.append(float(rec["Metric Value"].replace(",", "")) * hz / 1e6)
    return durations_ns, clocks_mhz, rn


def kb_latency_ms(out_dir):
    for f in glob.glob(os.path.join(out_dir, "traces", "*", "*", "*.jsonl")):
        for line in open(f):
            ev = json.loads(line)["evaluation"]
            return ev["status"], (ev.get("performance") or {}).get("latency_ms"), \
                ((ev.get("performance") or {}).get("extra") or {})
    return "NOT RUN", None, {}


env = dict(os.environ, KB_CUBLASLT_AUTOTUNE="0", KB_GEMM_RACE="0")
rows = []
for name, where, axis, value, solution, regex in CASES:
    ds = dataset_for(name, where, axis, value)
    bench = [args.kb, "bench", ds, "--device", "cuda", "--trials", "1", "--solutions", solution]
    out_kb = os.path.join(args.out, "kb-" + name)
    r = subprocess.run(bench + ["--out", out_kb, "--cupti"], capture_output=True, text=True, timeout=180, env=env)
    status, kb_ms, extra = kb_latency_ms(out_kb)
    # Under ncu: correctness calls only (--no-time; kb's blocking kernel would
    # stall on ncu's serialized launches), ten trials = ten cold launches of
    # the solution's kernel, each timed by the hardware.
    durations_ns, clocks_mhz, rn = ncu_launches(bench[:-4] + ["--trials", "10", "--solutions", solution,
                                                              "--out", out_kb + "-ncu", "--no-time"], regex)
    # The ten trials are the last ten launches: cuBLASLt's first-use tuning times several candidate algorithms
    # before them (slower ones too), which must not count.
    all_launches = len(durations_ns)
    durations_ns, clocks_mhz = durations_ns[-10:], clocks_mhz[-10:]
    ncu_ms = statistics.median(durations_ns) / 1e6 if durations_ns else None
    ratio = kb_ms / ncu_ms if kb_ms and ncu_ms else None
    cupti_ms = extra.get("cupti_kernel_ms")
    cupti_ratio = cupti_ms / ncu_ms if cupti_ms and ncu_ms else None
    kbflush = {}
    if args.lib:
        # The same kernel, each launch behind kb's clean L2 flush instead of ncu's (ncu_flushed_launches.py): the last ten.
        driver = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ncu_flushed_launches.py")
        w_ns, w_mhz, rw = ncu_launches([sys.executable, driver, args.lib, definition_paths[name], solution,
                                        f"{axis}={value}", "--launches", "12", "--flush", "clean"], regex,
                                       cache_control="none")
        w_ns, w_mhz = w_ns[-10:], w_mhz[-10:]
        w_ms = statistics.median(w_ns) / 1e6 if w_ns else None
        kbflush = {"ncu_kbflush_ms": w_ms, "ncu_kbflush_sm_clock_mhz": [round(c) for c in w_mhz],
                "kb_over_ncu_kbflush": kb_ms / w_ms if kb_ms and w_ms else None,
                "kb_cupti_over_ncu_kbflush": cupti_ms / w_ms if cupti_ms and w_ms else None,
                "ncu_kbflush_exit": rw.returncode, "ncu_kbflush_tail": (rw.stderr or rw.stdout)[-600:] if not w_ns else ""}
        kbflush["within_5pct_kbflush"] = abs(kbflush["kb_over_ncu_kbflush"] - 1) <= 0.05 if kbflush["kb_over_ncu_kbflush"] else None
    rows.append({"definition": name, "axis": axis, "value": value, "solution": solution, "status": status,
                 "kb_ms": kb_ms, "kb_samples": extra.get("samples"), "kb_graph": extra.get("graph"),
                 "ncu_ms": ncu_ms, "ncu_launches": all_launches,
                 "ncu_sm_clock_mhz": [round(c) for c in clocks_mhz], "kb_sm_clock_mhz": extra.get("sm_clock_mhz"),
                 "kb_batch_clock_mhz": extra.get("sm_clock_lowest_kept_mhz"), "kb_over_ncu": ratio,
                 "kb_l2_flush": extra.get("l2_flush"), "kb_cupti_ms": cupti_ms, "kb_cupti_over_ncu": cupti_ratio,
                 "within_5pct": (abs(ratio - 1) <= 0.05) if ratio else None,
                 "ncu_exit": rn.returncode, "ncu_tail": (rn.stderr or rn.stdout)[-600:] if not durations_ns else "",
                 **kbflush})
    shutil.rmtree(ds, ignore_errors=True)

def clock_span(c):
    return f"{min(c)}-{max(c)}" if c else "-"


json.dump(rows, open(os.path.join(args.out, "nsight_check.json"), "w"), indent=1)
# kb SM MHz: NVML's reading before / after kb's samples, then (after "avg") the lowest batch average of the kept
# samples from the GPU's own counters (lib/cuda/clock_sampler.cu), which is what ncu's clock column compares with.
lines = ["| definition | batch | solution | status | kb L2 flush | kb ms | kb SM MHz | ncu ms, last 10 launches (profiled) | ncu SM MHz (min-max) | kb / ncu | within 5% | kb CUPTI ms | kb CUPTI / ncu |",
         "| --- | ---: | --- | --- | --- | ---: | --- | ---: | --- | ---: | --- | ---: | ---: |"]
for r_ in rows:
    f = lambda x: "-" if x is None else f"{x:.4f}"
    lines.append(f"| {r_['definition']} | {r_['value']} | {r_['solution']} | {r_['status']} | {r_['kb_l2_flush']} | {f(r_['kb_ms'])} | {r_['kb_sm_clock_mhz']}"
                 f"{' avg ' + str(r_['kb_batch_clock_mhz']) if r_.get('kb_batch_clock_mhz') else ''} | "
                 f"{f(r_['ncu_ms'])} ({r_['ncu_launches']}) | {clock_span(r_['ncu_sm_clock_mhz'])} | {f(r_['kb_over_ncu'])} | {r_['within_5pct']} | "
                 f"{f(r_['kb_cupti_ms'])} | {f(r_['kb_cupti_over_ncu'])} |")
    if r_["ncu_tail"]:
        lines.append(f"\nncu gave no durations for {r_['definition']} (exit {r_['ncu_exit']}):\n```\n{r_['ncu_tail']}\n```\n")
if args.lib:
    # The second table: ncu on ncu_flushed_launches.py, every launch behind kb's clean flush (--cache-control none).
    lines += ["", "ncu with kb's flush: `--cache-control none` on `ncu_flushed_launches.py`, each launch behind kb's clean L2 "
              "flush (a buffer twice the L2 size written, then read); last 10 launches:", "",
              "| definition | batch | solution | kb ms | ncu ms, kb flush | ncu SM MHz (min-max) | kb / ncu | within 5% | "
              "kb CUPTI / ncu |", "| --- | ---: | --- | ---: | ---: | --- | ---: | --- | ---: |"]
    for r_ in rows:
        f = lambda x: "-" if x is None else f"{x:.4f}"
        lines.append(f"| {r_['definition']} | {r_['value']} | {r_['solution']} | {f(r_['kb_ms'])} | {f(r_.get('ncu_kbflush_ms'))} | "
                     f"{clock_span(r_.get('ncu_kbflush_sm_clock_mhz'))} | {f(r_.get('kb_over_ncu_kbflush'))} | "
                     f"{r_.get('within_5pct_kbflush')} | {f(r_.get('kb_cupti_over_ncu_kbflush'))} |")
        if r_.get("ncu_kbflush_tail"):
            lines.append(f"\nncu gave no durations for {r_['definition']} under kb's flush (exit {r_['ncu_kbflush_exit']}):"
                         f"\n```\n{r_['ncu_kbflush_tail']}\n```\n")
open(os.path.join(args.out, "nsight_check.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(0 if all(r_["within_5pct"] for r_ in rows) else 1)
