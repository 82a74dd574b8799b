"""PyTorch goldens for kb's _fft_c2c, _sparse_coo_tensor_with_dims_and_tensors
and LSTM (_cudnn_rnn, _cudnn_rnn_backward) oracles.

Each case is a BackendBench trace line in f64 / c128 (or integers), its input
tensors' storage (seeded; a complex storage written as [re, im] pairs) and
PyTorch's outputs on the CPU (complex as [re, im] pairs; a sparse COO result
as its _indices() and _values(), what kb's oracle writes). The cuDNN
overloads run as the LSTM they are: aten.lstm, and autograd for the backward
(the gradients of the forward rerun from input, hx, cx and the weight list);
reserve and weight_buf are written as null (kb does not compare them).
Writes tests/backendbench/goldens/aten_special.json, read by
tests/backendbench/test_aten_special.cpp.

    /path/to/python-with-torch tests/backendbench/goldens/make/aten_special.py
"""

import torch

import aten_goldens

torch.manual_seed(0)
f64, c128, i64 = torch.float64, torch.complex128, torch.int64


def fft_cases():
    out = []
    for n in (1, 2, 5, 12, 37, 64, 97):
        for norm, fwd in ((0, True), (0, False), (1, True), (2, False)):
            out.append(("aten._fft_c2c.default", f"((T([{n}], c128), [0], {norm}, {fwd}), {{}})", None))
    out.append(("aten._fft_c2c.default", "((T([2, 6, 10], c128), [1, 2], 0, False), {})", None))
    out.append(("aten._fft_c2c.default", "((T([3, 4, 5], c128), [2, 0], 2, True), {})", None))
    out.append(("aten._fft_c2c.default", "((T([4, 6], c128, stride=(1, 4)), [0], 1, False), {})", None))
    return out


def coo_fix(sizes):
    def fix(args):
        idx = args[3]
        for d, s in enumerate(sizes):
            idx[d].copy_(torch.randint(0, s, (idx.shape[1],)))
        idx[:, 1] = idx[:, 0]  # at least one duplicate
    return fix


def lstm_fix(args):
    # small weights so the gates do not saturate
    for w in args[1]:
        w.mul_(0.3)


LSTM_FWD = [
    "((T([2, 3, 4], f64), [T([12, 4], f64), T([12, 3], f64), T([12], f64), T([12], f64)], 4, None, "
    "T([1, 2, 3], f64), T([1, 2, 3], f64), 2, 3, 0, 1, True, 0.0, True, False, [], None), {})",
    "((T([3, 2, 4], f64), [T([12, 4], f64), T([12, 3], f64)], 2, None, "
    "T([1, 2, 3], f64), T([1, 2, 3], f64), 2, 3, 0, 1, False, 0.0, False, False, [], None), {})",
    "((T([3, 2, 4], f64), [T([12, 4], f64), T([12, 3], f64), T([12], f64), T([12], f64), "
    "T([12, 4], f64), T([12, 3], f64), T([12], f64), T([12], f64), "
    "T([12, 6], f64), T([12, 3], f64), T([12], f64), T([12], f64), "
    "T([12, 6], f64), T([12, 3], f64), T([12], f64), T([12], f64)], 4, None, "
    "T([4, 2, 3], f64), T([4, 2, 3], f64), 2, 3, 0, 2, False, 0.0, True, True, [], None), {})",
]

LSTM_BWD = [
    "((T([2, 3, 4], f64), [T([12, 4], f64), T([12, 3], f64), T([12], f64), T([12], f64)], 4, T([120], f64), "
    "T([1, 2, 3], f64), T([1, 2, 3], f64), T([2, 3, 3], f64), T([2, 3, 3], f64), None, None, "
    "2, 3, 0, 1, True, 0.0, True, False, [], None, T([16], u8), [True, False, False, True]), {})",
    "((T([2, 3, 4], f64), [T([12, 4], f64), T([12, 3], f64), T([12], f64), T([12], f64)], 4, T([120], f64), "
    "T([1, 2, 3], f64), T([1, 2, 3], f64), T([2, 3, 3], f64), T([2, 3, 3], f64), T([1, 2, 3], f64), "
    "T([1, 2, 3], f64), 2, 3, 0, 1, True, 0.0, True, False, [], None, T([16], u8), [True, True, True, True]), {})",
    "((T([3, 2, 4], f64), [T([12, 4], f64), T([12, 3], f64), T([12], f64), T([12], f64), "
    "T([12, 4], f64), T([12, 3], f64), T([12], f64), T([12], f64), "
    "T([12, 6], f64), T([12, 3], f64), T([12], f64), T([12], f64), "
    "T([12, 6], f64), T([12, 3], f64), T([12], f64), T([12], f64)], 4, None, "
    "T([4, 2, 3], f64), T([4, 2, 3], f64), T([3, 2, 6], f64), T([3, 2, 6], f64), None, T([4, 2, 3], f64), "
    "2, 3, 0, 2, False, 0.0, True, True, [], None, T([16], u8), [True, True, True, True]), {})",
    "((T([2, 3, 4], f64), [T([12, 4], f64), T([12, 3], f64), T([12], f64), T([12], f64)], 4, T([120], f64), "
    "T([1, 2, 3], f64), T([1, 2, 3], f64), T([2, 3, 3], f64), T([2, 3, 3], f64), None, None, "
    "2, 3, 0, 1, True, 0.0, True, False, [], None, T([16], u8), [False, False, False, True]), {})",
]

CASES = fft_cases() + [
    ("aten._sparse_coo_tensor_with_dims_and_tensors.default",
     "((1, 1, [7, 3], T([1, 12], i64), T([12, 3], f64)), {'dtype': f64, 'layout': torch.sparse_coo, "
     "'device': 'cpu', 'pin_memory': None})", coo_fix([7])),
    ("aten._sparse_coo_tensor_with_dims_and_tensors.default",
     "((2, 0, [4, 5], T([2, 9], i64), T([9], f64)), {'dtype': f64, 'layout': torch.sparse_coo, "
     "'device': 'cpu', 'pin_memory': None})", coo_fix([4, 5])),
] + [("aten._cudnn_rnn.default", t, lstm_fix) for t in LSTM_FWD] + [
    ("aten._cudnn_rnn_backward.default", t, lstm_fix) for t in LSTM_BWD]


class Maker:
    def __init__(self):
        self.storages = []

    def T(self, shape, dtype, stride=None):
        stride, span = aten_goldens.strides_and_span(shape, stride)
        if dtype in (i64, torch.uint8):
            base = torch.zeros(span, dtype=dtype)
        else:
            base = torch.randn(span, dtype=dtype)
        self.storages.append(base)
        return torch.as_strided(base, tuple(shape), tuple(stride))


def lstm(backward, args):
    names = ["input", "weight", "weight_stride0", "weight_buf", "hx", "cx"]
    if backward:
        names += ["output", "grad_output", "grad_hy", "grad_cy"]
    names += ["mode", "hidden_size", "proj_size", "num_layers", "batch_first", "dropout", "train",
              "bidirectional", "batch_sizes", "dropout_state"]
    if backward:
        names += ["reserve", "output_mask"]
    a = dict(zip(names, args))
    x = a["input"].detach().clone().requires_grad_(backward)
    hx = a["hx"].detach().clone().requires_grad_(backward)
    cx = a["cx"].detach().clone().requires_grad_(backward)
    ws = [w.detach().clone().requires_grad_(backward) for w in a["weight"]]
    y, hy, cy = torch.ops.aten.lstm.input(x, [hx, cx], ws, a["weight_stride0"] == 4, a["num_layers"], 0.0, False,
                                          a["bidirectional"], a["batch_first"])
    if not backward:
        return [y, hy, cy, None, None]
    outs, grads = [], []
    for o, g in ((y, a["grad_output"]), (hy, a["grad_hy"]), (cy, a["grad_cy"])):
        if g is not None:
            outs.append(o)
            grads.append(g)
    got = torch.autograd.grad(outs, [x, hx, cx] + ws, grads)
    mask = a["output_mask"]
    return [got[k] if mask[k] else None for k in range(3)] + (list(got[3:]) if mask[3] else [])


def flat(t):
    t = t.contiguous().flatten()
    if t.is_complex():
        return torch.view_as_real(t).flatten().tolist()
    return t.tolist()


def run_case(op, text, fix):
    m = Maker()
    env = {"T": m.T, "f64": f64, "c128": c128, "i64": i64, "u8": torch.uint8, "None": None, "True": True,
           "False": False, "torch": torch}
    args, kwargs = eval(text, env)
    args = list(args)
    if fix is not None:
        fix(args)
    inputs = [flat(s) for s in m.storages]
    if op == "aten._cudnn_rnn.default":
        out = lstm(False, args)
    elif op == "aten._cudnn_rnn_backward.default":
        out = lstm(True, args)
    else:
        _, fn_name, overload = op.split(".")
        out = getattr(getattr(torch.ops.aten, fn_name), overload)(*args, **kwargs)
        out = [out._indices(), out._values()] if out.layout == torch.sparse_coo else [out]
    outs = []
    for o in out:
        if o is None:
            outs.append(None)
        else:
            outs.append({"shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", ""), "values": flat(o.detach())})
    return {"op": op, "args": text, "inputs": inputs, "outputs": outs}


def main():
    cases = [run_case(*c) for c in CASES]
    aten_goldens.write("aten_special.json", cases)


if __name__ == "__main__":
    main()
