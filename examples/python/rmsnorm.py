#!/usr/bin/env python3
"""rmsnorm: call kb from Python with ctypes, on PyTorch tensors handed over without a copy through
DLPack: kb's RMSNorm (kb_cuda_rmsnorm on a GPU, on torch's current stream; kb_cpu_rmsnorm on the CPU)
writes into a tensor torch allocated, and the result is checked against the definition's reference
computed by torch. The ctypes declarations live in kb.py beside it (the `kb` module).

  $ python3 rmsnorm.py build/capi/libkb.so.1 kernels/rmsnorm/definitions/rmsnorm_h4096.json [cpu|cuda|cuda:N]
  rmsnorm_h4096 on cuda:0: kb_cuda_rmsnorm, 5 x 4096 bfloat16: largest difference from torch 0.0 (allowed 0.01 + 0.01 |y|)

Exit status 0 when every element is within FlashInfer-Bench's tolerance, 1 on a kb error (the message
is kb_last_error(), which names the file) or a mismatch, 2 on bad usage, 77 without torch.
"""
import sys

if len(sys.argv) not in (3, 4):
    print(f"usage: {sys.argv[0]} LIBKB.so RMSNORM_DEFINITION.json [cpu|cuda|cuda:N]", file=sys.stderr)
    sys.exit(2)
try:
    import torch
    import torch.utils.dlpack
except ImportError as e:
    print(f"skipped: no torch ({e})")
    sys.exit(77)

import kb  # examples/python/kb.py: libkb's ABI through ctypes

libkb_path, definition = sys.argv[1], sys.argv[2]
device = torch.device(sys.argv[3] if len(sys.argv) == 4 else ("cuda" if torch.cuda.is_available() else "cpu"))
try:
    lib = kb.Library(libkb_path)
    ctx = lib.context()
    try:
        d = ctx.load_definition(definition)
    except kb.Error as e:
        raise kb.Error("cannot load the definition", e.status, e.status_name, e.message) from None

    rows, hidden, eps = 5, 4096, 1e-5
    gen = torch.Generator().manual_seed(7)
    x = (torch.rand(rows, hidden, generator=gen) * 4 - 2).to(torch.bfloat16).to(device)
    w = (torch.rand(hidden, generator=gen) + 0.5).to(torch.bfloat16).to(device)
    y = torch.full((rows, hidden), float("nan"), dtype=torch.bfloat16, device=device)  # a call writing nothing fails

    # torch's tensors go to kb as DLPack capsules, read in place without a copy.
    inputs = [torch.utils.dlpack.to_dlpack(x), torch.utils.dlpack.to_dlpack(w)]
    outputs = [torch.utils.dlpack.to_dlpack(y)]
    d.check(inputs, outputs)
    solution = "kb_cuda_rmsnorm" if device.type == "cuda" else "kb_cpu_rmsnorm"
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else None
    ctx.run(d, solution, inputs, outputs, stream)
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()  # kb launched on torch's stream and did not wait
except kb.Error as e:
    print(f"kb_example_rmsnorm_python: {e}", file=sys.stderr)
    sys.exit(1)

# The definition's reference, in torch.
xf = x.float()
want = (xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * w.float()).to(torch.bfloat16).float()
got = y.float()
diff = (got - want).abs()
name = d.name
d.close()
ctx.close()
if not bool((diff <= 0.01 + 0.01 * want.abs()).all()):
    bad = int((diff > 0.01 + 0.01 * want.abs()).sum())
    print(f"kb_example_rmsnorm_python: {bad} elements differ from torch (largest {float(diff.nan_to_num(1e9).max())})",
          file=sys.stderr)
    sys.exit(1)
print(f"{name} on {device}: {solution}, {rows} x {hidden} bfloat16: largest difference from torch "
      f"{float(diff.max())} (allowed 0.01 + 0.01 |y|)")
