"""Splitting a profiler's kernel records into calls (torch_timing.kernel_span_ms), kept free of torch so that
it is tested without a GPU (tests/tools/test_gpu_tools.py)."""
import statistics


def call_spans_ms(kernels, flush_names):
    """kernels: chrome-trace kernel events ({"name", "ts", "dur"}, microseconds) of work queued as
    [anything] flush call flush call ...; flush_names: the flush's kernel names. Returns (spans in ms, the most
    kernels one call ran): each call's span runs from its first kernel's start to its last kernel's end.
    Kernels before the first flush (a spin kernel holding the queue) belong to no call."""
    spans, per_call, current, started = [], 0, [], False
    for e in sorted(kernels, key=lambda e: float(e["ts"])) + [None]:
        if e is None or e["name"] in flush_names:  # a flush ends the call before it
            if started and current:
                start = min(float(k["ts"]) for k in current)
                end = max(float(k["ts"]) + float(k["dur"]) for k in current)
                spans.append((end - start) * 1e-3)
                per_call = max(per_call, len(current))
            current, started = [], True
        elif started:
            current.append(e)
    return spans, per_call


def median_call_ms(kernels, flush_names, calls):
    """(median ms, kernels a call) of call_spans_ms, or (None, reason) when the records do not hold `calls` calls."""
    spans, per_call = call_spans_ms(kernels, flush_names)
    if len(spans) != calls:
        return None, f"{len(spans)} calls found in the profile for {calls} (a call's own kernel named like the flush?)"
    return statistics.median(spans), per_call
