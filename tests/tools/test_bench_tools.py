"""bench/'s Python helpers, on the parts that need no GPU: how a profiler's kernel records are cut into calls
(kernel_spans.py), compare_torch.py --merge on recorded results (its tables, the kernels-only ratio, how torch was
timed), summary.py's ratio tables, nsight_check.py's kernel-name filters against kb's kernels, and kb_capi.py on
this build's libkb. usage: test_bench_tools.py SOURCE_ROOT [LIBKB]"""
import ast
import glob
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile

root = sys.argv[1]
sys.path.insert(0, os.path.join(root, "bench"))
fixtures = os.path.join(root, "tests", "tools", "fixtures")
from kernel_spans import call_spans_ms, median_call_ms  # noqa: E402

failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    failures += not ok


def k(name, ts, dur):
    return {"name": name, "ts": ts, "dur": dur}


# A spin kernel holding the queue, then three calls, each behind a flush; the second call runs two kernels with a
# gap between them (the gap is the call's own: it counts), records arrive out of order.
trace = [k("spin", 0.0, 1500.0), k("fill", 1500.0, 30.0), k("gemm", 1531.0, 10.0),
         k("fill", 1542.0, 30.0), k("gemm", 1573.0, 10.0), k("reduce", 1585.5, 2.5),
         k("fill", 1589.0, 30.0), k("gemm", 1620.0, 12.0)]
spans, per_call = call_spans_ms(list(reversed(trace)), {"fill"})
check([round(s * 1e3, 3) for s in spans] == [10.0, 15.0, 12.0], f"three calls cut at the flushes: {spans}")
check(per_call == 2, f"the most kernels one call ran: {per_call}")
check(median_call_ms(trace, {"fill"}, 3) == (0.012, 2), "median of the three calls: 12 us")
ms, why = median_call_ms(trace, {"fill"}, 4)
check(ms is None and "3 calls found" in why, f"a count that does not match is refused: {why}")
check(call_spans_ms(trace, {"gemm"})[0] != spans, "a different flush name cuts differently (the test can tell)")

# compare_torch.py --merge on a recorded H100 run with --cupti (no torch needed)
kernels_only = os.path.join(fixtures, "compare_kernels_only_cupti.json")
with tempfile.TemporaryDirectory() as out:
    r = subprocess.run([sys.executable, os.path.join(root, "bench", "compare_torch.py"), "--merge",
                        kernels_only, "--out", out],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"compare_torch.py --merge: exit {r.returncode} {r.stderr[-300:]}")
    if r.returncode == 0:
        md = open(os.path.join(out, "benchmark.md")).read()
        merged = json.load(open(os.path.join(out, "benchmark.json")))
        rows = [l for l in md.splitlines() if l.startswith("| gemm_n4096_k4096 | 1 | kb_cuda_gemm |")]
        check(len(rows) == 1 and rows[0].rstrip(" |").endswith("0.752"),
              f"the kernels-only ratio of 4096^2 M = 1: {rows}")
        check("(0.91 us by CUPTI)" in md, "the empty kernel's CUPTI time in the header")
        check(len(merged["rows"]) == len(json.load(open(kernels_only))["rows"]),
              "every row kept")
# the same on a recorded H200 run with torch's batches replayed from CUDA graphs: how torch was timed, and each
# side's clock beside its set-aside count
with tempfile.TemporaryDirectory() as out:
    r = subprocess.run([sys.executable, os.path.join(root, "bench", "compare_torch.py"), "--merge",
                        os.path.join(fixtures, "compare_torch_graph_replay.json"), "--out", out],
                       capture_output=True, text=True, timeout=120)
    md = open(os.path.join(out, "benchmark.md")).read() if r.returncode == 0 else ""
    check("replayed from a CUDA graph, as kb's are, in 16 of 16 passes" in md, "torch's timing method in the header")
    rows = [l for l in md.splitlines() if l.startswith("| gemm_n5120_k3072 | 256 | kb_cuda_gemm |")]
    check(len(rows) == 1 and "| 0 / 0 (1923)+0 (1923) |" in rows[0], f"torch's clocks in the set-aside cell: {rows}")

# summary.py (the tables of bench/results/) on the same recorded runs: one row a definition, one column an M, the
# median line; the copy fraction only where bytes dominate; later files override earlier rows; bad input refused.
summary_tool = os.path.join(root, "bench", "summary.py")


def run_summary(*args):
    return subprocess.run([sys.executable, summary_tool, *args], capture_output=True, text=True, timeout=120)


r = run_summary(os.path.join(fixtures, "compare_torch_graph_replay.json"), "--command", "bash bench/run.sh gemm mid")
check(r.returncode == 0 and "Produced by `bash bench/run.sh gemm mid`." in r.stdout,
      f"summary.py names the command: exit {r.returncode} {r.stderr[-300:]}")
check("| gemm_n5120_k17408 | 0.919 | 1.005 |" in r.stdout and "| definition | M = 256 | M = 16384 |" in r.stdout,
      "summary.py's gemm row: kb / torch by M")
check("8 rows, kb / torch median 0.969, 0.919-1.005, 0 over 1.03." in r.stdout, "summary.py's median line")
r = run_summary(kernels_only)
check("| gemm_n4096_k4096 | 0.820 (59%) | 0.840 (58%) |" in r.stdout and "### gemm, M < 128" in r.stdout,
      "summary.py: small M with kb's fraction of the copy bandwidth")
check("| silu_and_mul_i14336 | 0.594 (1%) | 0.473 (8%) | 0.352 (102%) |" in r.stdout, "summary.py's silu_and_mul row")
check("kb_cublaslt_gemm" not in r.stdout.split("###", 1)[1], "only kb's default solution's rows")
with tempfile.TemporaryDirectory() as tmp:
    later = os.path.join(tmp, "later.json")
    with open(later, "w") as f:
        json.dump({"meta": {"device": "NVIDIA H200"}, "rows": [
            {"definition": "gemm_n5120_k17408", "value": 256, "solution": "kb_cuda_gemm", "status": "PASSED",
             "ratio": 1.5}]}, f)
    r = run_summary(os.path.join(fixtures, "compare_torch_graph_replay.json"), later)
    check("| gemm_n5120_k17408 | 1.500 | 1.005 |" in r.stdout and "1 over 1.03" in r.stdout,
          "a later file's row overrides the earlier one")
    with open(later, "w") as f:
        json.dump({"rows": [{"definition": "rmsnorm_h4096", "value": 1, "solution": "kb_cuda_rmsnorm",
                             "status": "INCORRECT_NUMERICAL"}]}, f)
    r = run_summary(later)
    check("| rmsnorm_h4096 | INCORRECT_NUMERICAL |" in r.stdout and "not PASSED: rmsnorm_h4096 @ 1 INCORRECT_NUMERICAL"
          in r.stdout, "a row that did not pass shows its status and is named")
    with open(later, "w") as f:
        f.write('{"rows": [{"definition": "gemm_n4096_k4096"}]}')
    r = run_summary(later)
    check(r.returncode != 0 and "later.json: rows[0] lacks value, solution, status" in r.stderr,
          f"a row without its fields is refused, naming the file and the row: {r.stderr.strip()}")
    with open(later, "w") as f:
        f.write('{"rows": [')
    r = run_summary(later)
    check(r.returncode != 0 and "later.json" in r.stderr, f"broken JSON is refused with the file's name: {r.stderr.strip()}")

# nsight_check.py's ncu kernel-name filters for kb's own kernels must match a __global__ function under kernels/: a
# filter naming a renamed kernel matches nothing, and ncu then profiles nothing.
nsight_src = open(os.path.join(root, "bench", "nsight_check.py")).read()
nsight_cases = next(ast.literal_eval(n.value) for n in ast.parse(nsight_src).body
                    if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "CASES")
kb_kernels = set()
for path in glob.glob(os.path.join(root, "kernels", "**", "*.cu"), recursive=True):
    text = open(path).read()
    for g in re.finditer(r"__global__\b", text):
        # the kernel's name: the first word followed by "(" that is not the launch bounds
        names = [m.group(1) for m in re.finditer(r"(\w+)\s*\(", text[g.end():g.end() + 400])]
        names = [n for n in names if n != "__launch_bounds__"]
        if names:
            kb_kernels.add(names[0])
check({"silu_and_mul_vec8_kernel", "gemv_kernel"} <= kb_kernels, f"kernel names read from kernels/: {len(kb_kernels)}")
check(not any(re.search("silu_and_mul_kernel", k) for k in kb_kernels), "a filter for a kernel kb lacks matches nothing")
for case_name, _, _, _, solution, regex in nsight_cases:
    if solution == "kb_cublaslt_gemm":
        continue  # cuBLASLt's kernels are not kb's
    hits = sorted(k for k in kb_kernels if re.search(regex, k))
    check(bool(hits), f"nsight_check.py's filter for {case_name} ({regex}) matches kb's kernels: {hits}")

# kb_capi.py (bench's ctypes binding of kb's C ABI) on this build's libkb, where the build passes it (not in
# sanitized builds): kb_cpu_gemm on host DLTensors built with it, checked against sums done here, and a NULL
# argument refused with kb's message.
if len(sys.argv) > 2:
    import ctypes
    import struct
    import kb_capi  # noqa: E402
    kb = kb_capi.load(sys.argv[2])
    ctx = kb_capi.context(kb)
    gemm = kb_capi.definition(kb, ctx, os.path.join(root, "kernels", "gemm", "definitions", "gemm_n128_k2048.json"))
    check(kb.kb_definition_name(gemm) == b"gemm_n128_k2048", "kb_definition_name through kb_capi")
    M, N, K = 3, 128, 2048
    a = [((i * 7) % 11 - 5) / 8 for i in range(M * K)]  # exact in fp16
    b = [((i * 5) % 13 - 6) / 16 for i in range(N * K)]

    def half_buffer(values):
        return (ctypes.c_uint16 * len(values))(*struct.unpack(f"{len(values)}H", struct.pack(f"{len(values)}e", *values)))

    bufs = [half_buffer(a), half_buffer(b), (ctypes.c_uint16 * (M * N))()]
    shapes = [(ctypes.c_int64 * 2)(M, K), (ctypes.c_int64 * 2)(N, K), (ctypes.c_int64 * 2)(M, N)]
    tensors = [kb_capi.DLTensor(ctypes.cast(buf, ctypes.c_void_p), kb_capi.DLDevice(kb_capi.KDL_CPU, 0), 2,
                                kb_capi.DLDataType(kb_capi.DTYPE_CODES["float16"], 16, 1), shape, None, 0)
               for buf, shape in zip(bufs, shapes)]
    ins = kb_capi.pointers([ctypes.addressof(t) for t in tensors[:2]])
    outs = kb_capi.pointers([ctypes.addressof(tensors[2])])
    status = kb.kb_solution_run(ctx, gemm, b"kb_cpu_gemm", ins, 2, outs, 1, None)
    check(status == kb_capi.KB_OK, f"kb_cpu_gemm through kb_capi: status {status} {kb.kb_last_error().decode()}")
    got = struct.unpack(f"{M * N}e", bytes(bufs[2]))
    off = 0
    for i in range(M):
        for j in range(N):
            want = sum(a[i * K + k] * b[j * K + k] for k in range(K))
            off += abs(got[i * N + j] - want) > 0.01 + 0.01 * abs(want)
    check(off == 0 and any(got), f"C = A @ B.T by kb_cpu_gemm: {off} of {M * N} elements off the sums done here")
    try:
        kb_capi.check(kb, "kb_solution_run", kb.kb_solution_run(ctx, gemm, b"kb_cpu_gemm", None, 2, outs, 1, None))
        check(False, "NULL inputs refused")
    except kb_capi.KbError as e:
        check("NULL" in str(e) and str(e).startswith("kb_solution_run: "), f"NULL inputs refused with kb's message: {e}")
    kb.kb_definition_destroy(gemm)
    kb.kb_context_destroy(ctx)

# bench_kernels.py: every shipped and bundled definition of the families gets serving-size workloads from the rule
# for its variable axes (none left without one), scalar inputs take a workload's value, and a trace renders as a row.
import bench_kernels  # noqa: E402

shared_dir = os.environ.get("KB_SHARED_DIR") or os.path.join(os.path.dirname(os.path.abspath(root)), "shared")
if os.path.isdir(os.path.join(shared_dir, "flashinfer-trace")):
    import argparse
    for fam, ops in bench_kernels.FAMILIES.items():
        with tempfile.TemporaryDirectory() as tmp:
            ns = argparse.Namespace(shared=shared_dir, kernels=os.path.join(root, "kernels"), max_workloads=None,
                                    max_definitions=None)
            planned, skipped = bench_kernels.write_family(ns, fam, tmp)
            defs = glob.glob(os.path.join(tmp, "definitions", "*", "*.json"))
            lines = [json.loads(x) for p in glob.glob(os.path.join(tmp, "workloads", "*", "*.jsonl")) for x in open(p)]
            check(planned == len(lines) > 0 and not skipped and len(defs) >= 3,
                  f"bench_kernels {fam}: {len(defs)} definitions, {planned} workloads, skipped {skipped}")
            scalars_ok = all(spec.get("type") == "random" or "value" in spec
                             for w in lines for spec in w["workload"]["inputs"].values())
            check(scalars_ok, f"bench_kernels {fam}: every input random or a scalar with its value")
            if fam == "moe":
                # an expert offset lies inside each definition's routed experts (0 where all are local)
                by_name = {json.load(open(p))["name"]: json.load(open(p)) for p in defs}
                bad = []
                for w in lines:
                    off = w["workload"]["inputs"].get("local_expert_offset")
                    axes = by_name[w["definition"]]["axes"]
                    if off is None or "num_local_experts" not in axes or "num_experts" not in axes:
                        continue
                    if not 0 <= off["value"] <= axes["num_experts"]["value"] - axes["num_local_experts"]["value"]:
                        bad.append((w["definition"], off["value"]))
                e384 = [w for w in lines if "_e384_" in w["definition"]]
                check(not bad and e384 and all(w["workload"]["inputs"]["local_expert_offset"]["value"] == 0
                                               for w in e384),
                      f"bench_kernels moe: expert offsets inside the routed experts: {bad[:3]}")
    # --max-definitions keeps that many of each kind (the definitions that differ only in constants)
    with tempfile.TemporaryDirectory() as tmp:
        ns = argparse.Namespace(shared=shared_dir, kernels=os.path.join(root, "kernels"), max_workloads=None,
                                max_definitions=1)
        bench_kernels.write_dataset(ns, bench_kernels.FAMILIES["serving"], tmp)
        names = [os.path.basename(p)[:-5] for p in glob.glob(os.path.join(tmp, "definitions", "*", "*.json"))]
        kinds = [bench_kernels.definition_kind(n + ".json") for n in names]
        check(len(kinds) == len(set(kinds)) and "gqa_paged_decode" in kinds and "mla_ragged_prefill_causal" in kinds,
              f"bench_kernels --max-definitions 1: one definition of each kind: {sorted(kinds)}")
    with tempfile.TemporaryDirectory() as tmp:
        ns = argparse.Namespace(shared=shared_dir, kernels=os.path.join(root, "kernels"), max_workloads=None,
                                max_definitions=1)
        bench_kernels.write_dataset(ns, bench_kernels.FAMILIES["sampling"], tmp)
        names = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(tmp, "definitions", "*", "*.json")))
        check([re.sub(r"_v\d+$", "", n) for n in names] == ["top_k_sampling_from_probs",
                                                           "top_k_top_p_sampling_from_probs",
                                                           "top_p_sampling_from_probs"],
              f"bench_kernels --max-definitions 1: one vocabulary of each sampling kind: {names}")
    # --match keeps the definitions whose name holds the text, shipped and bundled
    with tempfile.TemporaryDirectory() as tmp:
        ns = argparse.Namespace(shared=shared_dir, kernels=os.path.join(root, "kernels"), max_workloads=None,
                                max_definitions=None, match="gdn_prefill")
        planned, _ = bench_kernels.write_dataset(ns, bench_kernels.FAMILIES["linear"], tmp)
        names = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(tmp, "definitions", "*", "*.json")))
        check(names == ["gdn_prefill_qk16_v32_d128_k_last", "gdn_prefill_qk2_v4_d64_k_last",
                        "gdn_prefill_qk8_v16_d128_k_last"] and planned == 3 * len(names),
              f"bench_kernels --match gdn_prefill: the prefill definitions only: {names}, {planned} workloads")
    gdn = {"axes": {"total_seq_len": {"type": "var"}, "num_seqs": {"type": "var"}, "len_cu_seqlens": {"type": "var"}}}
    check(all(a["len_cu_seqlens"] == a["num_seqs"] + 1 for a in bench_kernels.axis_grid(gdn)),
          "bench_kernels: prefill workloads have num_seqs + 1 offsets")
    check(bench_kernels.axis_grid({"axes": {"rows": {"type": "var"}}}) is None, "bench_kernels: no rule, no workloads")
with tempfile.TemporaryDirectory() as tmp:
    trace = {"definition": "d", "workload": {"axes": {"batch_size": 4}}, "solution": "kb_cuda_x",
             "evaluation": {"status": "PASSED", "performance": {"latency_ms": 0.0125, "extra": {
                 "achieved_gbs": 3012.4, "fraction_of_copy_bandwidth": 0.712, "achieved_tflops": 1.25,
                 "judge_s": 0.875, "timing_s": 0.25}}}}
    os.makedirs(os.path.join(tmp, "kb", "x"))
    with open(os.path.join(tmp, "kb", "x", "d.jsonl"), "w") as f:
        f.write(json.dumps(trace) + "\n")
    rows = bench_kernels.table(tmp)
    walls = bench_kernels.wall_table([("d", "batch_size=4", "kb_cuda_x", "PASSED", 1.5),
                                      ("d", "batch_size=8", "kb_cuda_x", "PASSED", 0.25)])
    check(walls[2] == "| d | batch_size=4 | kb_cuda_x | PASSED | 1.50 |" and "slowest 1.50 s" in walls[-1]
          and "slowest after the first 0.25 s" in walls[-1], f"bench_kernels renders wall times: {walls}")
    check(rows[2:] == ["| d | batch_size=4 | kb_cuda_x | PASSED | 0.0125 | 3012 | 71% | 1.2 | - | 0.88 | 0.25 |"],
          f"bench_kernels renders a trace as a row: {rows[2:]}")


# bench_kernels.py's decode_grid: the rule covers every group kb's decode handles, its head dims (read from
# kernels/attention/launch.hpp), page sizes 1 to 64, batches 1 to 256 and 512 to 16384 tokens a sequence, at least 40
# shapes, none over the KV cap; each generated definition is consistent (name, constants, inputs' axes, the
# reference's parameters and constant checks) and its workloads give exactly its variable axes
launch_hpp = open(os.path.join(root, "kernels", "attention", "launch.hpp")).read()
kb_head_dims = [int(v) for v in re.search(r"kGqaHeadDims\[\]\s*=\s*\{([^}]*)\}", launch_hpp).group(1).split(",")]
kb_max_group = int(re.search(r"kGqaDecodeMaxGroup\s*=\s*(\d+)", launch_hpp).group(1))
shapes = bench_kernels.decode_grid_shapes()
groups = {s["num_qo_heads"] // s["num_kv_heads"] for s in shapes}
check(all(s["num_qo_heads"] % s["num_kv_heads"] == 0 for s in shapes) and groups == set(range(1, kb_max_group + 1)),
      f"decode grid: every group 1..{kb_max_group} ({sorted(groups)})")
check(sorted({s["head_dim"] for s in shapes}) == sorted(kb_head_dims),
      f"decode grid: every head dim of kGqaHeadDims {kb_head_dims}")
check({s["page_size"] for s in shapes} == {1, 16, 32, 64}, "decode grid: page sizes 1, 16, 32, 64")
batches, tokens = [s["batch_size"] for s in shapes], [s["tokens"] for s in shapes]
check(min(batches) == 1 and max(batches) == 256 and len(set(batches)) >= 6,
      f"decode grid: batches 1 .. 256 ({sorted(set(batches))})")
check(min(tokens) == 512 and max(tokens) == 16384 and all(t % s["page_size"] == 0 for t, s in zip(tokens, shapes)),
      f"decode grid: 512 .. 16384 tokens a sequence, whole pages ({sorted(set(tokens))})")
kv_bytes = [bench_kernels.grid_kv_bytes(s) for s in shapes]
check(max(kv_bytes) <= bench_kernels.GRID_MAX_KV_BYTES <= 2 << 30,
      f"decode grid: KV caches at most {bench_kernels.GRID_MAX_KV_BYTES >> 20} MiB (largest {max(kv_bytes) >> 20})")
check(shapes == bench_kernels.decode_grid_shapes(), "decode grid: the rule is deterministic")
# bench_kernels.py's prefill_dims: one ragged prefill definition per head dim of the grid, each reference checking
# its own head dim, beside the shipped MLA ragged prefill.
if os.path.isdir(os.path.join(shared_dir, "flashinfer-trace")):
    with tempfile.TemporaryDirectory() as tmp:
        ns = argparse.Namespace(shared=shared_dir, kernels=os.path.join(root, "kernels"), max_workloads=None,
                                max_definitions=None)
        bench_kernels.write_family(ns, "prefill_dims", tmp)
        dims = {}
        for p in glob.glob(os.path.join(tmp, "definitions", "gqa_ragged", "*.json")):
            d = json.load(open(p))
            checked = re.findall(r"assert head_dim == (\d+)", d["reference"])
            dims[d["axes"]["head_dim"]["value"]] = checked == [str(d["axes"]["head_dim"]["value"])]
        mla = glob.glob(os.path.join(tmp, "definitions", "mla_ragged", "*.json"))
        check(sorted(dims) == sorted(bench_kernels.GRID_HEAD_DIMS) and all(dims.values()) and mla,
              f"prefill_dims: head dims {sorted(dims)} (reference checks its own: {dims}), MLA {len(mla)}")
if os.path.isdir(os.path.join(shared_dir, "flashinfer-trace")):
    with tempfile.TemporaryDirectory() as tmp:
        ns = argparse.Namespace(shared=shared_dir, kernels=os.path.join(root, "kernels"), max_workloads=None,
                                max_definitions=None)
        planned, skipped = bench_kernels.write_family(ns, "decode_grid", tmp)
        grid_defs = sorted(glob.glob(os.path.join(tmp, "definitions", "gqa_paged", "*.json")))
        pairs, bad = set(), []
        for p in grid_defs:
            d = json.load(open(p))
            c = {k: v["value"] for k, v in d["axes"].items() if v["type"] == "const"}
            var = {k for k, v in d["axes"].items() if v["type"] == "var"}
            want = f"gqa_paged_decode_h{c['num_qo_heads']}_kv{c['num_kv_heads']}_d{c['head_dim']}_ps{c['page_size']}"
            params = [a.arg for a in next(n for n in ast.walk(ast.parse(d["reference"]))
                                          if isinstance(n, ast.FunctionDef) and n.name == "run").args.args]
            asserted = dict(re.findall(r"assert (num_qo_heads|num_kv_heads|head_dim|page_size) == (\d+)", d["reference"]))
            if d["name"] != want or os.path.basename(p) != want + ".json":
                bad.append(f"{d['name']}: name, want {want}")
            if params != list(d["inputs"]):
                bad.append(f"{d['name']}: reference parameters {params}, inputs {list(d['inputs'])}")
            if {k: int(v) for k, v in asserted.items()} != {k: c[k] for k in asserted} or len(asserted) != 4:
                bad.append(f"{d['name']}: reference checks {asserted}, constants {c}")
            for name, spec in list(d["inputs"].items()) + list(d["outputs"].items()):
                if any(a not in d["axes"] for a in spec.get("shape") or []):
                    bad.append(f"{d['name']}: {name}'s shape {spec['shape']} names an unknown axis")
            if ("kv_last_page_len" in d["inputs"]) != (c["page_size"] != 1):
                bad.append(f"{d['name']}: kv_last_page_len present on page size {c['page_size']}")
            for line in open(os.path.join(tmp, "workloads", "gqa_paged", d["name"] + ".jsonl")):
                w = json.loads(line)["workload"]
                a = w["axes"]
                if set(a) != var or a["len_indptr"] != a["batch_size"] + 1 or a["num_kv_indices"] > a["num_pages"]:
                    bad.append(f"{d['name']}: workload axes {a}")
                if w["inputs"]["sm_scale"] != {"type": "scalar", "value": c["head_dim"] ** -0.5}:
                    bad.append(f"{d['name']}: sm_scale {w['inputs']['sm_scale']}")
                pairs.add((d["name"], json.dumps(a, sort_keys=True)))
        check(not bad, f"decode grid: {len(grid_defs)} generated definitions consistent ({bad[:3]})")
        check(len(pairs) == planned >= 40 and not skipped,
              f"decode grid: {len(pairs)} distinct (definition, workload) shapes, {planned} planned")
        if len(sys.argv) > 2:  # kb's own schema checks, through the C ABI
            import kb_capi  # noqa: E402
            kb = kb_capi.load(sys.argv[2])
            ctx = kb_capi.context(kb)
            refused = []
            for p in grid_defs:
                try:
                    kb.kb_definition_destroy(kb_capi.definition(kb, ctx, p))
                except kb_capi.KbError as e:
                    refused.append(str(e))
            kb.kb_context_destroy(ctx)
            check(not refused, f"decode grid: kb_definition_load_file accepts every generated definition {refused[:2]}")

# flashinfer_side_by_side.py: the paged layouts it builds and hands to FlashInfer's plan (plain Python), then, where
# torch imports, its inputs for every serving, rmsnorm and sampling definition run through the definition's own
# reference on the CPU (the references' asserts check shapes and constraints)
import random  # noqa: E402
import flashinfer_side_by_side as fis  # noqa: E402

rng = random.Random(5)
for _ in range(200):
    parts, total = rng.randint(1, 9), rng.randint(0, 300)
    lens = fis.split_total(rng, total + 2 * parts, parts, 2)
    if not (len(lens) == parts and sum(lens) == total + 2 * parts and min(lens) >= 2):
        check(False, f"split_total({total + 2 * parts}, {parts}, 2) -> {lens}")
        break
else:
    check(True, "split_total: 200 random splits keep their total and minimum")
try:
    fis.split_total(rng, 3, 2, 2)
    check(False, "split_total refuses a total below the minimums")
except ValueError:
    check(True, "split_total refuses a total below the minimums")
bad = 0
for ps in (1, 16, 64):
    for _ in range(60):
        batch = rng.randint(1, 8)
        q = [rng.randint(1, 200) for _ in range(batch)]
        need = sum(max(1, -(-n // ps)) for n in q)
        n_idx = need + rng.randint(0, 40)
        num_pages = n_idx + rng.randint(0, 10)
        indptr, indices, last = fis.paged_layout(rng, q, n_idx, num_pages, ps)
        fis.check_paged_layout(indptr, indices, last, ps, num_pages)
        kv = fis.kv_lengths(indptr, last, ps)
        slots = fis.token_slots(indptr, indices, last, ps)
        ok = (len(set(indices)) == len(indices) and all(k >= n for k, n in zip(kv, q))
              and [len(s) for s in slots] == kv
              and all(len(set(s)) == len(s) for s in slots)
              and all(p in indices[indptr[b]:indptr[b + 1]] for b, s in enumerate(slots) for p, _ in s))
        bad += not ok
check(bad == 0, f"paged_layout: 180 random layouts valid, keys covering queries, token slots matching kv_lengths "
      f"({bad} bad)")
indptr, indices, last = fis.paged_layout(random.Random(2), [100, 30, 7], 3, 4, 64)
check(indptr == [0, 1, 2, 3] and last[0] == 64 and 30 <= last[1] <= 64 and 7 <= last[2] <= 64,
      f"paged_layout: pages too few to cover the queries: one page each, the last page as full as the queries ask "
      f"({indptr}, {last})")
try:
    fis.paged_layout(random.Random(2), [1, 1, 1], 2, 4, 64)
    check(False, "paged_layout refuses fewer pages than sequences")
except ValueError as e:
    check("a page each" in str(e), f"paged_layout refuses fewer pages than sequences: {e}")
check(fis.kv_lengths([0, 3, 3, 4], [5, 0, 64], 64) == [133, 0, 64], "kv_lengths: full pages, an empty sequence")
check(fis.token_slots([0, 2], [7, 3], [2], 4) == [[(7, 0), (7, 1), (7, 2), (7, 3), (3, 0), (3, 1)]],
      "token_slots: the pages in kv_indices order, the last one cut at its length")
check(fis.mla_plan_args(None, [0, 1, 3], [5, 2], 4) == ([0, 1, 2], [0, 1, 3], [5, 6]),
      "mla_plan_args: decode gets one query a sequence, kv_len_arr the valid tokens")
for args, why in ((([1, 2], [0], [1], 4, 5), "start at 0"), (([0, 2, 1], [0, 1], [1, 1], 4, 5), "decrease"),
                  (([0, 2], [0], [1], 4, 5), "page indices"), (([0, 1], [9], [1], 4, 5), "outside"),
                  (([0, 1], [0], [5], 4, 5), "last page length")):
    try:
        fis.check_paged_layout(*args)
        check(False, f"check_paged_layout refuses a layout that breaks '{why}'")
    except ValueError as e:
        check(why in str(e), f"check_paged_layout refuses a layout: {e}")
row = [0.1, 0.4, 0.05, 0.3, 0.15]
check(fis.filtered_support(row, 2, None) == {1, 3}, "filtered_support: top_k 2")
check(fis.filtered_support(row, None, 0.5) == {1, 3}, "filtered_support: top_p 0.5 keeps the token crossing it")
check(fis.filtered_support(row, None, 0.3) == {1}, "filtered_support: top_p below the largest keeps one")
check(fis.filtered_support(row, 3, 0.6) == {1, 3}, "filtered_support: top_k 3 renormalized, then top_p 0.6")
grid_def = {"name": "gqa_paged_decode_h20_kv4_d64_ps16", "op_type": "gqa_paged", "inputs": {},
            "axes": {"num_qo_heads": {"type": "const", "value": 20}, "num_kv_heads": {"type": "const", "value": 4},
                     "head_dim": {"type": "const", "value": 64}, "page_size": {"type": "const", "value": 16}}}
why = fis.variant_unsupported(grid_def, "cuda cores")
check(why and why.startswith("group 5"), f"FlashInfer's CUDA-core decode: group 5 not instantiated: {why}")
check(fis.variant_unsupported(grid_def, "tensor cores fa3") is None, "group 5 left to the tensor-core path")
grid_def["axes"]["num_qo_heads"]["value"] = 64
check(fis.variant_unsupported(grid_def, "cuda cores") is None, "FlashInfer's CUDA-core decode: group 16 runs")
measured = [("a", "b=1", 0.02, "cuda cores", 0.025), ("a", "b=1", 0.02, "tensor cores fa3", 0.016),
            ("c", "b=8", 0.05, "cuda cores", 0.05), ("e", "b=2", None, "cuda cores", 0.01)]
check(fis.fastest_ratios(measured) == [("a", "b=1", 0.02, "tensor cores fa3", 0.016, 0.02 / 0.016),
                                       ("c", "b=8", 0.05, "cuda cores", 0.05, 1.0)],
      "fastest_ratios: per shape the fastest FlashInfer variant, shapes without a kb latency left out")
summary = fis.ratio_summary(measured)
check(summary[-1] == "2 shapes: kb / FlashInfer median 1.12, largest 1.25 (a, b=1); 1 at most 1.0, 1 at most 1.1.",
      f"ratio_summary: median, largest and the counts under the bar: {summary[-1]}")
check(fis.ratio_summary([]) == [], "ratio_summary: nothing measured, no lines")
check(fis.total_variation([1, 1, 2, 2], [1, 2, 2, 2]) == 0.25 and fis.total_variation([1], [2]) == 1.0,
      "total_variation of two samples")
try:
    import torch  # noqa: F401
    have_torch = True
except ImportError:
    have_torch = False
    print("skip flashinfer_side_by_side inputs against the references: torch does not import")
if have_torch and os.path.isdir(os.path.join(shared_dir, "flashinfer-trace")):
    paths = []  # the first and last definition of each kind (by name, constants stripped)
    for op in ("gqa_paged", "gqa_ragged", "mla_paged", "mla_ragged", "rmsnorm", "sampling"):
        found = sorted(glob.glob(os.path.join(shared_dir, "flashinfer-trace", "definitions", op, "*.json")))
        kinds = {}
        for p in found:
            kinds.setdefault(re.sub(r"_(h|v)\d+.*$", "", os.path.basename(p)), []).append(p)
        paths += sorted({q for group in kinds.values() for q in (group[0], group[-1])})
    grid_tmp = tempfile.TemporaryDirectory()
    ns = argparse.Namespace(shared=shared_dir, kernels=os.path.join(root, "kernels"), max_workloads=None,
                            max_definitions=None)
    bench_kernels.write_family(ns, "decode_grid", grid_tmp.name)  # every generated definition, too
    paths += sorted(glob.glob(os.path.join(grid_tmp.name, "definitions", "gqa_paged", "*.json")))
    for p in paths:
        d = json.load(open(p))
        try:
            x = fis.build_inputs(d, fis.check_axes(d), {}, "cpu", seed=3)
            ints = {k: v.tolist() for k, v in x.items() if hasattr(v, "dtype") and not v.dtype.is_floating_point}
            if "kv_indices" in ints:
                a = {**fis.const_axes(d), **fis.check_axes(d)}
                last = ints.get("kv_last_page_len", [1] * (len(ints["kv_indptr"]) - 1))
                fis.check_paged_layout(ints["kv_indptr"], ints["kv_indices"], last, a["page_size"], a["num_pages"])
            out = fis.reference_fn(d)(**fis.clone(x))
            out = out if isinstance(out, (tuple, list)) else (out,)
            finite = all(bool(o.float().isfinite().all()) for o in out if o.dtype.is_floating_point)
            if d["op_type"] == "sampling":
                rows = x["probs"].double().tolist()
                ks = x["top_k"].tolist() if "top_k" in x else [None] * len(rows)
                qs = x["top_p"].tolist() if "top_p" in x else [None] * len(rows)
                inside = all(t in fis.filtered_support(r, k, q) for t, r, k, q in zip(out[0].tolist(), rows, ks, qs))
                check(inside, f"{d['name']}: the reference's draws lie in filtered_support's sets")
            else:
                check(finite and out[0].shape[0] == x[list(d["inputs"])[0]].shape[0],
                      f"{d['name']} at {fis.check_axes(d)}: inputs accepted by the reference, finite outputs")
        except Exception as e:  # noqa: BLE001
            check(False, f"{d['name']}: {type(e).__name__}: {e}")

print(f"{'FAILED' if failures else 'passed'}: {failures} failure(s)")
sys.exit(1 if failures else 0)
