"""Goldens for the linear-attention, state-space and sparse-attention op_types: gdn, mamba_ssu, dsa_paged.

    python3 tests/goldens/make/linear.py DEFINITIONS_DIR OUT_DIR     (OUT_DIR: tests/goldens/linear)

For every shipped definition of these op_types, runs the definition's own
PyTorch `reference` (CPU is enough: every reference computes in float32) on a
small call and writes OUT_DIR/<name>.safetensors with golden_lib.save().

Real or scaled. The recurrent states are large (gdn: heads * 128 * 128 float32
per sequence, 2 MB at 32 value heads; mamba: 128 * 64 * 128 bf16 per slot),
and every output is stored, so a definition whose smallest useful call would
store more than MAX_FILE_BYTES is goldened as a scaled-down copy of itself:
the same JSON with smaller constant axes (head_size, or mamba's heads, head
dim and state size), a name saying so, and the constants asserted by its
reference rewritten to match. The copy's JSON travels in the golden's
metadata ("definition_json", with "scaled_from" naming the shipped one), and
tests/kernels/test_linear_goldens.cpp judges the oracle on that definition.

Inputs:
  - float inputs are kb-golden-v1 generated (not stored) with per-input SCALEs:
    gdn's k at sqrt(3 / K) so |k| ~ 1 (the model l2-normalizes q and k; an
    unnormalized k makes the delta rule diverge), dsa's queries at 4 so the
    softmax is far from uniform;
  - index inputs (initial_state_indices, state_batch_indices, cu_seqlens,
    sparse_indices, seq_lens, block_table) are stored, drawn from a random
    generator seeded by the definition's name; they include the edge cases the
    references define: -1 padding slots (mamba), a zero-length sequence (gdn
    prefill), padded and empty sparse-index rows (dsa), sequences shorter than
    top-k and of length 0 (indexer);
  - the indexer's fp8 key cache is stored in deep_gemm's packed layout, made
    as FlashInfer-Bench makes it from bf16 keys (per-token scale amax / 448);
  - optional inputs are sometimes passed as None (gdn's state), and
    intermediate_states_buffer (an in-place scratch, not an output) always is.
"""
import glob
import json
import math
import os
import random
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_lib  # noqa: E402

OP_TYPES = ("gdn", "mamba_ssu", "dsa_paged")
MAX_FILE_BYTES = 1100 * 1024

# Scaled copies: shipped name -> (new constant values, new name).
SCALED = {
    "gdn_decode_qk16_v32_d128_k_last": ({"head_size": 32}, "gdn_decode_qk16_v32_d32_k_last"),
    "gdn_mtp_qk8_v16_d128_k_last": ({"head_size": 32}, "gdn_mtp_qk8_v16_d32_k_last"),
    "gdn_mtp_qk16_v32_d128_k_last": ({"head_size": 32}, "gdn_mtp_qk16_v32_d32_k_last"),
    "gdn_prefill_qk16_v32_d128_k_last": ({"head_size": 32}, "gdn_prefill_qk16_v32_d32_k_last"),
    "mamba_ssu_decode_h128_d64_s128_ng8": ({"nheads": 32, "head_dim": 16, "dstate": 64, "ngroups": 2},
                                           "mamba_ssu_decode_h32_d16_s64_ng2"),
}
# The names a reference's asserts use for each axis.
ASSERT_ALIASES = {"head_size": ("K", "V", "head_size"), "nheads": ("nheads",), "head_dim": ("head_dim",),
                  "dstate": ("dstate",), "ngroups": ("ngroups",)}


def scaled_definition(d, changes, new_name):
    """A copy of definition d with constant axes changed and its reference's asserts to match."""
    d = json.loads(json.dumps(d))
    ref = d["reference"]
    for axis, value in changes.items():
        old = d["axes"][axis]["value"]
        d["axes"][axis]["value"] = value
        for alias in ASSERT_ALIASES[axis]:
            pattern = re.compile(r"(assert\b[^\n]*\b%s\s*==\s*)%d\b" % (re.escape(alias), old))
            while True:
                ref, n = pattern.subn(lambda m: m.group(1) + str(value), ref)
                if n == 0:
                    break
    d["reference"] = ref
    d["description"] = "kb golden: %s with %s (scaled down). %s" % (
        d["name"], ", ".join("%s=%d" % kv for kv in changes.items()), d.get("description", ""))
    d["name"] = new_name
    return d


def _run_reference(d, args):
    namespace = {"__name__": "kb_reference_" + d["name"]}
    exec(compile(d["reference"], "<reference of %s>" % d["name"], "exec"), namespace)
    with torch.no_grad():
        result = namespace["run"](*args)
    if isinstance(result, torch.Tensor):
        result = (result,)
    names = list(d["outputs"])
    assert len(result) == len(names), "%s: reference returned %d outputs, definition has %d" % (
        d["name"], len(result), len(names))
    return dict(zip(names, result))


def _pack_fp8_keys(keys_bf16, page_size, head_dim):
    """[pages, page_size, 1, head_dim] bf16 -> deep_gemm packed [pages, page_size, 1, head_dim + 4] int8."""
    amax = keys_bf16.abs().float().amax(dim=3, keepdim=True).clamp(1e-4)
    scale = amax / 448.0
    fp8 = (keys_bf16 * (1.0 / scale)).to(torch.float8_e4m3fn)
    pages = keys_bf16.shape[0]
    packed = torch.empty(pages, page_size * (head_dim + 4), dtype=torch.uint8)
    packed[:, :page_size * head_dim] = fp8.view(pages, page_size * head_dim).view(torch.uint8)
    packed[:, page_size * head_dim:] = scale.view(pages, page_size).view(torch.uint8)
    return packed.view(pages, page_size, 1, head_dim + 4).view(torch.int8)


def _layout(d, c, rng):
    """Var axes, stored (index) inputs as tensors, scalars, inputs passed as None."""
    name = d["name"]
    inputs = d["inputs"]
    axes, stored, scalars, none = {}, {}, {}, set()
    if d["op_type"] == "gdn":
        scalars["scale"] = 0.0 if "decode" in name else 0.35  # 0: the reference's 1/sqrt(K) default
        if "cu_seqlens" in inputs:  # prefill
            lens = [3] if "qk8" in name else [4, 0, 5]
            cu = [0]
            for n in lens:
                cu.append(cu[-1] + n)
            axes.update(total_seq_len=cu[-1], num_seqs=len(lens), len_cu_seqlens=len(lens) + 1)
            stored["cu_seqlens"] = torch.tensor(cu, dtype=torch.int64)
            if "qk16" in name:
                none.add("state")
        elif "initial_state_indices" in inputs:  # mtp
            if "qk4" in name:
                axes.update(batch_size=1, seq_len=3, pool_size=1)
                idx = [0]
            else:
                axes.update(batch_size=3, seq_len=2 if "qk8" in name else 4, pool_size=4)
                idx = [2, 0, 3]
            stored["initial_state_indices"] = torch.tensor(idx, dtype=torch.int32)
            none.add("intermediate_states_buffer")
        else:  # decode
            axes.update(batch_size=1 if "qk4" in name else 3)
    elif d["op_type"] == "mamba_ssu":
        slots = [3, -1, 0, 4]  # slot 1 and 2 untouched, one padded element
        axes.update(batch_size=len(slots), state_cache_size=5)
        stored["state_batch_indices"] = torch.tensor(slots, dtype=torch.int32)
    elif "sparse_indices" in inputs:  # dsa sparse attention
        ps, topk = c["page_size"], c["topk"]
        rows = topk + 500
        num_pages = -(-rows // ps)
        rows = num_pages * ps
        tokens = 3
        idx = torch.full((tokens, topk), -1, dtype=torch.int32)
        for t, valid in enumerate([topk, 700, 0]):
            pick = rng.sample(range(rows), valid)
            idx[t, :valid] = torch.tensor(pick, dtype=torch.int32)
        axes.update(num_tokens=tokens, num_pages=num_pages)
        stored["sparse_indices"] = idx
        scalars["sm_scale"] = 1.0 / math.sqrt(128 + c["head_dim_kpe"])
    else:  # dsa top-k indexer
        ps, dim, topk = c["page_size"], c["index_head_dim"], 2048
        max_pages = -(-(topk + 300) // ps)
        num_pages = max_pages + 6
        seq_lens = [topk + 300, 100, 0, 3 * ps]
        table = torch.zeros(len(seq_lens), max_pages, dtype=torch.int32)
        for b in range(len(seq_lens)):
            table[b] = torch.tensor(rng.sample(range(num_pages), max_pages), dtype=torch.int32)
        axes.update(batch_size=len(seq_lens), max_num_pages=max_pages, num_pages=num_pages)
        stored["seq_lens"] = torch.tensor(seq_lens, dtype=torch.int32)
        stored["block_table"] = table
        gen = torch.Generator().manual_seed(golden_lib.fnv1a64(name + "/k") & 0x7FFFFFFF)
        keys = torch.randn(num_pages, ps, 1, dim, generator=gen).to(torch.bfloat16)
        stored["k_index_cache_fp8"] = _pack_fp8_keys(keys, ps, dim)
    return axes, stored, scalars, none


def _scale_of(d, k, c):
    if d["op_type"] == "gdn" and k == "k":
        return math.sqrt(3.0 / c["head_size"])
    if d["op_type"] == "dsa_paged" and k in ("q_nope", "q_pe"):
        return 4.0
    return 1.0


def make_one(path, out_dir):
    with open(path) as f:
        shipped = json.load(f)
    d = shipped
    extra = {"generator": "tests/goldens/make/linear.py"}
    if shipped["name"] in SCALED:
        changes, new_name = SCALED[shipped["name"]]
        d = scaled_definition(shipped, changes, new_name)
        extra["definition_json"] = json.dumps(d)
        extra["scaled_from"] = shipped["name"]
    name = d["name"]
    assert d["op_type"] in OP_TYPES, "%s: op_type %s" % (name, d["op_type"])
    c = {k: a["value"] for k, a in d["axes"].items() if a["type"] == "const"}
    rng = random.Random("kb-golden/" + name)
    axes, stored, scalars, none = _layout(d, c, rng)
    var_axes = {k: axes[k] for k, a in d["axes"].items() if a["type"] == "var"}
    all_axes = dict(c, **var_axes)

    args, inputs, generated, scales = [], {}, set(), {}
    for k, spec in d["inputs"].items():
        if spec["shape"] is None:
            value = scalars[k]
        elif k in none:
            assert spec.get("optional"), "%s: %s is not optional" % (name, k)
            value = None
        elif k in stored:
            value = stored[k]
            want = [all_axes[a] for a in spec["shape"]]
            assert list(value.shape) == want, "%s: %s is %s, want %s" % (name, k, list(value.shape), want)
        else:
            shape = [all_axes[a] for a in spec["shape"]]
            scale = _scale_of(d, k, c)
            value = golden_lib.generated(name, k, shape, getattr(torch, spec["dtype"]), scale=scale, device="cpu")
            generated.add(k)
            if scale != 1.0:
                scales[k] = scale
        args.append(value)
        if value is not None:
            inputs[k] = value
    outputs = _run_reference(d, args)
    return golden_lib.check_and_save(out_dir, d, all_axes, var_axes, inputs, outputs, generated, scales, extra,
                                     MAX_FILE_BYTES)


def make(definitions_dir, out_dir):
    torch.manual_seed(0)
    written = []
    for op_type in OP_TYPES:
        for path in sorted(glob.glob(os.path.join(definitions_dir, op_type, "*.json"))):
            written.append(make_one(path, out_dir))
    return written


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: linear.py DEFINITIONS_DIR OUT_DIR")
    total = 0
    for p in make(sys.argv[1], sys.argv[2]):
        size = os.path.getsize(p)
        total += size
        print(p, size)
    print("total", total, "bytes")
