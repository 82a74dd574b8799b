"""kb's CUDA solutions beside FlashInfer on the definitions and axes bench_kernels.py ran (run.sh flashinfer), on the
GPU machine. FlashInfer (flashinfer-python, carried with its modules precompiled for sm_90a: bench/README.md):
  gqa_paged decode     BatchDecodeWithPagedKVCacheWrapper: the CUDA-core decode kernel (group sizes 1, 2, 3, 4, 6,
                       8 and 16: CUDA_CORE_DECODE_GROUPS), and use_tensor_cores=True on the FA3 prefill kernel (with
                       --jit also on FA2, FlashInfer's default for bf16); both modules by the definition's head dim
  gqa_paged prefill    BatchPrefillWithPagedKVCacheWrapper, causal, FA3 (the backend FlashInfer picks on Hopper;
                       with --jit FA2 too)
  gqa_ragged, mla_ragged  BatchPrefillWithRaggedKVCacheWrapper, causal, FA3 (with --jit FA2 too)
  mla_paged            BatchMLAPagedAttentionWrapper, FA3 (FlashInfer's first choice on Hopper; with --jit FA2 too),
                       ckv / kpe caches as the definition's
  rmsnorm              flashinfer.norm.rmsnorm and fused_add_rmsnorm (its CUDA kernels: FLASHINFER_USE_CUDA_NORM=1;
                       the CuTe-DSL kernels need nvidia-cutlass-dsl, which is not carried)
  sampling             flashinfer.sampling.top_k_sampling_from_probs, top_p_sampling_from_probs,
                       top_k_top_p_sampling_from_probs (top-k first, as the definitions' references filter)
Inputs are built in PyTorch on CUDA with the definition's shapes and dtypes and kb's distributions (N(0,1) floats;
sequence lengths a random split of the axis' total, keys covering queries; distinct pages in random order; last
page lengths in range; probabilities exp(3 N(0,1)) normalized; top_k in [1, 128]; top_p in [0.1, 0.95)), not kb's
exact bytes. Every sequence gets at least one page here (FlashInfer's last_page_len has no empty sequence).

Before timing, each FlashInfer call runs on a small shape beside the definition's `reference` (its code executed
on CUDA tensors): attention and norms must match each output within a relative L2 error; sampling draws must lie
in the support the definition's filters leave, and their frequencies on a row repeated many times must match the
reference's own draws (total variation distance). A call that does not import, load, plan or match prints
`not compared: <why>` and the run goes on. Plan once, then time run() with torch_timing.time_like_kb (kb's
procedure, L2 flushed, batches replayed from a CUDA graph where the call can be captured). For sampling the
definition's reference is timed too. Below the rows: per shape, kb against the fastest FlashInfer variant, the
median and the largest ratio.

usage: flashinfer_side_by_side.py --run DIR [--run DIR...] [--out-md FILE] [--time-limit S] [--all-workloads] [--jit]
         DIR is bench_kernels.py's --out (DIR/dataset, DIR/results/traces); --jit lets FlashInfer compile modules
         that were not precompiled (FLASHINFER_DISABLE_JIT is set otherwise)"""
import argparse
import json
import math
import os
import random
import re
import sys
import time

from definition_reference import reference_fn, rel_err

OPS = ["gqa_paged", "gqa_ragged", "mla_paged", "mla_ragged", "rmsnorm", "sampling"]
TOLERANCE = {"output": 0.02, "lse": 0.01}  # relative L2 error of bf16 outputs and of the base-2 lse
TV_LIMIT = 0.08  # total variation distance of two empirical sampling distributions (4000 draws each)


# ---- index layouts (plain Python: tests/tools/test_bench_tools.py checks them without torch) ---------------------

def split_total(rng, total, parts, minimum=0):
    """`total` as `parts` non-negative lengths, each at least `minimum`: sorted random cuts (kb's split) of what is
    left after the minimums."""
    if parts <= 0:
        return []
    rest = total - minimum * parts
    if rest < 0:
        raise ValueError(f"{total} cannot be split into {parts} parts of at least {minimum}")
    cuts = sorted(rng.randint(0, rest) for _ in range(parts - 1))
    out, prev = [], 0
    for c in cuts + [rest]:
        out.append(c - prev + minimum)
        prev = c
    return out


def indptr_of(lengths):
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def paged_indices(rng, num_kv_indices, num_pages):
    """num_kv_indices distinct pages of num_pages in random order (an allocator's leftovers, as kb builds them)."""
    if num_kv_indices > num_pages:
        raise ValueError(f"{num_kv_indices} distinct pages asked for, but num_pages is {num_pages}")
    return rng.sample(range(num_pages), num_kv_indices)


def paged_layout(rng, q_lens, num_kv_indices, num_pages, page_size):
    """A paged KV cache of len(q_lens) sequences over num_kv_indices pages, in the FlashInfer Trace layout, which is
    FlashInfer's own (NHD pages; indptr over pages; last page lengths in 1..page_size): (kv_indptr, kv_indices,
    kv_last_page_len). Each sequence has at least one page, and at least as many keys as queries where the pages
    allow every sequence that (as kb's inputs: otherwise the pages are split without that rule)."""
    batch = len(q_lens)
    need = [max(1, -(-q // page_size)) for q in q_lens]
    if sum(need) > num_kv_indices:  # the pages cannot cover every sequence's queries: one page each at least
        need = [1] * batch
        if batch > num_kv_indices:
            raise ValueError(f"{num_kv_indices} pages cannot give {batch} sequences a page each")
    extra = split_total(rng, num_kv_indices - sum(need), batch)
    pages = [n + e for n, e in zip(need, extra)]
    last = []
    for q, p in zip(q_lens, pages):
        lo = max(1, q - (p - 1) * page_size)
        last.append(page_size if lo >= page_size else rng.randint(lo, page_size))
    return indptr_of(pages), paged_indices(rng, num_kv_indices, num_pages), last


def kv_lengths(kv_indptr, kv_last_page_len, page_size):
    """Keys of each sequence: full pages and the last page's valid tokens (0 for a sequence without pages)."""
    out = []
    for b in range(len(kv_indptr) - 1):
        pages = kv_indptr[b + 1] - kv_indptr[b]
        out.append(0 if pages == 0 else (pages - 1) * page_size + kv_last_page_len[b])
    return out


def check_paged_layout(kv_indptr, kv_indices, kv_last_page_len, page_size, num_pages):
    """The rules FlashInfer's plan relies on; raises ValueError naming the first one broken."""
    if not kv_indptr or kv_indptr[0] != 0:
        raise ValueError("kv_indptr must start at 0")
    if any(b < a for a, b in zip(kv_indptr, kv_indptr[1:])):
        raise ValueError("kv_indptr must not decrease")
    if kv_indptr[-1] != len(kv_indices):
        raise ValueError(f"kv_indptr[-1] = {kv_indptr[-1]} but there are {len(kv_indices)} page indices")
    if len(kv_last_page_len) != len(kv_indptr) - 1:
        raise ValueError("one last page length per sequence")
    if any(not 0 <= p < num_pages for p in kv_indices):
        raise ValueError(f"a page index is outside [0, {num_pages})")
    for b, n in enumerate(kv_last_page_len):
        if kv_indptr[b + 1] > kv_indptr[b] and not 1 <= n <= page_size:
            raise ValueError(f"sequence {b}: last page length {n} outside 1..{page_size}")


def token_slots(kv_indptr, kv_indices, kv_last_page_len, page_size):
    """Per sequence, its keys' (page, slot) in order: what the definitions' references gather."""
    out = []
    for b in range(len(kv_indptr) - 1):
        pages = kv_indices[kv_indptr[b]:kv_indptr[b + 1]]
        seq = []
        for i, p in enumerate(pages):
            n = kv_last_page_len[b] if i == len(pages) - 1 else page_size
            seq += [(p, s) for s in range(n)]
        out.append(seq)
    return out


def mla_plan_args(qo_indptr, kv_indptr, kv_last_page_len, page_size):
    """BatchMLAPagedAttentionWrapper.plan's layout from the trace's: qo_indptr (decode: one query a sequence),
    kv_indptr over pages, and kv_len_arr, each sequence's number of keys (its pages' valid tokens)."""
    batch = len(kv_indptr) - 1
    return (qo_indptr if qo_indptr is not None else list(range(batch + 1)), kv_indptr,
            kv_lengths(kv_indptr, kv_last_page_len, page_size))


def filtered_support(row, top_k=None, top_p=None):
    """Token ids a draw may return under the definitions' sampling rule (plain floats): top_k largest (ties by
    index), renormalized, then the smallest prefix of the sorted distribution whose mass reaches top_p (the token
    that crosses top_p included), as the references compute it."""
    order = sorted(range(len(row)), key=lambda i: (-row[i], i))
    keep = [i for i in order if row[i] > 0]
    if top_k is not None and 0 < top_k < len(row):
        keep = keep[:top_k]
    if top_p is not None and top_p < 1.0:
        total = sum(row[i] for i in keep)
        if top_p <= 0:
            return set(keep[:1])
        cdf, out = 0.0, []
        for i in keep:
            out.append(i)
            cdf += row[i] / total
            if cdf > top_p:
                break
        keep = out
    return set(keep)


def total_variation(a, b):
    """Total variation distance of two samples' empirical distributions."""
    ca, cb = {}, {}
    for x in a:
        ca[x] = ca.get(x, 0) + 1
    for x in b:
        cb[x] = cb.get(x, 0) + 1
    return 0.5 * sum(abs(ca.get(k, 0) / len(a) - cb.get(k, 0) / len(b)) for k in set(ca) | set(cb))


# ---- inputs -------------------------------------------------------------------------------------------------------

def const_axes(d):
    return {k: v["value"] for k, v in d["axes"].items() if v.get("type") == "const"}


def kind_of(d):
    op = d["op_type"]
    if op in ("gqa_paged", "mla_paged"):
        return op + ("_decode" if "decode" in d["name"] else "_prefill")
    if op == "rmsnorm":
        return "fused_add_rmsnorm" if "residual" in d["inputs"] else "rmsnorm"
    if op == "sampling":
        return re.match(r"(top_k_top_p|top_k|top_p)_sampling", d["name"]).group(1)
    return op


def check_axes(d):
    """A small problem of the definition's kind: three sequences of some hundred tokens, four rows."""
    ps = const_axes(d).get("page_size", 1)
    kind = kind_of(d)
    if kind.endswith("_decode"):
        pages = -(-3 * 300 // ps)
        return {"batch_size": 3, "len_indptr": 4, "num_kv_indices": pages, "num_pages": pages + 5}
    if kind.endswith("_prefill"):
        pages = -(-600 // ps) + 3
        a = {"len_indptr": 4, "total_q": 300, "num_kv_indices": pages, "num_pages": pages + 5}
        if "batch_size" in d["axes"]:
            a["batch_size"] = 3
        return a
    if kind in ("gqa_ragged", "mla_ragged"):
        return {"len_indptr": 4, "total_q": 300, "total_kv": 600}
    return {"batch_size": 4}


def build_inputs(d, axes, scalars, device, seed):
    """The definition's inputs as torch tensors on device (module docstring)."""
    import torch
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    # the float tensors drawn where they live: a KV cache of a few GB is drawn in milliseconds on the GPU
    dev_gen = gen if str(device) == "cpu" else torch.Generator(device=device).manual_seed(seed)
    a = {**const_axes(d), **axes}
    ps = a.get("page_size", 1)
    dt = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32, "int32": torch.int32,
          "int64": torch.int64}
    x, ints = {}, {}
    names = d["inputs"]
    batch = a["len_indptr"] - 1 if "len_indptr" in a else a.get("batch_size")
    if "qo_indptr" in names:
        q_lens = split_total(rng, a["total_q"], batch, 1)
        ints["qo_indptr"] = indptr_of(q_lens)
    else:
        q_lens = [1] * (batch or 0)
    if "kv_indices" in names:
        ints["kv_indptr"], ints["kv_indices"], ints["kv_last_page_len"] = paged_layout(
            rng, q_lens, a["num_kv_indices"], a["num_pages"], ps)
    elif "kv_indptr" in names:  # ragged: keys cover queries
        kv_lens = [q + e for q, e in zip(q_lens, split_total(rng, a["total_kv"] - a["total_q"], batch))]
        ints["kv_indptr"] = indptr_of(kv_lens)
    for name, spec in names.items():
        if not spec.get("shape"):
            x[name] = scalars.get(name)
            if x[name] is None and name == "sm_scale":
                x[name] = 1.0 / math.sqrt(a.get("head_dim", a.get("qk_dim", 128)))
            continue
        shape = [a[s] for s in spec["shape"]]
        t = dt[spec["dtype"]]
        if name in ints:
            x[name] = torch.tensor(ints[name], dtype=t, device=device)
        elif name == "probs":
            p = torch.exp(3 * torch.randn(shape, generator=gen, dtype=torch.float64))
            x[name] = (p / p.sum(-1, keepdim=True)).to(t).to(device)
        elif name == "top_k":
            x[name] = torch.randint(1, min(a.get("vocab_size", 128), 128) + 1, shape, generator=gen).to(t).to(device)
        elif name == "top_p":
            x[name] = (0.1 + 0.85 * torch.rand(shape, generator=gen)).to(t).to(device)
        else:
            x[name] = torch.randn(shape, generator=dev_gen, device=dev_gen.device).to(t).to(device)
    return x


# ---- FlashInfer calls ---------------------------------------------------------------------------------------------

WORKSPACE_BYTES = 256 << 20


# FlashInfer's CUDA-core decode kernel instantiates these group sizes (num_qo_heads / num_kv_heads) alone
# (DISPATCH_GQA_GROUP_SIZE in include/flashinfer/utils.cuh); its module is built per head dim, the group is chosen
# inside it at plan time. Other groups run on its tensor-core path only.
CUDA_CORE_DECODE_GROUPS = (1, 2, 3, 4, 6, 8, 16)


def variant_unsupported(d, variant):
    """Why FlashInfer has no kernel for definition d in this variant (None: it has one, as far as is known here)."""
    c = const_axes(d)
    if kind_of(d) == "gqa_paged_decode" and variant == "cuda cores":
        group = c["num_qo_heads"] // c["num_kv_heads"]
        if group not in CUDA_CORE_DECODE_GROUPS:
            return (f"group {group}: FlashInfer's CUDA-core decode kernel handles groups "
                    f"{', '.join(map(str, CUDA_CORE_DECODE_GROUPS))}")
    return None


def attention_variants(kind, jit=False):
    """(name, wrapper options) FlashInfer is run with. The FA2 prefill and MLA kernels are not among the modules
    precompiled for the GPU machine: they run only with --jit (compiled there)."""
    if kind == "gqa_paged_decode":
        out = [("cuda cores", {"use_tensor_cores": False}), ("tensor cores fa3", {"use_tensor_cores": True,
                                                                                  "backend": "fa3"})]
        return out + ([("tensor cores fa2", {"use_tensor_cores": True, "backend": "fa2"})] if jit else [])
    return [("fa3", {"backend": "fa3"})] + ([("fa2", {"backend": "fa2"})] if jit else [])


def flashinfer_call(fi, d, x, variant):
    """(run, output names): plan once here, run() launches FlashInfer's kernels alone."""
    import torch
    kind = kind_of(d)
    c = const_axes(d)
    dev = next(v.device for v in x.values() if isinstance(v, torch.Tensor))
    opts = dict(attention_variants(kind, jit=True)).get(variant, {})
    ws = lambda: torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=dev)  # noqa: E731
    bf16 = torch.bfloat16
    if "kv_indices" in x and "kv_last_page_len" not in x:  # page size 1 definitions: every page holds one token
        x = {**x, "kv_last_page_len": torch.ones(x["kv_indptr"].shape[0] - 1, dtype=torch.int32, device=dev)}
    if kind == "gqa_paged_decode":
        w = fi.BatchDecodeWithPagedKVCacheWrapper(ws(), "NHD", **opts)
        w.plan(x["kv_indptr"], x["kv_indices"], x["kv_last_page_len"], c["num_qo_heads"], c["num_kv_heads"],
               c["head_dim"], c["page_size"], sm_scale=float(x["sm_scale"]), q_data_type=bf16, kv_data_type=bf16)
        kv = (x["k_cache"], x["v_cache"])
        return (lambda: w.run(x["q"], kv, return_lse=True)), ["output", "lse"]
    if kind == "gqa_paged_prefill":
        w = fi.BatchPrefillWithPagedKVCacheWrapper(ws(), "NHD", **opts)
        w.plan(x["qo_indptr"], x["kv_indptr"], x["kv_indices"], x["kv_last_page_len"], c["num_qo_heads"],
               c["num_kv_heads"], c["head_dim"], c["page_size"], causal=True, sm_scale=float(x["sm_scale"]),
               q_data_type=bf16, kv_data_type=bf16)
        kv = (x["k_cache"], x["v_cache"])
        return (lambda: w.run(x["q"], kv, return_lse=True)), ["output", "lse"]
    if kind in ("gqa_ragged", "mla_ragged"):
        qk = c.get("head_dim", c.get("qk_dim"))
        vo = c.get("head_dim", c.get("vo_dim"))
        w = fi.BatchPrefillWithRaggedKVCacheWrapper(ws(), "NHD", **opts)
        w.plan(x["qo_indptr"], x["kv_indptr"], c["num_qo_heads"], c["num_kv_heads"], qk, head_dim_vo=vo,
               causal=True, sm_scale=float(x["sm_scale"]), q_data_type=bf16, kv_data_type=bf16)
        return (lambda: w.run(x["q"], x["k"], x["v"], return_lse=True)), ["output", "lse"]
    if kind in ("mla_paged_decode", "mla_paged_prefill"):
        ps = c["page_size"]
        qo, kv_indptr, kv_len = mla_plan_args(x["qo_indptr"].tolist() if "qo_indptr" in x else None,
                                              x["kv_indptr"].tolist(), x["kv_last_page_len"].tolist(), ps)
        i32 = lambda v: torch.tensor(v, dtype=torch.int32, device=dev)  # noqa: E731
        w = fi.mla.BatchMLAPagedAttentionWrapper(ws(), **opts)
        w.plan(metadata=fi.mla.MLAPlanMetadata.csr(i32(qo), i32(kv_indptr), x["kv_indices"], i32(kv_len)),
               num_heads=c["num_qo_heads"], head_dim_ckv=c["head_dim_ckv"], head_dim_kpe=c["head_dim_kpe"],
               page_size=ps, causal=kind == "mla_paged_prefill", sm_scale=float(x["sm_scale"]), q_data_type=bf16,
               kv_data_type=bf16, query_layout="split", kv_cache_layout="split", lse_mode="base2")
        query, cache = (x["q_nope"], x["q_pe"]), (x["ckv_cache"], x["kpe_cache"])
        return (lambda: w.run(query=query, kv_cache=cache, return_lse=True)), ["output", "lse"]
    eps = reference_eps(d)
    if kind == "rmsnorm":
        out = torch.empty_like(x["hidden_states"])
        return (lambda: (fi.norm.rmsnorm(x["hidden_states"], x["weight"], eps=eps, out=out),)), ["output"]
    if kind == "fused_add_rmsnorm":
        # in place: residual += hidden_states, hidden_states = rmsnorm(residual) * weight
        def run():
            fi.norm.fused_add_rmsnorm(x["hidden_states"], x["residual"], x["weight"], eps=eps)
            return (x["hidden_states"],)
        return run, ["output"]
    s = fi.sampling
    if kind == "top_k":
        return (lambda: (s.top_k_sampling_from_probs(x["probs"], x["top_k"]),)), ["samples"]
    if kind == "top_p":
        return (lambda: (s.top_p_sampling_from_probs(x["probs"], x["top_p"]),)), ["samples"]
    return (lambda: (s.top_k_top_p_sampling_from_probs(x["probs"], x["top_k"], x["top_p"],
                                                       filter_apply_order="top_k_first"),)), ["samples"]


def reference_eps(d):
    m = re.search(r"\bEPS\s*=\s*([0-9.eE+-]+)", d["reference"])
    return float(m.group(1)) if m else 1e-6


def clone(x):
    return {k: (v.clone() if hasattr(v, "clone") else v) for k, v in x.items()}


def check(fi, d, variant, device):
    """FlashInfer's call against the definition's reference on a small shape: (ok, detail)."""
    import torch
    ref = reference_fn(d)
    axes = check_axes(d)
    x = build_inputs(d, axes, {}, device, seed=7)
    if d["op_type"] != "sampling":
        want = ref(**clone(x))
        want = want if isinstance(want, (tuple, list)) else (want,)
        run, outs = flashinfer_call(fi, d, clone(x), variant)
        got = run()
        got = got if isinstance(got, (tuple, list)) else (got,)
        errs = {o: rel_err(g, want[list(d["outputs"]).index(o)]) for o, g in zip(outs, got)}
        ok = all(v <= TOLERANCE.get(o, TOLERANCE["output"]) for o, v in errs.items())
        return ok, f"{variant} at {axes}: " + ", ".join(f"{o} rel err {v:.2e}" for o, v in errs.items())
    # sampling: draws inside the filtered support on kb's distribution, then frequencies on one repeated row
    run, _ = flashinfer_call(fi, d, x, variant)
    rows = x["probs"].double().cpu().tolist()
    ks = x["top_k"].tolist() if "top_k" in x else [None] * len(rows)
    qs = x["top_p"].tolist() if "top_p" in x else [None] * len(rows)
    supports = [filtered_support(r, k, p) for r, k, p in zip(rows, ks, qs)]
    outside = 0
    for _ in range(50):
        for i, t in enumerate(run()[0].tolist()):
            outside += t not in supports[i]
    # a peaked row (mass halving every ~3 ranks) over randomly placed tokens: top_k 8 keeps 8 of them, top_p 0.5 a few
    n = 4000
    vocab = d["axes"]["vocab_size"]["value"]
    perm = torch.randperm(vocab, generator=torch.Generator().manual_seed(11))
    row = torch.zeros(vocab, dtype=torch.float64)
    row[perm] = torch.exp(-torch.arange(vocab, dtype=torch.float64) / 4)
    row /= row.sum()
    rep = {"probs": row.float().to(device).expand(n, -1).contiguous()}
    if "top_k" in x:
        rep["top_k"] = torch.full((n,), 8, dtype=x["top_k"].dtype, device=device)
    if "top_p" in x:
        rep["top_p"] = torch.full((n,), 0.5, dtype=x["top_p"].dtype, device=device)
    run_rep, _ = flashinfer_call(fi, d, rep, variant)
    got = run_rep()[0].tolist()
    want = ref(**clone(rep)).tolist()
    tv = total_variation(got, want)
    ok = outside == 0 and tv <= TV_LIMIT
    return ok, (f"{variant}: {outside} of {50 * len(rows)} draws outside the filtered support at {axes}; total "
                f"variation {tv:.3f} from the reference's draws on one row repeated {n} times (limit {TV_LIMIT})")


def variants_of(d, jit=False):
    kind = kind_of(d)
    if kind in ("gqa_paged_decode", "gqa_paged_prefill", "gqa_ragged", "mla_ragged", "mla_paged_decode",
                "mla_paged_prefill"):
        return [v for v, _ in attention_variants(kind, jit)]
    return ["CUDA kernel"]


# ---- the run ------------------------------------------------------------------------------------------------------

def short(e):
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]


def run_all(args):
    import torch
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    from side_by_side import dataset_rows, kb_latencies
    from torch_timing import time_like_kb
    try:
        import flashinfer as fi
        import flashinfer.mla  # noqa: F401
        import flashinfer.norm  # noqa: F401
        import flashinfer.sampling  # noqa: F401
    except Exception as e:  # noqa: BLE001
        print(f"not compared: flashinfer does not import: {short(e)}")
        write_md(args, [], [f"flashinfer does not import: {short(e)}"])
        return 0
    print(f"flashinfer {fi.__version__} from {os.path.dirname(fi.__file__)}", flush=True)
    device = "cuda"
    L2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
    flush_buf = torch.empty(2 * L2, dtype=torch.uint8, device=device)
    kb = {}
    rows = []
    for run_dir in args.run:
        kb.update(kb_latencies(os.path.join(run_dir, "results", "traces")))
        rows += dataset_rows(run_dir, [op for op in OPS if os.path.isdir(os.path.join(run_dir, "dataset",
                                                                                       "definitions", op))])
    start = time.monotonic()
    lines, notes, measured = [], [], []
    for d, workloads in rows:
        for variant in variants_of(d, args.jit):
            if args.time_limit and time.monotonic() - start > args.time_limit:
                notes.append(f"{d['name']} ({variant}): not compared: the time limit ({args.time_limit} s) was reached")
                continue
            why = variant_unsupported(d, variant)
            if why:
                notes.append(f"{d['name']} ({variant}): not compared: {why}")
                print(f"not compared: {d['name']} ({variant}): {why}", flush=True)
                continue
            try:
                ok, detail = check(fi, d, variant, device)
            except Exception as e:  # noqa: BLE001 (import, JIT, plan or reference failure)
                ok, detail = False, f"{variant}: {short(e)}"
            torch.cuda.empty_cache()
            print(f"{d['name']}: check {'PASSED' if ok else 'FAILED'}: {detail}", flush=True)
            if not ok:
                notes.append(f"{d['name']} ({variant}): not compared: {detail}")
                print(f"not compared: {d['name']} ({variant}): {detail}", flush=True)
                continue
            for axes, scalars in workloads:
                if args.time_limit and time.monotonic() - start > args.time_limit:
                    notes.append(f"{d['name']} {axes} ({variant}): not timed: the time limit was reached")
                    continue
                key = (d["name"], json.dumps(axes, sort_keys=True))
                if key not in kb and not args.all_workloads:
                    notes.append(f"{d['name']} {axes} ({variant}): not timed: kb bench left no passed trace here")
                    continue
                ref_ms = None
                try:
                    x = build_inputs(d, axes, scalars, device, seed=1)
                    run, _ = flashinfer_call(fi, d, x, variant)
                    with torch.no_grad():
                        ms = time_like_kb(run, flush_buf, max_time_s=1.0, graph=True)
                        graph = time_like_kb.last.get("graph")
                        if d["op_type"] == "sampling":
                            ref = reference_fn(d)
                            ref_ms = time_like_kb(lambda: ref(**x), flush_buf, max_time_s=1.0, graph=False)
                except Exception as e:  # noqa: BLE001
                    notes.append(f"{d['name']} {axes} ({variant}): FlashInfer failed: {short(e)}")
                    print(notes[-1], flush=True)
                    continue
                finally:
                    x = None
                    torch.cuda.empty_cache()
                kb_ms, sol = kb.get(key, (None, None))
                axes_s = ", ".join(f"{k}={v}" for k, v in sorted(axes.items()))
                lines.append("| {} | {} | {} | {} | {} | {:.4f} | {} | {} |".format(
                    d["name"], axes_s, sol or "-", f"{kb_ms:.4f}" if kb_ms else "-", variant, ms,
                    f"{kb_ms / ms:.2f}" if kb_ms else "-", f"{ref_ms:.4f}" if ref_ms else "-"))
                print(lines[-1], "(graph replay)" if graph else "(queued behind a spin)", flush=True)
                measured.append((d["name"], axes_s, kb_ms, variant, ms))
    write_md(args, lines, notes, measured)
    return 0


def fastest_ratios(measured):
    """measured: (definition, axes, kb ms or None, FlashInfer variant, its ms) rows. Per (definition, axes) with a kb
    latency, in first-seen order: (definition, axes, kb ms, the fastest variant, its ms, kb ms / its ms)."""
    best = {}
    for name, axes, kb_ms, variant, ms in measured:
        if not kb_ms:
            continue
        key = (name, axes)
        if key not in best or ms < best[key][4]:
            best[key] = (name, axes, kb_ms, variant, ms, kb_ms / ms)
    return list(best.values())


def ratio_summary(measured):
    """Markdown lines: kb against the fastest FlashInfer variant per shape, with the median and the largest ratio."""
    import statistics
    rows = fastest_ratios(measured)
    if not rows:
        return []
    ratios = [r[5] for r in rows]
    worst = max(rows, key=lambda r: r[5])
    out = ["", "kb against the fastest FlashInfer variant of each shape:", "",
           "| definition | axes | kb ms | fastest FlashInfer | its ms | kb / FlashInfer |",
           "| --- | --- | ---: | --- | ---: | ---: |"]
    out += [f"| {n} | {a} | {k:.4f} | {v} | {m:.4f} | {r:.2f} |" for n, a, k, v, m, r in rows]
    out += ["", f"{len(rows)} shapes: kb / FlashInfer median {statistics.median(ratios):.2f}, largest {worst[5]:.2f} "
            f"({worst[0]}, {worst[1]}); {sum(r <= 1.0 for r in ratios)} at most 1.0, "
            f"{sum(r <= 1.1 for r in ratios)} at most 1.1."]
    return out


def write_md(args, lines, notes, measured=()):
    md = ["FlashInfer beside kb, produced by `bash bench/run.sh flashinfer` (bench/flashinfer_side_by_side.py). kb ms: "
          "the fastest passed kb solution's latency from kb bench's traces; FlashInfer ms: torch_timing.time_like_kb "
          "(kb's procedure, L2 flushed) on inputs of the same shapes and distributions, plan outside the timing; "
          "kb / FlashInfer at most 1: kb as fast or faster. reference ms: the definition's PyTorch reference "
          "(sampling only).", "",
          "| definition | axes | kb solution | kb ms | FlashInfer | FlashInfer ms | kb / FlashInfer | reference ms |",
          "| --- | --- | --- | ---: | --- | ---: | ---: | ---: |"] + lines + ratio_summary(measured)
    if notes:
        md += ["", "Not compared:"] + [f"- {n}" for n in notes]
    out = args.out_md or os.path.join(args.run[0], "flashinfer_side_by_side.md")
    with open(out, "w") as f:
        f.write("\n".join(md) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", action="append", required=True, help="bench_kernels.py's --out folder (repeatable)")
    ap.add_argument("--out-md")
    ap.add_argument("--time-limit", type=int, default=0, help="start no new case after this many seconds (0: none)")
    ap.add_argument("--all-workloads", action="store_true",
                    help="time FlashInfer also where kb bench left no passed trace (default: only beside kb's)")
    ap.add_argument("--jit", action="store_true", help="let FlashInfer compile modules not precompiled")
    args = ap.parse_args()
    if not args.jit:
        os.environ["FLASHINFER_DISABLE_JIT"] = "1"
    os.environ.setdefault("FLASHINFER_USE_CUDA_NORM", "1")
    import torch
    if not torch.cuda.is_available():
        print("not compared: no CUDA device")
        return 0
    return run_all(args)


if __name__ == "__main__":
    sys.exit(main())
