"""Times PyTorch work with the procedure kb's own timer uses (lib/cuda/timing.cpp),
so that a kb / torch ratio compares kernels, not timing methods.

Why it matters: an H100 idles at a few hundred MHz, takes milliseconds to reach
its boost clock, and under sustained tensor-core load settles below it (power).
Timed in short bursts with pauses, torch.matmul ran up to 11% faster than the
same cuBLAS kernel timed by kb's adaptive loop (H100, 2026-11-24). Both sides
now do the same:
  - warm-up: at least 3 calls and at least WARMUP_MS of device work;
  - batches of 16 cold samples (L2 flushed by writing a buffer twice its size
    and reading it back before each start event), captured once in a CUDA
    graph and replayed, as kb does, so host launch gaps are not timed
    (capture_batch); where the call cannot be captured, queued from Python
    behind a spin kernel long enough to queue the batch (hold_cycles);
  - stop once there are at least 10 samples and the relative standard error
    of the mean (stdev / mean / sqrt(n)) is <= 0.5%, or after max_time_s of
    wall time; report the median. (Not stdev / mean <= 0.5%: a 4% spread
    then ran 2000 samples back to back, and the clock fell to 1515 MHz.)
  - batches cut to about BATCH_TARGET_MS of work, the SM clock averaged over
    each by kb's clock sampler (lib/cuda/clock_sampler.cu, built by
    bench/device_build.sh as libkb_clock_sampler.so; NVML's reading after the
    batch where that library is missing): a batch that ran under
    THROTTLE_THRESHOLD of the maximum clock is set aside, the GPU rests THROTTLE_RECOVERY_MS, and the
    batch after the rest (warming the clock up again) is set aside too; if
    fewer than min_samples were kept, the set-aside samples are used and the
    result is flagged (time_like_kb.last says what happened).
  - the flush as kb's L2Flush (lib/cuda/timing.hpp): clean by default (the read
    back leaves no dirty lines in L2), KB_L2_FLUSH=write for the write alone.
"""
import ctypes
import os
import statistics
import time

import torch

from kernel_spans import median_call_ms

WARMUP_MS = 10.0
PER_BATCH = 16
HOLD_CYCLES = 3_000_000  # ~1.5 ms at boost clock: enough to queue one batch of single-op calls from Python
SPIN_HZ = 2.0e9  # cycles a second the spin is counted in (the SM clock, at most ~2 GHz on H100 / H200)
BATCH_TARGET_MS = 20.0
# KB_TORCH_GRAPH=0: no CUDA graphs even where a caller asks for them (time_like_kb's graph=True): every batch
# queued from Python behind a spin kernel
GRAPH = os.environ.get("KB_TORCH_GRAPH", "1") != "0"
L2_FLUSH = "write" if os.environ.get("KB_L2_FLUSH") == "write" else "clean"


def flush_l2(flush_buf, k):
    """One cold sample's flush, as kb's (lib/cuda/timing.hpp L2Flush): write the buffer (twice the L2 size); for
    clean, then read it all, so the L2's dirty lines are written back before the start event."""
    flush_buf.fill_(k & 0xFF)
    if L2_FLUSH == "clean":
        flush_buf.view(torch.int64).max()


def _threshold_from_env():
    """kb's default_throttle_threshold (lib/cuda/timing.hpp): KB_THROTTLE_THRESHOLD in [0, 1], else 0.75."""
    try:
        v = float(os.environ.get("KB_THROTTLE_THRESHOLD", ""))
    except ValueError:
        return 0.75
    return v if 0 <= v <= 1 else 0.75


THROTTLE_THRESHOLD = _threshold_from_env()  # kb's TimingOptions defaults (lib/cuda/timing.hpp), which are nvbench's
THROTTLE_RECOVERY_MS = 50.0


class SmClock:
    """The current and maximum SM clock of torch's current device through NVML (libnvidia-ml, opened with
    ctypes), found by PCI bus id as kb finds it. current() and max() answer 0 when NVML is not there."""
    NVML_CLOCK_SM = 1

    def __init__(self):
        self.lib, self.handle = None, ctypes.c_void_p()
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0".encode()
            if lib.nvmlDeviceGetHandleByPciBusId_v2(ctypes.c_char_p(bus), ctypes.byref(self.handle)) == 0:
                self.lib = lib
        except (OSError, AttributeError):
            self.lib = None

    def _read(self, fn):
        if self.lib is None:
            return 0
        mhz = ctypes.c_uint()
        return mhz.value if fn(self.handle, self.NVML_CLOCK_SM, ctypes.byref(mhz)) == 0 else 0

    def current(self):
        return self._read(self.lib.nvmlDeviceGetClockInfo) if self.lib else 0

    def max(self):
        return self._read(self.lib.nvmlDeviceGetMaxClockInfo) if self.lib else 0


class BatchClock:
    """The average SM clock over a batch, from kb's clock sampler kernel (ctypes): start() before the batch's work,
    end() after it, mhz() once the stream is synchronized (0 when it cannot tell). None where the library is
    not on the loader path."""

    @staticmethod
    def load():
        try:
            lib = ctypes.CDLL("libkb_clock_sampler.so")
        except OSError:
            return None
        lib.kb_clock_sampler_launch.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        lib.kb_clock_sampler_average_mhz.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.kb_clock_sampler_average_mhz.restype = ctypes.c_double
        return BatchClock(lib)

    def __init__(self, lib):
        self.lib = lib
        self.words = 2 * lib.kb_clock_sampler_slots()
        self.slots = torch.zeros(2 * self.words, dtype=torch.int64, device="cuda")
        self.sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count

    def _launch(self, offset):
        stream = torch.cuda.current_stream().cuda_stream
        self.lib.kb_clock_sampler_launch(ctypes.c_void_p(self.slots.data_ptr() + 8 * offset), self.sms,
                                         ctypes.c_void_p(stream))

    def start(self):
        self.slots.zero_()
        self._launch(0)

    def end(self):
        self._launch(self.words)

    def mhz(self):
        host = self.slots.cpu()
        return self.lib.kb_clock_sampler_average_mhz(ctypes.c_void_p(host.data_ptr()),
                                                     ctypes.c_void_p(host.data_ptr() + 8 * self.words))


_clock = None


def sm_clock():
    global _clock
    if _clock is None:
        _clock = SmClock()
    return _clock


def hold_cycles(fn, flush_buf, calls):
    """Spin cycles that keep the GPU busy while Python queues `calls` flushes and calls of fn: HOLD_CYCLES, or
    3x the host time measured to queue them when that is longer. A call of many small ops (the rope reference
    runs ~20) takes Python longer to queue than the fixed spin lasts; the GPU would then wait for the host
    inside the timed spans (H200, 2026-11-27: 0.50 ms for a 4 us batch-1 rope)."""
    torch.cuda.synchronize()
    torch.cuda._sleep(HOLD_CYCLES)  # the queueing below is timed on the host only
    t = time.perf_counter()
    for k in range(4):
        flush_l2(flush_buf, k)
        fn()
    per_call_s = (time.perf_counter() - t) / 4
    torch.cuda.synchronize()
    return max(HOLD_CYCLES, int(3 * calls * per_call_s * SPIN_HZ))


def enqueue_batch(fn, flush_buf, per_batch, batch_clock, flush, starts, ends):
    """One batch of cold samples on the current stream: the clock sampler's start, then per sample the flush, the
    start event, fn(), the end event, then the sampler's end (kb's enqueue_batch in lib/cuda/timing.cpp)."""
    if batch_clock:
        batch_clock.start()
    for k in range(per_batch):
        if flush:
            flush_l2(flush_buf, k)
        starts[k].record()
        fn()
        ends[k].record()
    if batch_clock:
        batch_clock.end()


_capture_stream = None


def capture_stream():
    """The one side stream every capture uses (one workspace for kb's gemm there, not one per capture)."""
    global _capture_stream
    if _capture_stream is None:
        _capture_stream = torch.cuda.Stream()
    return _capture_stream


def capture_batch(fn, flush_buf, per_batch, batch_clock, flush):
    """((graph, starts, ends), None): one batch captured in a CUDA graph, replayed for every batch as kb replays
    its samples; (None, why) where fn cannot be captured (a host sync inside it, say): then the batches are queued
    from Python behind a spin kernel instead.

    Why a graph and not the spin: the spin (HOLD_CYCLES, 1.5 ms and more) idles the tensor cores before every
    batch while kb's graph replays run back to back, and a batch of 16 short cold samples is only a few ms: on an
    H200 near its power cap the GPU's clock recovered during torch's spins and not during kb's batches (measured:
    gemm 5120 x 17408 at M = 16384, kb's median throttled, torch's kept batches above the threshold;
    torch's time at M = 256 on 21504 x 5376 moved 5.5% between two passes). Events are recorded as graph nodes
    (external=True), as kb records its own with cudaEventRecordExternal."""
    starts = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(per_batch)]
    ends = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(per_batch)]
    try:
        # warm-up on a side stream first, then capture on that same stream, as torch's CUDA graph notes ask:
        # cuBLAS, the allocator and kb's gemm called through ctypes set up per-stream state (a
        # workspace) on a stream's first call, which must not fall inside the capture
        side = capture_stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for k in range(2):
                flush_l2(flush_buf, k)
                fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=side):
            enqueue_batch(fn, flush_buf, per_batch, batch_clock, flush, starts, ends)
        g.replay()  # one untimed replay: a graph that captured but cannot run is found here
        torch.cuda.synchronize()
        return (g, starts, ends), None
    except Exception as e:  # noqa: BLE001 (any capture failure leaves the spin path)
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001
            pass
        return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]


def time_like_kb(fn, flush_buf, max_time_s=1.5, min_samples=10, target_rel_error=0.005, max_samples=2000, flush=True,
                 throttle_threshold=THROTTLE_THRESHOLD, graph=False):
    """Median ms of fn() (kb's method; see the module docstring). Afterwards time_like_kb.last holds the samples kept
    and set aside, the clocks and whether the result is throttled (as kb's traces say it).

    graph=True: replay each batch from a CUDA graph (capture_batch), for work made of kernels only. Not for a
    tensor copy: torch's copy_ of a contiguous tensor is a cudaMemcpyAsync, which a graph turns into a memcpy node,
    and that ran at 2770 GB/s where the same copy on the stream ran at 4265 (H200)."""
    t0 = time.perf_counter()
    n = 3
    while True:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        if time.perf_counter() - t0 >= WARMUP_MS * 1e-3 or n >= 1 << 16:
            break
        n *= 2
    # one call timed alone after the warm-up (as kb does): its pace sizes the batches
    t1 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    call_ms = (time.perf_counter() - t1) * 1e3
    per_batch = max(1, min(PER_BATCH, int(BATCH_TARGET_MS / call_ms))) if call_ms > 0 else PER_BATCH
    clock = sm_clock()
    max_mhz, before_mhz = clock.max(), clock.current()
    threshold_mhz = throttle_threshold * max_mhz if throttle_threshold > 0 and max_mhz > 0 else 0
    lowest_kept = 0  # until a kept batch's clock is known
    batch_clock = BatchClock.load() if threshold_mhz else None
    if graph and GRAPH:
        captured, why_not_graph = capture_batch(fn, flush_buf, per_batch, batch_clock, flush)
    else:
        captured, why_not_graph = None, "KB_TORCH_GRAPH=0" if graph else "not asked"
    hold = 0 if captured else hold_cycles(fn, flush_buf, per_batch)
    samples, set_aside, rewarming = [], [], False
    start = time.perf_counter()
    while True:
        if captured:
            exec_graph, starts, ends = captured
            exec_graph.replay()
        else:
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(per_batch)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(per_batch)]
            torch.cuda._sleep(hold)
            enqueue_batch(fn, flush_buf, per_batch, batch_clock, flush, starts, ends)
        torch.cuda.synchronize()
        mhz = 0
        if threshold_mhz:
            mhz = round(batch_clock.mhz()) if batch_clock else 0
            mhz = mhz or clock.current()
        throttled_now = bool(threshold_mhz and 0 < mhz < threshold_mhz)
        batch = [s.elapsed_time(e) for s, e in zip(starts, ends)]
        if throttled_now or rewarming:
            set_aside += batch
        else:
            samples += batch
            if mhz:
                lowest_kept = min(lowest_kept, mhz) if lowest_kept else mhz
        rewarming = False
        if throttled_now:
            time.sleep(THROTTLE_RECOVERY_MS * 1e-3)
            rewarming = True
        enough = False
        if len(samples) >= min_samples:
            mean = statistics.fmean(samples)
            noise = statistics.stdev(samples) / mean if len(samples) > 1 and mean > 0 else 0.0
            enough = noise / len(samples) ** 0.5 <= target_rel_error
        if (enough or len(samples) + len(set_aside) >= max_samples
                or time.perf_counter() - start >= max_time_s):
            break
    used_set_aside = len(samples) < min_samples and bool(set_aside)
    if used_set_aside:
        samples, set_aside = samples + set_aside, []
    time_like_kb.last = {
        "samples": len(samples), "set_aside": len(set_aside), "sm_clock_mhz": [before_mhz, clock.current()],
        "sm_clock_max_mhz": max_mhz, "sm_clock_lowest_kept_mhz": lowest_kept if threshold_mhz and not used_set_aside else 0,
        "clock_from": "kb clock sampler" if batch_clock else "nvml",
        "graph": captured is not None, **({} if captured else {"not_graph": why_not_graph}),
        # as kb's TimingResult::throttled
        "throttled": bool(used_set_aside) if threshold_mhz
        else bool(max_mhz and min(before_mhz, clock.current()) < 0.9 * max_mhz)}
    return statistics.median(samples)


time_like_kb.last = {}


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
    flush_names = {e["name"] for e in kernels_of(lambda: flush_l2(flush_buf, 1))}
    if not flush_names:
        return None, "the profiler recorded no kernel for the L2 flush"

    hold = hold_cycles(fn, flush_buf, samples)

    def work():
        torch.cuda._sleep(hold)
        for k in range(samples):
            flush_l2(flush_buf, k)
            fn()

    return median_call_ms(kernels_of(work), flush_names, samples)
