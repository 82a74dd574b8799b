#!/usr/bin/env python3
"""A target program for Nsight Compute (bench/nsight_check.py): one of kb's
solutions called through the C ABI (ctypes, PyTorch tensors by DLPack), each
call behind the L2 flush kb's timer uses, so that ncu can time the kernel
under kb's conditions (run it with --cache-control none).

Why: ncu's own flush (--cache-control all) left kb's gemv 1-2 us slower than
kb's CUPTI kernel time on the same cold-L2 samples (H200: 21.2 us against 19.6
on 7168 x 5120 at M = 1), at one SM clock whatever the GPU did before each
launch (0, 2 or 10 ms of copies before it: 1785-1802 MHz either way), so the
clock does not explain it. A flush by writing
alone leaves dirty lines the kernel must write back (23.1 us here), which is
why kb writes its buffer and reads it back ("clean", lib/cuda/timing.hpp);
this does the same with torch: a buffer twice the L2 size filled, then summed.

usage: ncu_flushed_launches.py LIBKB DEFINITION.json SOLUTION AXIS=VALUE [--launches N]
                            [--flush clean|write|none]
Exit 0 when every call returned KB_OK, 1 otherwise, 2 on bad usage, 77 without torch or a GPU.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kb_capi  # noqa: E402 (kb's C ABI through ctypes)

p = argparse.ArgumentParser()
p.add_argument("lib")
p.add_argument("definition")
p.add_argument("solution")
p.add_argument("axes", nargs="+", help="AXIS=VALUE for each var axis")
p.add_argument("--launches", type=int, default=20)
p.add_argument("--flush", default="clean", choices=["clean", "write", "none"],
               help="before each call: a buffer twice the L2 size written, then read (clean, kb's default), "
                    "written only (write), or nothing")
args = p.parse_args()
torch = kb_capi.torch_cuda_or_skip()

d = json.load(open(args.definition))
values = {k: v["value"] for k, v in d["axes"].items() if v.get("type") == "const"}
for a in args.axes:
    k, _, v = a.partition("=")
    values[k] = int(v)
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def make(spec, fill):
    shape = [values[s] if isinstance(s, str) else s for s in (spec.get("shape") or [])]
    t = torch.empty(shape, dtype=DTYPES[spec["dtype"]], device="cuda")
    if fill:
        t.normal_(0, 0.5)
    return t


inputs = [make(s, True) for s in d["inputs"].values()]
outputs = [make(s, False) for s in d["outputs"].values()]

kb = kb_capi.load(args.lib)
try:
    ctx = kb_capi.context(kb)
    handle = kb_capi.definition(kb, ctx, args.definition)
except kb_capi.KbError as e:
    sys.exit(f"ncu_flushed_launches: {e}")
capsules = [torch.utils.dlpack.to_dlpack(t) for t in inputs + outputs]
ptrs = [kb_capi.dltensor_ptr(c) for c in capsules]
ins, outs = kb_capi.pointers(ptrs[:len(inputs)]), kb_capi.pointers(ptrs[len(inputs):])
stream = torch.cuda.current_stream().cuda_stream

flush_buf = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4, dtype=torch.float32,
                        device="cuda")
bad = 0
for i in range(args.launches + 1):  # the first call plans (cuBLASLt, kb's scratch): not one of the launches
    if args.flush != "none":
        flush_buf.fill_(float(i))
    if args.flush == "clean":
        flush_buf.sum()
    if kb.kb_solution_run(ctx, handle, args.solution.encode(), ins, len(inputs), outs, len(outputs), stream) != 0:
        print(f"ncu_flushed_launches: {kb.kb_last_error().decode()}", file=sys.stderr)
        bad += 1
        break
torch.cuda.synchronize()
print(f"{args.launches + 1} calls of {args.solution}, each behind the {args.flush} flush")
sys.exit(1 if bad else 0)
