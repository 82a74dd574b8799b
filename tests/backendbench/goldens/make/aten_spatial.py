"""PyTorch goldens for kb's ATen convolution, pooling and upsampling oracles.

Each case is a BackendBench trace line in f64 (strides included), its input
tensors' storage (random, seeded) and PyTorch's outputs (None for outputs an
output_mask drops). max_pool2d_with_indices_backward gets the forward's
indices, as in training. Writes tests/backendbench/goldens/aten_spatial.json,
read by tests/backendbench/test_aten_spatial.cpp.

    /path/to/python-with-torch tests/backendbench/goldens/make/aten_spatial.py
"""

import torch

import aten_goldens

torch.manual_seed(0)
f64, f32, f16, i64 = torch.float64, torch.float32, torch.float16, torch.int64

CASES = [
    # convolution: 1-D and 2-D, strides, padding, dilation, groups, bias, transposed, channels-last
    ("aten.convolution.default", "((T([2, 3, 7], f64), T([4, 3, 3], f64), T([4], f64), [2], [1], [1], False, [0], 1), {})"),
    ("aten.convolution.default", "((T([1, 4, 9], f64, stride=(36, 1, 4)), T([4, 1, 3], f64), None, [1], [2], [2], False, [0], 4), {})"),
    ("aten.convolution.default", "((T([2, 4, 6, 5], f64), T([6, 2, 3, 2], f64), T([6], f64), [2, 1], [1, 0], [1, 2], False, [0, 0], 2), {})"),
    ("aten.convolution.default", "((T([2, 3, 5, 5], f64, stride=(75, 1, 15, 3)), T([4, 3, 1, 1], f64), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {})"),
    ("aten.convolution.default", "((T([2, 4, 3, 4], f64), T([4, 3, 3, 3], f64), T([6], f64), [2, 2], [1, 1], [1, 1], True, [1, 0], 2), {})"),
    ("aten.convolution.default", "((T([1, 2, 3], f64), T([2, 3, 4], f64), None, [3], [0], [2], True, [1], 1), {})"),
    # convolution_backward: every mask, transposed, groups, channels-last grad_output
    ("aten.convolution_backward.default", "((T([2, 6, 3, 3], f64), T([2, 4, 6, 5], f64), T([6, 2, 3, 2], f64), [6], [2, 1], [1, 0], [1, 2], False, [0, 0], 2, [True, True, True]), {})"),
    ("aten.convolution_backward.default", "((T([1, 4, 9], f64, stride=(36, 1, 4)), T([1, 4, 9], f64), T([4, 1, 3], f64), [0], [1], [2], [2], False, [0], 4, [True, True, False]), {})"),
    ("aten.convolution_backward.default", "((T([2, 6, 6, 7], f64), T([2, 4, 3, 4], f64), T([4, 3, 3, 3], f64), [6], [2, 2], [1, 1], [1, 1], True, [1, 0], 2, [True, True, True]), {})"),
    ("aten.convolution_backward.default", "((T([2, 4, 5, 5], f64), T([2, 3, 5, 5], f64, stride=(75, 1, 15, 3)), T([4, 3, 1, 1], f64), [0], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [False, True, False]), {})"),
    # pooling
    ("aten.max_pool2d_with_indices.default", "((T([2, 3, 7, 7], f64), [3, 3], [2, 2]), {})"),
    ("aten.max_pool2d_with_indices.default", "((T([1, 2, 8, 6], f64, stride=(96, 1, 12, 2)), [3, 2], [2, 1], [1, 1], [1, 2], True), {})"),
    ("aten.max_pool2d_with_indices_backward.default", "((T([2, 3, 3, 3], f64), T([2, 3, 7, 7], f64), [3, 3], [2, 2], [0, 0], [1, 1], False, T([2, 3, 3, 3], i64)), {})"),
    ("aten.max_pool2d_with_indices_backward.default", "((T([1, 2, 5, 6], f64), T([1, 2, 8, 6], f64), [3, 2], [2, 1], [1, 1], [1, 2], True, T([1, 2, 5, 6], i64)), {})"),
    ("aten.avg_pool2d.default", "((T([2, 3, 7, 7], f64), [3, 3], [1, 1], [1, 1]), {})"),
    ("aten.avg_pool2d.default", "((T([1, 2, 7, 6], f64), [3, 2], [2, 2], [1, 1], True, False), {})"),
    ("aten.avg_pool2d.default", "((T([1, 2, 5, 5], f64), [2, 2], [2, 2], [0, 0], True, True, 3), {})"),
    ("aten.avg_pool2d_backward.default", "((T([2, 3, 7, 7], f64), T([2, 3, 7, 7], f64), [3, 3], [1, 1], [1, 1], False, True, None), {})"),
    ("aten.avg_pool2d_backward.default", "((T([1, 2, 4, 4], f64), T([1, 2, 7, 6], f64), [3, 2], [2, 2], [1, 1], True, False, None), {})"),
    ("aten._adaptive_avg_pool2d.default", "((T([2, 3, 7, 5], f64), [3, 2]), {})"),
    ("aten._adaptive_avg_pool2d_backward.default", "((T([2, 3, 3, 2], f64), T([2, 3, 7, 5], f64)), {})"),
    # upsampling
    ("aten.upsample_nearest2d.vec", "((T([2, 3, 4, 5], f64), None, [2.0, 3.0]), {})"),
    ("aten.upsample_nearest2d.vec", "((T([1, 2, 5, 4], f64), [7, 3], None), {})"),
    ("aten.upsample_nearest2d_backward.vec", "((T([2, 3, 8, 15], f64), None, [2, 3, 4, 5], [2.0, 3.0]), {})"),
    ("aten.upsample_nearest2d_backward.vec", "((T([1, 2, 7, 3], f64), [7, 3], [1, 2, 5, 4], None), {})"),
    ("aten.upsample_bilinear2d.vec", "((T([2, 3, 4, 5], f64), None, True, [2.0, 2.0]), {})"),
    ("aten.upsample_bilinear2d.vec", "((T([2, 3, 4, 5], f64), None, False, [2.0, 2.0]), {})"),
    ("aten.upsample_bilinear2d.vec", "((T([1, 2, 5, 4], f64, stride=(40, 1, 8, 2)), [7, 9], False, None), {})"),
    ("aten.upsample_bilinear2d_backward.vec", "((T([2, 3, 8, 10], f64), None, [2, 3, 4, 5], True, [2.0, 2.0]), {})"),
    ("aten.upsample_bilinear2d_backward.vec", "((T([1, 2, 7, 9], f64), [7, 9], [1, 2, 5, 4], False, None), {})"),
]


class Maker:
    def __init__(self):
        self.storages = []
        self.tensors = []

    def T(self, shape, dtype, stride=None):
        stride, span = aten_goldens.strides_and_span(shape, stride)
        if dtype == i64:
            base = torch.zeros(span, dtype=dtype)
        else:
            base = torch.randn(span, dtype=dtype)
        t = torch.as_strided(base, tuple(shape), tuple(stride))
        self.storages.append(base)
        self.tensors.append(t)
        return t


def run_case(op, text):
    m = Maker()
    args, kwargs = eval(text, {"T": m.T, "f64": f64, "i64": i64, "None": None, "True": True, "False": False})
    args = list(args)
    fn = getattr(torch.ops.aten, op.split(".")[1])
    if op.endswith("_backward.vec") and not hasattr(fn, "vec"):
        # PyTorch versions without the .vec backwards: .default takes the output
        # size and the per-dim scales the .vec form derives from its arguments.
        g, size, input_size, *rest = args
        scales = rest[-1] or [None, None]
        args = [g, size or list(g.shape[2:]), input_size, *rest[:-1], *scales]
        overload = fn.default
    else:
        overload = getattr(fn, op.split(".")[2])
    if op == "aten.max_pool2d_with_indices_backward.default":
        _, ind = torch.ops.aten.max_pool2d_with_indices.default(args[1], *args[2:7])
        args[7].copy_(ind)
    out = overload(*args, **kwargs)
    if isinstance(out, torch.Tensor):
        out = [out]
    outs = []
    for o in out:
        if o is None:
            outs.append(None)
        else:
            outs.append({"shape": list(o.shape), "values": o.contiguous().flatten().tolist()})
    return {"op": op, "args": text, "inputs": [s.tolist() for s in m.storages], "outputs": outs}


def main():
    cases = [run_case(op, text) for op, text in CASES]
    aten_goldens.write("aten_spatial.json", cases)


if __name__ == "__main__":
    main()
