"""Goldens for the attention op_types: gqa_paged, gqa_ragged, mla_paged, mla_ragged.

For every shipped definition of these op_types, make(definitions_dir, out_dir)
runs the definition's own PyTorch `reference` on a small batch and writes
out_dir/<definition>.safetensors with golden_lib.save():

  - float inputs (q / q_nope / q_pe, the caches, k, v) are kb-golden-v1
    generated, not stored; the queries with SCALE = Q_SCALE so the softmax is
    far from uniform (the others with SCALE 1);
  - index inputs (qo_indptr, kv_indptr, kv_indices, kv_last_page_len) are
    stored as int32, with the pages of each sequence drawn in a random (seeded
    by the definition's name) order from a cache with a few unused pages;
  - sm_scale: the first value the shipped workloads use for the definition,
    else its documented default (1/sqrt(head_dim); MLA 1/sqrt(128 + 64));
  - outputs (output, lse) are stored.

Batches: decode has kv lengths DECODE_KV_LENS (an empty sequence, a single
token, one that spans two 64-token pages); prefill has PREFILL_SEQS (queries
with no KV, a KV with no queries, a single query, q_len < kv_len across a page
boundary, q_len == kv_len). No sequence has q_len > kv_len: there the
references disagree (0 / -inf in the per-row loops, NaN from a softmax over
-inf in the vectorised ones) and the oracle writes 0 / -inf.

Run on a machine with PyTorch (GPU if there is one):
    python3 tests/goldens/make/attention.py DEFINITIONS_DIR OUT_DIR
"""
import glob
import json
import math
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_lib  # noqa: E402

OP_TYPES = ("gqa_paged", "gqa_ragged", "mla_paged", "mla_ragged")

Q_SCALE = 4.0
SPARE_PAGES = 3
DECODE_KV_LENS = [0, 1, 5, 67]
# (q_len, kv_len) per sequence.
PREFILL_SEQS = [(2, 0), (0, 3), (1, 5), (4, 67), (3, 3)]
MAX_FILE_BYTES = 200 * 1024

QUERY_INPUTS = ("q", "q_nope", "q_pe")
INDEX_INPUTS = ("qo_indptr", "kv_indptr", "kv_indices", "kv_last_page_len")


def _device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def _workload_sm_scale(definitions_dir, op_type, name):
    """The first sm_scale a shipped workload of this definition uses, or None."""
    path = os.path.join(os.path.dirname(os.path.abspath(definitions_dir)), "workloads", op_type, name + ".jsonl")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            spec = json.loads(line).get("workload", {}).get("inputs", {}).get("sm_scale")
            if spec and spec.get("type") == "scalar":
                return float(spec["value"])
    return None


def _default_sm_scale(d, consts):
    op = d["op_type"]
    if op == "mla_paged":
        # 1/sqrt(qk_nope + qk_rope) before absorption: 128 + head_dim_kpe.
        return 1.0 / math.sqrt(128 + consts["head_dim_kpe"])
    if op == "mla_ragged":
        return 1.0 / math.sqrt(consts["qk_dim"])
    return 1.0 / math.sqrt(consts["head_dim"])


def _layout(d, consts, rng):
    """Index tensors (as int lists) and the var axes of a small batch."""
    inputs = d["inputs"]
    prefill = "qo_indptr" in inputs
    seqs = PREFILL_SEQS if prefill else [(1, n) for n in DECODE_KV_LENS]
    qo_indptr = [0]
    for q_len, _ in seqs:
        qo_indptr.append(qo_indptr[-1] + q_len)
    batch = len(seqs)
    axes = {"batch_size": batch, "len_indptr": batch + 1, "total_q": qo_indptr[-1]}
    index = {"qo_indptr": qo_indptr}

    if "kv_indices" in inputs:  # paged
        page_size = consts["page_size"]
        pages_of = [-(-kv // page_size) for _, kv in seqs]
        if "kv_last_page_len" not in inputs:
            assert all(kv % page_size == 0 for _, kv in seqs), "full pages only without kv_last_page_len"
        num_pages = sum(pages_of) + SPARE_PAGES
        order = list(range(num_pages))
        rng.shuffle(order)
        kv_indptr, kv_indices, last = [0], [], []
        for (_, kv), n in zip(seqs, pages_of):
            kv_indices += order[len(kv_indices):len(kv_indices) + n]
            kv_indptr.append(len(kv_indices))
            last.append(kv - (n - 1) * page_size if n else 0)
        index.update(kv_indptr=kv_indptr, kv_indices=kv_indices, kv_last_page_len=last)
        axes.update(num_pages=num_pages, num_kv_indices=len(kv_indices))
    else:  # ragged
        kv_indptr = [0]
        for _, kv in seqs:
            kv_indptr.append(kv_indptr[-1] + kv)
        index["kv_indptr"] = kv_indptr
        axes["total_kv"] = kv_indptr[-1]
    return index, axes


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


def make_one(path, definitions_dir, out_dir, device=None):
    """Writes the golden of one definition file; returns its path."""
    device = device or _device()
    with open(path) as f:
        d = json.load(f)
    name, op_type = d["name"], d["op_type"]
    assert op_type in OP_TYPES, "%s: op_type %s" % (name, op_type)
    consts = {k: a["value"] for k, a in d["axes"].items() if a["type"] == "const"}
    rng = random.Random("kb-golden/" + name)
    index, var_values = _layout(d, consts, rng)

    var_axes = {}
    for k, a in d["axes"].items():
        if a["type"] == "var":
            assert k in var_values, "%s: no value for var axis %s" % (name, k)
            var_axes[k] = var_values[k]
    all_axes = dict(consts, **var_axes)

    sm_scale = _workload_sm_scale(definitions_dir, op_type, name)
    if sm_scale is None:
        sm_scale = _default_sm_scale(d, consts)

    args, inputs, generated, scales = [], {}, set(), {}
    for k, spec in d["inputs"].items():
        if spec["shape"] is None:
            assert k == "sm_scale", "%s: unexpected scalar input %s" % (name, k)
            value = sm_scale
        else:
            shape = [all_axes[a] for a in spec["shape"]]
            dtype = getattr(torch, spec["dtype"])
            if k in INDEX_INPUTS:
                values = list(index[k])[:shape[0]]
                values += [0] * (shape[0] - len(values))  # kv_last_page_len of shape [len_indptr]
                value = torch.tensor(values, dtype=dtype, device=device)
            else:
                scale = Q_SCALE if k in QUERY_INPUTS else 1.0
                value = golden_lib.generated(name, k, shape, dtype, scale=scale, device=device)
                generated.add(k)
                if scale != 1.0:
                    scales[k] = scale
        args.append(value)
        inputs[k] = value

    outputs = _run_reference(d, args)
    return golden_lib.check_and_save(out_dir, d, all_axes, var_axes, inputs, outputs, generated, scales,
                                     {"generator": "tests/goldens/make/attention.py"}, MAX_FILE_BYTES)


def make(definitions_dir, out_dir):
    """Goldens for every definition of the attention op_types under definitions_dir."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    written = []
    for op_type in OP_TYPES:
        for path in sorted(glob.glob(os.path.join(definitions_dir, op_type, "*.json"))):
            written.append(make_one(path, definitions_dir, out_dir))
    return written


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: attention.py DEFINITIONS_DIR OUT_DIR")
    for p in make(sys.argv[1], sys.argv[2]):
        print(p, os.path.getsize(p))
