#!/usr/bin/env python3
"""A target program for Nsight Compute (tools/gpu/nsight_check.py): one of kb's
solutions called through the C ABI (ctypes, PyTorch tensors by DLPack), each
call behind the L2 flush kb's timer uses, so that ncu can time the kernel
under kb's conditions (run it with --cache-control none).

Why: ncu's own flush (--cache-control all) left kb's gemv 1-2 us slower than
kb's CUPTI kernel time on the same cold-L2 samples (H200, session 29: 21.2 us
against 19.6 on 7168 x 5120 at M = 1), at one SM clock whatever the GPU did
before each launch (0, 2 or 10 ms of copies, this program's first form, since
dropped: 1785-1802 MHz; session 26 had blamed the clock). A flush by writing
alone leaves dirty lines the kernel must write back (23.1 us here), which is
why kb writes its buffer and reads it back ("clean", lib/cuda/timing.hpp);
this does the same with torch: a buffer twice the L2 size filled, then summed.

usage: ncu_flushed_launches.py LIBKB DEFINITION.json SOLUTION AXIS=VALUE [--launches N]
                            [--flush clean|write|none]
Exit 0 when every call returned KB_OK, 1 otherwise, 2 on bad usage, 77 without torch or a GPU.
"""
import argparse
import ctypes
import json
import sys

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
try:
    import torch
    import torch.utils.dlpack
except ImportError as e:
    print(f"skipped: no torch ({e})")
    sys.exit(77)
if not torch.cuda.is_available():
    print("skipped: no CUDA device")
    sys.exit(77)

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

kb = ctypes.CDLL(args.lib)
kb.kb_context_create.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
kb.kb_definition_load_file.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
kb.kb_last_error.restype = ctypes.c_char_p
kb.kb_solution_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p,
                               ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                               ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p]
get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
get_pointer.restype = ctypes.c_void_p
get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
ctx, handle = ctypes.c_void_p(), ctypes.c_void_p()
if kb.kb_context_create(None, 1, ctypes.byref(ctx)) != 0 or \
        kb.kb_definition_load_file(ctx, args.definition.encode(), ctypes.byref(handle)) != 0:
    sys.exit(f"ncu_flushed_launches: {kb.kb_last_error().decode()}")
capsules = [torch.utils.dlpack.to_dlpack(t) for t in inputs + outputs]
ptrs = [get_pointer(c, b"dltensor") for c in capsules]
ins = (ctypes.c_void_p * len(inputs))(*ptrs[:len(inputs)])
outs = (ctypes.c_void_p * len(outputs))(*ptrs[len(inputs):])
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
