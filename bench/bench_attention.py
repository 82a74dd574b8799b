#!/usr/bin/env python3
"""kb's paged decode and causal prefill kernels against PyTorch SDPA, in one run on one GPU.

1. Runs kb's benchmark driver (bench/attention_bench.cpp, built as
   tests/gpu/kb_attention_bench) for GQA decode (32 query / 8 KV heads,
   head_dim 128) and MLA decode (16 heads, ckv 512 + kpe 64) over batch x keys
   per sequence x page size (1, 64): paged caches with random page order, timed
   by kb (CUDA events, L2 flushed before each sample, CUDA-graph samples,
   median). The driver also reports kb's measured device copy bandwidth.
2. Times torch.nn.functional.scaled_dot_product_attention on the same logical
   GQA problem with a dense KV cache (q [B, 32, 1, 128], k/v [B, 8, L, 128],
   enable_gqa=True): CUDA events, L2 flushed (a buffer twice the L2 size) before
   each sample, samples queued behind torch.cuda._sleep, median.
3. Writes benchmark_attention.md (tables, the targets met) and
   benchmark_attention.json to --out.

Bytes are counted once each: the KV the batch reads, q, output, lse (kb) and
the page table (kb). GB/s = bytes / median time.

usage: python3 bench/bench_attention.py --driver BUILD/tests/gpu/kb_attention_bench --out bench-out [--quick]
       [--prefill no|also|only]   (causal prefill rows: kb paged/ragged vs SDPA is_causal, TFLOP/s; default also)
       [--grid decode]            (instead: GQA decode over a generated grid of shapes, grid_shapes() below:
                                   groups 1..16, head_dim 64..256, page sizes 1..64, batch 1..256, 512..16384
                                   keys a sequence; latency, fraction of copy bandwidth, SDPA beside it;
                                   writes benchmark_attention_grid.md / .json)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_timing import time_like_kb  # noqa: E402 (kb's timing procedure, for torch)

MAX_TIME = 0.3  # seconds of samples per case at most, kb's side (--max-time) and torch's alike

p = argparse.ArgumentParser()
p.add_argument("--driver", required=True, help="the kb_attention_bench binary")
p.add_argument("--out", required=True)
p.add_argument("--quick", action="store_true", help="fewer shapes")
p.add_argument("--max-kv-gib", type=float, default=9.0, help="skip shapes whose KV cache is larger")
p.add_argument("--prefill", choices=["no", "also", "only"], default="also",
               help="causal prefill rows (kb vs SDPA is_causal, TFLOP/s): none, after decode, or prefill alone")
p.add_argument("--grid", choices=["decode"], help="GQA decode over a generated grid of shapes, nothing else")
args = p.parse_args()
os.makedirs(args.out, exist_ok=True)

BATCHES = [1, 4, 16, 64, 256]
KEYS = [512, 2048, 8192, 32768]
if args.quick:
    BATCHES = [1, 16, 64]
    KEYS = [1024, 8192, 32768]
HQ, HKV, D = 32, 8, 128
MLA_H = 16
PREFILL_TOKENS = [512, 1024, 2048, 4096, 8192, 16384] if not args.quick else [1024, 4096, 16384]
if args.prefill == "only":
    BATCHES, KEYS = [], []
t_start = time.time()


def run_driver(kind, extra):
    cmd = [args.driver, "--kind", kind, "--batches", ",".join(map(str, BATCHES)), "--keys", ",".join(map(str, KEYS)),
           "--page-sizes", "1,64", "--max-kv-gib", str(args.max_kv_gib), "--max-time", str(MAX_TIME)] + extra
    print("+", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=200)
    rows, copy = [], None
    for line in r.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            print(line)
            continue
        o = json.loads(line)
        if "copy_gbs" in o:
            copy = o["copy_gbs"]
        elif "error" in o:
            print("driver error:", o["error"], flush=True)
        else:
            rows.append(o)
    if r.returncode != 0:
        print(f"driver {kind}: exit {r.returncode}\n{r.stderr[-2000:]}", flush=True)
    return rows, copy



# ---- --grid decode: GQA decode over generated shapes --------------------------------
GRID_DIMS = [64, 96, 128, 192, 256]
GRID_GROUPS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 14, 16]
GRID_PAGES = [1, 16, 32, 64]
GRID_BATCHES = [1, 2, 8, 32, 64, 128, 256]
GRID_KEYS = [512, 1024, 2048, 4096, 8192, 16384]
GRID_SHAPES = 55       # shapes in the grid
GRID_KV_HEADS = 8      # H_kv; H_q = group x H_kv
GRID_MAX_KV_GIB = 2.0  # a shape's KV read at most (time: ~0.5 ms a sample on an H200)


def grid_shapes():
    """The grid: shape i takes head dim i mod 5, group i mod 13, page size i mod 4, batch i mod 7 and keys
    (i div 4) mod 6 of the lists above (pairwise-coprime cycles, so the axes combine rather than move in step),
    then halves the batch while the KV read exceeds GRID_MAX_KV_GIB. Every value of every list appears."""
    out = []
    for i in range(GRID_SHAPES):
        d = GRID_DIMS[i % len(GRID_DIMS)]
        g = GRID_GROUPS[i % len(GRID_GROUPS)]
        ps = GRID_PAGES[i % len(GRID_PAGES)]
        b = GRID_BATCHES[i % len(GRID_BATCHES)]
        L = GRID_KEYS[(i // len(GRID_PAGES)) % len(GRID_KEYS)]
        while b > 1 and b * L * GRID_KV_HEADS * d * 4 > GRID_MAX_KV_GIB * (1 << 30):
            b //= 2
        out.append({"batch": b, "keys": L, "page_size": ps, "hq": g * GRID_KV_HEADS, "hkv": GRID_KV_HEADS, "dim": d})
    return out


def run_decode_grid():
    shapes = grid_shapes()
    spec = ",".join(f"{s['batch']}:{s['keys']}:{s['page_size']}:{s['hq']}:{s['hkv']}:{s['dim']}" for s in shapes)
    cmd = [args.driver, "--kind", "gqa", "--shapes", spec, "--max-kv-gib", str(GRID_MAX_KV_GIB + 0.5),
           "--max-time", str(MAX_TIME)]
    print("+", " ".join(cmd[:3]), f"--shapes <{len(shapes)} shapes>", " ".join(cmd[5:]), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    rows, copy = [], 0.0
    for line in r.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            print(line)
            continue
        o = json.loads(line)
        if "copy_gbs" in o:
            copy = o["copy_gbs"]
        elif "error" in o:
            print("driver error:", o["error"], flush=True)
        else:
            rows.append(o)
    if r.returncode != 0:
        print(f"driver gqa --shapes: exit {r.returncode}\n{r.stderr[-2000:]}", flush=True)
    print(f"kb driver done in {time.time() - t_start:.0f} s; copy bandwidth {copy:.0f} GB/s", flush=True)

    dev = torch.device("cuda")
    L2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
    flush = torch.empty(2 * L2, dtype=torch.uint8, device=dev)
    sdpa = {}
    for s in shapes:
        b, L, hq, hkv, d = s["batch"], s["keys"], s["hq"], s["hkv"], s["dim"]
        key = (b, L, hq, hkv, d)
        if key in sdpa:
            continue
        try:
            q = torch.randn(b, hq, 1, d, dtype=torch.bfloat16, device=dev)
            k = torch.randn(b, hkv, L, d, dtype=torch.bfloat16, device=dev)
            v = torch.randn(b, hkv, L, d, dtype=torch.bfloat16, device=dev)
            F.scaled_dot_product_attention(q, k, v, scale=d ** -0.5, enable_gqa=True)
            ms = time_like_kb(lambda: F.scaled_dot_product_attention(q, k, v, scale=d ** -0.5, enable_gqa=True),
                              flush, max_time_s=MAX_TIME)
            sdpa[key] = ms
            del q, k, v
        except torch.cuda.OutOfMemoryError:
            print(f"SDPA {key}: out of memory", flush=True)
        except Exception as e:  # an SDPA without enable_gqa: no SDPA column for this shape
            print(f"SDPA {key}: {e}", flush=True)
        torch.cuda.empty_cache()
    print(f"SDPA done at {time.time() - t_start:.0f} s", flush=True)

    name = torch.cuda.get_device_name(0)
    lines = [f"# GQA paged decode over a generated grid of shapes: kb vs PyTorch SDPA ({name})", "",
             f"torch {torch.__version__}; kb's measured device copy bandwidth {copy:.0f} GB/s. {len(shapes)} shapes "
             "generated by bench/bench_attention.py grid_shapes(): head_dim, group (H_q / H_kv, H_kv = "
             f"{GRID_KV_HEADS}), page size, batch and keys a sequence cycled together. kb: paged KV in random page "
             "order; SDPA: dense KV, enable_gqa=True. Medians of cold samples (L2 flushed). % copy: kb's bytes "
             "(KV, q, output, lse, page table, each once) per second over the copy bandwidth.", "",
             "| head_dim | group | H_q/H_kv | page size | batch | keys | KV MB | kb us | GB/s | % copy | splits "
             "| SDPA us | SDPA / kb |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    out_rows = []
    for s in shapes:
        r = next((x for x in rows if x["batch"] == s["batch"] and x["keys"] == s["keys"] and
                  x["page_size"] == s["page_size"] and x["hq"] == s["hq"] and x["hkv"] == s["hkv"] and
                  x["dim"] == s["dim"]), None)
        sd = sdpa.get((s["batch"], s["keys"], s["hq"], s["hkv"], s["dim"]))
        kv_mb = s["batch"] * s["keys"] * s["hkv"] * s["dim"] * 4 / 1e6
        frac = r["gbs"] / copy if r and copy else None
        cells = [str(s["dim"]), str(s["hq"] // s["hkv"]), f"{s['hq']}/{s['hkv']}", str(s["page_size"]),
                 str(s["batch"]), str(s["keys"]), f"{kv_mb:.0f}",
                 f"{r['ms'] * 1e3:.1f}" if r else "-", f"{r['gbs']:.0f}" if r else "-",
                 f"{100 * frac:.0f}%" if frac is not None else "-", str(r["splits"]) if r else "-",
                 f"{sd * 1e3:.1f}" if sd else "-", f"{sd / r['ms']:.2f}x" if sd and r else "-"]
        lines.append("| " + " | ".join(cells) + " |")
        out_rows.append({**s, "kb": r, "sdpa_ms": sd, "copy_fraction": frac})
    measured = [x["copy_fraction"] for x in out_rows if x["copy_fraction"] is not None]
    if measured:
        lines += ["", f"{len(measured)} of {len(shapes)} shapes measured; copy fraction median "
                  f"{statistics.median(measured):.2f}, min {min(measured):.2f}. Run time {time.time() - t_start:.0f} s."]
    md = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "benchmark_attention_grid.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "benchmark_attention_grid.json"), "w") as f:
        json.dump({"device": name, "torch": torch.__version__, "copy_gbs": copy, "shapes": out_rows}, f, indent=1)
    print(md)
    if len(rows) != len(shapes):
        sys.exit(1)


if args.grid == "decode":
    run_decode_grid()
    sys.exit(0)

gqa_rows, copy_gbs = run_driver("gqa", ["--hq", str(HQ), "--hkv", str(HKV), "--dim", str(D)]) if BATCHES else ([], None)
mla_rows, copy2 = run_driver("mla", ["--hq", str(MLA_H)]) if BATCHES else ([], None)
prefill_rows = []
if args.prefill != "no":
    # batch 1 (one sequence of `tokens`) and batch 8 (tokens / 8 each); --keys carries the total query tokens
    for kind, extra in (("prefill-gqa", ["--hq", str(HQ), "--hkv", str(HKV)]),
                        ("prefill-gqa-ragged", ["--hq", str(HQ), "--hkv", str(HKV)]),
                        ("prefill-mla", ["--hq", str(MLA_H)])):
        cmd_extra = extra + ["--batches", "1,8", "--keys", ",".join(map(str, PREFILL_TOKENS))]
        r, c = run_driver(kind, cmd_extra)
        prefill_rows += r
        copy_gbs = copy_gbs or c
copy_gbs = copy_gbs or copy2 or 0.0
print(f"kb driver done in {time.time() - t_start:.0f} s; copy bandwidth {copy_gbs:.0f} GB/s", flush=True)

# ---- PyTorch SDPA on the same logical GQA problems ----------------------------
dev = torch.device("cuda")
props = torch.cuda.get_device_properties(0)
L2 = getattr(props, "L2_cache_size", 50 << 20)
flush_buf = torch.empty(2 * L2, dtype=torch.uint8, device=dev)


def time_torch(fn, **_):
    """Median ms of fn() over cold samples, timed as kb times its kernels (torch_timing.py)."""
    return time_like_kb(fn, flush_buf, max_time_s=MAX_TIME)


sdpa = {}
sdpa_note = "enable_gqa=True"
for b in BATCHES:
    for L in KEYS:
        kv_bytes = b * L * HKV * D * 2 * 2
        if kv_bytes > args.max_kv_gib * (1 << 30):
            continue
        try:
            q = torch.randn(b, HQ, 1, D, dtype=torch.bfloat16, device=dev)
            k = torch.randn(b, HKV, L, D, dtype=torch.bfloat16, device=dev)
            v = torch.randn(b, HKV, L, D, dtype=torch.bfloat16, device=dev)
            scale = D ** -0.5
            try:
                F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=True)
                fn = lambda: F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=True)
            except Exception as e:  # older torch: heads expanded outside the timed call
                sdpa_note = f"k/v repeated to {HQ} heads outside timing (enable_gqa failed: {e})"
                ke = k.repeat_interleave(HQ // HKV, dim=1)
                ve = v.repeat_interleave(HQ // HKV, dim=1)
                fn = lambda: F.scaled_dot_product_attention(q, ke, ve, scale=scale)
            ms = time_torch(fn)
            nbytes = kv_bytes + 2 * b * HQ * D * 2  # KV, q, output
            sdpa[(b, L)] = (ms, nbytes / (ms * 1e-3) / 1e9)
            del q, k, v
        except torch.cuda.OutOfMemoryError:
            print(f"SDPA batch {b} keys {L}: out of memory", flush=True)
        torch.cuda.empty_cache()
print(f"SDPA done at {time.time() - t_start:.0f} s", flush=True)

# ---- SDPA causal prefill on dense K / V (the same logical problems) ---------------
sdpa_prefill = {}
if args.prefill != "no":
    for b in (1, 8):
        for tokens in PREFILL_TOKENS:
            L = tokens // b
            for hq, hkv, dqk, dv in ((HQ, HKV, 128, 128),):
                try:
                    q = torch.randn(b, hq, L, dqk, dtype=torch.bfloat16, device=dev)
                    k = torch.randn(b, hkv, L, dqk, dtype=torch.bfloat16, device=dev)
                    v = torch.randn(b, hkv, L, dv, dtype=torch.bfloat16, device=dev)
                    try:
                        F.scaled_dot_product_attention(q[:, :, :8], k[:, :, :8], v[:, :, :8], is_causal=True, enable_gqa=True)
                        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                    except Exception:  # older torch: heads expanded outside the timed call
                        ke, ve = k.repeat_interleave(hq // hkv, dim=1), v.repeat_interleave(hq // hkv, dim=1)
                        fn = lambda: F.scaled_dot_product_attention(q, ke, ve, is_causal=True)
                    ms = time_torch(fn, samples=20, batch=5)
                    flops = 2.0 * b * hq * (L * (L + 1) / 2) * (dqk + dv)
                    sdpa_prefill[(b, tokens)] = (ms, flops / (ms * 1e-3) / 1e12)
                    del q, k, v
                except torch.cuda.OutOfMemoryError:
                    print(f"SDPA prefill batch {b} tokens {tokens}: out of memory", flush=True)
                torch.cuda.empty_cache()
    print(f"SDPA prefill done at {time.time() - t_start:.0f} s", flush=True)

# ---- Report ---------------------------------------------------------------------
name = torch.cuda.get_device_name(0)
lines = [f"# Attention (paged decode, causal prefill): kb vs PyTorch SDPA ({name})", "",
         f"torch {torch.__version__}, CUDA {torch.version.cuda}; kb's measured device copy bandwidth "
         f"{copy_gbs:.0f} GB/s. Times are medians of cold samples (L2 flushed). GB/s counts the KV read, q and output "
         f"once. SDPA: dense KV, {sdpa_note}. kb: paged KV (random page order), page size 1 and 64.", ""]
bars = []


def kb_row(rows, b, L, ps):
    for r in rows:
        if r["batch"] == b and r["keys"] == L and r["page_size"] == ps:
            return r
    return None


lines += [f"## GQA decode, {HQ} query / {HKV} KV heads, head_dim {D}", "",
          "| batch | keys | KV MB | SDPA us | SDPA GB/s | kb ps64 us | GB/s | % copy | vs SDPA | splits "
          "| kb ps1 us | GB/s | % copy | vs SDPA | splits |",
          "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
for b in BATCHES:
    for L in KEYS:
        kv_mb = b * L * HKV * D * 4 / 1e6
        s = sdpa.get((b, L))
        cells = [str(b), str(L), f"{kv_mb:.0f}", f"{s[0] * 1e3:.1f}" if s else "-", f"{s[1]:.0f}" if s else "-"]
        any_kb = False
        for ps, min_sdpa, min_copy in ((64, 0.90, 0.85), (1, 0.80, 0.75)):
            r = kb_row(gqa_rows, b, L, ps)
            if not r:
                cells += ["-"] * 5
                continue
            any_kb = True
            frac = r["gbs"] / copy_gbs if copy_gbs else 0
            ratio = s[0] / r["ms"] if s else None  # throughput ratio on the same problem = SDPA time / kb time
            cells += [f"{r['ms'] * 1e3:.1f}", f"{r['gbs']:.0f}", f"{100 * frac:.0f}%",
                      f"{ratio:.2f}x" if ratio else "-", str(r["splits"])]
            if kv_mb >= 256:
                bars.append((f"GQA ps{ps} batch {b} keys {L}: vs SDPA >= {min_sdpa:.2f}", ratio is not None and ratio >= min_sdpa,
                             f"{ratio:.2f}" if ratio else "no SDPA"))
                bars.append((f"GQA ps{ps} batch {b} keys {L}: copy fraction >= {min_copy:.2f}", frac >= min_copy, f"{frac:.2f}"))
        if any_kb or s:
            lines.append("| " + " | ".join(cells) + " |")

lines += ["", f"## MLA decode, {MLA_H} heads, ckv 512 + kpe 64 (no SDPA equivalent: GB/s vs copy)", "",
          "| batch | keys | KV MB | kb ps64 us | GB/s | % copy | splits | kb ps1 us | GB/s | % copy | splits |",
          "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
for b in BATCHES:
    for L in KEYS:
        kv_mb = b * L * 576 * 2 / 1e6
        cells = [str(b), str(L), f"{kv_mb:.0f}"]
        any_kb = False
        for ps in (64, 1):
            r = kb_row(mla_rows, b, L, ps)
            if not r:
                cells += ["-"] * 4
                continue
            any_kb = True
            frac = r["gbs"] / copy_gbs if copy_gbs else 0
            cells += [f"{r['ms'] * 1e3:.1f}", f"{r['gbs']:.0f}", f"{100 * frac:.0f}%", str(r["splits"])]
            if L >= 8192 and kv_mb >= 256:
                bars.append((f"MLA ps{ps} batch {b} keys {L}: copy fraction >= 0.80", frac >= 0.80, f"{frac:.2f}"))
        if any_kb:
            lines.append("| " + " | ".join(cells) + " |")

if args.prefill != "no":
    def pf_row(kind, b, tokens, ps):
        for r in prefill_rows:
            if r["kind"] == kind and r["batch"] == b and r["tokens"] == tokens and r["page_size"] == ps:
                return r
        return None

    lines += ["", f"## Causal prefill, GQA {HQ} query / {HKV} KV heads, head_dim 128 (SDPA is_causal on dense K/V; "
              "TFLOP/s counts the causal half; kb times the attention kernel alone, its plan apart)", "",
              "| batch | tokens | SDPA us | SDPA TFLOP/s | kb paged ps64 us | TFLOP/s | vs SDPA | kb paged ps1 us | TFLOP/s "
              "| vs SDPA | kb ragged us | TFLOP/s | vs SDPA | plan us |",
              "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for b in (1, 8):
        for tokens in PREFILL_TOKENS:
            s_ = sdpa_prefill.get((b, tokens))
            cells = [str(b), str(tokens), f"{s_[0] * 1e3:.0f}" if s_ else "-", f"{s_[1]:.0f}" if s_ else "-"]
            plan = None
            for kind, ps in (("prefill-gqa", 64), ("prefill-gqa", 1), ("prefill-gqa-ragged", 0)):
                r = pf_row(kind, b, tokens, ps)
                if not r:
                    cells += ["-"] * 3
                    continue
                plan = r.get("plan_ms")
                ratio = r["tflops"] / s_[1] if s_ else None
                cells += [f"{r['ms'] * 1e3:.0f}", f"{r['tflops']:.0f}", f"{ratio:.2f}x" if ratio else "-"]
                if tokens >= 4096:
                    name_ = f"GQA prefill {'ragged' if ps == 0 else f'paged ps{ps}'} batch {b} tokens {tokens}: vs SDPA >= 0.75"
                    bars.append((name_, ratio is not None and ratio >= 0.75, f"{ratio:.2f}" if ratio else "no SDPA"))
            cells.append(f"{plan * 1e3:.1f}" if plan is not None and plan >= 0 else "-")
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"## Causal prefill, MLA {MLA_H} heads, ckv 512 + kpe 64, paged (no SDPA equivalent)", "",
              "| batch | tokens | ps64 us | TFLOP/s | ps1 us | TFLOP/s |", "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for b in (1, 8):
        for tokens in PREFILL_TOKENS:
            cells = [str(b), str(tokens)]
            for ps in (64, 1):
                r = pf_row("prefill-mla", b, tokens, ps)
                cells += [f"{r['ms'] * 1e3:.0f}", f"{r['tflops']:.0f}"] if r else ["-", "-"]
            lines.append("| " + " | ".join(cells) + " |")

lines += ["", "## Targets (shapes with a KV read of at least 256 MB; MLA: 8192 keys and more)", "",
          "| target | met | value |", "| --- | --- | --- |"]
lines += [f"| {what} | {'yes' if ok else '**no**'} | {val} |" for what, ok, val in bars]
held = sum(1 for _, ok, _ in bars if ok)
lines += ["", f"{held} of {len(bars)} targets met. Run time {time.time() - t_start:.0f} s."]
md = "\n".join(lines) + "\n"
with open(os.path.join(args.out, "benchmark_attention.md"), "w") as f:
    f.write(md)
with open(os.path.join(args.out, "benchmark_attention.json"), "w") as f:
    json.dump({"device": name, "torch": torch.__version__, "copy_gbs": copy_gbs, "gqa": gqa_rows, "mla": mla_rows,
               "prefill": prefill_rows,
               "sdpa_prefill": [{"batch": b, "tokens": t, "ms": v[0], "tflops": v[1]} for (b, t), v in sdpa_prefill.items()],
               "sdpa": [{"batch": b, "keys": L, "ms": v[0], "gbs": v[1]} for (b, L), v in sdpa.items()],
               "sdpa_note": sdpa_note, "bars": [{"bar": w, "holds": ok, "value": v} for w, ok, v in bars]}, f, indent=1)
print(md)
decode_ok = (gqa_rows and mla_rows) or args.prefill == "only"
sys.exit(0 if decode_ok and (prefill_rows or args.prefill == "no") else 1)
