#!/usr/bin/env python3
"""rmsnorm: call kb from Python with ctypes, on PyTorch tensors handed over without a copy through
DLPack: kb's RMSNorm (kb_cuda_rmsnorm on a GPU, on torch's current stream; kb_cpu_rmsnorm on the CPU)
writes into a tensor torch allocated, and the result is checked against the definition's reference
computed by torch.

  $ python3 rmsnorm.py build/capi/libkb.so.1 kernels/rmsnorm/definitions/rmsnorm_h4096.json [cpu|cuda|cuda:N]
  rmsnorm_h4096 on cuda:0: kb_cuda_rmsnorm, 5 x 4096 bfloat16: largest difference from torch 0.0 (allowed 0.01 + 0.01 |y|)

Exit status 0 when every element is within FlashInfer-Bench's tolerance, 1 on a kb error (the message
is kb_last_error(), which names the file) or a mismatch, 2 on bad usage, 77 without torch.
"""
import ctypes
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

libkb_path, definition = sys.argv[1], sys.argv[2]
device = torch.device(sys.argv[3] if len(sys.argv) == 4 else ("cuda" if torch.cuda.is_available() else "cpu"))
kb = ctypes.CDLL(libkb_path)
KB_ABI_VERSION, KB_OK = 1, 0
kb.kb_context_create.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
kb.kb_context_destroy.argtypes = [ctypes.c_void_p]
kb.kb_definition_load_file.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
kb.kb_definition_destroy.argtypes = [ctypes.c_void_p]
kb.kb_definition_name.argtypes = [ctypes.c_void_p]
kb.kb_definition_name.restype = ctypes.c_char_p
kb.kb_status_string.argtypes = [ctypes.c_int]
kb.kb_status_string.restype = ctypes.c_char_p
kb.kb_last_error.restype = ctypes.c_char_p
kb.kb_solution_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p,
                               ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                               ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p]

# A DLPack capsule holds a DLManagedTensor*, whose first member is the DLTensor kb reads.
get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
get_pointer.restype = ctypes.c_void_p
get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def check(what, status):
    if status != KB_OK:
        print(f"kb_example_rmsnorm_python: {what}: {kb.kb_status_string(status).decode()}: "
              f"{kb.kb_last_error().decode()}", file=sys.stderr)
        sys.exit(1)


ctx, definition_handle = ctypes.c_void_p(), ctypes.c_void_p()
check("kb_context_create", kb.kb_context_create(None, KB_ABI_VERSION, ctypes.byref(ctx)))
check("cannot load the definition", kb.kb_definition_load_file(ctx, definition.encode(), ctypes.byref(definition_handle)))

rows, hidden, eps = 5, 4096, 1e-5
gen = torch.Generator().manual_seed(7)
x = (torch.rand(rows, hidden, generator=gen) * 4 - 2).to(torch.bfloat16).to(device)
w = (torch.rand(hidden, generator=gen) + 0.5).to(torch.bfloat16).to(device)
y = torch.full((rows, hidden), float("nan"), dtype=torch.bfloat16, device=device)  # a call writing nothing fails

capsules = [torch.utils.dlpack.to_dlpack(t) for t in (x, w, y)]  # alive until the call returns
tensors = [get_pointer(c, b"dltensor") for c in capsules]
inputs = (ctypes.c_void_p * 2)(tensors[0], tensors[1])
outputs = (ctypes.c_void_p * 1)(tensors[2])
solution = b"kb_cuda_rmsnorm" if device.type == "cuda" else b"kb_cpu_rmsnorm"
stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else None
check("kb_solution_run", kb.kb_solution_run(ctx, definition_handle, solution, inputs, 2, outputs, 1, stream))
if device.type == "cuda":
    torch.cuda.current_stream(device).synchronize()  # kb launched on torch's stream and did not wait

# The definition's reference, in torch.
xf = x.float()
want = (xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * w.float()).to(torch.bfloat16).float()
got = y.float()
diff = (got - want).abs()
name = kb.kb_definition_name(definition_handle).decode()
kb.kb_definition_destroy(definition_handle)
kb.kb_context_destroy(ctx)
if not bool((diff <= 0.01 + 0.01 * want.abs()).all()):
    bad = int((diff > 0.01 + 0.01 * want.abs()).sum())
    print(f"kb_example_rmsnorm_python: {bad} elements differ from torch (largest {float(diff.nan_to_num(1e9).max())})",
          file=sys.stderr)
    sys.exit(1)
print(f"{name} on {device}: {solution.decode()}, {rows} x {hidden} bfloat16: largest difference from torch "
      f"{float(diff.max())} (allowed 0.01 + 0.01 |y|)")
