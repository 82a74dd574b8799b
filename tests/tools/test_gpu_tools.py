"""The GPU machine's Python tools, on the parts that need no GPU: how a profiler's kernel records are cut into
calls (tools/gpu/kernel_spans.py), compare_torch.py --merge on committed H100 results (its tables, the
kernels-only ratio), issue4_bars.py on committed H200 results, and nsight_check.py's kernel-name filters against
kb's kernels, race_sweep.py's tables on a stand-in kb. usage: test_gpu_tools.py SOURCE_ROOT"""
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
sys.path.insert(0, os.path.join(root, "tools", "gpu"))
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

# compare_torch.py --merge on committed results (no torch needed)
bench = os.path.join(root, "benchmarks", "h100-2026-11-27-s13")
with tempfile.TemporaryDirectory() as out:
    r = subprocess.run([sys.executable, os.path.join(root, "tools", "gpu", "compare_torch.py"), "--merge",
                        os.path.join(bench, "kernels_vs_kernels.json"), "--out", out],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"compare_torch.py --merge: exit {r.returncode} {r.stderr[-300:]}")
    if r.returncode == 0:
        md = open(os.path.join(out, "benchmark.md")).read()
        merged = json.load(open(os.path.join(out, "benchmark.json")))
        rows = [l for l in md.splitlines() if l.startswith("| gemm_n4096_k4096 | 1 | kb_cuda_gemm |")]
        check(len(rows) == 1 and rows[0].rstrip(" |").endswith("0.752"),
              f"the kernels-only ratio of 4096^2 M = 1: {rows}")
        check("(0.91 us by CUPTI)" in md, "the empty kernel's CUPTI time in the header")
        check(len(merged["rows"]) == len(json.load(open(os.path.join(bench, "kernels_vs_kernels.json")))["rows"]),
              "every row kept")
# the same on session 34's graph-mode run: how torch was timed, and each side's clock beside its set-aside count
with tempfile.TemporaryDirectory() as out:
    r = subprocess.run([sys.executable, os.path.join(root, "tools", "gpu", "compare_torch.py"), "--merge",
                        os.path.join(root, "benchmarks", "h200-2026-12-03-s34", "call5_torch_g1.json"), "--out", out],
                       capture_output=True, text=True, timeout=120)
    md = open(os.path.join(out, "benchmark.md")).read() if r.returncode == 0 else ""
    check("replayed from a CUDA graph, as kb's are, in 16 of 16 passes" in md, "torch's timing method in the header")
    rows = [l for l in md.splitlines() if l.startswith("| gemm_n5120_k3072 | 256 | kb_cuda_gemm |")]
    check(len(rows) == 1 and "| 0 / 0 (1923)+0 (1923) |" in rows[0], f"torch's clocks in the set-aside cell: {rows}")

# issue4_bars.py on committed H200 results: the verdicts those files hold, and bad input refused with its name.
bars_tool = os.path.join(root, "tools", "gpu", "issue4_bars.py")
s20 = os.path.join(root, "benchmarks", "h200-2026-11-28-s20")
s21 = os.path.join(root, "benchmarks", "h200-2026-11-28-s21")


def run_bars(*args):
    r = subprocess.run([sys.executable, bars_tool, *args], capture_output=True, text=True, timeout=120)
    verdicts = {}
    for line in r.stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[1] in ("yes", "no", "not measured"):
            verdicts[cells[0]] = (cells[1], cells[2])
    return r, verdicts


BW_BAR = "RMSNorm / fused add + RMSNorm / SiLU-and-mul, >= 256 MB: >= 90% of copy bandwidth"
r, v = run_bars(os.path.join(s20, "4_gemm_all_shapes_m128_2048_8192.json"), os.path.join(s21, "norm_silu_full_before.json"),
                os.path.join(s21, "silu_and_mul_final.json"))
check(r.returncode == 0, f"issue4_bars.py: exit {r.returncode} {r.stderr[-300:]}")
check(v.get("GEMM M >= 128: median kb / torch.matmul <= 1.0", ("",))[0] == "yes"
      and "median 0.978 over 84 rows" in v["GEMM M >= 128: median kb / torch.matmul <= 1.0"][1],
      f"the gemm median bar from session 20's 84 rows: {v.get('GEMM M >= 128: median kb / torch.matmul <= 1.0')}")
every = v.get("GEMM M >= 128: kb / torch.matmul <= 1.03 on every shape", ("", ""))
check(every[0] == "no" and "gemm_n8192_k28672 @ 2048 1.048" in every[1], f"the rows over 1.03 named: {every}")
check(v.get(BW_BAR, ("",))[0] == "yes", f"silu_and_mul's session-21 rows override the earlier ones: {v.get(BW_BAR)}")
check(v.get("GEMM M <= 16, N = K = 4096: at least 1.5x faster than torch.matmul (kb / torch <= 0.667)", ("",))[0]
      == "not measured", "a bar without rows is not measured, not held")
r, v = run_bars(os.path.join(s21, "norm_silu_full_before.json"))
check(v.get(BW_BAR, ("", ""))[0] == "no" and "silu_and_mul_i12288 @ 4096 0.878" in v[BW_BAR][1],
      f"session 20's silu_and_mul at 4096 tokens misses the bandwidth bar: {v.get(BW_BAR)}")
# session 22's one-lease table (benchmarks/h200-2026-12-01-s22/issue4_bars.md), Nsight file included
s22 = os.path.join(root, "benchmarks", "h200-2026-12-01-s22")
r, v = run_bars(*[os.path.join(s22, f) for f in ("bars_1_gemm_m128_2048_8192.json", "bars_2_decode_m1_m16.json",
                                                "bars_3_decode_big_m8_9_12.json", "bars_4_norm_silu.json")],
                "--nsight", os.path.join(s22, "bars_5_nsight_check.json"))
nsight_bar = v.get("kb's timing within 5% of Nsight Compute (kernels over 20 us)", ("", ""))
check(nsight_bar[0] == "yes" and "3 rows, kb / ncu 0.999-1.029" in nsight_bar[1], f"session 22's Nsight bar: {nsight_bar}")
# session 34's one-lease table (gzipped): a row over 1.03 carries each side's clock, kb's median throttled (T)
s34 = os.path.join(root, "benchmarks", "h200-2026-12-03-s34")
with tempfile.TemporaryDirectory() as tmp:
    plain = []
    for part in ("gemm_large", "gemm_mid", "gemm_16384"):
        plain.append(os.path.join(tmp, part + ".json"))
        with gzip.open(os.path.join(s34, f"lease1_{part}.json.gz"), "rb") as src, open(plain[-1], "wb") as dst:
            dst.write(src.read())
    r34, v34 = run_bars(*plain)
    every = v34.get("GEMM M >= 128: kb / torch.matmul <= 1.03 on every shape", ("", ""))
    check(r34.returncode == 0 and every[0] == "no" and "224 rows, 0.842-1.046" in every[1]
          and "gemm_n5120_k17408 @ 16384 1.046 (clock kb T / torch 1513, 1512)" in every[1],
          f"session 34's gemm rows, the throttled one marked: {every}")
# a run with --cupti: kb's CUPTI kernel time is judged in a row of its own beside its event latency
with tempfile.TemporaryDirectory() as tmp:
    ns = os.path.join(tmp, "nsight.json")
    with open(ns, "w") as f:
        json.dump([{"definition": "gemm_n7168_k5120", "value": 1, "solution": "kb_cuda_gemv", "ncu_ms": 0.0205,
                    "kb_over_ncu": 1.068, "kb_cupti_over_ncu": 1.012},
                   {"definition": "rmsnorm_h7168", "value": 32768, "solution": "kb_cuda_rmsnorm", "ncu_ms": 0.2,
                    "kb_over_ncu": 1.01, "kb_cupti_over_ncu": 0.998}], f)
    _, vc = run_bars(os.path.join(s22, "bars_4_norm_silu.json"), "--nsight", ns)
    events_bar = vc.get("kb's timing within 5% of Nsight Compute (kernels over 20 us)", ("", ""))
    cupti_bar = vc.get("kb's CUPTI kernel time within 5% of Nsight Compute (kernels over 20 us)", ("", ""))
    check(events_bar[0] == "no" and "gemm_n7168_k5120 @ 1 1.068" in events_bar[1] and
          cupti_bar[0] == "yes" and "2 rows, kb / ncu 0.998-1.012" in cupti_bar[1],
          f"events and CUPTI judged apart: {events_bar} {cupti_bar}")
# session 37's gemm parts (gzipped, read as they are) with its interleaved runs: the every-shape bar judged on each
# measurement and on the shapes over 1.03 in both
s37 = os.path.join(root, "benchmarks", "h200-2026-12-03-s37")
r37, v37 = run_bars(*[os.path.join(s37, f"{part}.json.gz") for part in ("gemm_large", "gemm_mid", "gemm_16384")],
                    "--interleaved", os.path.join(s37, "ab_interleaved_m128_256_tiles_on.json"),
                    os.path.join(s37, "interleaved_all_m.json.gz"))
il_bar = v37.get("GEMM M >= 128, kb and torch.matmul timed alternately (interleaved_ratio.py): <= 1.03 on every shape",
                 ("", ""))
both_bar = v37.get("GEMM M >= 128: no shape over 1.03 in both measurements (kb bench's run and the interleaved one)",
                   ("", ""))
check(r37.returncode == 0 and il_bar[0] == "no" and "224 shapes, median 0.983" in il_bar[1]
      and "gemm_n256_k7168 @ 16384 1.076 (rounds 0.934-1.081)" in il_bar[1], f"session 37's interleaved bar: {il_bar}")
check(both_bar[0] == "no" and "over 1.03 in kb bench's run 4, in the interleaved 4, in both 1: "
      "gemm_n5376_k21504 @ 16384 1.031 / 1.044" in both_bar[1], f"session 37's shapes over in both: {both_bar}")
# session 38's committed table is what the tool makes of the committed files its README names (the command there)
s38 = os.path.join(root, "benchmarks", "h200-2026-12-03-s38")
r38, _ = run_bars(*[os.path.join(s38, f"{part}.json.gz") for part in ("gemm_large", "gemm_mid", "gemm_16384", "gemm_small")],
                  os.path.join(root, "benchmarks", "h200-2026-12-03-s36", "norms.json.gz"),
                  "--nsight", os.path.join(s38, "nsight_check.json"),
                  "--interleaved", os.path.join(s37, "interleaved_all_m.json.gz"),
                  os.path.join(s38, "interleaved_m256_call1.json"), os.path.join(s38, "interleaved_m256_16384_call2.json"))
committed = open(os.path.join(s38, "issue4_bars.md")).read()
check(r38.returncode == 0 and r38.stdout.strip() and committed.rstrip().endswith(r38.stdout.strip()),
      "session 38's issue4_bars.md is the tool's table of its files")
with tempfile.TemporaryDirectory() as tmp:
    bad_il = os.path.join(tmp, "il.json")
    with open(bad_il, "w") as f:
        f.write('{"rows": [{"definition": "gemm_n4096_k4096", "M": 256}]}')
    r, _ = run_bars(os.path.join(s37, "gemm_mid.json.gz"), "--interleaved", bad_il)
    check(r.returncode == 2 and "il.json: rows[0] lacks status, ratio" in r.stderr,
          f"an interleaved row without its fields is refused, naming the file and the row: {r.stderr.strip()}")
decode_bar = v.get("GEMM M <= 16, weight >= 64 MB: >= 75% of the measured copy bandwidth", ("", ""))
check(decode_bar[0] == "no" and "19 of 60 rows miss" in decode_bar[1], f"session 22's decode bandwidth bar: {decode_bar}")
with tempfile.TemporaryDirectory() as tmp:
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        f.write('{"rows": [{"definition": "gemm_n4096_k4096"}]}')
    r, _ = run_bars(bad)
    check(r.returncode == 2 and "bad.json: rows[0] lacks value, solution, status" in r.stderr,
          f"a row without its fields is refused, naming the file and the row: {r.returncode} {r.stderr.strip()}")
    with open(bad, "w") as f:
        f.write('{"rows": [')
    r, _ = run_bars(bad)
    check(r.returncode == 2 and "bad.json" in r.stderr, f"broken JSON is refused with the file's name: {r.stderr.strip()}")

# nsight_check.py's ncu kernel-name filters for kb's own kernels must match a __global__ function under kernels/: a
# renamed kernel (session 21's silu_and_mul_vec8_kernel) left the filter matching nothing, and ncu then profiled nothing.
nsight_src = open(os.path.join(root, "tools", "gpu", "nsight_check.py")).read()
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
check(not any(re.search("silu_and_mul_kernel", k) for k in kb_kernels), "the old silu filter would match nothing")
for case_name, _, _, _, solution, regex in nsight_cases:
    if solution == "kb_cublaslt_gemm":
        continue  # cuBLASLt's kernels are not kb's
    hits = sorted(k for k in kb_kernels if re.search(regex, k))
    check(bool(hits), f"nsight_check.py's filter for {case_name} ({regex}) matches kb's kernels: {hits}")

# race_sweep.py on a stand-in kb: the race notes session 28 recorded (each form's median), and for the timed A/B runs
# trace lines whose latency depends on KB_GEMM_LONG_K, so the table's ratios are known.
FAKE_KB = r"""#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
out = args[args.index("--out") + 1]
if "--no-time" in args:
    for line in open(os.environ["FAKE_NOTES"]):
        print("kb gemm race: " + line.rstrip(), file=sys.stderr)
    sys.exit(0)
os.makedirs(os.path.join(out, "traces", "kb", "gemm"), exist_ok=True)
with open(os.path.join(out, "traces", "kb", "gemm", "sweep.jsonl"), "w") as f:
    for m in (128, 512):
        ms = 0.2 if os.environ.get("KB_GEMM_LONG_K") == "chunks" else 0.15
        f.write(json.dumps({"definition": "sweep_float16_n8192_k28672", "workload": {"axes": {"M": m}},
                            "evaluation": {"status": "PASSED", "performance": {"latency_ms": ms * m / 128}}}) + "\n")
"""
with tempfile.TemporaryDirectory() as tmp:
    fake = os.path.join(tmp, "kb")
    with open(fake, "w") as f:
        f.write(FAKE_KB)
    os.chmod(fake, 0o755)
    notes = os.path.join(root, "benchmarks", "h200-2026-12-02-s28", "long_k_notes_call2_run2.txt")
    r = subprocess.run([sys.executable, os.path.join(root, "tools", "gpu", "race_sweep.py"), "--kb", fake, "--n", "8192",
                        "--m", "128,512", "--k", "28672", "--out", os.path.join(tmp, "out"),
                        "--ab", "KB_GEMM_LONG_K=chunks"], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, FAKE_NOTES=notes))
    check(r.returncode == 0, f"race_sweep.py on a stand-in kb: exit {r.returncode} {r.stderr[-300:]}")
    table = r.stdout.splitlines()
    row = [l for l in table if l.startswith("| 1024 | 8192 |")]
    # 8192 x 28672 at M = 1024: batch 638.2080, one by one 630.2720, kb wgmma 647.9040 us; the static rule's batch
    # over the fastest 1.013
    check(len(row) == 1 and "| cuBLASLt chunks one by one | cuBLASLt chunks | 1.013 |" in row[0],
          f"race_sweep.py's row for M = 1024: {row}")
    ab = [l for l in table if l.startswith("| 512 | 8192 |")]
    check(len(ab) == 1 and ab[0].endswith("| 800.0 | 600.0 | 0.750 |"), f"race_sweep.py's A/B columns: {ab}")
    check("without / with KB_GEMM_LONG_K=chunks: median 0.750, 0.750-0.750 over 2 rows" in r.stdout,
          "race_sweep.py's A/B summary")
    definition = json.load(open(os.path.join(tmp, "out", "dataset", "definitions", "sweep_float16_n8192_k28672.json")))
    check(definition["axes"]["K"]["value"] == 28672 and definition["inputs"]["B"]["shape"] == ["N", "K"],
          "race_sweep.py's made-up definition")

# kb_capi.py (the tools' ctypes binding of kb's C ABI) on this build's libkb, where the build passes it (not in
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

print(f"{'FAILED' if failures else 'passed'}: {failures} failure(s)")
sys.exit(1 if failures else 0)
