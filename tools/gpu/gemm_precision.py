#!/usr/bin/env python3
"""What torch.matmul trades for speed on large GEMMs, measured on the GPU.

kb's cuBLASLt plans allow split-K reductions only in fp32 (the compute type);
PyTorch by default lets cuBLAS reduce split-K partials in fp16/bf16
(torch.backends.cuda.matmul.allow_{fp16,bf16}_reduced_precision_reduction).
This script times torch.matmul both ways on the shapes where kb trailed it,
and judges torch's outputs against an fp64 product with FlashInfer-Bench's
rule (an element fails when abs > 1e-2 and rel > 1e-2), so the comparison in
compare_torch.py can be read knowing which precision each side ran at.

usage: python3 tools/gpu/gemm_precision.py --out DIR   (GPU machine, torch)
"""
import argparse
import json
import statistics

import torch

from torch_timing import time_like_kb

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
args = p.parse_args()

dev = torch.device("cuda")
L2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
flush_buf = torch.empty(2 * L2, dtype=torch.uint8, device=dev)
mm = torch.backends.cuda.matmul


def time_torch(fn, **_):
    """Median ms of fn() over cold samples, timed as kb times its kernels (torch_timing.py)."""
    return time_like_kb(fn, flush_buf, max_time_s=1.5)


def set_reduced(allowed):
    mm.allow_fp16_reduced_precision_reduction = allowed
    mm.allow_bf16_reduced_precision_reduction = allowed


def fib_failures(out, ref64):
    """(failing elements, max abs error) under FlashInfer-Bench's rule."""
    diff = (out.double() - ref64).abs()
    rel = diff / (ref64.abs() + 1e-8)
    bad = (diff > 1e-2) & (rel > 1e-2)
    return int(bad.sum()), float(diff.max())


# (N, K, M): the rows over 1.03 in benchmarks/h100-2026-11-24/compare_gemm_*.md
shapes = [(4096, 4096, 2048), (28672, 4096, 512), (28672, 4096, 8192), (5376, 21504, 512), (5376, 21504, 8192),
          (3072, 8192, 2048), (7168, 5120, 2048), (10240, 8192, 8192)]
rows = []
torch.manual_seed(0)
for n, k, m in shapes:
    A = torch.randn(m, k, dtype=torch.float16, device=dev)
    B = torch.randn(n, k, dtype=torch.float16, device=dev)
    row = {"N": n, "K": k, "M": m}
    for allowed in (True, False):
        set_reduced(allowed)
        key = "reduced" if allowed else "fp32_reduction"
        row[f"ms_{key}"] = time_torch(lambda: torch.matmul(A, B.T))
    if k * m * n <= 8192 * 5376 * 21504 and m >= 2048:
        ref = A.double() @ B.double().T
        for allowed in (True, False):
            set_reduced(allowed)
            key = "reduced" if allowed else "fp32_reduction"
            row[f"fails_{key}"], row[f"max_abs_{key}"] = fib_failures(torch.matmul(A, B.T), ref)
        # the fp32 CUDA-core product (no tensor cores), as kb's GPU oracle computed it before fp64
        tf32 = mm.allow_tf32
        mm.allow_tf32 = False
        row["fails_fp32_simt"], row["max_abs_fp32_simt"] = fib_failures((A.float() @ B.float().T).half(), ref)
        mm.allow_tf32 = tf32
        del ref
    set_reduced(True)
    row["ratio_default_over_fp32_reduction"] = row["ms_reduced"] / row["ms_fp32_reduction"]
    print(json.dumps(row), flush=True)
    rows.append(row)
    del A, B
    torch.cuda.empty_cache()

meta = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "cublas": torch.backends.cuda.preferred_blas_library().name if hasattr(torch.backends.cuda,
                                                                             "preferred_blas_library") else "?"}
with open(f"{args.out}/gemm_precision.json", "w") as f:
    json.dump({"meta": meta, "rows": rows}, f, indent=1)
print(json.dumps(meta))
