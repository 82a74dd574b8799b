#!/usr/bin/env python3
"""Randomized model of prefill_wgmma.cuh's producer / consumer protocol.

Mirrors the kernel's mbarrier use (full_k / full_v: 128 producer arrivals,
empty_k / empty_v: 4 warps x 2 consumer warpgroups; phase parity waits) for
every WgmmaConfig (STAGES, OVERLAP, ASYNC), with copies that land at random
times and random interleavings. Checks: no deadlock; a consumer reads a stage
only when it holds the tile it expects, fully landed; the producer never
writes a stage a consumer still reads. The producer's 128 threads move in
lockstep (named barrier every tile) and are modelled as one actor arriving
128 times; a consumer warpgroup is one actor arriving 4 times.
"""
import itertools
import random


class Barrier:
    def __init__(self, count):
        self.count, self.pending, self.phase = count, count, 0

    def arrive(self, k=1):
        self.pending -= k
        assert self.pending >= 0, "over-arrival"
        if self.pending == 0:
            self.phase += 1
            self.pending = self.count

    def done(self, parity):  # try_wait.parity: has the phase with this parity completed?
        return (self.phase & 1) != parity


class Sim:
    def __init__(self, S, overlap, asyn, n, nw, seed):
        self.S, self.overlap, self.asyn, self.n, self.nw = S, overlap, asyn, n, nw
        self.rng = random.Random(seed)
        self.full_k = [Barrier(128) for _ in range(S)]
        self.full_v = [Barrier(128) for _ in range(S)]
        self.empty_k = [Barrier(8) for _ in range(S)]
        self.empty_v = [Barrier(8) for _ in range(S)]
        self.stage = {("k", s): None for s in range(S)} | {("v", s): None for s in range(S)}  # (tile, landed)
        self.readers = {key: set() for key in self.stage}
        self.inflight = []  # copies: [kind, stage, tile]; land in order per producer (cp.async groups)
        self.async_arrivals = []  # (index into landed count, barrier)
        self.landed = 0
        self.issued = 0

    # --- producer -----------------------------------------------------------------
    def producer(self):
        S = self.S
        for t in range(self.n):
            s = t % S
            par = (t // S + 1) & 1
            if t >= S:
                while not self.empty_k[s].done(par):
                    yield
            yield from self.issue("k", s, t)
            if self.asyn:
                self.async_arrive(self.full_k[s])
            if t >= S:
                while not self.empty_v[s].done(par):
                    yield
            yield from self.issue("v", s, t)
            if self.asyn:
                self.async_arrive(self.full_v[s])
            elif t > 0:
                # cp.async.wait_group 1: everything but tile t's two copies landed
                while self.landed < self.issued - 2:
                    yield
                sp = (t - 1) % S
                self.full_k[sp].arrive(128)
                self.full_v[sp].arrive(128)
        if not self.asyn and self.n > 0:
            while self.landed < self.issued:
                yield
            sp = (self.n - 1) % S
            self.full_k[sp].arrive(128)
            self.full_v[sp].arrive(128)

    def issue(self, kind, s, t):
        key = (kind, s)
        assert not self.readers[key], f"producer overwrites {key} while read by {self.readers[key]}"
        self.stage[key] = (t, False)
        self.inflight.append((kind, s, t))
        self.issued += 1
        yield

    def async_arrive(self, bar):  # cp.async.mbarrier.arrive.noinc: once all copies issued so far landed
        self.async_arrivals.append((self.issued, bar))
        self.flush_arrivals()

    def flush_arrivals(self):
        while self.async_arrivals and self.async_arrivals[0][0] <= self.landed:
            self.async_arrivals.pop(0)[1].arrive(128)

    def land_one(self):
        kind, s, t = self.inflight.pop(0)
        if self.stage[(kind, s)] == (t, False):
            self.stage[(kind, s)] = (t, True)
        self.landed += 1
        self.flush_arrivals()

    # --- consumers ----------------------------------------------------------------
    def wait_full(self, bars, j):
        while not bars[j % self.S].done((j // self.S) & 1):
            yield

    def read(self, who, kind, j):
        key = (kind, j % self.S)
        assert self.stage[key] == (j, True), f"{who} reads {key} = {self.stage[key]}, wants tile {j}"
        self.readers[key].add(who)

    def release(self, who, kind, bars, j):
        self.readers[(kind, j % self.S)].discard(who)
        bars[j % self.S].arrive(4)

    def consumer(self, who, nw):
        if not self.overlap:
            for j in range(nw):
                yield from self.wait_full(self.full_k, j)
                self.read(who, "k", j)
                yield
                self.release(who, "k", self.empty_k, j)
                yield
                yield from self.wait_full(self.full_v, j)
                self.read(who, "v", j)
                yield
                self.release(who, "v", self.empty_v, j)
        elif nw > 0:
            yield from self.wait_full(self.full_k, 0)
            self.read(who, "k", 0)
            yield
            self.release(who, "k", self.empty_k, 0)
            for j in range(1, nw):
                yield from self.wait_full(self.full_k, j)
                yield from self.wait_full(self.full_v, j - 1)
                self.read(who, "k", j)
                self.read(who, "v", j - 1)
                yield
                self.release(who, "k", self.empty_k, j)
                yield
                self.release(who, "v", self.empty_v, j - 1)
            yield from self.wait_full(self.full_v, nw - 1)
            self.read(who, "v", nw - 1)
            yield
            self.release(who, "v", self.empty_v, nw - 1)
        for j in range(nw, self.n):
            yield from self.wait_full(self.full_k, j)
            self.release(who, "k", self.empty_k, j)
            yield from self.wait_full(self.full_v, j)
            self.release(who, "v", self.empty_v, j)

    def run(self):
        actors = {"P": self.producer(), "C0": self.consumer("C0", self.nw[0]), "C1": self.consumer("C1", self.nw[1])}
        steps = 0
        while actors or self.inflight:
            steps += 1
            assert steps < 200000, "deadlock"
            choices = list(actors) + (["land"] if self.inflight else [])
            c = self.rng.choice(choices)
            if c == "land":
                self.land_one()
                continue
            try:
                next(actors[c])
            except StopIteration:
                del actors[c]
        assert self.landed == 2 * self.n


def main():
    configs = [(S, ov, a) for S in (2, 3, 4) for ov in (False, True) for a in (False, True) if a or not ov or S >= 3]
    for S, ov, a in configs:
        runs = 0
        for n in range(0, 7):
            for nw0, nw1 in itertools.product(range(n + 1), repeat=2):
                if max(nw0, nw1) != n and n > 0:
                    continue  # some warpgroup computes the last tile
                for seed in range(20):
                    Sim(S, ov, a, n, (nw0, nw1), seed).run()
                    runs += 1
        print(f"STAGES={S} OVERLAP={ov} ASYNC={a}: {runs} runs, no deadlock, no stage race")
    # The combination the kernel forbids (static_assert) must deadlock here.
    try:
        for seed in range(20):
            Sim(2, True, False, 4, (4, 4), seed).run()
        print("unexpected: STAGES=2 OVERLAP blocking did not deadlock")
    except AssertionError as e:
        print(f"STAGES=2 OVERLAP=True ASYNC=False: {e} (as expected; forbidden by static_assert)")


if __name__ == "__main__":
    main()
