#!/usr/bin/env python3
"""Compact ratio tables from compare_torch.py's benchmark.json files, in the format of bench/results/<device>.md:
one row a definition, one column a batch size (M for gemm), each cell kb / torch (below 1: kb faster) and, where
the bytes moved dominate, kb's fraction of the measured copy bandwidth. Each table ends with a line giving the
rows, the median and the range. Later files override earlier rows of the same (definition, batch, solution).

usage: summary.py BENCHMARK.json[.gz]... [--command "bench/run.sh gemm"] [--out FILE]
"""
import argparse
import gzip
import json
import statistics
import sys

# kb's default solution per family: the one an engine gets, the row each table shows
DEFAULT_SOLUTION = {"gemm": "kb_cuda_gemm", "rmsnorm": "kb_cuda_rmsnorm", "fused_add_rmsnorm": "kb_cuda_rmsnorm",
                    "silu_and_mul": "kb_cuda_silu_and_mul", "rope": "kb_cuda_rope"}


def family(definition):
    for prefix in ("fused_add_rmsnorm", "rmsnorm", "silu_and_mul", "gemm", "rope"):
        if definition.startswith(prefix):
            return prefix
    return None


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"summary.py: {path}: {e}")
    for i, row in enumerate(data.get("rows", [])):
        missing = [k for k in ("definition", "value", "solution", "status") if k not in row]
        if missing:
            raise SystemExit(f"summary.py: {path}: rows[{i}] lacks {', '.join(missing)}")
    return data


def cell(row, with_copy):
    if row["status"] != "PASSED" or row.get("ratio") is None:
        return row["status"]
    text = f"{row['ratio']:.3f}"
    if with_copy and row.get("kb_fraction_of_copy_bw") is not None:
        text += f" ({row['kb_fraction_of_copy_bw'] * 100:.0f}%)"
    return text


def table(title, rows, with_copy):
    values = sorted({r["value"] for r in rows})
    defs = sorted({r["definition"] for r in rows}, key=lambda d: (len(d), d))
    at = {(r["definition"], r["value"]): r for r in rows}
    axis = "M" if all(family(d) == "gemm" for d in defs) else "batch"
    out = [f"### {title}", "", "| definition | " + " | ".join(f"{axis} = {v}" for v in values) + " |",
           "| --- |" + " ---: |" * len(values)]
    for d in defs:
        out.append(f"| {d} | " + " | ".join(cell(at[(d, v)], with_copy) if (d, v) in at else "-" for v in values)
                   + " |")
    ratios = [r["ratio"] for r in rows if r["status"] == "PASSED" and r.get("ratio") is not None]
    failed = [f"{r['definition']} @ {r['value']} {r['status']}" for r in rows if r["status"] != "PASSED"]
    line = f"{len(rows)} rows"
    if ratios:
        line += (f", kb / torch median {statistics.median(ratios):.3f}, {min(ratios):.3f}-{max(ratios):.3f}, "
                 f"{sum(x > 1.03 for x in ratios)} over 1.03")
    if failed:
        line += "; not PASSED: " + ", ".join(failed)
    return out + ["", line + ".", ""]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--command", default="", help="the command that produced the files, named above each table")
    p.add_argument("--out", help="write here (default: stdout)")
    a = p.parse_args()
    rows, meta = {}, {}
    for path in a.files:
        data = load(path)
        meta = data.get("meta", meta) or meta
        for r in data.get("rows", []):
            fam = family(r["definition"])
            if fam and r["solution"] == DEFAULT_SOLUTION[fam]:
                rows[(r["definition"], r["value"], r["solution"])] = r
    rows = list(rows.values())
    if not rows:
        raise SystemExit("summary.py: no rows of kb's default solutions in " + ", ".join(a.files))
    copy = meta.get("copy_bandwidth_gbs")
    out = [f"{meta.get('device', 'unknown device')}, torch {meta.get('torch', '?')}"
           + (f", copy bandwidth {copy:.0f} GB/s (torch, 1 GiB device to device)" if copy else "")
           + ". Cells: kb / torch latency, medians of cold samples (L2 flushed), both timed by kb's procedure"
           + " (docs/performance/timing.md); in parentheses kb's fraction of the copy bandwidth.", ""]
    if a.command:
        out += [f"Produced by `{a.command}`.", ""]
    gemm = [r for r in rows if family(r["definition"]) == "gemm"]
    if [r for r in gemm if r["value"] >= 128]:
        out += table("gemm, M >= 128: kb_cuda_gemm / torch.matmul", [r for r in gemm if r["value"] >= 128], False)
    if [r for r in gemm if r["value"] < 128]:
        out += table("gemm, M < 128: kb_cuda_gemm / torch.matmul (% of copy bandwidth)",
                     [r for r in gemm if r["value"] < 128], True)
    for fam, title in (("rmsnorm", "rmsnorm: kb_cuda_rmsnorm / F.rms_norm"),
                       ("fused_add_rmsnorm", "fused add + rmsnorm: kb_cuda_rmsnorm / F.rms_norm(x + r)"),
                       ("silu_and_mul", "silu_and_mul: kb_cuda_silu_and_mul / F.silu(x1) * x2"),
                       ("rope", "rope: kb_cuda_rope / the definition's reference in torch")):
        part = [r for r in rows if family(r["definition"]) == fam]
        if part:
            out += table(title + " (% of copy bandwidth)", part, True)
    text = "\n".join(out)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
