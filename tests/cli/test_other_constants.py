#!/usr/bin/env python3
"""kb bench --device cpu on definitions kb has never seen: each kind of shipped definition (one per family of
names that differ only in constants; three gemm shapes) derived with other constants, the sizes real models use
that the shipped set does not (head groups of 3, 5, 6 and 8, head dims 64 to 256, page sizes 1 and 16, MLA with 8
to 128 heads, other GDN / Mamba head layouts, DSA with other heads, dims and top-k, smaller MoE experts, odd
hidden sizes, vocabularies of 1000 to 151936, partial rotary dims). Each gets one small workload, and kb's CPU
solution of its op type must be PASSED against kb's oracle: the oracles and the CPU solutions read every
constant from the definition, never from the shipped names or values.

usage: test_other_constants.py KB SHARED_DIR SOURCE_DIR [KEEP_DIR]
KEEP_DIR: the derived dataset is copied there too (to judge kb's CUDA solutions on it on a GPU machine:
`kb bench KEEP_DIR --device cuda`). Exits 77 (skipped) when KB_SKIP_SLOW_BENCH is set (unoptimised / sanitized
builds).
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

kb, shared, source = sys.argv[1:4]
keep = sys.argv[4] if len(sys.argv) > 4 else None
if os.environ.get("KB_SKIP_SLOW_BENCH"):
    print(f"skipped: {os.environ['KB_SKIP_SLOW_BENCH']}")
    sys.exit(77)
defs_root = os.path.join(shared, "flashinfer-trace", "definitions")
failures = 0


def check(name, cond, detail=""):
    global failures
    print(f"{'ok  ' if cond else 'FAIL'} {name}{'' if cond else ': ' + detail}")
    failures += not cond


def variants(op, c):
    """Other values of the const axes c of a definition of op type op (each dict overrides some of them)."""
    if op in ("gqa_paged", "gqa_ragged"):
        out = [dict(num_qo_heads=qo, num_kv_heads=kv, head_dim=hd)
               for qo, kv, hd in ((24, 4, 128), (5, 1, 64), (12, 4, 96), (16, 2, 256), (14, 7, 192))]
        return out + [dict(page_size=1), dict(page_size=16)]
    if op == "mla_paged":
        return [dict(num_qo_heads=8), dict(num_qo_heads=128), dict(num_qo_heads=20, page_size=16), dict(page_size=1)]
    if op == "mla_ragged":
        return [dict(num_qo_heads=8, num_kv_heads=8), dict(qk_dim=96, vo_dim=64),
                dict(num_qo_heads=20, num_kv_heads=20, qk_dim=128, vo_dim=128)]
    if op == "gdn":
        return [dict(num_q_heads=6, num_k_heads=6, num_v_heads=12), dict(num_q_heads=3, num_k_heads=3, num_v_heads=9),
                dict(head_size=64)]
    if op == "mamba_ssu":
        return [dict(nheads=48, ngroups=4), dict(head_dim=32, dstate=64), dict(nheads=24, ngroups=1, dstate=16)]
    if op == "dsa_paged" and "num_index_heads" in c:
        return [dict(num_index_heads=32, index_head_dim=64, head_dim_with_scale=68, topk=256, page_size=16),
                dict(num_index_heads=48, index_head_dim=96, head_dim_with_scale=100, topk=300),
                dict(topk=512, page_size=1)]
    if op == "dsa_paged":
        return [dict(num_qo_heads=8), dict(num_qo_heads=32, topk=256), dict(head_dim_ckv=256, head_dim_kpe=32, topk=128)]
    if op == "moe":
        out = []
        for h, i in ((256, 256), (384, 128), (512, 384)):
            v = dict(hidden_size=h, intermediate_size=i, gemm1_out_size=2 * i, num_hidden_blocks=h // 128,
                     num_intermediate_blocks=i // 128, num_gemm1_out_blocks=2 * i // 128)
            if c.get("num_experts", 0) > 32:  # fewer experts, for the CPU's time; groups still divide them
                v["num_experts"] = 32
                if "num_local_experts" in c:
                    v["num_local_experts"] = min(c["num_local_experts"], 16)
            out.append(v)
        return out
    if op == "rmsnorm":
        return [dict(hidden_size=96), dict(hidden_size=5000)]
    if op == "sampling":
        return [dict(vocab_size=50000), dict(vocab_size=1000), dict(vocab_size=151936)]
    if op == "gemm":
        return [dict(N=200, K=96), dict(N=1000, K=1000)]
    if op == "rope":
        return [dict(head_size=64, rotary_dim=32), dict(head_size=256, rotary_dim=256)]
    return []


def small_axes(d):
    """One small workload's variable axes, consistent with the definition's constants."""
    v = {k for k, a in d["axes"].items() if a["type"] == "var"}
    c = {k: a["value"] for k, a in d["axes"].items() if a["type"] == "const"}
    ps, topk = c.get("page_size", 1), c.get("topk", 64)
    per = (37 + ps - 1) // ps  # pages of a 37-token sequence
    table = [
        ({"batch_size"}, {"batch_size": 3}),
        ({"batch_size", "seq_len", "pool_size"}, {"batch_size": 2, "seq_len": 3, "pool_size": 5}),
        ({"total_seq_len", "num_seqs", "len_cu_seqlens"}, {"total_seq_len": 150, "num_seqs": 3, "len_cu_seqlens": 4}),
        ({"batch_size", "state_cache_size"}, {"batch_size": 3, "state_cache_size": 7}),
        ({"num_tokens", "num_pages"}, {"num_tokens": 2, "num_pages": max(2 * topk, 256) // ps + 1}),
        ({"batch_size", "max_num_pages", "num_pages"},
         {"batch_size": 3, "max_num_pages": (topk + 300 + ps - 1) // ps, "num_pages": 3 * ((topk + 300 + ps - 1) // ps) + 2}),
        ({"seq_len"}, {"seq_len": 9}),
        ({"M"}, {"M": 7}),
        ({"batch_size", "num_pages", "len_indptr", "num_kv_indices"},
         {"batch_size": 3, "len_indptr": 4, "num_kv_indices": 3 * per, "num_pages": 3 * per + 1}),
        ({"len_indptr", "total_q", "num_kv_indices", "num_pages"},
         {"len_indptr": 3, "total_q": 74, "num_kv_indices": 2 * per, "num_pages": 2 * per + 1}),
        ({"len_indptr", "total_q", "num_kv_indices", "num_pages", "batch_size"},
         {"len_indptr": 3, "total_q": 74, "num_kv_indices": 2 * per, "num_pages": 2 * per + 1, "batch_size": 2}),
        ({"len_indptr", "total_q", "total_kv"}, {"len_indptr": 3, "total_q": 74, "total_kv": 74}),
        ({"max_seq_len", "num_kv_heads", "num_qo_heads", "num_tokens"},
         {"max_seq_len": 64, "num_kv_heads": 3, "num_qo_heads": 6, "num_tokens": 11}),
    ]
    return next((axes for names, axes in table if names == v), None)


def scalar_values():
    """The first value each (op type, scalar input) takes in the shipped and bundled workloads."""
    values = {}
    shipped = glob.glob(os.path.join(shared, "flashinfer-trace", "workloads", "*", "*.jsonl"))  # workloads/OP/
    bundled = glob.glob(os.path.join(source, "kernels", "*", "workloads", "*.jsonl"))  # kernels/OP/workloads/
    for path, op in sorted([(p, os.path.basename(os.path.dirname(p))) for p in shipped] +
                           [(p, os.path.basename(os.path.dirname(os.path.dirname(p)))) for p in bundled]):
        with open(path) as f:
            for line in f:
                if line.strip():
                    for name, spec in json.loads(line)["workload"]["inputs"].items():
                        if spec.get("type") == "scalar":
                            values.setdefault((op, name), spec["value"])
    return values


scalars = scalar_values()
derived = {}  # name -> op type
with tempfile.TemporaryDirectory() as tmp:
    root = os.path.join(tmp, "ds")
    kinds, gemms = set(), 0
    for path in sorted(glob.glob(os.path.join(defs_root, "*", "*.json"))):
        with open(path) as f:
            d = json.load(f)
        op = d["op_type"]
        kind = re.sub(r"_h\d+.*$|_v\d+$", "", d["name"])  # names that differ only in constants: one kind
        if kind in kinds or (op == "gemm" and gemms == 3):
            continue
        kinds.add(kind)
        gemms += op == "gemm"
        c = {k: a["value"] for k, a in d["axes"].items() if a["type"] == "const"}
        for over in variants(op, c):
            over = {k: x for k, x in over.items() if k in c and c[k] != x}
            if not over:
                continue
            e = json.loads(json.dumps(d))
            for k, x in over.items():
                e["axes"][k]["value"] = x
            e["name"] = d["name"] + "__" + "_".join(f"{k}{x}" for k, x in over.items())
            inputs = {}
            for name, spec in e["inputs"].items():
                if spec.get("shape"):
                    inputs[name] = {"type": "random"}
                elif name == "local_expert_offset":  # inside the derived definition's experts
                    room = e["axes"]["num_experts"]["value"] - e["axes"]["num_local_experts"]["value"]
                    inputs[name] = {"type": "scalar", "value": min(max(int(scalars.get((op, name), 0)), 0), room)}
                elif (op, name) in scalars:
                    inputs[name] = {"type": "scalar", "value": scalars[(op, name)]}
                elif name == "sm_scale":
                    dim = next(e["axes"][a]["value"] for a in ("head_dim", "qk_dim", "head_dim_qk", "head_dim_ckv")
                               if a in e["axes"])
                    inputs[name] = {"type": "scalar", "value": dim ** -0.5}
            axes = small_axes(e)
            check(f"{e['name']}: a small workload", axes is not None, "no rule for its variable axes")
            if axes is None:
                continue
            os.makedirs(os.path.join(root, "definitions", op), exist_ok=True)
            os.makedirs(os.path.join(root, "workloads", op), exist_ok=True)
            with open(os.path.join(root, "definitions", op, e["name"] + ".json"), "w") as f:
                json.dump(e, f)
            with open(os.path.join(root, "workloads", op, e["name"] + ".jsonl"), "w") as f:
                f.write(json.dumps({"definition": e["name"], "solution": None, "evaluation": None,
                                    "workload": {"uuid": "other-constants-" + e["name"], "axes": axes,
                                                 "inputs": inputs}}) + "\n")
            derived[e["name"]] = op
    check("derived definitions of every op type", {op for op in derived.values()} >= {
        "gqa_paged", "gqa_ragged", "mla_paged", "mla_ragged", "gdn", "mamba_ssu", "dsa_paged", "moe", "rmsnorm",
        "sampling", "gemm", "rope"}, str(sorted(set(derived.values()))))

    if keep:
        shutil.copytree(root, keep, dirs_exist_ok=True)
    p = subprocess.run([kb, "validate", root], capture_output=True, text=True, timeout=300)
    check("kb validate: the derived definitions and workloads are consistent", p.returncode == 0, p.stdout[-3000:])
    p = subprocess.run([kb, "bench", root, "--device", "cpu", "--no-time", "--trials", "1", "--out",
                        os.path.join(tmp, "out")], capture_output=True, text=True, timeout=1200)
    rows = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) >= 4 and not line.startswith(("skipped:", " ")) and f[0] in derived:
            sol = next((x for x in f[1:] if x.startswith("kb_cpu_")), None)
            if sol:
                rows.setdefault(f[0], []).append((sol, f[f.index(sol) + 1]))
    for name in sorted(derived):
        r = rows.get(name, [])
        check(f"{name}: kb's CPU solution PASSED", r and all(s == "PASSED" for _, s in r), f"rows {r}")
    check("kb bench exits 0", p.returncode == 0, f"exit {p.returncode}: {p.stderr[-3000:]}")
    print(f"{len(derived)} derived definitions")

print(f"{failures} failed")
sys.exit(1 if failures else 0)
