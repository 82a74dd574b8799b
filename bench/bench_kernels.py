"""kb's own CUDA solutions of an op family judged and timed by `kb bench --device cuda` at serving sizes, and the
traces rendered as one table: latency, bytes moved and their fraction of the measured copy bandwidth, TFLOP/s and
their fraction of the measured bf16 tensor-core rate (the cost model's counts, docs/cost_model.md).

The definitions are the shipped ones (SHARED/flashinfer-trace/definitions/<op_type>) and kb's bundled ones
(KERNELS/<op_type>/definitions). Each gets workloads from one rule per op kind, derived from its variable axes
(below): decode batches of 1 to 256, multi-token steps, prefill of 1 to 16 sequences over 4k to 16k tokens, sparse
attention over a 64k-token cache; for the attention op types (family serving) paged decode of 1 and 64 sequences
of 4096 tokens each and causal prefill of 16 x 1024 and 1 x 16384 tokens, with each evaluation's wall time (the judge
included) beside its latency. Family decode_grid: paged GQA decode over a generated grid of shapes (group sizes
1 to 16, every head dim kb's decode handles, page sizes 1 to 64, batches 1 to 256 of 512 to 16384 tokens:
decode_grid_shapes), each a definition derived from a shipped one by its constants, sm_scale 1 / sqrt(head_dim).
Family prefill_dims: ragged causal prefill at every such head dim (group 4) and the shipped MLA ragged prefill
(qk 192 / vo 128), at the prefill sizes above.
Inputs are kb's seeded random ones; a scalar input takes the value a bundled or shipped workload of the same op type
gives it (the rule has no way to invent a scale).

usage: bench_kernels.py --kb KB --shared SHARED --kernels KERNELS
           --family moe|linear|sampling|serving|prefill_dims|rmsnorm|decode_grid --out DIR
       [--time-limit S] [--max-workloads N] [--max-definitions N] [--match TEXT]
       bench_kernels.py --table TRACES_DIR [--out-md FILE]     (render traces already written; no GPU)"""
import argparse
import glob
import json
import itertools
import os
import re
import subprocess
import sys
import threading
import time
import uuid

FAMILIES = {"moe": ["moe"], "linear": ["gdn", "mamba_ssu", "dsa_paged"], "sampling": ["sampling"],
            "serving": ["gqa_paged", "gqa_ragged", "mla_paged", "mla_ragged"], "rmsnorm": ["rmsnorm"],
            "decode_grid": ["gqa_paged"], "prefill_dims": ["gqa_ragged", "mla_ragged"]}


def var_axes(d):
    return sorted(k for k, v in d["axes"].items() if v.get("type") == "var")


def const(d, name, default=None):
    a = d["axes"].get(name)
    return a["value"] if a and a.get("type") == "const" else default


def axis_grid(d):
    """The workloads' axes for definition d, by the set of its variable axes."""
    v = set(var_axes(d))
    if v == {"batch_size"}:  # decode steps: gdn decode, sampling, rmsnorm
        return [{"batch_size": b} for b in (1, 16, 64, 256)]
    if v == {"batch_size", "seq_len", "pool_size"}:  # gdn multi-token prediction from a state pool
        return [{"batch_size": b, "seq_len": t, "pool_size": 2 * b} for b, t in ((16, 2), (64, 4), (256, 4))]
    if v == {"total_seq_len", "num_seqs", "len_cu_seqlens"}:  # variable-length prefill
        return [{"total_seq_len": n, "num_seqs": s, "len_cu_seqlens": s + 1} for s, n in ((1, 4096), (4, 16384),
                                                                                          (16, 16384))]
    if v == {"batch_size", "state_cache_size"}:  # mamba state update from a cache of states
        return [{"batch_size": b, "state_cache_size": 2 * b} for b in (1, 64, 256)]
    if v == {"num_tokens", "num_pages"}:  # sparse attention over a cache of 65536 tokens
        pages = 65536 // const(d, "page_size", 1)
        return [{"num_tokens": t, "num_pages": pages} for t in (1, 32, 128)]
    if v == {"batch_size", "max_num_pages", "num_pages"}:  # top-k indexer, 8192 cached tokens a sequence
        per = 8192 // const(d, "page_size", 1)
        return [{"batch_size": b, "max_num_pages": per, "num_pages": b * per} for b in (1, 32)]
    if v == {"seq_len"}:  # moe: decode to prefill
        return [{"seq_len": t} for t in (1, 16, 64, 1024, 4096)]
    ps = const(d, "page_size", 1)
    if v == {"batch_size", "num_pages", "len_indptr", "num_kv_indices"}:  # paged decode: 4096 tokens a sequence
        return [{"batch_size": b, "len_indptr": b + 1, "num_kv_indices": b * 4096 // ps, "num_pages": b * 4096 // ps}
                for b in (1, 64)]
    if v in ({"len_indptr", "total_q", "num_kv_indices", "num_pages"},
             {"len_indptr", "total_q", "num_kv_indices", "num_pages", "batch_size"}):  # paged causal prefill
        grid = []
        for s, t in ((16, 1024), (1, 16384)):
            a = {"len_indptr": s + 1, "total_q": s * t, "num_kv_indices": s * t // ps, "num_pages": s * t // ps}
            if "batch_size" in v:
                a["batch_size"] = s
            grid.append(a)
        return grid
    if v == {"len_indptr", "total_q", "total_kv"}:  # ragged causal prefill
        return [{"len_indptr": s + 1, "total_q": s * t, "total_kv": s * t} for s, t in ((16, 1024), (1, 16384))]
    return None


def qk_dim(d):
    return const(d, "qk_dim", const(d, "head_dim_qk", const(d, "head_dim")))


def definition_kind(path):
    """gqa_paged_decode_h32_kv8_d128_ps64.json -> gqa_paged_decode, top_p_sampling_from_probs_v128256.json ->
    top_p_sampling_from_probs: the definitions that differ only in constants (heads, sizes, vocabulary)."""
    return re.sub(r"_h\d+.*$|_v\d+(\.json)?$", "", os.path.basename(path))


def scalar_values(op_dirs):
    """Scalar inputs' values from the workloads beside the definitions: by (definition, input name) and by
    (op_type, input name), the first seen of each."""
    by_definition, by_op = {}, {}
    for op, wdir in op_dirs:
        for path in sorted(glob.glob(os.path.join(wdir, "*.jsonl"))):
            with open(path) as f:
                for line in f:
                    line = line.strip()
                    if not line:
                        continue
                    record = json.loads(line)
                    for name, spec in record["workload"]["inputs"].items():
                        if spec.get("type") == "scalar":
                            by_definition.setdefault((record.get("definition"), name), spec["value"])
                            by_op.setdefault((op, name), spec["value"])
    return by_definition, by_op


def scalar_value(d, op, name, scalars):
    """A scalar input's value for definition d: from a workload of d, else of another definition of its op type.
    An expert offset taken from another definition is kept inside d's routed experts (local_expert_offset +
    num_local_experts <= num_experts: 0 where every expert is local), so the call's choices are its own."""
    by_definition, by_op = scalars
    if (d["name"], name) in by_definition:
        return by_definition[(d["name"], name)]
    v = by_op.get((op, name))
    if name == "local_expert_offset" and v is not None:
        axes = d.get("axes", {})
        routed, local = axes.get("num_experts", {}).get("value"), axes.get("num_local_experts", {}).get("value")
        if routed is not None and local is not None:
            v = min(max(int(v), 0), max(int(routed) - int(local), 0))
    return v


def write_dataset(args, ops, dest):
    """Copies the family's definitions into dest and writes their serving-size workloads; returns the rows planned."""
    sources = []
    for op in ops:
        sources.append((op, os.path.join(args.shared, "flashinfer-trace", "definitions", op),
                        os.path.join(args.shared, "flashinfer-trace", "workloads", op)))
        sources.append((op, os.path.join(args.kernels, op, "definitions"), os.path.join(args.kernels, op, "workloads")))
    scalars = scalar_values([(op, w) for op, _, w in sources])
    planned, skipped, written = 0, [], set()
    for op, ddir, _ in sources:
        paths = []
        match = getattr(args, "match", None)
        found = sorted(p for p in glob.glob(os.path.join(ddir, "*.json")) if not match or match in os.path.basename(p))
        for kind, group in itertools.groupby(found, key=definition_kind):
            group = list(group)
            n = args.max_definitions
            if n and len(group) > n:  # evenly spaced over the sorted names
                group = [group[i * (len(group) - 1) // max(n - 1, 1)] for i in range(n)]
            paths += group
        for path in paths:
            with open(path) as f:
                d = json.load(f)
            if d["name"] in written:  # a bundled copy of a shipped definition: the shipped one stands
                continue
            written.add(d["name"])
            grid = axis_grid(d)
            if grid is None:
                skipped.append(f"{d['name']}: no workload rule for variable axes {var_axes(d)}")
                continue
            inputs, missing = {}, []
            for name, spec in d["inputs"].items():
                if spec.get("shape"):
                    inputs[name] = {"type": "random"}
                elif scalar_value(d, op, name, scalars) is not None:
                    inputs[name] = {"type": "scalar", "value": scalar_value(d, op, name, scalars)}
                elif name == "sm_scale" and qk_dim(d):  # attention's usual scale, 1 / sqrt(the logits' dim)
                    inputs[name] = {"type": "scalar", "value": qk_dim(d) ** -0.5}
                else:
                    missing.append(name)
            if missing:
                skipped.append(f"{d['name']}: no workload gives scalar input(s) {', '.join(missing)} a value")
                continue
            planned += write_definition(dest, op, d, grid[: args.max_workloads], inputs)
    return planned, skipped


def write_definition(dest, op, d, grid, inputs):
    """Definition d as dest/definitions/OP/NAME.json and one workload per axes of grid (uuid from the name and the
    axes, the same inputs each) as dest/workloads/OP/NAME.jsonl; returns the number of workloads."""
    os.makedirs(os.path.join(dest, "definitions", op), exist_ok=True)
    os.makedirs(os.path.join(dest, "workloads", op), exist_ok=True)
    with open(os.path.join(dest, "definitions", op, d["name"] + ".json"), "w") as f:
        json.dump(d, f, indent=2)
    with open(os.path.join(dest, "workloads", op, d["name"] + ".jsonl"), "w") as f:
        for axes in grid:
            key = d["name"] + json.dumps(axes, sort_keys=True)
            w = {"uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, key)), "axes": axes, "inputs": inputs}
            f.write(json.dumps({"definition": d["name"], "workload": w, "solution": None, "evaluation": None}) + "\n")
    return len(grid)


# ---- decode_grid: paged GQA decode over generated shapes -----------------------------------------------------------

GRID_HEAD_DIMS = [64, 96, 128, 192, 256]  # kernels/attention/launch.hpp's kGqaHeadDims: kb's decode handles these
GRID_GROUPS = list(range(1, 17))  # num_qo_heads / num_kv_heads; kb's decode handles 1..16 (kGqaDecodeMaxGroup)
GRID_PAGE_SIZES = [1, 16, 32, 64]
GRID_BATCHES = [1, 3, 8, 24, 64, 160, 256]
GRID_TOKENS = [512, 1024, 2048, 4096, 8192, 16384]  # a sequence's tokens, on average (multiples of every page size)
GRID_KV_HEADS = [1, 2, 4, 8]
GRID_SHAPES = 48  # three passes over the group sizes
GRID_MAX_KV_BYTES = 2 << 30  # a shape's K and V caches at most (bf16): the grid runs in minutes on an H100
# the shipped definitions the grid's are derived from: page size 1 has no kv_last_page_len (every page is full)
GRID_TEMPLATES = {1: "gqa_paged_decode_h32_kv8_d128_ps1", None: "gqa_paged_decode_h32_kv8_d128_ps64"}


def grid_kv_bytes(s):
    """The K and V caches of shape s in bytes: batch x tokens keys of num_kv_heads x head_dim bf16, twice."""
    return s["batch_size"] * s["tokens"] * s["num_kv_heads"] * s["head_dim"] * 2 * 2


def decode_grid_shapes():
    """The grid. Shape i takes group i mod 16, head dim i mod 5, page size (i + i div 16) mod 4 (so each group
    meets three page sizes), batch i mod 7, tokens (i div 2) mod 6 and kv heads (i div 5) mod 4 of the lists above;
    then, while its KV caches exceed GRID_MAX_KV_BYTES, it halves its kv heads down to 1 and after that its batch.
    Each shape: num_qo_heads, num_kv_heads, head_dim, page_size, batch_size, tokens (per sequence)."""
    out = []
    for i in range(GRID_SHAPES):
        g = GRID_GROUPS[i % len(GRID_GROUPS)]
        s = {"num_kv_heads": GRID_KV_HEADS[(i // 5) % len(GRID_KV_HEADS)],
             "head_dim": GRID_HEAD_DIMS[i % len(GRID_HEAD_DIMS)],
             "page_size": GRID_PAGE_SIZES[(i + i // len(GRID_GROUPS)) % len(GRID_PAGE_SIZES)],
             "batch_size": GRID_BATCHES[i % len(GRID_BATCHES)],
             "tokens": GRID_TOKENS[(i // 2) % len(GRID_TOKENS)]}
        while grid_kv_bytes(s) > GRID_MAX_KV_BYTES:
            if s["num_kv_heads"] > 1:
                s["num_kv_heads"] //= 2
            else:
                s["batch_size"] //= 2
        s["num_qo_heads"] = g * s["num_kv_heads"]
        out.append(s)
    return out


def grid_name(s):
    return f"gqa_paged_decode_h{s['num_qo_heads']}_kv{s['num_kv_heads']}_d{s['head_dim']}_ps{s['page_size']}"


def with_constants(template, name, s, axes):
    """Definition `name` from a shipped one: the constant axes named in axes set from s, with the reference's
    checks of them; everything else (axes, inputs, outputs, constraints, the reference's computation) is the
    template's, which is written for any constants."""
    d = json.loads(json.dumps(template))
    d["name"] = name
    ref = d["reference"]
    for axis in axes:
        if d["axes"].get(axis, {}).get("type") != "const":
            raise ValueError(f"{template['name']}: {axis} is not a constant axis")
        d["axes"][axis]["value"] = s[axis]
        ref, n = re.subn(rf"assert {axis} == \d+\b", f"assert {axis} == {s[axis]}", ref)
        if n != 1:
            raise ValueError(f"{template['name']}: its reference checks {axis} {n} times, not once")
    d["reference"] = ref
    d["tags"] = [t for t in d.get("tags", []) if not t.startswith(("model:", "status:"))]
    return d


def grid_definition(template, s):
    """Definition of shape s from a shipped paged decode definition (with_constants: heads, head dim, page size)."""
    d = with_constants(template, grid_name(s), s, ("num_qo_heads", "num_kv_heads", "head_dim", "page_size"))
    d["description"] = (f"Batched Grouped Query Attention decode with a paged KV cache (page_size={s['page_size']}), "
                        f"group {s['num_qo_heads'] // s['num_kv_heads']}: bench_kernels.py's decode_grid, "
                        f"{template['name']} with other constants.")
    return d


def grid_axes(s):
    """The workload's variable axes: batch_size sequences over tokens / page_size pages each (the pages split
    among the sequences by kb's input generator), every page in the cache used."""
    pages = s["batch_size"] * (s["tokens"] // s["page_size"])
    return {"batch_size": s["batch_size"], "len_indptr": s["batch_size"] + 1, "num_kv_indices": pages,
            "num_pages": pages}


def write_decode_grid(args, dest):
    """The decode grid's definitions and workloads into dest (one workload each; shapes sharing constants share a
    definition); returns the rows planned and the shapes not written (none: every template is read)."""
    ddir = os.path.join(args.shared, "flashinfer-trace", "definitions", "gqa_paged")
    templates = {}
    for ps, name in GRID_TEMPLATES.items():
        with open(os.path.join(ddir, name + ".json")) as f:
            templates[ps] = json.load(f)
    by_name = {}
    for s in decode_grid_shapes():
        d = grid_definition(templates[1 if s["page_size"] == 1 else None], s)
        entry = by_name.setdefault(d["name"], (d, []))
        if grid_axes(s) not in entry[1]:
            entry[1].append(grid_axes(s))
    planned = 0
    for d, grid in by_name.values():
        inputs = {name: {"type": "random"} if spec.get("shape") else {"type": "scalar", "value": qk_dim(d) ** -0.5}
                  for name, spec in d["inputs"].items()}
        planned += write_definition(dest, "gqa_paged", d, grid[: args.max_workloads], inputs)
    return planned, []


# ---- prefill_dims: ragged causal prefill at every head dim ---------------------------------------------------------

PREFILL_DIMS_TEMPLATE = "gqa_ragged_prefill_causal_h32_kv8_d128"  # group 4, Llama-3-8B's heads


def write_prefill_dims(args, dest):
    """Ragged causal prefill at each head dim of GRID_HEAD_DIMS (32 query / 8 kv heads, from PREFILL_DIMS_TEMPLATE)
    and the shipped MLA ragged prefill (qk 192 / vo 128), at the serving sizes of axis_grid; returns the rows
    planned and the definitions skipped."""
    with open(os.path.join(args.shared, "flashinfer-trace", "definitions", "gqa_ragged",
                           PREFILL_DIMS_TEMPLATE + ".json")) as f:
        template = json.load(f)
    planned = 0
    for dim in GRID_HEAD_DIMS:
        d = with_constants(template, f"gqa_ragged_prefill_causal_h32_kv8_d{dim}", {"head_dim": dim}, ("head_dim",))
        d["description"] = f"Ragged causal GQA prefill, group 4, head_dim {dim}: bench_kernels.py's prefill_dims."
        inputs = {name: {"type": "random"} if spec.get("shape") else {"type": "scalar", "value": dim ** -0.5}
                  for name, spec in d["inputs"].items()}
        planned += write_definition(dest, "gqa_ragged", d, axis_grid(d)[: args.max_workloads], inputs)
    mla, skipped = write_dataset(args, ["mla_ragged"], dest)
    return planned + mla, skipped


def write_family(args, family, dest):
    """The family's dataset into dest: the decode grid's or prefill_dims' generated definitions, or the shipped and
    bundled ones of its op types; returns the rows planned and the definitions skipped."""
    if family == "decode_grid":
        return write_decode_grid(args, dest)
    if family == "prefill_dims":
        return write_prefill_dims(args, dest)
    return write_dataset(args, FAMILIES[family], dest)


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def table(traces_dir):
    """Markdown rows, one per trace line under traces_dir (kb's own CUDA solutions and whatever else ran)."""
    rows = []
    for path in sorted(glob.glob(os.path.join(traces_dir, "**", "*.jsonl"), recursive=True)):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                t = json.loads(line)
                ev = t.get("evaluation") or {}
                perf = ev.get("performance") or {}
                extra = perf.get("extra") or {}
                axes = ", ".join(f"{k}={v}" for k, v in sorted(t["workload"]["axes"].items()))
                copy = extra.get("fraction_of_copy_bandwidth")
                mma = extra.get("fraction_of_mma_bf16")
                rows.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                    t["definition"], axes, t.get("solution"), ev.get("status"), fmt(perf.get("latency_ms"), ".4f"),
                    fmt(extra.get("achieved_gbs"), ".0f"), "-" if copy is None else f"{copy * 100:.0f}%",
                    fmt(extra.get("achieved_tflops"), ".1f"), "-" if mma is None else f"{mma * 100:.1f}%",
                    fmt(extra.get("judge_s"), ".2f"), fmt(extra.get("timing_s"), ".2f")))
    # judge s / timing s: where the evaluation's wall time went (kb's measurement record: the checked trials, then
    # the timer with the judging of timed calls)
    head = ["| definition | axes | solution | status | latency ms | GB/s | of copy bw | TFLOP/s | of bf16 mma "
            "| judge s | timing s |",
            "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    return head + rows


def defined_names(dataset):
    return [os.path.splitext(os.path.basename(p))[0]
            for p in glob.glob(os.path.join(dataset, "definitions", "*", "*.json"))]


def run_timed(cmd, names, time_limit):
    """Runs kb bench, echoing its output; returns its exit status (124: stopped at time_limit) and, for each result
    row it printed, (definition, first axes cell, solution, status, seconds since the previous row)."""
    start = last = time.monotonic()
    walls = []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1)
    timer = threading.Timer(time_limit, proc.kill) if time_limit else None
    if timer:
        timer.start()
    for line in proc.stdout:
        sys.stdout.write(line)
        cells = line.split()
        if len(cells) >= 4 and cells[0] in names:
            # kb's row: definition, its axes as name=value cells (one or more), solution, status, ...
            n = 1
            while n < len(cells) and "=" in cells[n]:
                n += 1
            if n + 1 >= len(cells):
                continue
            now = time.monotonic()
            walls.append((cells[0], ", ".join(c.rstrip(",") for c in cells[1:n]), cells[n], cells[n + 1], now - last))
            last = now
    rc = proc.wait()
    if timer:
        timer.cancel()
        if time.monotonic() - start >= time_limit:
            rc = 124
    return rc, walls


def wall_table(walls):
    rows = ["| definition | axes | solution | status | wall s |", "| --- | --- | --- | --- | ---: |"]
    rows += [f"| {d} | {a} | {s} | {st} | {w:.2f} |" for d, a, s, st, w in walls]
    if walls:
        rows += ["", f"{len(walls)} evaluations in {sum(w[4] for w in walls):.1f} s; the slowest "
                 f"{max(w[4] for w in walls):.2f} s, the slowest after the first "
                 f"{max([w[4] for w in walls[1:]] or [0]):.2f} s."]
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kb")
    ap.add_argument("--shared")
    ap.add_argument("--kernels")
    ap.add_argument("--family", choices=sorted(FAMILIES))
    ap.add_argument("--out")
    ap.add_argument("--time-limit", type=int, default=0, help="stop kb bench after this many seconds (0: none)")
    ap.add_argument("--max-workloads", type=int, default=None)
    ap.add_argument("--max-definitions", type=int, default=None, help="per folder of definitions, evenly spaced")
    ap.add_argument("--match", help="only the definitions whose name contains this text (e.g. gdn_prefill)")
    ap.add_argument("--table", help="render the traces under this folder and exit")
    ap.add_argument("--out-md")
    args = ap.parse_args()
    if args.table:
        text = "\n".join(table(args.table)) + "\n"
        if args.out_md:
            with open(args.out_md, "w") as f:
                f.write(text)
        sys.stdout.write(text)
        return 0
    for need in ("kb", "shared", "kernels", "family", "out"):
        if not getattr(args, need):
            ap.error(f"--{need} is needed (or --table)")
    os.makedirs(args.out, exist_ok=True)
    dataset = os.path.join(args.out, "dataset")
    planned, skipped = write_family(args, args.family, dataset)
    for s in skipped:
        print("not measured:", s)
    print(f"{planned} workloads planned", flush=True)
    cmd = [args.kb, "bench", dataset, "--device", "cuda", "--out", os.path.join(args.out, "results"), "--resume"]
    rc, walls = run_timed(cmd, set(defined_names(dataset)), args.time_limit)
    if rc == 124:
        print(f"STOPPED: kb bench ran past {args.time_limit} s; the table holds what it finished")
    # rmsnorm and decode_grid run only as parts of run.sh flashinfer
    command = (args.family if args.family in ("moe", "linear", "sampling", "serving", "prefill_dims")
               else f"flashinfer {args.family}")
    md = [f"Produced by `bash bench/run.sh {command}`.", ""] + table(os.path.join(args.out, "results", "traces"))
    md += ["", "Wall time of each evaluation (`kb bench` from one result row to the next: inputs, reference, judging "
           "and timing; the first row also holds loading the dataset and starting CUDA):", ""] + wall_table(walls)
    if skipped:
        md += ["", "Not measured:"] + [f"- {s}" for s in skipped]
    with open(os.path.join(args.out, args.family + ".md"), "w") as f:
        f.write("\n".join(md) + "\n")
    return 0 if rc in (0, 1) else rc


if __name__ == "__main__":
    sys.exit(main())
