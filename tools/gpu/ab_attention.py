#!/usr/bin/env python3
"""Side-by-side timing of attention variants on the GPU machine (after prepare.sh).

Each variant is a set of environment switches (the KB_* switches of kernels/common/tuning_env.hpp) and/or
another build of the benchmark driver; rounds alternate the variants, so clock and thermal drift hit them
alike. Prints one markdown table: a row per (batch, tokens, page size), each cell every round's median in us.

  python3 tools/gpu/ab_attention.py "new=;old=KB_PREFILL_TMA_STORE=0" --rounds 3 --batches 1,8 --keys 4096,8192
  python3 tools/gpu/ab_attention.py "new=;prev=@.devcarry/prev_driver" --kinds prefill-gqa --page-sizes 1

A variant is NAME=SETTINGS, SETTINGS a comma-separated list of VAR=VALUE or @PATH (a driver binary built from
another commit, carried beside the bundle). --keys is the total query tokens for the prefill kinds.
"""
import argparse
import collections
import json
import os
import subprocess
import sys

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("variants", help='"name=SETTINGS;name=SETTINGS;..."')
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--kinds", default="prefill-gqa,prefill-gqa-ragged", help="driver kinds (gqa, mla, prefill-*)")
ap.add_argument("--batches", default="1,8")
ap.add_argument("--keys", default="4096,8192")
ap.add_argument("--page-sizes", default="1,64")
ap.add_argument("--hq", default="32")
ap.add_argument("--hkv", default="8")
ap.add_argument("--max-time", default="0.15", help="seconds of samples per case")
ap.add_argument("--driver", default=".devcarry/bin/test_attention_bench")
args = ap.parse_args()

variants = []
for item in filter(None, args.variants.split(";")):
    name, _, settings = item.partition("=")
    env, driver = dict(os.environ), args.driver
    for s in filter(None, settings.split(",")):
        if s.startswith("@"):
            driver = s[1:]
        else:
            k, _, v = s.partition("=")
            env[k] = v
    variants.append((name, env, driver))

times = collections.defaultdict(list)
for _ in range(args.rounds):
    for name, env, driver in variants:
        for kind in args.kinds.split(","):
            extra = ["--hkv", args.hkv] if kind.startswith("gqa") or kind.startswith("prefill-gqa") else []
            cmd = [driver, "--kind", kind, "--hq", args.hq, *extra, "--batches", args.batches, "--keys", args.keys,
                   "--page-sizes", args.page_sizes, "--max-time", args.max_time]
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
            for line in r.stdout.splitlines():
                if not line.startswith("{"):
                    continue
                o = json.loads(line)
                if "error" in o:
                    print(f"{name} {kind}: {o['error']}", file=sys.stderr)
                elif "ms" in o and "batch" in o:
                    k = o.get("kind", kind)
                    kv = "ragged" if k.endswith("ragged") else f"ps{o['page_size']}"
                    times[(k, o["batch"], o.get("tokens", o.get("keys")), kv, name)].append(o["ms"] * 1e3)
            if r.returncode != 0:
                print(f"{name} {kind}: driver exit {r.returncode}: {r.stderr[-500:]}", file=sys.stderr)

names = [v[0] for v in variants]
print("| kind | batch | tokens / keys | kv | " + " | ".join(f"{n} us" for n in names) + " |")
print("|---|---:|---:|---|" + "---|" * len(names))
for case in sorted({k[:4] for k in times}, key=lambda c: (c[0], c[1], c[2] or 0, c[3])):
    cells = ["/".join(f"{t:.1f}" for t in times.get(case + (n,), [])) or "-" for n in names]
    print(f"| {case[0]} | {case[1]} | {case[2]} | {case[3]} | " + " | ".join(cells) + " |")
