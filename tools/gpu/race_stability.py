#!/usr/bin/env python3
"""Whether kb_cuda_gemm's races pick the same candidate twice: two files of
race notes (kb's "kb gemm race:" lines, as on_device.sh race-ab and long-k-ab
save them) from runs of the same problems. Per problem both winners, and each
run's winner timed in the other run's race (its median over the other run's
winner's: above 1, the other run would have lost that much by taking it).

usage: race_stability.py A_NOTES B_NOTES [--names a,b] > stability.md
"""
import argparse
import re
import statistics

NOTE = re.compile(r"(\S+) M=(\d+) N=(\d+) K=(\d+): ([^;]+); median of \d+ cold samples: (.*?) \(static rule")
ITEM = re.compile(r"(.*) ([\d.]+) us$")


def races(path):
    """{(dtype, M, N, K): (winner, {candidate: median us})}"""
    out = {}
    for line in open(path):
        m = NOTE.search(line)
        if not m:
            continue
        medians = {}
        for item in m[6].split(", "):
            i = ITEM.match(item.replace(" (rule)", ""))
            if i:
                medians[i[1]] = float(i[2])
        out[(m[1], int(m[2]), int(m[3]), int(m[4]))] = (m[5], medians)
    return out


p = argparse.ArgumentParser()
p.add_argument("a")
p.add_argument("b")
p.add_argument("--names", default="A,B")
args = p.parse_args()
name_a, name_b = args.names.split(",")
a, b = races(args.a), races(args.b)
keys = sorted(k for k in a if k in b)
same = [k for k in keys if a[k][0] == b[k][0]]


def cost(k, winner_from, timed_in):
    """winner_from's winner over timed_in's winner, in timed_in's medians (None if either is missing)."""
    w, (own, med) = winner_from[k][0], timed_in[k]
    return med[w] / med[own] if w in med and own in med else None


print(f"# Race winners, {name_a} against {name_b}\n")
print(f"{len(keys)} problems raced in both ({len(a)} in {name_a}, {len(b)} in {name_b}); the same winner on "
      f"{len(same)}.\n")
for first, second, n1, n2 in ((a, b, name_a, name_b), (b, a, name_b, name_a)):
    c = [x for x in (cost(k, first, second) for k in keys) if x is not None]
    if c:
        print(f"- {n1}'s winner timed in {n2}'s race, over {n2}'s winner: median {statistics.median(c):.4f}, "
              f"max {max(c):.4f}; over 1.01 on {sum(x > 1.01 for x in c)}, over 1.02 on {sum(x > 1.02 for x in c)}")
print(f"\n| dtype | M | N | K | winner in {name_a} | winner in {name_b} | {name_a}'s in {name_b} | {name_b}'s in {name_a} |")
print("| --- | ---: | ---: | ---: | --- | --- | ---: | ---: |")
for k in keys:
    if a[k][0] == b[k][0]:
        continue
    ab, ba = cost(k, a, b), cost(k, b, a)
    fmt = lambda x: "-" if x is None else f"{x:.4f}"
    print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {a[k][0]} | {b[k][0]} | {fmt(ab)} | {fmt(ba)} |")
