"""Goldens for the gemm, rmsnorm, rope and sampling definitions.

make(definitions_dir, out_dir) runs every definition's own PyTorch `reference`
under DEFINITIONS_DIR/{gemm,rmsnorm,rope,sampling}/*.json on small inputs and
writes OUT_DIR/<definition>.safetensors with golden_lib.save(). Needs PyTorch
(a CUDA GPU when there is one; the CPU otherwise), numpy and safetensors.

What each golden holds (var axes small, big float inputs never stored):
  gemm      M = 3. A and B are kb-golden-v1 generated (SCALE 1), so the
            [N, K] weights (up to 28672 x 4096) are rebuilt by the C++ test,
            not stored; only out.C [3, N] is. TF32 and reduced-precision
            fp16/bf16 reductions are turned off, so the reference accumulates
            in fp32 like the oracle.
  rmsnorm   batch_size = 4; hidden_states, residual and weight generated.
  rope      num_tokens = 5, num_qo_heads = 4, num_kv_heads = 2,
            max_seq_len = 64; q, k and cos_sin_cache generated (the cache
            holds uniform values, not real cos/sin: the arithmetic is what is
            tested); positions stored (int64, including 0 and max_seq_len - 1).
  sampling  batch_size = 2. probs would be 0.5-1 MB a row, too much for 18
            files, and cannot be kb-golden-v1 values (they must sum to 1). So
            probs is listed as generated AND in the metadata key "softmax":
            probs = softmax over the vocabulary, computed in float64 and
            rounded to float32, of the kb-golden-v1 tensor "probs" with
            SCALE = vocab_size / 16 (the top tokens' logits then lie about
            1/8 apart, so about 20 tokens hold 90% of the mass and a
            4096-draw histogram is a fair estimate of the distribution). The
            C++ test rebuilds probs the same way; a last-bit difference in exp()
            is harmless because sampling is judged by distribution, not bits.
            top_k / top_p are stored (row 0 filters, row 1 exercises the
            reference's "no filtering" or argmax branch). The reference is run
            on 4096 copies of each row (in chunks of 512, torch seeded) and
            its draws are stored as out.samples with shape [batch, 4096];
            metadata "check" = "distribution" and "draws" = "4096" say so.
            The C++ test checks every draw lies in the oracle's support and
            the total variation distance to the oracle's distribution is < 0.2.

Sizes (measured on an H200, torch 2.11): gemm 3 * N * 2 bytes (1-230 KB, 1.5 MB for all 28), rmsnorm
4 * hidden * 2 (1-57 KB, 0.37 MB for 13), rope 8 KB, sampling 66 KB each (1.2 MB for 18):
3.08 MB for the 60 files; generating them takes about 2 minutes.
"""
import glob
import json
import os

import torch

import golden_lib

OPS = ("gemm", "rmsnorm", "rope", "sampling")
DRAWS = 4096
CHUNK = 512


def _device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def _dtype(name):
    return getattr(torch, name)


def _reference(definition):
    namespace = {}
    exec(compile(definition["reference"], definition["name"] + ".reference", "exec"), namespace)
    return namespace["run"]


def _axes(definition, var):
    """Every axis bound: const values from the definition, var ones from `var`."""
    out = {}
    for name, axis in definition["axes"].items():
        if axis["type"] == "const":
            out[name] = axis["value"]
        else:
            if name not in var:
                raise ValueError(f"{definition['name']}: no value chosen for var axis {name}")
            out[name] = var[name]
    return out


def _shape(spec, axes):
    return [axes[a] for a in spec["shape"]]


def _as_tuple(result):
    return result if isinstance(result, (tuple, list)) else (result,)


def _save(out_dir, definition, var, inputs, outputs, generated, scales=None, extra_meta=None):
    path = os.path.join(out_dir, definition["name"] + ".safetensors")
    golden_lib.save(path, definition["name"], var, inputs, outputs, generated, scales, extra_meta)
    return path


def _plain(definition, var, out_dir, stored=None):
    """Float inputs generated, `stored` (name -> tensor) stored; outputs as returned."""
    device = _device()
    axes = _axes(definition, var)
    stored = stored or {}
    inputs, generated = {}, []
    for name, spec in definition["inputs"].items():
        if name in stored:
            inputs[name] = stored[name].to(device)
            continue
        if spec["shape"] is None:
            raise ValueError(f"{definition['name']}: scalar input {name} has no chosen value")
        inputs[name] = golden_lib.generated(definition["name"], name, _shape(spec, axes),
                                            _dtype(spec["dtype"]), device=device)
        generated.append(name)
    run = _reference(definition)
    result = _as_tuple(run(*inputs.values()))
    names = list(definition["outputs"].keys())
    if len(result) != len(names):
        raise ValueError(f"{definition['name']}: reference returned {len(result)} values for {len(names)} outputs")
    outputs = dict(zip(names, result))
    return _save(out_dir, definition, var, inputs, outputs, generated)


def _gemm(definition, out_dir):
    return _plain(definition, {"M": 3}, out_dir)


def _rmsnorm(definition, out_dir):
    return _plain(definition, {"batch_size": 4}, out_dir)


def _rope(definition, out_dir):
    var = {"num_tokens": 5, "num_qo_heads": 4, "num_kv_heads": 2, "max_seq_len": 64}
    positions = torch.tensor([0, 1, 17, 63, 42], dtype=_dtype(definition["inputs"]["positions"]["dtype"]))
    return _plain(definition, var, out_dir, stored={"positions": positions})


def _sampling(definition, out_dir):
    device = _device()
    name = definition["name"]
    var = {"batch_size": 2}
    axes = _axes(definition, var)
    vocab = axes["vocab_size"]
    inputs_spec = definition["inputs"]
    scale = vocab / 16.0
    logits = golden_lib.generated(name, "probs", [2, vocab], torch.float32, scale=scale, device="cpu")
    probs = torch.softmax(logits.double(), dim=-1).to(torch.float32)
    inputs = {"probs": probs.to(_dtype(inputs_spec["probs"]["dtype"]))}
    has_k, has_p = "top_k" in inputs_spec, "top_p" in inputs_spec
    if has_k and has_p:
        ks, ps = [10, 0], [0.8, 0.0]   # row 1: no top-k (k = 0), then top_p <= 0 -> argmax
    else:
        ks, ps = [8, 0], [0.9, 0.5]    # top_k row 1: k = 0, no filtering
    if has_k:
        inputs["top_k"] = torch.tensor(ks, dtype=_dtype(inputs_spec["top_k"]["dtype"]))
    if has_p:
        inputs["top_p"] = torch.tensor(ps, dtype=_dtype(inputs_spec["top_p"]["dtype"]))
    order = list(inputs_spec.keys())
    run = _reference(definition)
    torch.manual_seed(0)
    draws = []
    for row in range(2):
        got = []
        for start in range(0, DRAWS, CHUNK):
            n = min(CHUNK, DRAWS - start)
            args = [inputs[k][row:row + 1].to(device).expand(n, *inputs[k].shape[1:]).contiguous() for k in order]
            got.append(_as_tuple(run(*args))[0].to(torch.int64).cpu())
        draws.append(torch.cat(got))
    samples = torch.stack(draws)  # [batch, DRAWS]
    extra = {"softmax": "probs", "check": "distribution", "draws": str(DRAWS)}
    return _save(out_dir, definition, var, inputs, {"samples": samples}, ["probs"], {"probs": scale}, extra)


MAKERS = {"gemm": _gemm, "rmsnorm": _rmsnorm, "rope": _rope, "sampling": _sampling}


def make(definitions_dir, out_dir):
    """Writes one golden per gemm/rmsnorm/rope/sampling definition; returns the paths."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for op in OPS:
        for path in sorted(glob.glob(os.path.join(definitions_dir, op, "*.json"))):
            with open(path) as f:
                definition = json.load(f)
            if definition.get("op_type") != op:
                continue
            paths.append(MAKERS[op](definition, out_dir))
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    return paths
