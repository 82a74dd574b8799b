"""Goldens for the MoE definitions: python3 tests/goldens/make/moe.py [--as-is] DEFINITIONS_DIR OUT_DIR

For every DEFINITIONS_DIR/moe/*.json, runs the definition's own PyTorch `reference` on small
inputs and writes OUT_DIR/<definition>.safetensors (golden_lib.save; OUT_DIR is usually
tests/goldens/moe). Needs PyTorch (CPU is enough), numpy and safetensors.

The shipped MoE definitions are too big to run whole: their weights alone hold 0.4 to 17
billion elements (e384 h7168 i2048: 16.9 G fp8; fp4 e128 h5120 i8192: 16.1 G float32), which
neither the reference on a workstation nor the C++ test in CI can hold. So each golden is of a
scaled-down copy of the definition: the same JSON and the same reference code, with the
constants that set sizes (H, I, E, E_global and the matching axes and asserts) made small and
TOP_K, N_GROUP, TOPK_GROUP and BLOCK kept. The copy is named <definition>_golden and stored
whole in the metadata ("definition_json"; "scaled_from" names the shipped one), so the C++
test (tests/kernels/test_moe.cpp) runs kb's oracle on exactly what the reference ran and
checks that kb reads the shipped definition as the same form.

Inputs: weights, activations and their scales are kb-golden-v1 generated (golden_lib);
routing_logits are stored, a random permutation of distinct values per token (so no top-k
has a tie, whose order torch leaves unspecified); routing_bias, topk_ids (distinct experts per
token, positive bfloat16 weights) and the scalars are stored too. seq_len = 5.

--as-is: goldens of DEFINITIONS_DIR/*.json unchanged (kb's bundled MoE definitions, small
already, whose references kb wrote: kernels/moe/definitions -> tests/goldens/moe/bundled).
"""
import glob
import json
import os
import re
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_lib  # noqa: E402

TOKENS = 5
SEED = 20261205

# Scaled sizes: hidden and intermediate stay multiples of the 128 block for the fp8 block
# forms; the float-weight forms use sizes that leave a remainder past 8-wide lanes.
BLOCK_SIZES = {"hidden_size": 256, "intermediate_size": 128}
PLAIN_SIZES = {"hidden_size": 136, "intermediate_size": 72}
# Generated inputs' SCALE (values uniform in [-SCALE, SCALE]), chosen so outputs are O(1).
SCALES = {
    "hidden_states": 2.0,
    "hidden_states_scale": 1.0,
    "gemm1_weights": 1.0,
    "gemm1_weights_scale": 1.0,
    "gemm2_weights": 1.0,
    "gemm2_weights_scale": 1.0,
    "output1_scales_scalar": 0.4,
    "output1_scales_gate_scalar": 0.4,
    "output2_scales_scalar": 0.4,
}
PLAIN_WEIGHT_SCALE = 0.3


def _experts(d):
    """(global experts, local experts) of the scaled copy, with the routing shape kept."""
    ax = d["axes"]
    ref = d["reference"]
    ng = re.search(r"^\s*N_GROUP\s*=\s*(\d+)", ref, re.M)
    if "num_local_experts" in ax and "num_experts" in ax:  # DeepSeek: global and local
        n_group = int(ng.group(1)) if ng else 1
        glob_e = max(32, n_group * 4)
        local = glob_e if ax["num_local_experts"]["value"] == ax["num_experts"]["value"] else glob_e // 4
        return glob_e, local
    e = ax.get("num_experts", ax.get("num_local_experts"))["value"]
    small = min(e, 32) if e != 64 else 24
    return small, small


def scaled(d):
    """The scaled-down copy of definition d (a dict) and its size map."""
    out = json.loads(json.dumps(d))
    blocks = "hidden_states_scale" in d["inputs"]
    sizes = dict(BLOCK_SIZES if blocks else PLAIN_SIZES)
    H, I = sizes["hidden_size"], sizes["intermediate_size"]
    glob_e, local = _experts(d)
    ax = out["axes"]
    old = {k: v.get("value") for k, v in ax.items()}
    new = {"hidden_size": H, "intermediate_size": I, "gemm1_out_size": 2 * I}
    if "num_experts" in ax and "num_local_experts" in ax:
        new.update(num_experts=glob_e, num_local_experts=local)
    elif "num_experts" in ax:
        new["num_experts"] = glob_e
    else:
        new["num_local_experts"] = glob_e
    if blocks:
        new.update(num_hidden_blocks=H // 128, num_intermediate_blocks=I // 128, num_gemm1_out_blocks=2 * I // 128)
    for k, v in new.items():
        if k in ax:
            ax[k]["value"] = v
    # The reference's size constants and asserts.
    ref = d["reference"]
    consts = {
        "H": (old["hidden_size"], H),
        "I": (old["intermediate_size"], I),
    }
    e_old = old.get("num_experts") or old.get("num_local_experts")
    consts["E"] = (e_old, new.get("num_experts", new.get("num_local_experts")))
    consts["E_global"] = (old.get("num_experts"), new.get("num_experts"))
    consts["E_local"] = (old.get("num_local_experts"), new.get("num_local_experts"))
    for name, (a, b) in consts.items():
        if a is None or b is None:
            continue
        ref = re.sub(rf"^(\s*{name}\s*=\s*){a}\b", rf"\g<1>{b}", ref, flags=re.M)
        ref = re.sub(rf"(assert\s+{name}\s*==\s*){a}\b", rf"\g<1>{b}", ref)
    out["reference"] = ref
    out["name"] = d["name"] + "_golden"
    out["description"] = f"Scaled-down copy of {d['name']} for kb's goldens. " + d.get("description", "")
    return out


def _reference(d):
    ns = {}
    exec(compile(d["reference"], d["name"] + ".reference", "exec"), ns)
    return ns["run"]


def _shape(d, spec, axes):
    return [axes[a] for a in spec["shape"]]


def make_one(d, out_dir, gen, as_is=False):
    s = d if as_is else scaled(d)
    axes = {k: v["value"] for k, v in s["axes"].items() if v["type"] == "const"}
    axes["seq_len"] = TOKENS
    inputs, generated, scales = {}, set(), {}
    E_route = None
    for name, spec in s["inputs"].items():
        dtype = getattr(torch, spec["dtype"])
        if spec["shape"] is None:
            if name == "local_expert_offset":
                ne, nl = axes.get("num_experts"), axes.get("num_local_experts")
                inputs[name] = (ne - nl) // 2 if ne and nl and ne != nl else 0
            elif name == "routed_scaling_factor":
                inputs[name] = 2.5
            else:
                raise ValueError(f"{d['name']}: no value for scalar {name}")
            continue
        shape = _shape(s, spec, axes)
        if name == "routing_logits":
            E_route = shape[1]
            rows = [torch.randperm(E_route, generator=gen).to(torch.float32) for _ in range(shape[0])]
            inputs[name] = ((torch.stack(rows) - E_route / 2) / 8).to(dtype)
        elif name == "routing_bias":
            inputs[name] = (torch.randn(shape, generator=gen) * 0.05).to(dtype)
        elif name == "topk_ids":
            T, K = shape
            E = axes.get("num_experts", axes.get("num_local_experts"))
            ids = torch.stack([torch.randperm(E, generator=gen)[:K] for _ in range(T)]).to(torch.int32)
            w = torch.softmax(torch.randn(T, K, generator=gen), dim=-1).to(torch.bfloat16)
            bits = w.view(torch.int16).to(torch.int32) & 0xFFFF
            inputs[name] = (ids << 16) | bits
        else:
            scale = SCALES.get(name, 1.0)
            if name.startswith("gemm") and spec["dtype"] == "float32" and "scale" not in name:
                scale = PLAIN_WEIGHT_SCALE
            inputs[name] = golden_lib.generated(s["name"], name, shape, dtype, scale=scale, device="cpu")
            generated.add(name)
            if scale != 1.0:
                scales[name] = scale
    run = _reference(s)
    names = list(s["inputs"].keys())
    import inspect
    params = list(inspect.signature(run).parameters)
    out = run(**{p: inputs[p] for p in params})
    if set(params) != set(names):
        raise ValueError(f"{d['name']}: reference parameters {params} differ from the inputs {names}")
    outputs = {"output": out}
    path = os.path.join(out_dir, d["name"] + ".safetensors")
    golden_lib.save(path, s["name"], {"seq_len": TOKENS}, inputs, outputs, generated, scales,
                    extra_meta={"definition_json": json.dumps(s), "scaled_from": d["name"]})
    o = out.float()
    return path, float(o.abs().max()), float((o.abs() < 0.1).float().mean())


def make(definitions_dir, out_dir, as_is=False):
    """Goldens of DEFINITIONS_DIR/moe/*.json (scaled down), or of DEFINITIONS_DIR/*.json as they are."""
    torch.use_deterministic_algorithms(True)
    gen = torch.Generator().manual_seed(SEED)
    os.makedirs(out_dir, exist_ok=True)
    pattern = os.path.join(definitions_dir, "*.json") if as_is else os.path.join(definitions_dir, "moe", "*.json")
    for f in sorted(glob.glob(pattern)):
        d = json.load(open(f))
        path, mx, zeros = make_one(d, out_dir, gen, as_is)
        print(f"{os.path.basename(path)} {os.path.getsize(path)} bytes, max |out| {mx:.3g}, fraction under 0.1 {zeros:.2f}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--as-is"]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        sys.exit(2)
    make(args[0], args[1], as_is="--as-is" in sys.argv)
