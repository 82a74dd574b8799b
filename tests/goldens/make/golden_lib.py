"""Shared pieces of the golden generator (run on the GPU machine with PyTorch).

A golden is one safetensors file per definition under tests/goldens/: the
definition's own PyTorch `reference`, run on small inputs, and its outputs.
Large float inputs are not stored: they are "generated" by kb-golden-v1, a
generator that the C++ test (tests/kernels/golden_inputs.cpp) reproduces bit
for bit, and listed in the file's metadata. Everything else (index tensors,
probabilities, scalars) is stored.

kb-golden-v1, for tensor NAME of definition DEF with N elements:
  seed   = FNV-1a 64-bit of the UTF-8 bytes of "DEF/NAME"
  z_i    = splitmix64 output for counter i: x = seed + (i + 1) * 0x9E3779B97F4A7C15 (mod 2^64);
           z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB; z ^= z >> 31
  u_i    = (z_i >> 40) / 2^24          (exact in float32, in [0, 1))
  v_i    = (2 * u_i - 1) * SCALE       (float32; SCALE = 1 unless the file says otherwise)
  value  = v_i rounded to the tensor's dtype (round-to-nearest-even, as torch's .to())
"""
import json
import os

import numpy as np
import torch
from safetensors.torch import save_file

MASK = (1 << 64) - 1


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for b in text.encode("utf-8"):
        h ^= b
        h = (h * 0x100000001B3) & MASK
    return h


def uniform01(definition, name, n):
    """float32 array u_i of kb-golden-v1."""
    seed = np.uint64(fnv1a64(f"{definition}/{name}"))
    with np.errstate(over="ignore"):
        i = np.arange(1, n + 1, dtype=np.uint64)
        x = seed + i * np.uint64(0x9E3779B97F4A7C15)
        z = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)


def generated(definition, name, shape, dtype, scale=1.0, device="cuda"):
    """The kb-golden-v1 tensor NAME of DEFINITION, as a torch tensor of DTYPE."""
    n = int(np.prod(shape)) if len(shape) else 1
    v = (np.float32(2.0) * uniform01(definition, name, n) - np.float32(1.0)) * np.float32(scale)
    t = torch.from_numpy(v.astype(np.float32)).reshape(shape)
    return t.to(device).to(dtype)


def save(path, definition, axes, inputs, outputs, generated_names, scales=None, extra_meta=None):
    """Writes one golden: stored inputs as 'in.NAME', outputs as 'out.NAME'.

    axes: every var axis value; generated_names: inputs not stored (kb-golden-v1);
    scales: name -> SCALE for generated inputs whose SCALE is not 1.
    """
    tensors = {}
    for k, v in inputs.items():
        if k in generated_names:
            continue
        if isinstance(v, torch.Tensor):
            tensors["in." + k] = v.detach().contiguous().cpu()
    for k, v in outputs.items():
        tensors["out." + k] = v.detach().contiguous().cpu()
    scalars = {k: v for k, v in inputs.items() if not isinstance(v, torch.Tensor)}
    meta = {
        "format": "kb-golden-v1",
        "definition": definition,
        "axes": json.dumps(axes),
        "generated": ",".join(sorted(generated_names)),
        "scales": json.dumps(scales or {}),
        "scalars": json.dumps(scalars),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
    }
    meta.update(extra_meta or {})
    save_file(tensors, path, metadata=meta)


def check_and_save(out_dir, definition, all_axes, var_axes, inputs, outputs, generated_names, scales, extra_meta,
                   max_bytes):
    """Checks every output of `definition` (a parsed definition) against its spec (shape under all_axes, dtype,
    no NaN), then saves the golden as OUT_DIR/<name>.safetensors (save()) and checks it stays under max_bytes.
    Returns the file's path."""
    name = definition["name"]
    for k, spec in definition["outputs"].items():
        t = outputs[k]
        want = [all_axes[a] for a in spec["shape"]]
        assert list(t.shape) == want, "%s: output %s has shape %s, expected %s" % (name, k, list(t.shape), want)
        assert t.dtype == getattr(torch, spec["dtype"]), "%s: output %s is %s" % (name, k, t.dtype)
        assert not torch.isnan(t.float()).any(), "%s: output %s has NaN" % (name, k)
    os.makedirs(out_dir, exist_ok=True)
    out_path = os.path.join(out_dir, name + ".safetensors")
    save(out_path, name, var_axes, inputs, outputs, generated_names, scales=scales, extra_meta=extra_meta)
    size = os.path.getsize(out_path)
    assert size < max_bytes, "%s: %d bytes" % (out_path, size)
    return out_path
