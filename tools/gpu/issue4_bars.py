"""Issue 4's bars, read from compare_torch.py results: which hold, and the rows that miss them.

usage: issue4_bars.py BENCHMARK.json [BENCHMARK.json ...] [--nsight NSIGHT.json] [--interleaved IL.json ...]
                      [--out BARS.md]

Each BENCHMARK.json is a compare_torch.py output (or a --merge of several); rows of a later file replace rows of an
earlier one with the same definition, batch size and solution, so a re-measurement can be laid over a full table.
NSIGHT.json is nsight_check.py's output. IL.json is interleaved_ratio.py's (kb_cuda_gemm and torch.matmul timed
alternately in one process; later files replace earlier rows): with it, the gemm every-shape bar is judged on that
measurement too, and on the shapes over 1.03 in both (a ratio one measurement's clock or noise put over the line
rarely stays over in the other). Any file may be gzipped (.gz). A bar with no rows to judge says so ("not
measured") rather than holding.
Judged on kb's default solutions only (kb_cuda_gemm, kb_cuda_rmsnorm, ...), and only on rows that PASSED: a row that
did not pass fails every bar it falls under.

Prints (or writes) one markdown table: bar | holds | figures. Exit 0 whatever the bars say (a report); 2 on bad input.
"""
import argparse
import gzip
import json
import re
import statistics
import sys

# The solution kb runs by default per family (compare_torch.py's --all-solutions adds others, not judged here);
# kb_cuda_rmsnorm takes the fused add + RMSNorm definitions too.
DEFAULT_SOLUTIONS = {"gemm": "kb_cuda_gemm", "rmsnorm": "kb_cuda_rmsnorm", "silu_and_mul": "kb_cuda_silu_and_mul"}
GEMM_NAME = re.compile(r"^gemm_n(\d+)_k(\d+)$")


def fail(message):
    print(f"issue4_bars.py: {message}", file=sys.stderr)
    sys.exit(2)


def family(definition):
    if definition.startswith("gemm_"):
        return "gemm"
    if "rmsnorm" in definition:
        return "rmsnorm"
    if definition.startswith("silu_and_mul"):
        return "silu_and_mul"
    return None


def is_default_solution(row):
    return row["solution"] == DEFAULT_SOLUTIONS.get(family(row["definition"]))


def read_json(path):
    try:
        with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
            return json.load(f)
    except (OSError, ValueError, EOFError) as e:
        fail(f"{path}: {e}")


def checked_rows(path, tool, fields):
    """The rows of one tool's JSON, each holding `fields`; exits naming the file and row otherwise."""
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        fail(f"{path}: not a {tool} result (no \"rows\" list)")
    for i, r in enumerate(data["rows"]):
        missing = [k for k in fields if k not in r]
        if missing:
            fail(f"{path}: rows[{i}] lacks {', '.join(missing)}")
        yield r


def load_rows(paths):
    rows = {}
    for path in paths:
        for r in checked_rows(path, "compare_torch.py", ("definition", "value", "solution", "status")):
            rows[(r["definition"], r["value"], r["solution"])] = r
    return [r for r in rows.values() if family(r["definition"]) and is_default_solution(r)]


def load_interleaved(paths):
    """interleaved_ratio.py's rows at M >= 128, as {(definition, M): row} with the row's M also under "value"."""
    rows = {}
    for path in paths:
        for r in checked_rows(path, "interleaved_ratio.py", ("definition", "M", "status", "ratio")):
            if family(r["definition"]) == "gemm" and r["M"] >= 128:
                rows[(r["definition"], r["M"])] = dict(r, value=r["M"])
    return rows


def row_name(r):
    return f"{r['definition']} @ {r['value']}"


def clock_note(r):
    """Each side's clock over its kept samples: the lowest batch average (MHz), or T where the median holds samples
    set aside as throttled (kb's trace, torch_timing.py's record per torch pass). A ratio between two different
    clocks is partly the clock's (session 34: 1.046 with kb at T and torch at 1513 / 1512, 1.005 with both at T)."""
    def side(mhz, throttled):
        return "T" if throttled else (str(mhz) if mhz else "?")
    kb = side(r.get("kb_sm_clock_lowest_kept_mhz"), r.get("kb_throttled"))
    torch = ", ".join(side(t.get("sm_clock_lowest_kept_mhz"), t.get("throttled")) for t in r.get("torch_timing") or [])
    return f"clock kb {kb} / torch {torch or '?'}"


def judge(rows, label, figure_of, ok_of, describe, higher_is_better=False, note_of=None):
    """One bar: every row must pass and satisfy ok_of. Returns (label, verdict, figures); the misses are listed
    worst first, each with note_of(row) in brackets where given."""
    if not rows:
        return label, "not measured", "no rows in the given results"
    failed = [r for r in rows if r["status"] != "PASSED"]
    misses = [r for r in rows if r["status"] == "PASSED" and not ok_of(r)]
    values = [figure_of(r) for r in rows if r["status"] == "PASSED"]
    figures = describe(values) if values else ""
    if failed:
        figures += f"; {len(failed)} row(s) did not pass: " + ", ".join(f"{row_name(r)} {r['status']}" for r in failed[:4])
    if misses:
        figures += f"; {len(misses)} of {len(rows)} rows miss: " + ", ".join(
            f"{row_name(r)} {figure_of(r):.3f}" + (f" ({note_of(r)})" if note_of else "")
            for r in sorted(misses, key=figure_of, reverse=not higher_is_better)[:6])
    verdict = "yes" if not failed and not misses else "no"
    return label, verdict, figures.lstrip("; ")


def gemm_weight_bytes(r):
    m = GEMM_NAME.match(r["definition"])
    return int(m.group(1)) * int(m.group(2)) * 2 if m else None


def rounds_note(r):
    """The spread of an interleaved shape's rounds (each round: kb and torch.matmul once, back to back)."""
    rounds = r.get("round_ratios") or []
    return f"rounds {min(rounds):.3f}-{max(rounds):.3f}" if rounds else "rounds ?"


def interleaved_bars(large_m, interleaved):
    """The every-shape bar judged on the interleaved measurement, then on the shapes over 1.03 in both."""
    out = []
    il = list(interleaved.values())
    out.append(judge(il, "GEMM M >= 128, kb and torch.matmul timed alternately (interleaved_ratio.py): <= 1.03 on "
                     "every shape", lambda r: r["ratio"], lambda r: r["ratio"] <= 1.03,
                     lambda v: f"{len(v)} shapes, median {statistics.median(v):.3f}, {min(v):.3f}-{max(v):.3f}",
                     note_of=rounds_note))
    both = [(r, interleaved[(r["definition"], r["value"])]) for r in large_m
            if (r["definition"], r["value"]) in interleaved]
    label = "GEMM M >= 128: no shape over 1.03 in both measurements (kb bench's run and the interleaved one)"
    if not both:
        out.append((label, "not measured", "no shape in both"))
        return out
    def over(r):  # misses the bar: over 1.03, or did not pass
        return r["status"] != "PASSED" or r["ratio"] > 1.03
    bench_over = [b for b, _ in both if over(b)]
    il_over = [i for _, i in both if over(i)]
    over_both = [(b, i) for b, i in both if over(b) and over(i)]
    figures = (f"{len(both)} shapes in both; over 1.03 in kb bench's run {len(bench_over)}, in the interleaved "
               f"{len(il_over)}, in both {len(over_both)}")
    if over_both:
        figures += ": " + ", ".join(f"{row_name(b)} {b['ratio']:.3f} / {i['ratio']:.3f}" for b, i in over_both)
    out.append((label, "no" if over_both else "yes", figures))
    return out


def bars(rows, nsight, interleaved=None):
    gemm = [r for r in rows if family(r["definition"]) == "gemm"]
    norms = [r for r in rows if family(r["definition"]) in ("rmsnorm", "silu_and_mul")]
    large_m = [r for r in gemm if r["value"] >= 128]
    decode = [r for r in gemm if r["value"] <= 16]
    out = []

    # GEMM, M >= 128: <= 1.03 on every shape, median <= 1.0.
    label, verdict, figs = judge(large_m, "GEMM M >= 128: kb / torch.matmul <= 1.03 on every shape",
                                 lambda r: r["ratio"], lambda r: r["ratio"] <= 1.03,
                                 lambda v: f"{len(v)} rows, {min(v):.3f}-{max(v):.3f}", note_of=clock_note)
    out.append((label, verdict, figs))
    if interleaved:
        out += interleaved_bars(large_m, interleaved)
    passed = [r["ratio"] for r in large_m if r["status"] == "PASSED"]
    if passed:
        med = statistics.median(passed)
        out.append(("GEMM M >= 128: median kb / torch.matmul <= 1.0", "yes" if med <= 1.0 and
                    len(passed) == len(large_m) else "no", f"median {med:.3f} over {len(passed)} rows"))
    else:
        out.append(("GEMM M >= 128: median kb / torch.matmul <= 1.0", "not measured", "no rows in the given results"))

    # GEMM, M <= 16: 1.5x faster than torch at N = K = 4096 (kb / torch <= 1 / 1.5).
    sq = [r for r in decode if r["definition"] == "gemm_n4096_k4096"]
    out.append(judge(sq, "GEMM M <= 16, N = K = 4096: at least 1.5x faster than torch.matmul (kb / torch <= 0.667)",
                     lambda r: r["ratio"], lambda r: r["ratio"] <= 1 / 1.5,
                     lambda v: f"{len(v)} rows, kb / torch {min(v):.3f}-{max(v):.3f}"))

    # GEMM, M <= 16: >= 75% of copy bandwidth where the weight is >= 64 MB.
    big = [r for r in decode if (gemm_weight_bytes(r) or 0) >= 64e6]
    out.append(judge(big, "GEMM M <= 16, weight >= 64 MB: >= 75% of the measured copy bandwidth",
                     lambda r: r["kb_fraction_of_copy_bw"], lambda r: r["kb_fraction_of_copy_bw"] >= 0.75,
                     lambda v: f"{len(v)} rows, {100 * min(v):.0f}-{100 * max(v):.0f}%", higher_is_better=True))

    # Norms and SiLU-and-mul.
    large = [r for r in norms if r.get("bytes", 0) >= 256e6]
    out.append(judge(large, "RMSNorm / fused add + RMSNorm / SiLU-and-mul, >= 256 MB: >= 90% of copy bandwidth",
                     lambda r: r["kb_fraction_of_copy_bw"], lambda r: r["kb_fraction_of_copy_bw"] >= 0.90,
                     lambda v: f"{len(v)} rows, {100 * min(v):.0f}-{100 * max(v):.0f}%", higher_is_better=True))
    out.append(judge(norms, "RMSNorm / fused add + RMSNorm / SiLU-and-mul: never slower than torch",
                     lambda r: r["ratio"], lambda r: r["ratio"] <= 1.0,
                     lambda v: f"{len(v)} rows, kb / torch {min(v):.3f}-{max(v):.3f}"))
    batch1 = [r for r in norms if r["value"] == 1 and r.get("kb_over_empty_kernel")]
    out.append(judge(batch1, "RMSNorm / fused add + RMSNorm / SiLU-and-mul, batch 1: within 1.2x of an empty kernel",
                     lambda r: r["kb_over_empty_kernel"], lambda r: r["kb_over_empty_kernel"] <= 1.2,
                     lambda v: f"{len(v)} rows, kb / empty {min(v):.2f}-{max(v):.2f}"))

    # Timing against Nsight Compute, kernels over 20 us.
    if nsight is None:
        out.append(("kb's timing within 5% of Nsight Compute (kernels over 20 us)", "not measured", "no --nsight file"))
    else:
        timed = [r for r in nsight if r.get("ncu_ms") and r["ncu_ms"] > 0.020 and r.get("kb_over_ncu")]
        if not timed:
            out.append(("kb's timing within 5% of Nsight Compute (kernels over 20 us)", "not measured",
                        "no row with an ncu time over 20 us"))
        else:
            # kb's latency (CUDA events: the launch included) and, where the run had --cupti, CUPTI's kernel
            # time (the kernel alone, as ncu's duration), each judged in its own row.
            for key, bar in (("kb_over_ncu", "kb's timing within 5% of Nsight Compute (kernels over 20 us)"),
                             ("kb_cupti_over_ncu", "kb's CUPTI kernel time within 5% of Nsight Compute (kernels over 20 us)")):
                have = [r for r in timed if r.get(key)]
                if not have:  # no --cupti in that run
                    continue
                ratios = [r[key] for r in have]
                off = [r for r in have if abs(r[key] - 1) > 0.05]
                out.append((bar, "no" if off else "yes", f"{len(have)} rows, kb / ncu {min(ratios):.3f}-{max(ratios):.3f}" +
                            (("; off: " + ", ".join(f"{row_name(r)} {r[key]:.3f}" for r in off)) if off else "")))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results", nargs="+", help="compare_torch.py benchmark.json files, later ones override")
    p.add_argument("--nsight", help="nsight_check.py's JSON")
    p.add_argument("--interleaved", nargs="+", default=[], help="interleaved_ratio.py's JSON, later ones override")
    p.add_argument("--out", help="write the markdown here (default: stdout)")
    a = p.parse_args(argv)
    rows = load_rows(a.results)
    interleaved = load_interleaved(a.interleaved)
    nsight = None
    if a.nsight:
        nsight = read_json(a.nsight)
        if not isinstance(nsight, list):
            fail(f"{a.nsight}: not nsight_check.py's output (a list of rows)")
    lines = ["| bar | holds? | figures |", "| --- | --- | --- |"]
    lines += [f"| {b} | {v} | {f} |" for b, v, f in bars(rows, nsight, interleaved)]
    text = "\n".join(lines) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
