#!/usr/bin/env python3
"""Cross-checks kb_dispatch against the trace files it was built from.

usage: dispatch_check.py LIBKB GEMM_DEFINITION.json TRACES [cpu|cuda] [--order KB_SOLUTIONS]

For a gemm definition (var axis M), reads every trace line of it under TRACES
with Python's json, works out which solution kb_dispatch should pick for a
range of M (the fastest PASSED kb_* solution on the nearest recorded M, in
log2 distance, ties to the smaller M; a solution with any other status on an M
is out for that M), and asks libkb's kb_dispatch_choose (ctypes; tensor
metadata only, nothing is run or allocated on the device). Prints one line per
M and exits 1 on any disagreement. Assumes every kb_* solution in the traces
is one of kb's in-process solutions that handles the definition, as
`kb bench` with its default solutions writes them.

--order lists kb's solutions in kb's order (`kb bench --list`): the dispatch is
then built with its default tie margin (2%: among the solutions within 2% of
the fastest, the one listed first wins). Without it the dispatch is built with
tie_margin 0 and the strictly fastest must win.
"""
import ctypes
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kb_capi import DTYPE_BITS, DTYPE_CODES, KDL_CPU, KDL_CUDA, DLDataType, DLDevice, DLTensor  # noqa: E402
import kb_capi  # noqa: E402


class Options(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("hardware", ctypes.c_char_p), ("fallback", ctypes.c_char_p),
                ("flags", ctypes.c_uint32), ("tie_margin", ctypes.c_double)]


class Choice(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("solution", ctypes.c_char_p), ("workload_uuid", ctypes.c_char_p),
                ("recorded_latency_ms", ctypes.c_double), ("exact", ctypes.c_int)]


def expected_choices(definition, traces, device, order, margin):
    """{M: (solution, uuid, ms)} per recorded M: among the PASSED kb_* solutions there within `margin` of the
    fastest, the first in `order` (solutions not in it after those that are, by name)."""
    best, failed = {}, set()
    for root, _, files in os.walk(traces):
        for name in sorted(files):
            if not name.endswith(".jsonl"):
                continue
            for line in open(os.path.join(root, name)):
                if not line.strip():
                    continue
                t = json.loads(line)
                sol = t.get("solution")
                if t.get("definition") != definition or not sol or not sol.startswith("kb_") or not t.get("evaluation"):
                    continue
                if ("_cuda_" in sol or "_cublaslt_" in sol) != (device == "cuda"):
                    continue
                m = t["workload"]["axes"]["M"]
                ev = t["evaluation"]
                perf = ev.get("performance") or {}
                if ev["status"] != "PASSED" or not perf.get("latency_ms"):
                    failed.add((m, sol))
                    continue
                key = (m, sol)
                if key not in best or perf["latency_ms"] < best[key][0]:
                    best[key] = (perf["latency_ms"], t["workload"]["uuid"])
    per_m = {}
    for (m, sol), (ms, uuid) in sorted(best.items()):
        if (m, sol) not in failed:
            per_m.setdefault(m, []).append((sol, uuid, ms))
    winners = {}
    for m, cands in per_m.items():
        fastest = min(ms for _, _, ms in cands)
        within = [c for c in cands if not c[2] > fastest * (1 + margin)]
        rank = {s: i for i, s in enumerate(order)}
        winners[m] = min(within, key=lambda c: (rank.get(c[0], len(rank)), c[0]))
    return winners


def main():
    args = sys.argv[1:]
    order = []
    if "--order" in args:
        i = args.index("--order")
        if i + 1 >= len(args):
            print(__doc__.strip().splitlines()[2], file=sys.stderr)
            return 2
        order = [s for s in args[i + 1].split(",") if s]
        del args[i:i + 2]
    if len(args) not in (3, 4):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    libkb, def_path, traces = args[:3]
    device = args[3] if len(args) == 4 else "cuda"
    margin = 0.02 if order else 0.0
    d = json.load(open(def_path))
    n = d["axes"]["N"]["value"]
    k = d["axes"]["K"]["value"]
    dtype = d["inputs"]["A"]["dtype"]
    winners = expected_choices(d["name"], traces, device, order, margin)
    print(f"{d['name']} on {device}, tie margin {margin}: recorded winners " +
          ", ".join(f"M={m}: {s} ({ms * 1000:.1f} us)" for m, (s, _, ms) in sorted(winners.items())))
    if not winners:
        print("FAIL: no PASSED kb_* record for this device in", traces)
        return 1

    kb = kb_capi.load(libkb)
    kb.kb_dispatch_create.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p,
                                      ctypes.POINTER(ctypes.c_void_p)]
    kb.kb_dispatch_choose.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                                      ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.POINTER(Choice)]
    kb.kb_dispatch_destroy.argtypes = [ctypes.c_void_p]
    ctx, dh, dp = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    opts = Options(ctypes.sizeof(Options), None, None, 0, 0.0)  # the strict rule, when no --order is given
    if (kb.kb_context_create(None, 1, ctypes.byref(ctx)) or kb.kb_definition_load_file(ctx, def_path.encode(), ctypes.byref(dh))
            or kb.kb_dispatch_create(ctx, dh, traces.encode(), None if order else ctypes.byref(opts),
                                     ctypes.byref(dp))):
        print("FAIL:", kb.kb_last_error().decode())
        return 1

    fake = ctypes.c_void_p(0x1000)  # choosing reads metadata only; the pointer is never dereferenced
    dev = DLDevice(KDL_CUDA if device == "cuda" else KDL_CPU, 0)
    dt = DLDataType(DTYPE_CODES[dtype], DTYPE_BITS[dtype], 1)
    failures = 0
    recorded = sorted(winners)
    for m in [1, 2, 3, 4, 5, 7, 8, 12, 16, 24, 32, 48, 64, 128, 512, 4096]:
        shapes = [(ctypes.c_int64 * 2)(m, k), (ctypes.c_int64 * 2)(n, k), (ctypes.c_int64 * 2)(m, n)]
        ts = [DLTensor(fake, dev, 2, dt, s, None, 0) for s in shapes]
        ins = (ctypes.c_void_p * 2)(ctypes.addressof(ts[0]), ctypes.addressof(ts[1]))
        outs = (ctypes.c_void_p * 1)(ctypes.addressof(ts[2]))
        c = Choice(ctypes.sizeof(Choice), None, None, 0.0, 0)
        if kb.kb_dispatch_choose(dp, ins, 2, outs, 1, ctypes.byref(c)):
            print(f"M={m}: FAIL: {kb.kb_last_error().decode()}")
            failures += 1
            continue
        near = min(recorded, key=lambda r: (abs(math.log2(max(m, 1)) - math.log2(max(r, 1))), r))
        want_sol, want_uuid, _ = winners[near]
        got = (c.solution.decode(), c.workload_uuid.decode() if c.workload_uuid else None)
        ok = got == (want_sol, want_uuid)
        failures += not ok
        print(f"M={m}: kb_dispatch chose {got[0]} (recorded M={near}{', exact' if c.exact else ''})"
              f"{'' if ok else f'; FAIL: expected {want_sol} from {want_uuid}'}")
    kb.kb_dispatch_destroy(dp)
    print(f"dispatch check: {failures} disagreements")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
