#!/usr/bin/env python3
"""kb's gemm against torch.matmul, timed in one process, in alternation, by one procedure (issue 4).

compare_torch.py times torch, then runs `kb bench` in another process, then times torch again. Between those
passes the H200's SM clock moves: in session 34 torch's own time moved by up to 13% between its two passes of
one shape (lowest kept batch clock 1790 against 1498 MHz), so a kb / torch ratio near 1.03 says as much about
the clock as about the kernels. This tool takes the clock out of the ratio as far as one process can:
  - kb's solution runs through kb's C ABI (kb_solution_run, ctypes, DLPack) on torch's tensors and current
    stream, as examples/python/rmsnorm.py does; both sides are then timed by torch_timing.time_like_kb with
    graph=True: the same L2 flush, CUDA graph replay, batches and throttle handling for both;
  - ROUNDS rounds per shape, each timing kb and torch once, back to back, the order alternating (kb first in
    even rounds), so both meet the same clock drift; the ratio is the median of the rounds' kb / torch, its
    spread the rounds' lowest and highest;
  - kb's output is checked before any timing against the product computed in fp64 from the same fp16/bf16
    operands (|kb - ref| <= 0.01 + 0.01 |ref|, FlashInfer-Bench's gemm tolerance); a shape whose check fails is
    reported FAILED and not timed. torch.matmul's own misses under the same rule are recorded beside it (in
    session 35 torch.matmul itself missed on 8 and 10 elements of 8192 x 28672 at M = 4096 and 1024, when kb
    was checked against it: torch lets cuBLAS reduce split-K partial sums in fp16).
kb bench's own table stays the benchmark of record (its timer is kb's C++ one); this one says how much of a
ratio is the kernels.

usage: interleaved_ratio.py --lib LIBKB.so --definitions DIR --out DIR [--values 256,1024] [--only NAMES]
                            [--rounds 3] [--solution kb_cuda_gemm] [--time-limit SECONDS]
Writes OUT/interleaved.md and OUT/interleaved.json (rewritten after every shape, so a cut run keeps what it
measured). Exit 0 when every shape ran and PASSED, 1 otherwise, 2 on bad usage, 77 without torch or a GPU.
"""
import argparse
import ctypes
import glob
import json
import os
import statistics
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--lib", required=True, help="libkb.so.1")
p.add_argument("--definitions", required=True, help="FlashInfer-Bench definitions dir (its gemm/*.json)")
p.add_argument("--out", required=True)
p.add_argument("--values", default="128,256,512,1024,2048,4096,8192", help="comma-separated M")
p.add_argument("--only", default="", help="comma-separated definition names (default: every gemm definition)")
p.add_argument("--rounds", type=int, default=3)
p.add_argument("--solution", default="kb_cuda_gemm")
p.add_argument("--max-time", type=float, default=0.5, help="seconds per timing (time_like_kb's max_time_s)")
p.add_argument("--time-limit", type=float, default=0, help="seconds: start no shape after this; 0: none")
args = p.parse_args()
if args.rounds < 1:
    p.error("--rounds must be at least 1")
try:
    values = [int(v) for v in args.values.split(",") if v]
except ValueError:
    p.error(f"--values is a comma-separated list of integers; got {args.values!r}")
if not values or min(values) < 1:
    p.error("--values needs at least one M >= 1")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kb_capi  # noqa: E402 (kb's C ABI through ctypes)

torch = kb_capi.torch_cuda_or_skip()
from torch_timing import time_like_kb  # noqa: E402 (the procedure both sides are timed by)

T0 = time.time()


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')} +{time.time() - T0:6.1f}s] {msg}", flush=True)


kb = kb_capi.load(args.lib)
KbError = kb_capi.KbError
ctx = kb_capi.context(kb)

dev = torch.device("cuda")
props = torch.cuda.get_device_properties(dev)
flush_buf = torch.empty(2 * getattr(props, "L2_cache_size", 50 << 20), dtype=torch.uint8, device=dev)
torch_dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}

defs = []
for path in sorted(glob.glob(os.path.join(args.definitions, "gemm", "*.json"))):
    with open(path) as fh:
        d = json.load(fh)
    if args.only and d["name"] not in args.only.split(","):
        continue
    defs.append((path, d))
if not defs:
    print(f"interleaved_ratio.py: no gemm definition under {args.definitions}/gemm"
          + (f" named {args.only}" if args.only else ""), file=sys.stderr)
    sys.exit(2)

solution = args.solution.encode()
rows = []


def write_outputs(cut):
    os.makedirs(args.out, exist_ok=True)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "solution": args.solution,
            "rounds": args.rounds, "max_time_s": args.max_time, "cut": cut, "elapsed_s": time.time() - T0}
    with open(os.path.join(args.out, "interleaved.json"), "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1)
    lines = [f"# {args.solution} against torch.matmul, interleaved in one process, on {meta['device']}", "",
             f"torch {meta['torch']}. Each shape: {args.rounds} rounds, each timing kb (through kb_solution_run on "
             "torch's stream) and torch.matmul once, back to back, the order alternating; both timed by "
             "torch_timing.time_like_kb(graph=True): L2 flushed before each sample, batches replayed from a CUDA "
             "graph, throttled batches set aside. ratio: the median of the rounds' kb / torch; spread: the rounds' "
             "lowest and highest. clocks: the lowest kept batch clock (MHz) of each side over the rounds. torch.matmul's "
             "misses: its elements off the fp64 product by more than 0.01 + 0.01 |y| (kb's must be 0)."
             + (" The run was cut by its time limit." if cut else ""), "",
             "| definition | M | status | kb ms | torch ms | ratio | spread | clocks kb / torch | graph | torch.matmul's misses |",
             "| --- | ---: | --- | ---: | ---: | ---: | --- | --- | --- | ---: |"]
    for r in rows:
        if r["status"] != "PASSED":
            lines.append(f"| {r['definition']} | {r['M']} | {r['status']} | - | - | - | - | - | {r.get('why', '')} | "
                         f"{r.get('torch_misses', '-')} |")
            continue
        lines.append(f"| {r['definition']} | {r['M']} | PASSED | {r['kb_ms']:.4f} | {r['torch_ms']:.4f} | "
                     f"{r['ratio']:.3f} | {min(r['round_ratios']):.3f}-{max(r['round_ratios']):.3f} | "
                     f"{min(r['kb_clocks'] or [0])} / {min(r['torch_clocks'] or [0])} | "
                     f"{'yes' if r['graph'] else 'no: ' + r.get('not_graph', '')} | {r.get('torch_misses', '-')} |")
    with open(os.path.join(args.out, "interleaved.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


cut = False
status = 0
try:
    for path, d in defs:
        def_handle = kb_capi.definition(kb, ctx, path)
        N, K = d["axes"]["N"]["value"], d["axes"]["K"]["value"]
        dt = torch_dtype[d["inputs"]["A"]["dtype"]]
        for M in values:
            if args.time_limit and time.time() - T0 > args.time_limit:
                cut = True
                break
            row, want = {"definition": d["name"], "M": M}, None
            A = torch.randn(M, K, dtype=dt, device=dev)
            B = torch.randn(N, K, dtype=dt, device=dev)
            C = torch.full((M, N), float("nan"), dtype=dt, device=dev)  # a call that writes nothing fails
            capsules = [torch.utils.dlpack.to_dlpack(t) for t in (A, B, C)]  # alive while the shape is timed
            dl = [kb_capi.dltensor_ptr(c) for c in capsules]
            ins, outs = kb_capi.pointers(dl[:2]), kb_capi.pointers(dl[2:])

            def kb_call():
                # torch's current stream at call time: the capture stream inside a graph capture
                kb_capi.check(kb, "kb_solution_run", kb.kb_solution_run(
                    ctx, def_handle, solution, ins, 2, outs, 1, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)))

            def torch_call():
                return torch.matmul(A, B.T)

            try:
                kb_call()  # the first call plans (kb's race, cuBLASLt's autotuning) outside any capture
                want = A.double() @ B.double().T  # the trusted product: fp64 from the same operands

                def misses(got):
                    return int(((got.double() - want).abs() > 0.01 + 0.01 * want.abs()).sum())

                bad = misses(C)
                row["torch_misses"] = misses(torch_call())
                torch.cuda.synchronize()
                if bad:
                    row.update(status="FAILED", why=f"{bad} elements off the fp64 product by more than 0.01 + 0.01 |y|")
                else:
                    kb_ms, torch_ms, ratios, kb_clocks, torch_clocks, graphs = [], [], [], [], [], []
                    for r in range(args.rounds):
                        order = ("kb", "torch") if r % 2 == 0 else ("torch", "kb")
                        got = {}
                        for side in order:
                            ms = time_like_kb(kb_call if side == "kb" else torch_call, flush_buf,
                                              max_time_s=args.max_time, graph=True)
                            last = dict(time_like_kb.last)
                            got[side] = ms
                            (kb_clocks if side == "kb" else torch_clocks).append(last.get("sm_clock_lowest_kept_mhz", 0))
                            graphs.append(last.get("graph", False) or last.get("not_graph", "?"))
                        kb_ms.append(got["kb"])
                        torch_ms.append(got["torch"])
                        ratios.append(got["kb"] / got["torch"])
                    not_graphed = [g for g in graphs if g is not True]
                    row.update(status="PASSED", kb_ms=statistics.median(kb_ms), torch_ms=statistics.median(torch_ms),
                               ratio=statistics.median(ratios), round_ratios=ratios, kb_round_ms=kb_ms,
                               torch_round_ms=torch_ms, kb_clocks=[c for c in kb_clocks if c],
                               torch_clocks=[c for c in torch_clocks if c], graph=not not_graphed,
                               **({"not_graph": str(not_graphed[0])[:200]} if not_graphed else {}))
            except KbError as e:
                row.update(status="ERROR", why=str(e)[:300])
            if row["status"] != "PASSED":
                status = 1
            rows.append(row)
            log(f"{d['name']} M={M}: {row['status']}"
                + (f" kb {row['kb_ms']:.4f} ms torch {row['torch_ms']:.4f} ms ratio {row['ratio']:.3f} "
                   f"({min(row['round_ratios']):.3f}-{max(row['round_ratios']):.3f})" if row["status"] == "PASSED"
                   else f": {row.get('why', '')}"))
            write_outputs(cut)
            A = B = C = want = capsules = ins = outs = None  # this shape's memory back before the next
            torch.cuda.empty_cache()
        kb.kb_definition_destroy(def_handle)
        if cut:
            break
finally:
    write_outputs(cut)
log(f"{len(rows)} shapes, {sum(r['status'] == 'PASSED' for r in rows)} PASSED" + ("; cut by the time limit" if cut else ""))
sys.exit(1 if cut or status else 0)
