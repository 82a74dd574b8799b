#!/usr/bin/env python3
"""Times PyTorch eager on every line of a BackendBench trace file, on a GPU.

usage: torch_baseline.py TRACE_FILE --out BASELINE.json [--ops A,B] [--limit-per-op N]
                         [--warmup 3] [--reps 20] [--seed 0]
                         [--max-elements 8388608] [--max-flops 4294967296] [--time-limit S]
                         [--skip-saved LINES.json]

For each line it builds the same tensors kb builds (same shapes, strides and
dtypes: a storage buffer of 1 + sum((size-1)*stride) elements viewed with
torch.as_strided; floats uniform in [0, 1), signed ints in [-9, 9], u8 in
[0, 9], bools 50/50; index arguments of the operators kb prepares made valid),
then times torch.ops.aten.<op>.<overload> with CUDA events: warm-up calls
first, then --reps timed calls, each between its own pair of events; the
median is written. Lines are keyed by canonical operator name (aten.sum.SymInt
is aten.sum.dim_IntList, and its lines join that operator's, in file order)
and the line's index within that operator, the keys `kb backendbench run
--baseline` reads. --limit-per-op takes the N lines with the smallest inputs,
as kb does. Lines torch cannot run get null and an entry under "errors".
--max-elements / --max-flops skip (null, no error) the lines `kb backendbench
run --device cuda` does not judge by default (over its CPU oracle budget:
--oracle-limit / --oracle-flops there; 0 lifts a limit).
Timing policy, the same in `kb backendbench run --device cuda`: L2 warm (no
flush), --warmup untimed calls, then --reps calls each between its own pair of
CUDA events on the current stream, synchronized after each; the median. A call
here includes PyTorch's dispatch and output allocation (its caching
allocator); kb's includes its prepared launch (outputs allocated beforehand).
Run it on the GPU machine in the same device call as kb's CUDA run (bash bench/run.sh backendbench does both).
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch

CANONICAL = {"aten.sum.SymInt": "aten.sum.dim_IntList"}
DTYPES = {
    "bf16": torch.bfloat16, "f64": torch.float64, "f32": torch.float32, "f16": torch.float16,
    "c32": torch.complex32, "c64": torch.complex64, "c128": torch.complex128, "i8": torch.int8,
    "i16": torch.int16, "i32": torch.int32, "i64": torch.int64, "b8": torch.bool, "u8": torch.uint8,
}


class TSpec:
    def __init__(self, shape, dtype, stride=None):
        self.shape = list(shape)
        self.dtype = dtype
        if stride is None:
            stride, acc = [], 1
            for s in reversed(self.shape):
                stride.insert(0, acc)
                acc *= max(s, 1)
        self.stride = list(stride)

    def numel(self):
        return math.prod(self.shape)


def T(shape, dtype, stride=None, *rest, **kw):
    if "stride" in kw:
        stride = kw["stride"]
    return TSpec(shape, dtype, stride)


def read_trace(path):
    """[(canonical op, spelling, source line, args text)] in file order."""
    lines, op = [], None
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line:
                continue
            if line.startswith("Operator:"):
                op = line.split(":", 1)[1].strip()
                continue
            if not line.startswith("cnt:"):
                raise SystemExit(f"{path}:{n}: expected 'Operator:' or 'cnt:'")
            text = line.split(",", 1)[1].strip()
            lines.append((CANONICAL.get(op, op), op, n, text))
    return lines


def evaluate(text):
    names = dict(DTYPES)
    names.update({"T": T, "torch": torch, "inf": math.inf, "nan": math.nan})
    return eval(text, {"__builtins__": {}}, names)  # the trace's Python literal; no builtins reachable


def input_elements(v):
    if isinstance(v, TSpec):
        return v.numel()
    if isinstance(v, (list, tuple)):
        return sum(input_elements(e) for e in v)
    if isinstance(v, dict):
        return sum(input_elements(e) for e in v.values())
    return 0


def make_tensor(spec, gen):
    span = 0 if spec.numel() == 0 else 1 + sum((s - 1) * st for s, st in zip(spec.shape, spec.stride))
    dt = spec.dtype
    if dt.is_floating_point:
        buf = torch.rand(span, generator=gen, dtype=torch.float32, device="cuda").to(dt)
    elif dt.is_complex:
        buf = torch.complex(torch.rand(span, generator=gen, device="cuda"),
                            torch.rand(span, generator=gen, device="cuda")).to(dt)
    elif dt == torch.bool:
        buf = torch.randint(0, 2, (span,), generator=gen, device="cuda").bool()
    elif dt == torch.uint8:
        buf = torch.randint(0, 10, (span,), generator=gen, device="cuda").to(dt)
    else:
        buf = torch.randint(-9, 10, (span,), generator=gen, device="cuda").to(dt)
    return torch.as_strided(buf, spec.shape, spec.stride)


def build(v, gen):
    if isinstance(v, TSpec):
        return make_tensor(v, gen)
    if isinstance(v, list):
        return [build(e, gen) for e in v]
    if isinstance(v, tuple):
        return tuple(build(e, gen) for e in v)
    return v


def valid(t, n, gen):
    if n <= 0:
        return
    t.copy_(torch.randint(0, n, t.shape, generator=gen, device=t.device).to(t.dtype))


def size(t, dim):
    return t.shape[dim] if t.dim() else 1


def prepare(op, args, kwargs, gen):
    """Valid index arguments, for the operators kb's table prepares (kernels/aten/index)."""
    a = list(args)
    if op in ("aten.index_select.default", "aten.gather.default", "aten.scatter_add.default",
              "aten.scatter_add_.default", "aten.index_add.default", "aten.index_add_.default"):
        valid(a[2], size(a[0], a[1]), gen)
    elif op == "aten.embedding.default":
        valid(a[1], a[0].shape[0], gen)
    elif op == "aten.embedding_dense_backward.default":
        valid(a[1], a[2], gen)
    elif op == "aten.nll_loss_forward.default":
        valid(a[1], a[0].shape[-1], gen)
    elif op == "aten.nll_loss_backward.default":
        valid(a[2], a[1].shape[-1], gen)
    return a, kwargs


def over_budget(op, parsed, max_elements, max_flops):
    """The lines kb's CUDA run does not judge (lib/backendbench/run_cuda.cpp over_budget)."""
    args, kwargs = parsed
    if max_elements and input_elements(list(args)) + input_elements(dict(kwargs)) > max_elements:
        return True
    if max_flops and op in ("aten.mm.default", "aten.bmm.default", "aten.addmm.default"):
        mats = [a for a in args if isinstance(a, TSpec) and len(a.shape) >= 2]
        if len(mats) >= 2 and 2.0 * math.prod(mats[-2].shape) * mats[-1].shape[-1] > max_flops:
            return True
    return False


def resolve(spelling):
    parts = spelling.split(".")
    if parts[0] != "aten" or len(parts) != 3:
        raise ValueError(f"not an aten overload: {spelling}")
    packet = getattr(torch.ops.aten, parts[1])
    if not hasattr(packet, parts[2]) and spelling in CANONICAL:
        # traces name some overloads by their symbolic-shape spelling (aten.sum.SymInt), which torch.ops lacks
        parts = CANONICAL[spelling].split(".")
    return getattr(packet, parts[2])


def time_line(fn, args, kwargs, warmup, reps):
    for _ in range(warmup):
        fn(*args, **kwargs)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args, **kwargs)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--out", required=True)
    p.add_argument("--ops", default="")
    p.add_argument("--limit-per-op", type=int, default=0)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-elements", type=int, default=1 << 23)
    p.add_argument("--max-flops", type=float, default=float(1 << 32))
    p.add_argument("--time-limit", type=float, default=0, help="seconds; later lines are skipped, the file is still written")
    p.add_argument("--skip-saved", default="", help="a `kb backendbench run --save-lines` file: its lines are not timed "
                   "(a resumed kb run keeps their baseline times from their own run)")
    o = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("torch_baseline.py: no CUDA device (the baseline is PyTorch eager on the GPU)")
    wanted = {CANONICAL.get(x, x) for x in o.ops.split(",") if x}
    saved = set()
    if o.skip_saved:
        with open(o.skip_saved) as f:
            saved = {(l["op"], l["index"]) for l in json.load(f)["lines"]}
    per_op = {}
    for op, spelling, n, text in read_trace(o.trace):
        per_op.setdefault(op, []).append((spelling, n, text))
    times, errors = {}, {}
    gen = torch.Generator(device="cuda")
    started = time.monotonic()
    for op, lines in per_op.items():
        if wanted and op not in wanted:
            continue
        parsed = [evaluate(t) for _, _, t in lines]
        idx = list(range(len(lines)))
        if o.limit_per_op and o.limit_per_op < len(idx):
            idx = sorted(sorted(idx, key=lambda i: input_elements(parsed[i]))[:o.limit_per_op])
        for i in idx:
            spelling, n, _ = lines[i]
            if (op, i) in saved or over_budget(op, parsed[i], o.max_elements, o.max_flops):
                continue
            if o.time_limit and time.monotonic() - started > o.time_limit:
                errors.setdefault(op, {})[str(i)] = "not run: --time-limit reached"
                continue
            gen.manual_seed(o.seed * 1000003 + i)
            try:
                args, kwargs = parsed[i]
                args, kwargs = prepare(op, build(list(args), gen), build(dict(kwargs), gen), gen)
                ms = time_line(resolve(spelling), args, kwargs, o.warmup, o.reps)
                times.setdefault(op, {})[str(i)] = ms
            except Exception as e:  # a line torch cannot run is recorded, not fatal
                times.setdefault(op, {})[str(i)] = None
                errors.setdefault(op, {})[str(i)] = f"line {n}: {type(e).__name__}: {e}"[:500]
        torch.cuda.empty_cache()
        print(f"{op}: {len(idx)} lines", file=sys.stderr)
    out = {"format": "kb-backendbench-baseline-1", "device": torch.cuda.get_device_name(),
           "torch": torch.__version__, "trace": o.trace, "method": f"CUDA events, median of {o.reps} after {o.warmup} warm-up calls",
           "times_ms": times, "errors": errors}
    with open(o.out, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
