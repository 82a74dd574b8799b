"""Times PyTorch work with the procedure kb's own timer uses (lib/cuda/timing.cpp),
so that a kb / torch ratio compares kernels, not timing methods.

Why it matters: an H100 idles at a few hundred MHz, takes milliseconds to reach
its boost clock, and under sustained tensor-core load settles below it (power).
Timed in short bursts with pauses, torch.matmul ran up to 11% faster than the
same cuBLAS kernel timed by kb's adaptive loop (H100, 2026-11-24). Both sides
now do the same:
  - warm-up: at least 3 calls and at least WARMUP_MS of device work;
  - batches of 16 cold samples (L2 flushed by writing a buffer twice its size
    before each start event), queued behind a spin kernel long enough for
    Python to queue the batch (hold_cycles), so host launch gaps are not
    timed (kb replays a CUDA graph instead);
  - stop once there are at least 10 samples and the relative standard error
    of the mean (stdev / mean / sqrt(n)) is <= 0.5%, or after max_time_s of
    wall time; report the median. (Not stdev / mean <= 0.5%: a 4% spread
    then ran 2000 samples back to back, and the clock fell to 1515 MHz.)
"""
import statistics
import time

import torch

from kernel_spans import median_call_ms

WARMUP_MS = 10.0
PER_BATCH = 16
HOLD_CYCLES = 3_000_000  # ~1.5 ms at boost clock: enough to queue one batch of single-op calls from Python
SPIN_HZ = 2.0e9  # cycles a second the spin is counted in (the SM clock, at most ~2 GHz on H100 / H200)


def hold_cycles(fn, flush_buf, calls):
    """Spin cycles that keep the GPU busy while Python queues `calls` flushes and calls of fn: HOLD_CYCLES, or
    3x the host time measured to queue them when that is longer. A call of many small ops (the rope reference
    runs ~20) takes Python longer to queue than the fixed spin lasts; the GPU would then wait for the host
    inside the timed spans (H200, 2026-11-27: 0.50 ms for a 4 us batch-1 rope)."""
    torch.cuda.synchronize()
    torch.cuda._sleep(HOLD_CYCLES)  # the queueing below is timed on the host only
    t = time.perf_counter()
    for k in range(4):
        flush_buf.fill_(k)
        fn()
    per_call_s = (time.perf_counter() - t) / 4
    torch.cuda.synchronize()
    return max(HOLD_CYCLES, int(3 * calls * per_call_s * SPIN_HZ))


def time_like_kb(fn, flush_buf, max_time_s=1.5, min_samples=10, target_rel_error=0.005, max_samples=2000, flush=True):
    """Median ms of fn() (kb's method; see the module docstring)."""
    t0 = time.perf_counter()
    n = 3
    while True:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        if time.perf_counter() - t0 >= WARMUP_MS * 1e-3 or n >= 1 << 16:
            break
        n *= 2
    hold = hold_cycles(fn, flush_buf, PER_BATCH)
    samples = []
    start = time.perf_counter()
    while True:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(PER_BATCH)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(PER_BATCH)]
        torch.cuda._sleep(hold)
        for k in range(PER_BATCH):
            if flush:
                flush_buf.fill_(k & 0xFF)
            starts[k].record()
            fn()
            ends[k].record()
        torch.cuda.synchronize()
        samples += [s.elapsed_time(e) for s, e in zip(starts, ends)]
        mean = statistics.fmean(samples)
        noise = statistics.stdev(samples) / mean if len(samples) > 1 and mean > 0 else 0.0
        if ((len(samples) >= min_samples and noise / len(samples) ** 0.5 <= target_rel_error)
                or len(samples) >= max_samples or time.perf_counter() - start >= max_time_s):
            break
    return statistics.median(samples)


def kernel_span_ms(fn, flush_buf, samples=PER_BATCH):
    """fn()'s kernels alone: the median over cold calls of the span from the first kernel's start to the last
    kernel's end, from the CUDA profiler's kernel records (CUPTI, through torch.profiler), as kb bench --cupti
    times kb's. The calls are queued behind the spin kernel, so the GPU runs each call's kernels back to back
    (no host launch gap inside a span). Returns (median ms, kernels a call), or (None, reason)."""
    import json
    import os
    import tempfile
    from torch.profiler import ProfilerActivity, profile

    def kernels_of(work):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            work()
            torch.cuda.synchronize()
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path) as fh:
                events = json.load(fh).get("traceEvents", [])
        finally:
            os.unlink(path)
        return sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: float(e["ts"]))

    for _ in range(3):
        fn()
    flush_names = {e["name"] for e in kernels_of(lambda: flush_buf.fill_(1))}
    if not flush_names:
        return None, "the profiler recorded no kernel for the L2 flush"

    hold = hold_cycles(fn, flush_buf, samples)

    def work():
        torch.cuda._sleep(hold)
        for k in range(samples):
            flush_buf.fill_(k & 0xFF)
            fn()

    return median_call_ms(kernels_of(work), flush_names, samples)
