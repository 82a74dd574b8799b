#!/usr/bin/env python3
"""kb against PyTorch on the same shapes, on one GPU.

Per op family (gemm, rmsnorm, silu_and_mul, rope; --families picks some):
1. Times PyTorch on the family's shapes: CUDA events around each call, L2
   flushed before each sample (a buffer twice the L2 size), each batch of
   samples replayed from a CUDA graph as kb's are (the rope reference and the
   copies: queued behind torch.cuda._sleep), so host launch gaps are not
   timed, median (torch_timing.py).
2. Writes a dataset of those shapes (the shipped gemm and rmsnorm definitions
   and kb's bundled silu_and_mul ones, batch sizes 1..32768) and runs
   `kb bench --device cuda --trials 1` on it: every kb CUDA solution is judged
   against kb's oracle and timed by kb (CUDA events, L2 flushed,
   graph-captured samples, median).
3. Rewrites benchmark.md (ratios) and benchmark.json with every family done
   so far, so a run cut short keeps what it measured.
   With --torch-after, PyTorch is timed again after each kb run and kb is
   compared with the mean of the two (both shown): the SM clock drifts over a
   run, and compute-bound shapes (gemm M = 8192) move with it.
The device copy bandwidth (torch copy of 1 GiB) and an empty kernel are
measured first. Progress lines carry the time since the start.

Where time goes: kb bench makes fresh inputs and judges every (workload,
solution) before timing it (up to 1.5 s of samples each), so the gemm
family's big shapes dominate. Each kb code path is measured once: for
M <= kCudaGemmGemvMaxM (kernels/gemm/cuda/gemm_cuda.hpp) kb_cuda_gemm runs the
gemv kernel (kb_cuda_gemv's path) and kb_cublaslt_gemm is measured beside it;
above, kb_cuda_gemm is kb_cublaslt_gemm's path and runs alone
(--all-solutions runs all three everywhere). To fit a device call, run one
family per call, split a family with --shard K/N, and set --time-limit below
the caller's timeout; --merge joins the benchmark.json files of several calls.
"""
import argparse
import glob
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

FAMILIES = ("gemm", "rmsnorm", "silu_and_mul", "rope")
# rope: the shipped definition at Llama-3.1-8B's heads (32 query, 8 kv), a 4096-row cos/sin cache; num_tokens varies
ROPE_AXES = {"num_qo_heads": 32, "num_kv_heads": 8, "max_seq_len": 4096}
GEMM_M = [1, 2, 4, 8, 16, 32, 128, 512, 2048, 8192]
NORM_B = [1, 16, 128, 1024, 4096, 16384, 32768]
NORM_NAMES = ("rmsnorm_h4096", "rmsnorm_h7168", "fused_add_rmsnorm_h4096", "fused_add_rmsnorm_h7168",
              "rmsnorm_h2048", "rmsnorm_h128")

p = argparse.ArgumentParser()
p.add_argument("--kb")
p.add_argument("--definitions", help="FlashInfer-Bench definitions dir")
p.add_argument("--bundled", help="kb's kernels/ dir")
p.add_argument("--out", required=True)
p.add_argument("--quick", action="store_true", help="fewer shapes")
p.add_argument("--families", default=",".join(FAMILIES), help="comma-separated, of " + ", ".join(FAMILIES))
p.add_argument("--shard", default="1/1", help="K/N: the K-th of N slices of each family's definitions")
p.add_argument("--only", default="", help="comma-separated definition names (default: all of the families')")
p.add_argument("--values", default="", help="comma-separated batch sizes / M (default: the family's list)")
p.add_argument("--all-solutions", action="store_true",
               help="every kb solution at every shape, even where two run the same code")
p.add_argument("--time-limit", type=float, default=0,
               help="seconds: start no kb run after this and stop a running one; 0: none")
p.add_argument("--torch-after", action="store_true",
               help="time PyTorch again after each kb run and compare kb with the mean of the two torch times: "
                    "compute-bound shapes drift with the clock over a run (M = 8192 rows moved 9%% between "
                    "runs), and one torch pass before kb puts all of that drift on one side")
p.add_argument("--cupti", action="store_true",
               help="pass --cupti to kb bench: each kb row also gets its kernels' own time from CUPTI (kb CUPTI ms); "
                    "torch's kernels are timed the same way through torch.profiler (torch CUPTI ms), and the two "
                    "give a kernels-only ratio")
p.add_argument("--merge", nargs="+", metavar="JSON", help="join these benchmark.json files into --out; no GPU")
args = p.parse_args()

T0 = time.time()


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')} +{time.time() - T0:6.1f}s] {msg}", flush=True)


def fmt_num(x, digits=4):
    return "-" if x is None else f"{x:.{digits}f}"


def same_size_pct(r):
    c = r.get("same_size_copy_gbs")
    if not c or not r.get("kb_ms") or not r.get("bytes"):
        return "-"
    return f"{100 * r['bytes'] / (r['kb_ms'] * 1e-3) / 1e9 / c:.0f}%"


def cupti_ratio(r):
    kb_k, torch_k = r.get("kb_cupti_ms"), r.get("torch_cupti_ms")
    return kb_k / torch_k if kb_k and torch_k else None


def throttle_cell(r):
    """Samples the timers set aside because the SM clock had fallen under the throttle threshold (and the
    re-warm batch after each rest): kb's, then torch's per pass; T marks a median measured throttled; in
    brackets the lowest average clock (MHz) of a kept batch, where known: two sides at different clocks
    compare clocks as well as kernels."""
    def one(n, throttled, mhz):
        return "-" if n is None else f"{n}{' T' if throttled else ''}{f' ({mhz})' if mhz and not throttled else ''}"
    torch_part = "+".join(one(t.get("set_aside"), t.get("throttled"), t.get("sm_clock_lowest_kept_mhz"))
                          for t in r.get("torch_timing") or []) or "-"
    return f"{one(r.get('kb_set_aside'), r.get('kb_throttled'), r.get('kb_sm_clock_lowest_kept_mhz'))} / {torch_part}"


def write_outputs(meta, rows, parts=None):
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "benchmark.json"), "w") as fh:
        json.dump({"meta": meta, "rows": rows, **({"parts": parts} if parts else {})}, fh, indent=1)
    metas = parts or [meta]
    lines = [f"# kb vs PyTorch on {metas[0]['device']}", ""]
    for m in metas:
        lines.append(f"torch {m['torch']}; copy bandwidth (torch, 1 GiB D2D, read+write) {m['copy_bandwidth_gbs']:.0f} "
                     f"GB/s; empty kernel {m['empty_kernel_ms'] * 1000:.1f} us"
                     + (f" ({m['empty_kernel_cupti_ms'] * 1000:.2f} us by CUPTI)" if m.get("empty_kernel_cupti_ms") else "")
                     + "; families done: "
                     f"{', '.join(m['families_done']) or 'none'}"
                     + (f"; not finished: {', '.join(m['families_cut'])}" if m.get("families_cut") else "")
                     + (f"; definitions shard {m['shard']}" if m.get("shard", "1/1") != "1/1" else "")
                     + (f"; throttle threshold {m['throttle_threshold']:.2f} of the maximum SM clock"
                        if m.get("throttle_threshold") is not None else "")
                     + f" ({m['elapsed_s']:.0f} s).")
    bracketed = any(r.get("torch_ms_after") for r in rows)
    cupti = any(r.get("kb_cupti_ms") for r in rows)
    passes = [t for r in rows for t in r.get("torch_timing") or []]
    spun = sorted({t.get("not_graph", "timed behind a spin kernel, not replayed from a graph")
                   for t in passes if not t.get("graph")})
    graphed = sum(1 for t in passes if t.get("graph"))
    torch_how = ""
    if passes:
        torch_how = (f"torch's samples were replayed from a CUDA graph, as kb's are, in {graphed} of {len(passes)} "
                     "passes")
        if spun:
            torch_how += f"; the others queued behind a spin kernel ({'; '.join(spun)[:300]})"
        torch_how += ". "
    lines += ["", "Latencies are medians of cold samples (L2 flushed). ratio = kb / torch (below 1: kb faster). "
              + torch_how
              + ("torch ms is the mean of torch timed before and after kb (--torch-after; both in a column at the end). "
                 if bracketed else "")
              + ("kb CUPTI ms: kb's kernels alone, from CUPTI's records of the GPU's start and end of each kernel "
                 "(kb bench --cupti), where the other columns hold CUDA events; torch CUPTI ms: torch's the same way "
                 "(torch.profiler's kernel records, cold calls queued behind a spin kernel); CUPTI ratio: kb / torch "
                 "of these, kernels against kernels, launch overhead left out. " if cupti else "") +
              "All kb rows were judged against kb's oracle in the same run. "
              "kb / empty: kb's latency over an empty kernel's, both timed by kb in the same process "
              "(graph replay, L2 flushed): how far a launch is above the launch floor; kb / 1-read: the same over a "
              "one-thread kernel that copies 16 bytes (one cold DRAM read: the floor of any kernel that reads memory). "
              "% same-size copy (gemm, M <= 16): kb's GB/s over what torch's copy of half the weight (read + write: "
              "as many bytes as the weight) reaches, timed the same way (cold): the copy bandwidth at this size, "
              "launch and L2 state included. set aside kb / torch: samples each timer set aside because the SM "
              "clock read under the throttle threshold (KB_THROTTLE_THRESHOLD, 0.75 by default) after their batch (the GPU then rests 50 ms, and the batch after "
              "the rest is set aside too: nvbench's throttle handling); the clock is each batch's average, from the "
              "GPU's cycle counters (kb's clock sampler, both sides); torch's per pass, joined by +; T: too few "
              "samples ran above the threshold, and the median holds set-aside ones; in brackets the lowest clock "
              "(MHz) among the batches kept, kb's from its trace.", "",
              "| definition | batch | solution | status | kb ms | torch ms | baseline | ratio | kb % copy BW | kb / empty "
              "| kb / 1-read | kb % same-size copy | set aside (lowest kept MHz) kb / torch |" + (" torch ms before / after |" if bracketed else "")
              + (" kb CUPTI ms | torch CUPTI ms | CUPTI ratio |" if cupti else ""),
              "| --- | ---: | --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
              + (" ---: |" if bracketed else "") + (" ---: | ---: | ---: |" if cupti else "")]
    for r in sorted(rows, key=lambda r: (r["definition"], r["value"], r["solution"])):
        frac = r["kb_fraction_of_copy_bw"]
        lines.append(f"| {r['definition']} | {r['value']} | {r['solution']} | {r['status']} | {fmt_num(r['kb_ms'])} | "
                     f"{fmt_num(r['torch_ms'])} | {r['baseline']} | {fmt_num(r['ratio'], 3)} | "
                     f"{'-' if frac is None else f'{100 * frac:.0f}%'} | {fmt_num(r.get('kb_over_empty_kernel'), 2)} | "
                     f"{fmt_num(r.get('kb_over_one_read_kernel'), 2)} | {same_size_pct(r)} | {throttle_cell(r)} |"
                     + (f" {fmt_num(r.get('torch_ms_before'))} / {fmt_num(r.get('torch_ms_after'))} |" if bracketed else "")
                     + (f" {fmt_num(r.get('kb_cupti_ms'))} | {fmt_num(r.get('torch_cupti_ms'))} | "
                        f"{fmt_num(cupti_ratio(r), 3)} |" if cupti else ""))
    with open(os.path.join(args.out, "benchmark.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    return lines


if args.merge:
    parts, rows = [], []
    for f in args.merge:
        with open(f) as fh:
            doc = json.load(fh)
        parts += doc.get("parts") or [doc["meta"]]
        rows += doc["rows"]
    merged = dict(parts[0], families_done=sorted({f for m in parts for f in m["families_done"]}),
                  families_cut=sorted({f for m in parts for f in m.get("families_cut", [])}),
                  elapsed_s=sum(m["elapsed_s"] for m in parts))
    print("\n".join(write_outputs(merged, rows, parts)))
    sys.exit(0)

for need in ("kb", "definitions", "bundled"):
    if not getattr(args, need):
        p.error(f"--{need} is required (unless --merge)")
families = [f for f in args.families.split(",") if f]
if not families or any(f not in FAMILIES for f in families):
    p.error(f"--families takes some of {', '.join(FAMILIES)}; got {args.families!r}")
m = re.fullmatch(r"(\d+)/(\d+)", args.shard)
if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
    p.error(f"--shard is K/N with 1 <= K <= N; got {args.shard!r}")
shard_k, shard_n = int(m.group(1)), int(m.group(2))
only = {n for n in args.only.split(",") if n}
deadline = T0 + args.time_limit if args.time_limit > 0 else None


class Stop(Exception):
    """SIGTERM (e.g. from `timeout`): write what was measured, then exit."""


def on_term(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one stop; a second must not cut the writing of results
    raise Stop(f"signal {signum}")


signal.signal(signal.SIGTERM, on_term)

import torch  # noqa: E402 (not needed by --merge)
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_timing  # noqa: E402
from torch_timing import kernel_span_ms, time_like_kb  # noqa: E402 (kb's timing procedure, for torch)

dev = torch.device("cuda")
props = torch.cuda.get_device_properties(0)
L2 = getattr(props, "L2_cache_size", 50 << 20)
flush_buf = torch.empty(2 * L2, dtype=torch.uint8, device=dev)


kernel_ms_of_case = None  # --cupti: time_torch_cases points this at the case being timed
timing_of_case = {}  # time_like_kb.last of the case's op (samples kept and set aside, throttled)


def time_torch(fn, kernels=False, graph=False, **_):
    """Median ms of fn() over cold samples, timed as kb times its kernels (torch_timing.py). kernels=True (the
    op itself, not a side measurement): with --cupti, also its kernels alone, kept for the case. graph=True:
    samples replayed from a CUDA graph, as kb replays its own (work of kernels only: not the copies, whose
    cudaMemcpyAsync a graph turns into a slower memcpy node; not the rope reference, whose code is the
    definition's)."""
    global kernel_ms_of_case, timing_of_case
    ms = time_like_kb(fn, flush_buf, max_time_s=1.5, graph=graph)
    if kernels:
        timing_of_case = dict(time_like_kb.last)
    if kernels and args.cupti and kernel_ms_of_case is not None:
        try:
            kernel_ms_of_case = kernel_span_ms(fn, flush_buf)
        except Exception as e:  # the profiler's trouble costs the column, not the run
            kernel_ms_of_case = (None, f"torch.profiler: {e}")
    return ms


def copy_bandwidth_gbs():
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device=dev).fill_(1)
    b = torch.empty_like(a)
    ms = time_torch(lambda: b.copy_(a), samples=20)
    return 2 * n / (ms * 1e-3) / 1e9


def load_defs(pattern):
    out = []
    for f in sorted(glob.glob(pattern)):
        with open(f) as fh:
            out.append(json.load(fh))
    return out


def gemv_max_m():
    """kb_cuda_gemm's gemv/cuBLASLt crossover, read from its header; None if not found."""
    try:
        with open(os.path.join(args.bundled, "gemm", "cuda", "gemm_cuda.hpp")) as fh:
            found = re.search(r"kCudaGemmGemvMaxM\s*=\s*(\d+)", fh.read())
        return int(found.group(1)) if found else None
    except OSError:
        return None


def family_plan(family):
    """[(run name, [(definition, axis, value)], kb solutions or None for all)] for one family."""
    gemm_m, norm_b = GEMM_M, NORM_B
    if family == "gemm":
        defs = load_defs(os.path.join(args.definitions, "gemm", "*.json"))
        if args.quick:  # what fits one 10-minute device call
            gemm_m = [1, 16, 128, 1024, 8192]
            defs = [d for d in defs if d["name"] in ("gemm_n4096_k4096", "gemm_n28672_k4096")]
        axis, values = "M", gemm_m
    elif family == "rmsnorm":
        defs = [d for d in load_defs(os.path.join(args.definitions, "rmsnorm", "*.json")) if d["name"] in NORM_NAMES]
        if args.quick:
            norm_b = [1, 128, 4096, 32768]
            defs = [d for d in defs if d["name"] in ("rmsnorm_h4096", "rmsnorm_h7168", "fused_add_rmsnorm_h7168")]
        axis, values = "batch_size", norm_b
    elif family == "rope":
        defs = load_defs(os.path.join(args.definitions, "rope", "*.json"))
        if args.quick:
            norm_b = [1, 128, 4096, 32768]
        axis, values = "num_tokens", norm_b
    else:
        defs = load_defs(os.path.join(args.bundled, "silu_and_mul", "definitions", "*.json"))
        if args.quick:
            norm_b = [1, 128, 4096, 32768]
            defs = [d for d in defs if d["name"] == "silu_and_mul_i14336"]
        axis, values = "num_tokens", norm_b
    if only:
        defs = [d for d in defs if d["name"] in only]
    if args.values:
        values = [int(v) for v in args.values.split(",") if v]
    defs = defs[shard_k - 1::shard_n]
    cases = lambda vs: [(d, axis, v) for d in defs for v in vs]  # noqa: E731
    crossover = gemv_max_m() if family == "gemm" else None
    if family != "gemm" or args.all_solutions or crossover is None:
        if family == "gemm" and not args.all_solutions:
            log("gemm: kCudaGemmGemvMaxM not found in kernels/gemm/cuda/gemm_cuda.hpp; running every solution")
        return [(family, cases(values), None)]
    small = [v for v in values if v <= crossover]
    large = [v for v in values if v > crossover]
    runs = []
    if small:  # kb_cuda_gemm = the gemv kernel here; cuBLASLt beside it
        runs.append((f"gemm-m-le-{crossover}", cases(small), ["kb_cuda_gemm", "kb_cublaslt_gemm"]))
    if large:  # kb_cuda_gemm = kb_cublaslt_gemm's path here
        runs.append((f"gemm-m-gt-{crossover}", cases(large), ["kb_cuda_gemm"]))
    return runs


same_size_copy = {}  # (definition, M) -> GB/s of torch's copy of half the weight (read + write = the weight's bytes)
torch_dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def torch_case(d, axis, v):
    """(median ms, bytes, flops, baseline name) of PyTorch on one shape."""
    ax = {k: a.get("value") for k, a in d["axes"].items()}
    ax[axis] = v
    if d["op_type"] == "gemm":
        dt = torch_dtype[d["inputs"]["A"]["dtype"]]
        A = torch.randn(v, ax["K"], dtype=dt, device=dev)
        B = torch.randn(ax["N"], ax["K"], dtype=dt, device=dev)
        ms = time_torch(lambda: torch.matmul(A, B.T), kernels=True, graph=True)
        if v <= 16:  # decode: what a plain copy moving as many bytes as the weight reaches, timed the same way
            half = B.flatten()[: B.numel() // 2]
            B2 = torch.empty_like(half)
            copy_ms = time_torch(lambda: B2.copy_(half))
            same_size_copy[(d["name"], v)] = 2 * half.numel() * half.element_size() / (copy_ms * 1e-3) / 1e9
            del B2
        return ms, (A.numel() + B.numel() + v * ax["N"]) * A.element_size(), 2 * v * ax["N"] * ax["K"], "torch.matmul"
    if d["op_type"] == "rmsnorm":
        h = ax["hidden_size"]
        x = torch.randn(v, h, dtype=torch.bfloat16, device=dev)
        w = torch.randn(h, dtype=torch.bfloat16, device=dev)
        eps = 1e-6 if "EPS = 1e-6" in d["reference"] else 1e-5
        if "residual" in d["inputs"]:
            res = torch.randn_like(x)
            ms = time_torch(lambda: F.rms_norm(x + res, (h,), w, eps), kernels=True, graph=True)
            return ms, 3 * x.numel() * 2 + h * 2, 0, "F.rms_norm(x + r)"  # read x and r, write out
        ms = time_torch(lambda: F.rms_norm(x, (h,), w, eps), kernels=True, graph=True)
        return ms, 2 * x.numel() * 2 + h * 2, 0, "F.rms_norm"
    if d["op_type"] == "rope":  # the definition's own reference, run by torch on the GPU
        scope = {}
        exec(d["reference"], scope)
        ax.update(ROPE_AXES)
        hs = ax["head_size"]
        q = torch.randn(v, ax["num_qo_heads"], hs, dtype=torch.bfloat16, device=dev)
        k = torch.randn(v, ax["num_kv_heads"], hs, dtype=torch.bfloat16, device=dev)
        cache = torch.randn(ax["max_seq_len"], ax["rotary_dim"], dtype=torch.float32, device=dev)
        pos = torch.randint(0, ax["max_seq_len"], (v,), dtype=torch.int64, device=dev)
        ms = time_torch(lambda: scope["run"](q, k, cache, pos), kernels=True)
        # q and k read and written, one cache row and one position read per token
        nbytes = 2 * (q.numel() + k.numel()) * 2 + v * ax["rotary_dim"] * 4 + v * 8
        return ms, nbytes, 0, "reference (torch)"
    i = ax["intermediate_size"]  # silu_and_mul
    x = torch.randn(v, 2 * i, dtype=torch.bfloat16, device=dev)
    ms = time_torch(lambda: F.silu(x[:, :i]) * x[:, i:], kernels=True, graph=True)
    return ms, 3 * v * i * 2, 0, "F.silu(x1) * x2"


torch_kernel_ms = {}  # --cupti: (definition, value) -> (median ms, kernels a call) or (None, reason)
torch_throttle = {}  # (definition, value) -> [time_like_kb.last of each torch pass]


def time_torch_cases(cases, kernels=False):
    """{(definition, value): torch_case(...)}, logged per definition; kernels=True (--cupti): also each op's
    kernels alone, into torch_kernel_ms."""
    global kernel_ms_of_case
    out, t, current = {}, time.time(), None
    for d, axis, v in cases:
        if current not in (None, d["name"]):
            log(f"torch {current}: done ({time.time() - t:.1f} s)")
            t = time.time()
        current = d["name"]
        kernel_ms_of_case = (None, "not measured") if kernels else None
        out[(d["name"], v)] = torch_case(d, axis, v)
        torch_throttle.setdefault((d["name"], v), []).append(dict(timing_of_case))
        if kernels:
            torch_kernel_ms[(d["name"], v)] = kernel_ms_of_case
        kernel_ms_of_case = None
    if current:
        log(f"torch {current}: done ({time.time() - t:.1f} s)")
    torch.cuda.empty_cache()  # leave the device memory to kb
    return out


kb_proc = None
stopped = None  # set when SIGTERM came


def read_kb_traces(out):
    """{(definition, value): {solution: (status, ms, extra)}} from the traces kb bench wrote under out."""
    results = {}
    for f in glob.glob(os.path.join(out, "traces", "*", "*", "*.jsonl")):
        for tline in open(f):
            try:
                tr = json.loads(tline)
            except json.JSONDecodeError:  # a line cut by a kill
                continue
            ev = tr["evaluation"]
            v = list(tr["workload"]["axes"].values())[0]
            perf = ev.get("performance") or {}
            results.setdefault((tr["definition"], v), {})[tr["solution"]] = (
                ev["status"], perf.get("latency_ms"), perf.get("extra") or {})
    return results


def run_kb(name, cases, solutions):
    """Runs kb bench on the cases: (read_kb_traces' results, whether it finished). After SIGTERM it stops kb, sets
    `stopped` and returns what kb had recorded."""
    global kb_proc, stopped
    if deadline and time.time() >= deadline:
        log(f"kb bench {name}: not started (time limit)")
        return {}, False
    tmp = tempfile.mkdtemp(prefix=f"kb-compare-{name}-")
    os.makedirs(os.path.join(tmp, "definitions"))
    os.makedirs(os.path.join(tmp, "workloads"))
    by_def = {}
    for d, axis, v in cases:
        by_def.setdefault(d["name"], (d, axis, []))[2].append(v)
    for dname, (d, axis, values) in by_def.items():
        with open(os.path.join(tmp, "definitions", dname + ".json"), "w") as fh:
            json.dump(d, fh)
        with open(os.path.join(tmp, "workloads", dname + ".jsonl"), "w") as fh:
            for v in values:
                # the varied axis first: read_kb_traces keys results by the first axis's value
                fixed = ROPE_AXES if d["op_type"] == "rope" else {}
                wl = {"uuid": str(uuid.uuid4()), "axes": {axis: v, **fixed},
                      "inputs": {k: {"type": "random"} for k in d["inputs"]}}
                fh.write(json.dumps({"definition": dname, "workload": wl, "solution": None, "evaluation": None}) + "\n")
    out = os.path.join(args.out, "compare-kb", name)
    cmd = [args.kb, "bench", tmp, "--device", "cuda", "--trials", "1", "--out", out] + (["--cupti"] if args.cupti else [])
    if solutions:
        cmd += ["--solutions", ",".join(solutions)]
    jobs = f"{len(cases) * len(solutions)}" if solutions else f"{len(cases)}+"  # every solution: at least one each
    log(f"kb bench {name}: {len(by_def)} definitions, {len(cases)} shapes, "
        f"{'solutions ' + ','.join(solutions) if solutions else 'every solution'} ({jobs} evaluations)")
    t, done, cut = time.time(), 0, False
    kb_proc = proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    timer = None
    if deadline:
        def expire():
            nonlocal cut
            cut = True
            proc.kill()
        timer = threading.Timer(max(0.0, deadline - time.time()), expire)
        timer.start()
    try:
        for line in kb_proc.stdout:
            line = line.rstrip()
            if re.match(r"\S+ +\S+=\d+ ", line):  # a result row: definition, axes, solution, status, ...
                done += 1
                log(f"kb [{done}/{jobs}] {line}")
            elif line:
                log(f"kb: {line}")
        rc = kb_proc.wait()
    except Stop as e:
        stopped, rc = str(e), None
    finally:
        if timer:
            timer.cancel()
        if kb_proc.poll() is None:
            kb_proc.kill()
            kb_proc.wait()
        kb_proc = None
    how = f"stopped by {stopped}" if stopped else "STOPPED at the time limit" if cut else f"exit {rc}"
    log(f"kb bench {name}: {how} after {time.time() - t:.0f} s")
    return read_kb_traces(out), not cut and not stopped


log(f"families {','.join(families)}, shard {args.shard}" + (f", time limit {args.time_limit:.0f} s" if deadline else ""))
bw = copy_bandwidth_gbs()
empty_ms = time_torch(lambda: torch.cuda._sleep(0), graph=True)
try:
    empty_cupti = kernel_span_ms(lambda: torch.cuda._sleep(0), flush_buf) if args.cupti else (None, None)
except Exception as e:
    empty_cupti = (None, f"torch.profiler: {e}")
log(f"copy bandwidth {bw:.0f} GB/s, empty kernel {empty_ms * 1000:.1f} us"
    + (f" (kernel alone, CUPTI: {empty_cupti[0] * 1000:.2f} us)" if empty_cupti[0] else ""))
meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "copy_bandwidth_gbs": bw,
        "empty_kernel_ms": empty_ms, "empty_kernel_cupti_ms": empty_cupti[0], "l2_bytes": L2, "families_requested": families, "families_done": [],
        "families_cut": [], "shard": args.shard, "elapsed_s": 0.0,
        "throttle_threshold": torch_timing.THROTTLE_THRESHOLD, "torch_l2_flush": torch_timing.L2_FLUSH}
rows = []
try:
    for family in families:
        finished = True
        for name, cases, solutions in family_plan(family):
            if deadline and time.time() >= deadline:
                log(f"{name}: not started (time limit)")
                finished = False
                kb, ran = {}, False
                torch_ms = {}
            else:
                torch_ms = time_torch_cases(cases, kernels=args.cupti)
                kb, ran = run_kb(name, cases, solutions)
                finished &= ran
                # torch bracketing kb: the same shapes again, so drift falls on both sides
                torch_after = time_torch_cases(cases) if args.torch_after and ran and not stopped else {}
            for d, axis, v in cases:
                t_ms, nbytes, flops, baseline = torch_ms.get((d["name"], v), (None, None, None, "-"))
                t_before = t_ms
                t_after = torch_after.get((d["name"], v), (None,))[0] if args.torch_after else None
                if t_ms and t_after:
                    t_ms = 0.5 * (t_ms + t_after)
                sols = kb.get((d["name"], v), {})
                for sol, (status, lat, extra) in sorted(sols.items()):
                    rows.append({"definition": d["name"], "axis": axis, "value": v, "solution": sol, "status": status,
                                 "kb_ms": lat, "torch_ms": t_ms, "torch_ms_before": t_before,
                                 "torch_ms_after": t_after, "baseline": baseline, "bytes": nbytes,
                                 "flops": flops, "ratio": (lat / t_ms) if lat and t_ms else None,
                                 "kb_fraction_of_copy_bw": (nbytes / (lat * 1e-3) / 1e9 / bw) if lat and nbytes else None,
                                 "kb_copy_bw_gbs": extra.get("copy_bandwidth_gbs"), "graph": extra.get("graph"),
                                 "kb_sm_clock_lowest_kept_mhz": extra.get("sm_clock_lowest_kept_mhz"),
                                 "kb_cupti_ms": extra.get("cupti_kernel_ms"),
                                 "torch_cupti_ms": torch_kernel_ms.get((d["name"], v), (None,))[0],
                                 "torch_cupti_note": None if torch_kernel_ms.get((d["name"], v), (None,))[0]
                                 else torch_kernel_ms.get((d["name"], v), (None, None))[1],
                                 "kb_empty_kernel_ms": extra.get("empty_kernel_ms"),
                                 "same_size_copy_gbs": same_size_copy.get((d["name"], v)),
                                 "kb_one_read_kernel_ms": extra.get("one_read_kernel_ms"),
                                 "kb_l2_flush": extra.get("l2_flush"),
                                 "kb_over_one_read_kernel": (lat / extra["one_read_kernel_ms"])
                                 if lat and extra.get("one_read_kernel_ms") else None,
                                 "kb_over_empty_kernel": (lat / extra["empty_kernel_ms"])
                                 if lat and extra.get("empty_kernel_ms") else None,
                                 "kb_samples": extra.get("samples"), "kb_sm_clock_mhz": extra.get("sm_clock_mhz"),
                                 "kb_throttled": extra.get("throttled"),
                                 "kb_set_aside": extra.get("throttled_samples_set_aside"),
                                 "kb_throttle_reasons": extra.get("throttle_reasons"),
                                 "torch_timing": torch_throttle.get((d["name"], v), [])})
                if not sols:
                    rows.append({"definition": d["name"], "axis": axis, "value": v, "solution": "-",
                                 "status": "NOT RUN" if ran else "NOT RUN (time limit)", "kb_ms": None,
                                 "torch_ms": t_ms, "baseline": baseline, "bytes": nbytes, "flops": flops,
                                 "ratio": None, "kb_fraction_of_copy_bw": None})
            meta["elapsed_s"] = time.time() - T0
            write_outputs(meta, rows)  # partial results after every kb run
            if stopped:
                raise Stop(stopped)
        meta["families_done" if finished else "families_cut"].append(family)
        meta["elapsed_s"] = time.time() - T0
        write_outputs(meta, rows)
        log(f"{family}: {'done' if finished else 'not finished (time limit)'}; {args.out}/benchmark.md written")
except Stop as e:
    stopped = str(e)
    if kb_proc is not None and kb_proc.poll() is None:  # stopped while reading kb's output
        kb_proc.kill()
    meta["families_cut"] = [f for f in families if f not in meta["families_done"]]
    meta["elapsed_s"] = time.time() - T0
    write_outputs(meta, rows)
    log(f"stopped by {stopped}: partial results in {args.out}/benchmark.md")

print("\n".join(write_outputs(meta, rows)), flush=True)
log(f"families done: {', '.join(meta['families_done']) or 'none'}"
    + (f"; not finished: {', '.join(meta['families_cut'])}" if meta["families_cut"] else ""))
sys.exit(3 if stopped or meta["families_cut"] else 0)
