#!/usr/bin/env python3
"""Writes kb's bundled gdn, mamba_ssu and dsa_paged definitions and workloads
under kernels/<op_type>/{definitions,workloads}/.

Small shapes of the same forms as the shipped FlashInfer-Bench definitions
(Qwen3-Next's gated delta net, Nemotron-H's Mamba2 update, DeepSeek-V3.2's
sparse attention and fp8 indexer), so a CPU-only CI judges every form in
seconds. The definitions and their references are kb's own. As in the shipped
mtp definitions, mtp returns its state pool as it came (the updates are not
written back). Workload inputs are random: kb builds the index structures,
the packed fp8 cache and gdn's unit-norm q and k itself (lib/inputs).
Run from anywhere; the output is committed. Workload uuids are uuid5 of their
content, so rerunning gives the same files.
"""
import json
import os
import uuid

ROOT = os.path.dirname(os.path.abspath(__file__))
NS = uuid.UUID("6b62000d-6b62-4b62-8b62-6b626b626b62")

GDN_STEP = '''
def _delta_rule(S, q, k, v, g, beta, scale):
    # One token for every sequence and value head. S: [N, HV, V, K] (k-last);
    # q, k: [N, HV, K]; v: [N, HV, V]; g, beta: [N, HV].
    S = S * g[:, :, None, None]
    u = torch.einsum("nhvk,nhk->nhv", S, k)
    S = S + torch.einsum("nhv,nhk->nhvk", beta[:, :, None] * (v - u), k)
    return S, scale * torch.einsum("nhvk,nhk->nhv", S, q)


def _gates(A_log, a, dt_bias, b):
    g = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float()))
    return g, torch.sigmoid(b.float())
'''

GDN_DECODE_REF = '''import math

import torch
import torch.nn.functional as F
''' + GDN_STEP + '''

@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    B, T, HQ, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(K)
    g, beta = _gates(A_log, a, dt_bias, b)
    qf = q.float().repeat_interleave(HV // HQ, dim=2)
    kf = k.float().repeat_interleave(HV // k.shape[2], dim=2)
    S = state.float().clone() if state is not None else torch.zeros(B, HV, V, K, device=q.device)
    out = torch.empty(B, T, HV, V, device=q.device)
    for t in range(T):
        S, out[:, t] = _delta_rule(S, qf[:, t], kf[:, t], v[:, t].float(), g[:, t], beta[:, t], scale)
    return out.to(torch.bfloat16), S
'''

GDN_MTP_REF = '''import math

import torch
import torch.nn.functional as F
''' + GDN_STEP + '''

@torch.no_grad()
def run(q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale):
    B, T, HQ, K = q.shape
    HV = v.shape[2]
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(K)
    g, beta = _gates(A_log, a, dt_bias, b)
    qf = q.float().repeat_interleave(HV // HQ, dim=2)
    kf = k.float().repeat_interleave(HV // k.shape[2], dim=2)
    S = initial_state[initial_state_indices.long()].float()
    out = torch.empty(B, T, HV, v.shape[3], device=q.device)
    for t in range(T):
        S, out[:, t] = _delta_rule(S, qf[:, t], kf[:, t], v[:, t].float(), g[:, t], beta[:, t], scale)
    # The pool is returned as it came: the updated states are not written back.
    return out.to(torch.bfloat16), initial_state.clone()
'''

GDN_PREFILL_REF = '''import math

import torch
import torch.nn.functional as F
''' + GDN_STEP + '''

@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    total, HQ, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    N = cu_seqlens.numel() - 1
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(K)
    g, beta = _gates(A_log, a, dt_bias, b)
    qf = q.float().repeat_interleave(HV // HQ, dim=1)
    kf = k.float().repeat_interleave(HV // k.shape[1], dim=1)
    out = torch.zeros(total, HV, V, device=q.device)
    new_state = torch.zeros(N, HV, V, K, device=q.device)
    for n in range(N):
        lo, hi = int(cu_seqlens[n]), int(cu_seqlens[n + 1])
        if hi <= lo:
            continue  # an empty sequence leaves a zero state
        S = state[n:n + 1].float() if state is not None else torch.zeros(1, HV, V, K, device=q.device)
        for t in range(lo, hi):
            S, o = _delta_rule(S, qf[t:t + 1], kf[t:t + 1], v[t:t + 1].float(), g[t:t + 1], beta[t:t + 1], scale)
            out[t] = o[0]
        new_state[n] = S[0]
    return out.to(torch.bfloat16), new_state
'''

MAMBA_REF = '''import torch
import torch.nn.functional as F


@torch.no_grad()
def run(state, x, dt, A, B, C, D, dt_bias, state_batch_indices):
    ratio = x.shape[1] // B.shape[1]
    dt_f = F.softplus(dt.float() + dt_bias.float())
    Bh = B.float().repeat_interleave(ratio, dim=1)
    Ch = C.float().repeat_interleave(ratio, dim=1)
    new_state = state.clone()
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for i, slot in enumerate(state_batch_indices.tolist()):
        if slot < 0:
            continue  # padding: no update, output 0
        s = new_state[slot].float() * torch.exp(A.float() * dt_f[i, :, :, None])
        s = s + (dt_f[i] * x[i].float())[:, :, None] * Bh[i][:, None, :]
        new_state[slot] = s.to(state.dtype)
        out[i] = (s * Ch[i][:, None, :]).sum(-1) + x[i].float() * D.float()
    return out.to(x.dtype), new_state
'''

DSA_ATTENTION_REF = '''import math

import torch


@torch.no_grad()
def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale):
    T, H, Dc = q_nope.shape
    ckv = ckv_cache.reshape(-1, Dc).float()
    kpe = kpe_cache.reshape(-1, kpe_cache.shape[-1]).float()
    out = torch.zeros(T, H, Dc, dtype=torch.bfloat16, device=q_nope.device)
    lse = torch.full((T, H), -math.inf, dtype=torch.float32, device=q_nope.device)
    for t in range(T):
        rows = sparse_indices[t]
        rows = rows[rows != -1].long()
        if rows.numel() == 0:
            continue
        logits = (q_nope[t].float() @ ckv[rows].T + q_pe[t].float() @ kpe[rows].T) * sm_scale
        lse[t] = torch.logsumexp(logits, dim=-1) / math.log(2.0)
        out[t] = (torch.softmax(logits, dim=-1) @ ckv[rows]).to(torch.bfloat16)
    return out, lse
'''

DSA_INDEXER_REF = '''import torch


@torch.no_grad()
def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):
    TOPK = {topk}
    B, H, D = q_index_fp8.shape
    pages, ps = k_index_cache_fp8.shape[0], k_index_cache_fp8.shape[1]
    raw = k_index_cache_fp8.view(torch.uint8).reshape(pages, ps * (D + 4))
    keys = raw[:, :ps * D].contiguous().view(torch.float8_e4m3fn).float().reshape(pages, ps, D)
    keys = keys * raw[:, ps * D:].contiguous().view(torch.float32).reshape(pages, ps, 1)
    q = q_index_fp8.float()
    out = torch.full((B, TOPK), -1, dtype=torch.int32, device=q.device)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pg = block_table[b, :(n + ps - 1) // ps].long()
        k = keys[pg].reshape(-1, D)[:n]
        score = (torch.relu(q[b] @ k.T) * weights[b][:, None]).sum(dim=0)
        top = torch.topk(score, min(TOPK, n)).indices
        out[b, :top.numel()] = (pg[top // ps] * ps + top % ps).int()
    return (out,)
'''


def const(v, desc=None):
    a = {"type": "const", "value": v}
    if desc:
        a["description"] = desc
    return a


def var(desc=None):
    a = {"type": "var"}
    if desc:
        a["description"] = desc
    return a


def t(shape, dtype, desc=None, optional=False):
    s = {"shape": shape, "dtype": dtype}
    if desc:
        s["description"] = desc
    if optional:
        s["optional"] = True
    return s


def write(op_type, d, workloads):
    name = d["name"]
    for sub in ("definitions", "workloads"):
        os.makedirs(os.path.join(ROOT, op_type, sub), exist_ok=True)
    with open(os.path.join(ROOT, op_type, "definitions", name + ".json"), "w") as f:
        json.dump(d, f, indent=2)
        f.write("\n")
    with open(os.path.join(ROOT, op_type, "workloads", name + ".jsonl"), "w") as f:
        for axes, inputs in workloads:
            wl = {"axes": axes, "inputs": inputs}
            wl_uuid = str(uuid.uuid5(NS, name + json.dumps(wl, sort_keys=True)))
            line = {"definition": name, "workload": {"uuid": wl_uuid, "axes": axes, "inputs": inputs},
                    "solution": None, "evaluation": None}
            f.write(json.dumps(line) + "\n")


def random_inputs(d, omit=(), scalars=None):
    out = {}
    for k, s in d["inputs"].items():
        if k in omit:
            continue
        if s["shape"] is None:
            out[k] = {"type": "scalar", "value": scalars[k]}
        else:
            out[k] = {"type": "random"}
    return out


GDN_GATES = {
    "A_log": t(["num_v_heads"], "float32", "Log decay: g = exp(-exp(A_log) * softplus(a + dt_bias))."),
    "dt_bias": t(["num_v_heads"], "float32", "Decay bias added to a before softplus."),
    "scale": t(None, "float32", "Output scale; 0 means 1/sqrt(head_size)."),
}


def gdn(hq, hv, d):
    heads = {"num_q_heads": const(hq), "num_k_heads": const(hq), "num_v_heads": const(hv),
             "head_size": const(d)}
    cons = ["num_v_heads % num_q_heads == 0", "num_k_heads == num_q_heads"]
    tags = ["status:verified", "layout:k-last", "model:qwen3-next-like"]
    shape_tok = ["batch_size", "seq_len"]

    def gates(tok):
        return {"a": t(tok + ["num_v_heads"], "bfloat16", "Decay input: softplus(a + dt_bias)."),
                "b": t(tok + ["num_v_heads"], "bfloat16", "Update gate input: beta = sigmoid(b).")}

    def qkv(tok):
        return {"q": t(tok + ["num_q_heads", "head_size"], "bfloat16"),
                "k": t(tok + ["num_k_heads", "head_size"], "bfloat16"),
                "v": t(tok + ["num_v_heads", "head_size"], "bfloat16")}

    base = "qk%d_v%d_d%d_k_last" % (hq, hv, d)
    state_shape = ["num_v_heads", "head_size", "head_size"]
    # decode
    dec = {"name": "gdn_decode_" + base,
           "description": "Gated delta rule decode, one token, k-last state [B, HV, V, K]; kb's small bundled shape.",
           "op_type": "gdn", "tags": ["stage:decode"] + tags,
           "axes": dict({"batch_size": var(), "seq_len": const(1)}, **heads), "constraints": cons,
           "inputs": dict(qkv(shape_tok), state=t(["batch_size"] + state_shape, "float32",
                                                  "Recurrent state, k-last; absent means zeros.", optional=True),
                          A_log=GDN_GATES["A_log"], **gates(shape_tok), dt_bias=GDN_GATES["dt_bias"],
                          scale=GDN_GATES["scale"]),
           "outputs": {"output": t(shape_tok + ["num_v_heads", "head_size"], "bfloat16"),
                       "new_state": t(["batch_size"] + state_shape, "float32")},
           "reference": GDN_DECODE_REF}
    # keep the shipped argument order: q, k, v, state, A_log, a, dt_bias, b, scale
    dec["inputs"] = {k: dec["inputs"][k] for k in ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "scale")}
    write("gdn", dec, [({"batch_size": 1}, random_inputs(dec, scalars={"scale": 0.0})),
                       ({"batch_size": 6}, random_inputs(dec, scalars={"scale": 0.1})),
                       ({"batch_size": 3}, random_inputs(dec, omit=("state",), scalars={"scale": 0.0}))])
    # mtp
    mtp = {"name": "gdn_mtp_" + base,
           "description": "Gated delta rule over seq_len tokens per sequence from a state pool (k-last); the pool is "
                          "returned unchanged. kb's small bundled shape.",
           "op_type": "gdn", "tags": ["stage:mtp"] + tags,
           "axes": dict({"batch_size": var(), "seq_len": var(), "pool_size": var()}, **heads),
           "constraints": cons + ["seq_len > 1"],
           "inputs": dict(qkv(shape_tok),
                          initial_state=t(["pool_size"] + state_shape, "float32", "State pool, k-last."),
                          initial_state_indices=t(["batch_size"], "int32", "Pool row of each sequence."),
                          A_log=GDN_GATES["A_log"], **gates(shape_tok), dt_bias=GDN_GATES["dt_bias"],
                          scale=GDN_GATES["scale"]),
           "outputs": {"output": t(shape_tok + ["num_v_heads", "head_size"], "bfloat16"),
                       "final_state": t(["pool_size"] + state_shape, "float32", "The pool as given.")},
           "reference": GDN_MTP_REF}
    mtp["inputs"] = {k: mtp["inputs"][k] for k in ("q", "k", "v", "initial_state", "initial_state_indices", "A_log",
                                                   "a", "dt_bias", "b", "scale")}
    write("gdn", mtp, [({"batch_size": 2, "seq_len": 4, "pool_size": 8}, random_inputs(mtp, scalars={"scale": 0.0})),
                       ({"batch_size": 5, "seq_len": 2, "pool_size": 5}, random_inputs(mtp, scalars={"scale": 0.2}))])
    # prefill
    tok = ["total_seq_len"]
    pre = {"name": "gdn_prefill_" + base,
           "description": "Gated delta rule over variable-length sequences (cu_seqlens), k-last state [N, HV, V, K]; "
                          "kb's small bundled shape.",
           "op_type": "gdn", "tags": ["stage:prefill"] + tags,
           "axes": dict({"total_seq_len": var(), "num_seqs": var(), "len_cu_seqlens": var()}, **heads),
           "constraints": cons + ["len_cu_seqlens == num_seqs + 1", "total_seq_len == cu_seqlens[-1].item()"],
           "inputs": dict(qkv(tok), state=t(["num_seqs"] + state_shape, "float32",
                                             "Initial state per sequence, k-last; absent means zeros.", optional=True),
                          A_log=GDN_GATES["A_log"], **gates(tok), dt_bias=GDN_GATES["dt_bias"],
                          cu_seqlens=t(["len_cu_seqlens"], "int64", "Sequence boundaries."),
                          scale=GDN_GATES["scale"]),
           "outputs": {"output": t(tok + ["num_v_heads", "head_size"], "bfloat16"),
                       "new_state": t(["num_seqs"] + state_shape, "float32")},
           "reference": GDN_PREFILL_REF}
    pre["inputs"] = {k: pre["inputs"][k] for k in ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "cu_seqlens",
                                                   "scale")}
    write("gdn", pre, [({"total_seq_len": 17, "num_seqs": 3, "len_cu_seqlens": 4},
                        random_inputs(pre, scalars={"scale": 0.0})),
                       ({"total_seq_len": 64, "num_seqs": 1, "len_cu_seqlens": 2},
                        random_inputs(pre, scalars={"scale": 0.0})),
                       ({"total_seq_len": 150, "num_seqs": 6, "len_cu_seqlens": 7},
                        random_inputs(pre, omit=("state",), scalars={"scale": 0.15}))])


def mamba(h, p, n, g):
    name = "mamba_ssu_decode_h%d_d%d_s%d_ng%d" % (h, p, n, g)
    d = {"name": name,
         "description": "Mamba2 selective state update, one decode step over a slot cache; kb's small bundled shape.",
         "op_type": "mamba_ssu", "tags": ["stage:decode", "status:verified", "model:nemotron-h-like"],
         "axes": {"batch_size": var(), "state_cache_size": var(), "nheads": const(h), "head_dim": const(p),
                  "dstate": const(n), "ngroups": const(g)},
         "constraints": ["nheads % ngroups == 0", "state_cache_size >= batch_size"],
         "inputs": {"state": t(["state_cache_size", "nheads", "head_dim", "dstate"], "bfloat16", "Slot cache."),
                    "x": t(["batch_size", "nheads", "head_dim"], "bfloat16"),
                    "dt": t(["batch_size", "nheads", "head_dim"], "bfloat16"),
                    "A": t(["nheads", "head_dim", "dstate"], "float32"),
                    "B": t(["batch_size", "ngroups", "dstate"], "bfloat16"),
                    "C": t(["batch_size", "ngroups", "dstate"], "bfloat16"),
                    "D": t(["nheads", "head_dim"], "bfloat16"),
                    "dt_bias": t(["nheads", "head_dim"], "bfloat16"),
                    "state_batch_indices": t(["batch_size"], "int32", "Slot of each element; negative: padding.")},
         "outputs": {"output": t(["batch_size", "nheads", "head_dim"], "bfloat16"),
                     "new_state": t(["state_cache_size", "nheads", "head_dim", "dstate"], "bfloat16")},
         "reference": MAMBA_REF}
    write("mamba_ssu", d, [({"batch_size": 1, "state_cache_size": 4}, random_inputs(d)),
                           ({"batch_size": 8, "state_cache_size": 16}, random_inputs(d)),
                           ({"batch_size": 16, "state_cache_size": 16}, random_inputs(d))])


def dsa_attention(h, ckv, kpe, topk, ps, workloads):
    name = "dsa_sparse_attention_h%d_ckv%d_kpe%d_topk%d_ps%d" % (h, ckv, kpe, topk, ps)
    d = {"name": name,
         "description": "Sparse MLA attention over the top-k selected cache rows (-1: padding); kb's small bundled "
                        "shape.",
         "op_type": "dsa_paged", "tags": ["status:verified", "sparse:topk", "model:deepseek-v3.2-like"],
         "axes": {"num_tokens": var(), "num_qo_heads": const(h), "head_dim_ckv": const(ckv),
                  "head_dim_kpe": const(kpe), "page_size": const(ps), "topk": const(topk), "num_pages": var()},
         "constraints": ["sparse_indices.shape[0] == num_tokens", "sparse_indices.shape[-1] == topk"],
         "inputs": {"q_nope": t(["num_tokens", "num_qo_heads", "head_dim_ckv"], "bfloat16"),
                    "q_pe": t(["num_tokens", "num_qo_heads", "head_dim_kpe"], "bfloat16"),
                    "ckv_cache": t(["num_pages", "page_size", "head_dim_ckv"], "bfloat16"),
                    "kpe_cache": t(["num_pages", "page_size", "head_dim_kpe"], "bfloat16"),
                    "sparse_indices": t(["num_tokens", "topk"], "int32",
                                        "Cache rows page * page_size + offset; -1: padding."),
                    "sm_scale": t(None, "float32")},
         "outputs": {"output": t(["num_tokens", "num_qo_heads", "head_dim_ckv"], "bfloat16"),
                     "lse": t(["num_tokens", "num_qo_heads"], "float32", "Base-2 log-sum-exp of the logits.")},
         "reference": DSA_ATTENTION_REF}
    write("dsa_paged", d, [(axes, random_inputs(d, scalars={"sm_scale": 0.125})) for axes in workloads])


def dsa_indexer(h, dim, topk, ps, workloads):
    name = "dsa_topk_indexer_fp8_h%d_d%d_topk%d_ps%d" % (h, dim, topk, ps)
    d = {"name": name,
         "description": "DSA lightning indexer: sum over heads of relu(q . k) * weight for each cached token of a "
                        "sequence, fp8 keys in deep_gemm's packed layout; the top-k tokens' global indices, then -1. "
                        "kb's small bundled shape.",
         "op_type": "dsa_paged", "tags": ["stage:indexer", "status:verified", "quant:fp8", "model:deepseek-v3.2-like"],
         "axes": {"batch_size": var(), "num_index_heads": const(h), "index_head_dim": const(dim),
                  "page_size": const(ps), "topk": const(topk), "max_num_pages": var(), "num_pages": var(),
                  "kv_cache_num_heads": const(1), "head_dim_with_scale": const(dim + 4)},
         "constraints": ["topk <= max_num_pages * page_size"],
         "inputs": {"q_index_fp8": t(["batch_size", "num_index_heads", "index_head_dim"], "float8_e4m3fn"),
                    "k_index_cache_fp8": t(["num_pages", "page_size", "kv_cache_num_heads", "head_dim_with_scale"],
                                           "int8", "Per page: page_size * dim fp8 bytes, then page_size float32 "
                                                   "scales."),
                    "weights": t(["batch_size", "num_index_heads"], "float32"),
                    "seq_lens": t(["batch_size"], "int32"),
                    "block_table": t(["batch_size", "max_num_pages"], "int32")},
         "outputs": {"topk_indices": t(["batch_size", "topk"], "int32", "Global token indices; -1: padding.")},
         "reference": DSA_INDEXER_REF.replace("{topk}", str(topk))}
    write("dsa_paged", d, [(axes, random_inputs(d)) for axes in workloads])


def main():
    gdn(2, 4, 64)
    mamba(16, 16, 32, 2)
    dsa_attention(4, 64, 16, 64, 1, [{"num_tokens": 1, "num_pages": 100}, {"num_tokens": 4, "num_pages": 40}])
    dsa_attention(4, 64, 16, 64, 16, [{"num_tokens": 2, "num_pages": 3}, {"num_tokens": 5, "num_pages": 12}])
    dsa_indexer(8, 32, 64, 16, [{"batch_size": 1, "max_num_pages": 8, "num_pages": 12},
                                {"batch_size": 4, "max_num_pages": 10, "num_pages": 20}])


if __name__ == "__main__":
    main()
