"""kb's CUDA solutions beside other implementations of the same definitions, on the workloads bench_kernels.py
generated (same definitions, same axes), on the GPU machine:
  gdn decode, mtp     flash-linear-attention's fused_recurrent_gated_delta_rule (fla-core, Triton)
  gdn prefill         flash-linear-attention's chunk_gated_delta_rule
  mamba_ssu           mamba-ssm's Triton selective_state_update (mamba_ssm/ops/triton/selective_state_update.py,
                      loaded alone from the sdist when the package's compiled extension does not import)
  moe fp8 block scale PyTorch: routing in torch, then per expert torch._scaled_mm with the 1x128 activation and
                      128x128 weight block scales, SwiGLU, the intermediate requantized to fp8 per 1x128 block
Inputs are built in PyTorch on CUDA with the definition's shapes and dtypes and kb's distributions (N(0,1) floats,
fp8 from N(0,1) clamped to [-2, 2], gdn's q and k rows of unit L2 norm, distinct state slots, a random split of
the tokens into sequences), not kb's exact bytes. Before timing a definition, the other implementation runs on a
small shape beside the definition's `reference` and must match it (relative L2 error of each compared output under
a tolerance); a definition whose check fails or cannot run is skipped with the reason printed. The other side is
timed with torch_timing.time_like_kb (kb's timing procedure); kb's latency is read from the traces kb bench wrote.

usage: side_by_side.py --family linear|moe --run DIR [--out-md FILE] [--time-limit S] [--mamba-sdist TAR]
         DIR is bench_kernels.py's --out (DIR/dataset, DIR/results/traces)
       side_by_side.py --cpu-check     (layout conversions against fla's naive recurrence, CPU, small shapes)"""
import argparse
import glob
import importlib.util
import json
import math
import os
import re
import sys
import tarfile
import tempfile
import time
import types

import torch
import torch.nn.functional as F

from definition_reference import reference_fn, rel_err

OPS = {"linear": ["gdn", "mamba_ssu"], "moe": ["moe"]}
FP8 = getattr(torch, "float8_e4m3fn", None)
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32, "int32": torch.int32,
          "int64": torch.int64, "float8_e4m3fn": FP8}


# ---- inputs -------------------------------------------------------------------------------------------------------

def shape_of(spec, axes):
    return [axes[a] for a in spec["shape"]]


def slot_pool(d, name):
    """For X_indices: the first axis of the input named by the longest '_'-separated prefix X (kb's rule)."""
    prefix = name[: -len("_indices")]
    while prefix:
        spec = d["inputs"].get(prefix)
        if spec and spec.get("shape"):
            return spec["shape"][0]
        prefix = prefix.rpartition("_")[0]
    return None


def build_inputs(d, axes, scalars, device, gen):
    """The definition's inputs as torch tensors, in kb's distributions (module docstring)."""
    axes = dict(axes)
    for name, a in d["axes"].items():
        if a.get("type") == "const":
            axes[name] = a["value"]
    out = {}
    for name, spec in d["inputs"].items():
        if not spec.get("shape"):
            out[name] = scalars.get(name)
            continue
        shape, dt = shape_of(spec, axes), DTYPES[spec["dtype"]]
        if name.startswith("cu_seqlens"):
            n, total = shape[0] - 1, None
            for k, v in d["axes"].items():  # the axis whose value is cu_seqlens[-1]: the tokens' axis
                if v.get("type") == "var" and k in axes and k not in ("num_seqs", "len_cu_seqlens"):
                    total = axes[k]
            cuts = torch.sort(torch.randint(0, total + 1, (n - 1,), generator=gen)).values
            out[name] = torch.cat([torch.zeros(1, dtype=torch.int64), cuts, torch.tensor([total])]).to(dt).to(device)
        elif name.endswith("_indices") and slot_pool(d, name):
            pool = axes[slot_pool(d, name)]
            out[name] = torch.randperm(pool, generator=gen)[: shape[0]].to(dt).to(device)
        elif d["op_type"] == "gdn" and name in ("q", "k"):
            x = torch.randn(shape, generator=gen)
            out[name] = (x / x.norm(dim=-1, keepdim=True)).to(dt).to(device)
        elif dt == FP8:
            out[name] = torch.randn(shape, generator=gen).clamp(-2, 2).to(dt).to(device)
        elif dt.is_floating_point:
            out[name] = torch.randn(shape, generator=gen).to(dt).to(device)
        else:
            out[name] = torch.randint(-1024, 1024, shape, generator=gen).to(dt).to(device)
    return out


# ---- gdn: flash-linear-attention ----------------------------------------------------------------------------------

def gdn_kind(d):
    return re.match(r"gdn_(decode|mtp|prefill)", d["name"]).group(1)


def gdn_scale(x, head_size):
    return x if x else 1.0 / math.sqrt(head_size)


def gdn_gates(x):
    """The definition's gates in fla's explicit form: log g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b)."""
    g = -torch.exp(x["A_log"].float()) * F.softplus(x["a"].float() + x["dt_bias"].float())
    return g, torch.sigmoid(x["b"].float())


def gdn_call(d, x, fla_ops, variant):
    """A closure running the definition's call through fla, and the names of the definition outputs its results
    stand for. variant 'fused': fla computes the gates and reads the k-last state itself (use_gate_in_kernel,
    use_beta_sigmoid_in_kernel, state_v_first); 'explicit': the gates in torch and the state transposed to fla's
    [N, HV, K, V]. fla_ops holds fused_recurrent_gated_delta_rule and chunk_gated_delta_rule (or the naive
    recurrence under those names, on the CPU)."""
    kind = gdn_kind(d)
    K = x["q"].shape[-1]
    scale = gdn_scale(x["scale"], K)
    if kind == "prefill":
        q, k, v, a, b = (x[n].unsqueeze(0) for n in ("q", "k", "v", "a", "b"))
        state, cu = x["state"], x["cu_seqlens"]
        fn = fla_ops["chunk_gated_delta_rule"]
    else:
        q, k, v, a, b = (x[n] for n in ("q", "k", "v", "a", "b"))
        state = x["state"] if kind == "decode" else None
        cu = None
        fn = fla_ops["fused_recurrent_gated_delta_rule"]
    outputs = ["output", "new_state"] if kind != "mtp" else ["output"]
    pool, idx = (x["initial_state"], x["initial_state_indices"]) if kind == "mtp" else (None, None)
    cu_cpu = cu.cpu() if cu is not None else None

    if variant == "fused":
        extra = {"cu_seqlens": cu} if cu is not None else {}
        if cu is not None:
            extra["cu_seqlens_cpu"] = cu_cpu

        def run():
            s0 = pool.index_select(0, idx.long()) if pool is not None else state
            o, s = fn(q, k, v, g=a, beta=b, scale=scale, initial_state=s0, output_final_state=kind != "mtp",
                      use_gate_in_kernel=True, A_log=x["A_log"], dt_bias=x["dt_bias"],
                      use_beta_sigmoid_in_kernel=True, state_v_first=True, **extra)
            o = o[0] if kind == "prefill" else o
            return (o, s) if kind != "mtp" else (o,)
        return run, outputs

    g, beta = gdn_gates(x)
    if kind == "prefill":
        g, beta = g.unsqueeze(0), beta.unsqueeze(0)

    def run():
        s0 = pool.index_select(0, idx.long()) if pool is not None else state
        s0 = s0.transpose(-1, -2).contiguous()  # [N, HV, V, K] -> fla's [N, HV, K, V]
        o, s = fn(q, k, v, g=g, beta=beta, scale=scale, initial_state=s0, output_final_state=kind != "mtp",
                  **({"cu_seqlens": cu} if cu is not None else {}))
        o = o[0] if kind == "prefill" else o
        return (o, s.transpose(-1, -2)) if kind != "mtp" else (o,)
    return run, outputs


def gdn_check_axes(d):
    kind = gdn_kind(d)
    if kind == "decode":
        return {"batch_size": 3}
    if kind == "mtp":
        return {"batch_size": 3, "seq_len": 3, "pool_size": 5}
    return {"total_seq_len": 150, "num_seqs": 3, "len_cu_seqlens": 4}


# ---- mamba_ssu: mamba-ssm's Triton selective_state_update ---------------------------------------------------------

def load_mamba(sdist):
    """selective_state_update from the installed mamba_ssm, else from the two files it needs in the sdist (its
    package __init__ imports the compiled extension, built for another torch): (fn, None) or (None, why)."""
    try:
        from mamba_ssm.ops.triton.selective_state_update import selective_state_update
        return selective_state_update, None
    except Exception as e:  # noqa: BLE001
        why = f"mamba_ssm does not import ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    if not sdist or not os.path.exists(sdist):
        return None, why + "; no mamba-ssm sdist given (--mamba-sdist)"
    try:
        # Triton reads a @jit function's source from its file, so the two modules are written out and imported
        # from there (bare parent packages: the real __init__ imports the compiled extension).
        root = tempfile.mkdtemp(prefix="kb_mamba_")
        pkg_dir = os.path.join(root, "mamba_ssm", "ops", "triton")
        os.makedirs(pkg_dir)
        with tarfile.open(sdist) as tar:
            for m in tar.getmembers():
                for mod in ("softplus", "selective_state_update"):
                    if m.name.endswith(f"mamba_ssm/ops/triton/{mod}.py"):
                        with open(os.path.join(pkg_dir, f"{mod}.py"), "wb") as f:
                            f.write(tar.extractfile(m).read())
        for pkg, sub in (("mamba_ssm", ""), ("mamba_ssm.ops", "ops"), ("mamba_ssm.ops.triton", "ops/triton")):
            sys.modules[pkg] = types.ModuleType(pkg)
            sys.modules[pkg].__path__ = [os.path.join(root, "mamba_ssm", sub)]
        for mod in ("softplus", "selective_state_update"):
            name = f"mamba_ssm.ops.triton.{mod}"
            path = os.path.join(pkg_dir, f"{mod}.py")
            spec = importlib.util.spec_from_file_location(name, path)
            m = importlib.util.module_from_spec(spec)
            sys.modules[name] = m
            spec.loader.exec_module(m)
        return sys.modules["mamba_ssm.ops.triton.selective_state_update"].selective_state_update, None
    except Exception as e:  # noqa: BLE001
        return None, f"{why}; loading selective_state_update.py from {sdist} failed: {type(e).__name__}: {e}"


def mamba_call(d, x, ssu, variant):
    def run():
        out = ssu(x["state"], x["x"], x["dt"], x["A"], x["B"], x["C"], D=x["D"], dt_bias=x["dt_bias"],
                  dt_softplus=True, state_batch_indices=x["state_batch_indices"])
        return out, x["state"]
    return run, ["output", "new_state"]


# ---- moe: PyTorch with torch._scaled_mm ---------------------------------------------------------------------------

def moe_form(d):
    if d["name"].startswith("moe_fp8_block_scale_ds_routing"):
        return "ds_routing"
    if d["name"].startswith("moe_fp8_block_scale_renorm"):
        return "renorm"
    return None


def name_int(d, key):
    m = re.search(rf"(?:^|_){key}(\d+)(?:_|$)", d["name"])
    return int(m.group(1)) if m else None


def moe_route(d, x):
    """(topk experts [T, k] int64 in the global numbering, weights [T, k] float32), the definition's routing."""
    top_k = name_int(d, "topk")
    logits = x["routing_logits"].float()
    if moe_form(d) == "renorm":
        vals, idx = torch.topk(logits, top_k, dim=-1)
        return idx, torch.softmax(vals, dim=-1)
    ng, kg = name_int(d, "ng"), name_int(d, "kg")
    T, E = logits.shape
    s = torch.sigmoid(logits)
    sb = s + x["routing_bias"].float()
    groups = sb.view(T, ng, E // ng).topk(2, dim=2).values.sum(2)
    keep = torch.zeros_like(groups).scatter_(1, groups.topk(kg, dim=1).indices, 1.0)
    masked = sb.masked_fill(keep.repeat_interleave(E // ng, dim=1) == 0, torch.finfo(torch.float32).min)
    idx = masked.topk(top_k, dim=1).indices
    w = s.gather(1, idx)
    return idx, w / (w.sum(1, keepdim=True) + 1e-20) * float(x["routed_scaling_factor"])


def quantize_1x128(c):
    """c [M, N] float -> fp8 e4m3 [M, N] and its scales [N/128, M] (amax / 448 per row and 128 columns)."""
    M, N = c.shape
    blocks = c.float().view(M, N // 128, 128)
    scale = blocks.abs().amax(-1).clamp(min=1e-12) / 448.0
    q = (blocks / scale.unsqueeze(-1)).to(FP8).view(M, N)
    return q, scale.t().contiguous()


def scaled_mm(a, a_scale_km, w, w_scale_nk, layout):
    """a [M, K] fp8 times w [N, K] fp8 transposed, with a's 1x128 scales given as [K/128, M] and w's 128x128 scales
    as [N/128, K/128], in bf16. layout 'views': scales passed as M-major / K-major transposed views; 'contiguous':
    as contiguous copies."""
    sa, sb = a_scale_km.t(), w_scale_nk.t()
    if layout == "contiguous":
        sa, sb = sa.contiguous(), sb.contiguous()
    return torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)


def moe_call(d, x, _unused, variant):
    I = d["axes"]["intermediate_size"]["value"]
    offset = int(x.get("local_expert_offset") or 0)
    E_local = x["gemm1_weights"].shape[0]

    def run():
        idx, w = moe_route(d, x)
        T = idx.shape[0]
        local = idx - offset
        flat = local.flatten()
        order = torch.argsort(flat, stable=True)
        ok = (flat[order] >= 0) & (flat[order] < E_local)
        order = order[ok]
        experts = flat[order]
        counts = torch.bincount(experts, minlength=E_local).tolist()  # the one host sync
        tokens = order // idx.shape[1]
        weights = w.flatten()[order]
        out = torch.zeros(T, x["hidden_states"].shape[1], dtype=torch.float32, device=idx.device)
        start = 0
        for e, n in enumerate(counts):
            if n == 0:
                continue
            tok = tokens[start:start + n]
            a = x["hidden_states"].index_select(0, tok)
            a_s = x["hidden_states_scale"].index_select(1, tok)
            g1 = scaled_mm(a, a_s, x["gemm1_weights"][e], x["gemm1_weights_scale"][e], variant)
            c = F.silu(g1[:, I:].float()) * g1[:, :I].float()
            cq, c_s = quantize_1x128(c)
            o = scaled_mm(cq, c_s, x["gemm2_weights"][e], x["gemm2_weights_scale"][e], variant)
            out.index_add_(0, tok, o.float() * weights[start:start + n, None])
            start += n
        return (out.to(torch.bfloat16),)
    return run, ["output"]


def moe_reference_bytes(d):
    """The definition's reference dequantizes every expert's weights to float32, three such tensors at once."""
    a = {k: v.get("value") for k, v in d["axes"].items()}
    E = a.get("num_local_experts") or a.get("num_experts")
    return 3 * 4 * E * 3 * a["intermediate_size"] * a["hidden_size"]


# ---- the run ------------------------------------------------------------------------------------------------------

TOLERANCE = {"gdn": 0.02, "mamba_ssu": 0.02, "moe": 0.05}
OTHER = {"gdn": "fla", "mamba_ssu": "mamba-ssm", "moe": "torch _scaled_mm"}


def check(d, ref, call, impl, variants, scalars, device):
    """The first variant whose outputs match the definition's reference on a small shape: (variant, detail) or
    (None, why)."""
    op = d["op_type"]
    axes = gdn_check_axes(d) if op == "gdn" else (
        {"batch_size": 3, "state_cache_size": 5} if op == "mamba_ssu" else {"seq_len": 24})
    gen = torch.Generator().manual_seed(7)
    x = build_inputs(d, axes, scalars, device, gen)
    args = [n for n in d["inputs"]]
    want = ref(**{n: (x[n].clone() if isinstance(x[n], torch.Tensor) else x[n]) for n in args})
    want = want if isinstance(want, (tuple, list)) else (want,)
    names = list(d["outputs"])
    whys = []
    for variant in variants:
        xv = {n: (v.clone() if isinstance(v, torch.Tensor) else v) for n, v in x.items()}
        try:
            run, outs = call(d, xv, impl, variant)
            got = run()
            errs = {o: rel_err(g, want[names.index(o)]) for o, g in zip(outs, got)}
        except Exception as e:  # noqa: BLE001
            whys.append(f"{variant}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])
            continue
        detail = ", ".join(f"{o} rel err {v:.2e}" for o, v in errs.items())
        if all(v <= TOLERANCE[op] for v in errs.values()):
            return variant, f"{variant} at {axes}: {detail}"
        whys.append(f"{variant} at {axes}: {detail} (tolerance {TOLERANCE[op]})")
    return None, "; ".join(whys)


def kb_latencies(traces_dir):
    """(definition, axes json) -> (latency ms, solution) of the fastest passed kb trace."""
    best = {}
    for path in glob.glob(os.path.join(traces_dir, "**", "*.jsonl"), recursive=True):
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                t = json.loads(line)
                ev = t.get("evaluation") or {}
                ms = (ev.get("performance") or {}).get("latency_ms")
                if ev.get("status") != "PASSED" or ms is None:
                    continue
                key = (t["definition"], json.dumps(t["workload"]["axes"], sort_keys=True))
                if key not in best or ms < best[key][0]:
                    best[key] = (ms, t.get("solution"))
    return best


def dataset_rows(run_dir, ops):
    """(definition dict, [(axes, scalar inputs)]) for each definition bench_kernels.py wrote."""
    rows = []
    for op in ops:
        for path in sorted(glob.glob(os.path.join(run_dir, "dataset", "definitions", op, "*.json"))):
            with open(path) as f:
                d = json.load(f)
            wl = []
            wpath = os.path.join(run_dir, "dataset", "workloads", op, d["name"] + ".jsonl")
            with open(wpath) as f:
                for line in f:
                    if line.strip():
                        w = json.loads(line)["workload"]
                        wl.append((w["axes"], {n: s["value"] for n, s in w["inputs"].items()
                                               if s.get("type") == "scalar"}))
            rows.append((d, wl))
    return rows


def implementations(family, args):
    """op type -> (call, impl, variants) for what imports, and op type -> why not for what does not."""
    have, missing = {}, {}
    if family == "linear":
        try:
            from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
            have["gdn"] = (gdn_call, {"chunk_gated_delta_rule": chunk_gated_delta_rule,
                                      "fused_recurrent_gated_delta_rule": fused_recurrent_gated_delta_rule},
                           ["fused", "explicit"])
        except Exception as e:  # noqa: BLE001
            missing["gdn"] = f"fla (fla-core) does not import: {type(e).__name__}: {e}"
        ssu, why = load_mamba(args.mamba_sdist)
        if ssu:
            have["mamba_ssu"] = (mamba_call, ssu, ["triton"])
        else:
            missing["mamba_ssu"] = why
    else:
        if not hasattr(torch, "_scaled_mm") or FP8 is None:
            missing["moe"] = "this torch has no torch._scaled_mm or float8_e4m3fn"
        else:
            have["moe"] = (moe_call, None, ["views", "contiguous"])
    return have, missing


def run_family(args):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_timing import time_like_kb
    device = "cuda"
    have, missing = implementations(args.family, args)
    for op, why in missing.items():
        print(f"not compared: {op}: {why}", flush=True)
    kb = kb_latencies(os.path.join(args.run, "results", "traces"))
    L2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
    flush_buf = torch.empty(2 * L2, dtype=torch.uint8, device=device)
    start = time.monotonic()
    lines, notes, form_passed = [], [], {}
    for d, workloads in dataset_rows(args.run, OPS[args.family]):
        op = d["op_type"]
        if op not in have:
            notes.append(f"{d['name']}: not compared: {missing.get(op, 'no other implementation')}")
            continue
        call, impl, variants = have[op]
        if op == "moe" and moe_form(d) is None:
            notes.append(f"{d['name']}: not compared: side_by_side.py has PyTorch formulations for the fp8 block "
                         "scale forms (renorm, ds_routing) only")
            continue
        if args.time_limit and time.monotonic() - start > args.time_limit:
            notes.append(f"{d['name']}: not compared: the time limit ({args.time_limit} s) was reached")
            continue
        scalars = workloads[0][1] if workloads else {}
        if op == "moe" and moe_reference_bytes(d) > args.reference_bytes:
            variant = form_passed.get(moe_form(d))
            if not variant:
                notes.append(f"{d['name']}: not compared: its reference needs about {moe_reference_bytes(d) >> 30}"
                             " GiB and no definition of its form was checked first")
                continue
            detail = f"{variant}: the reference needs {moe_reference_bytes(d) >> 30} GiB; the form's check on a " \
                     "smaller definition stands for it"
        else:
            try:
                variant, detail = check(d, reference_fn(d), call, impl, variants, scalars, device)
            except Exception as e:  # noqa: BLE001 (the definition's reference itself failed)
                variant, detail = None, f"the reference failed: {type(e).__name__}: {e}"[:300]
            torch.cuda.empty_cache()
        print(f"{d['name']}: check {'PASSED' if variant else 'FAILED'}: {detail}", flush=True)
        if not variant:
            notes.append(f"{d['name']}: not compared: {OTHER[op]} does not match the reference: {detail}")
            continue
        if op == "moe":
            form_passed.setdefault(moe_form(d), variant)
        for axes, wscalars in workloads:
            if args.time_limit and time.monotonic() - start > args.time_limit:
                notes.append(f"{d['name']} {axes}: not timed: the time limit was reached")
                continue
            key = (d["name"], json.dumps(axes, sort_keys=True))
            try:
                gen = torch.Generator().manual_seed(1)
                x = build_inputs(d, axes, wscalars, device, gen)
                run, _ = call(d, x, impl, variant)
                with torch.no_grad():
                    ms = time_like_kb(run, flush_buf, max_time_s=1.5, graph=op != "moe")
                graph = time_like_kb.last.get("graph")
            except Exception as e:  # noqa: BLE001
                notes.append(f"{d['name']} {axes}: {OTHER[op]} failed: {type(e).__name__}: {e}"[:300])
                continue
            finally:
                x = None
                torch.cuda.empty_cache()
            kb_ms, sol = kb.get(key, (None, None))
            ratio = f"{ms / kb_ms:.2f}" if kb_ms else "-"
            axes_s = ", ".join(f"{k}={v}" for k, v in sorted(axes.items()))
            lines.append(f"| {d['name']} | {axes_s} | {sol or '-'} | {kb_ms:.4f} | {OTHER[op]} ({variant}) | "
                         f"{ms:.4f} | {ratio} |" if kb_ms else
                         f"| {d['name']} | {axes_s} | - | - | {OTHER[op]} ({variant}) | {ms:.4f} | - |")
            print(lines[-1], ("(graph replay)" if graph else "(queued behind a spin)"), flush=True)
    md = [f"Side by side, produced by `bash bench/run.sh {args.family}` (bench/side_by_side.py). kb ms: the fastest "
          "passed kb solution's latency from kb bench's traces; other ms: torch_timing.time_like_kb (kb's procedure, "
          "L2 flushed) on inputs of the same shapes and distributions; other / kb above 1: kb faster.", "",
          "| definition | axes | kb solution | kb ms | other | other ms | other / kb |",
          "| --- | --- | --- | ---: | --- | ---: | ---: |"] + lines
    if notes:
        md += ["", "Not compared:"] + [f"- {n}" for n in notes]
    text = "\n".join(md) + "\n"
    with open(args.out_md or os.path.join(args.run, f"{args.family}_side_by_side.md"), "w") as f:
        f.write(text)
    for n in notes:
        print(n)
    return 0


# ---- CPU check of the layout conversions --------------------------------------------------------------------------

def cpu_check(args):
    """The 'explicit' gdn conversion (gates in torch, the state transposed to fla's k-first layout, GVA by
    repeating q and k heads) through fla's naive recurrence against each gdn definition's reference, on the CPU.
    fla's naive recurrence has no GVA and no varlen: q and k heads are repeated to HV heads, and prefill runs one
    sequence at a time."""
    path = args.fla_naive
    if not path:
        import fla.ops.gated_delta_rule.naive as naive_mod  # noqa: F401 (imports Triton through fla.ops)
        naive = naive_mod.naive_recurrent_gated_delta_rule
    else:
        spec = importlib.util.spec_from_file_location("fla_naive", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        naive = mod.naive_recurrent_gated_delta_rule

    def gva(x, HV):
        return x.repeat_interleave(HV // x.shape[-2], dim=-2)

    def recurrent(q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens=None):
        HV = v.shape[-2]
        q, k = gva(q, HV), gva(k, HV)
        if cu_seqlens is None:
            return naive(q.float(), k.float(), v.float(), beta, g, scale=scale, initial_state=initial_state,
                         output_final_state=output_final_state)
        outs, states = [], []
        for i in range(len(cu_seqlens) - 1):
            a, b = int(cu_seqlens[i]), int(cu_seqlens[i + 1])
            o, s = naive(q[:, a:b].float(), k[:, a:b].float(), v[:, a:b].float(), beta[:, a:b], g[:, a:b],
                         scale=scale, initial_state=initial_state[i:i + 1], output_final_state=True)
            outs.append(o)
            states.append(s)
        return torch.cat(outs, 1), torch.cat(states, 0)

    ops = {"fused_recurrent_gated_delta_rule": recurrent, "chunk_gated_delta_rule": recurrent}
    paths = sorted(glob.glob(os.path.join(args.definitions, "gdn", "*.json")))
    if args.kernels:
        paths += sorted(glob.glob(os.path.join(args.kernels, "gdn", "definitions", "*.json")))
    failed = 0
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        for axes in (gdn_check_axes(d),) + ((({"total_seq_len": 37, "num_seqs": 1, "len_cu_seqlens": 2}),)
                                            if gdn_kind(d) == "prefill" else ()):
            x = build_inputs(d, axes, {"scale": 0.0}, "cpu", torch.Generator().manual_seed(3))
            want = reference_fn(d)(**{n: (v.clone() if isinstance(v, torch.Tensor) else v) for n, v in x.items()})
            run, outs = gdn_call(d, x, ops, "explicit")
            got = run()
            errs = {o: rel_err(g, want[list(d["outputs"]).index(o)]) for o, g in zip(outs, got)}
            ok = all(v <= TOLERANCE["gdn"] for v in errs.values())
            failed += not ok
            print(f"{d['name']} {axes}: {'PASSED' if ok else 'FAIL'} "
                  + ", ".join(f"{o} rel err {v:.2e}" for o, v in errs.items()))
    # mamba_ssu: the definition's layout is mamba-ssm's (state [cache, nheads, dim, dstate], x / dt [batch, nheads,
    # dim], A [nheads, dim, dstate], B / C [batch, ngroups, dstate], D / dt_bias [nheads, dim]): the sdist's torch
    # reference (selective_state_update_ref) is checked beside the definition's when --mamba-sdist is given
    if args.mamba_sdist:
        with tarfile.open(args.mamba_sdist) as tar:
            src = next(tar.extractfile(m).read().decode() for m in tar.getmembers()
                       if m.name.endswith("mamba_ssm/ops/triton/selective_state_update.py"))
        ref_src = src[src.index("def selective_state_update_ref"):]
        scope = {"torch": torch, "F": F, "rearrange": None, "repeat": None}
        try:
            import einops
            scope.update(rearrange=einops.rearrange, repeat=einops.repeat)
        except ImportError:
            print("mamba_ssu: einops does not import; selective_state_update_ref not checked")
            return 1 if failed else 0
        exec(compile(ref_src, "selective_state_update_ref", "exec"), scope)
        mpaths = sorted(glob.glob(os.path.join(args.definitions, "mamba_ssu", "*.json")))
        if args.kernels:
            mpaths += sorted(glob.glob(os.path.join(args.kernels, "mamba_ssu", "definitions", "*.json")))
        for p in mpaths:
            with open(p) as f:
                d = json.load(f)
            x = build_inputs(d, {"batch_size": 3, "state_cache_size": 5}, {}, "cpu", torch.Generator().manual_seed(5))
            want = reference_fn(d)(**{n: v.clone() for n, v in x.items()})
            idx = x["state_batch_indices"].long()
            # the torch reference has no slots: gather, update, compare the rows; it computes in its inputs' dtypes
            # (bf16 sums of dt and dt_bias, bf16 products), 4-6% from the definition's float32 on these inputs,
            # so it gets them upcast to float32: this checks the layouts, not bf16 rounding
            state = x["state"][idx].float()
            f = {n: x[n].float() for n in ("x", "dt", "A", "B", "C", "D", "dt_bias")}
            out = scope["selective_state_update_ref"](state, f["x"], f["dt"], f["A"], f["B"], f["C"], D=f["D"],
                                                      dt_bias=f["dt_bias"], dt_softplus=True)
            errs = {"output": rel_err(out, want[0]), "new_state": rel_err(state, want[1][idx])}
            ok = all(v <= TOLERANCE["mamba_ssu"] for v in errs.values())
            failed += not ok
            print(f"{d['name']} (mamba-ssm selective_state_update_ref): {'PASSED' if ok else 'FAIL'} "
                  + ", ".join(f"{o} rel err {v:.2e}" for o, v in errs.items()))
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", choices=sorted(OPS))
    ap.add_argument("--run", help="bench_kernels.py's --out folder")
    ap.add_argument("--out-md")
    ap.add_argument("--time-limit", type=int, default=0, help="start no new case after this many seconds (0: none)")
    ap.add_argument("--mamba-sdist", help="mamba-ssm's sdist (.tar.gz), for selective_state_update.py alone")
    ap.add_argument("--reference-bytes", type=float, default=24 * 2**30,
                    help="moe: check against the reference only where it needs less memory than this")
    ap.add_argument("--cpu-check", action="store_true")
    ap.add_argument("--fla-naive", help="--cpu-check: fla/ops/gated_delta_rule/naive.py (else imported from fla)")
    ap.add_argument("--definitions", help="--cpu-check: the shipped definitions folder")
    ap.add_argument("--kernels", help="--cpu-check: kb's kernels folder (its bundled definitions)")
    args = ap.parse_args()
    if args.cpu_check:
        return cpu_check(args)
    if not args.family or not args.run:
        ap.error("--family and --run are needed (or --cpu-check)")
    if not torch.cuda.is_available():
        print("not compared: no CUDA device")
        return 0
    return run_family(args)


if __name__ == "__main__":
    sys.exit(main())
