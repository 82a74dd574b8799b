"""PyTorch goldens for kb's embedding-bag, advanced-indexing, group-norm, padding,
fold, grid-sampling, topk/norm/mse and rounding-division oracles.

Each case is a BackendBench trace line in f64 (or integers), its input tensors'
storage (random, seeded; index arguments made valid by the case's `fix`) and
PyTorch's outputs on the CPU. `compare` lists the outputs PyTorch's CPU kernel
defines as the traces' CUDA kernel does (_embedding_bag's offset2bag and
bag_size are left empty by the CPU kernel in sum mode; kb follows CUDA);
outputs not listed are written as null. im2col_backward and col2im_backward
are col2im and im2col with the same arguments (PyTorch builds without the
backward overloads get them from the forward). Writes
tests/backendbench/goldens/aten_more.json, read by tests/backendbench/test_aten_more.cpp.

    /path/to/python-with-torch tests/backendbench/goldens/make/aten_more.py
"""

import torch

import aten_goldens

torch.manual_seed(0)
f64, i64, b8 = torch.float64, torch.int64, torch.bool


def randint_(t, lo, hi):
    t.copy_(torch.randint(lo, hi, t.shape, dtype=t.dtype))


def bags(n_rows, include_last=False, nonempty=False):
    """fix for _embedding_bag: valid indices, sorted offsets from 0 (nonempty: no empty bag; PyTorch's CPU
    kernel gives an empty bag's max index 0, its CUDA kernel -1)."""
    def fix(args):
        idx, off = args[1], args[2]
        randint_(idx, 0, n_rows)
        if nonempty:
            o = torch.sort(torch.randperm(idx.numel() - 1)[: off.numel() - 1] + 1).values
            o = torch.cat([torch.zeros(1, dtype=i64), o])
        else:
            o = torch.sort(torch.randint(0, idx.numel() + 1, off.shape)).values
        o[0] = 0
        if include_last:
            o[-1] = idx.numel()
        off.copy_(o)
    return fix


def psw_backward(args):
    g, w, idx, off, o2b = args[:5]
    randint_(idx, 0, w.shape[0])
    o = torch.sort(torch.randint(0, idx.numel() + 1, off.shape)).values
    o[0] = 0
    off.copy_(o)
    o2b.copy_(torch.searchsorted(o, torch.arange(idx.numel()), right=True) - 1)


def index_fix(*ranges):
    """fix for index / index_put: the k-th tensor in the index list gets values in [lo, hi)."""
    def fix(args):
        ts = [t for t in args[1] if t is not None and t.dtype == i64]
        for t, (lo, hi) in zip(ts, ranges):
            randint_(t, lo, hi)
    return fix


def unique_rows(n):
    def fix(args):
        t = next(t for t in args[1] if t is not None)
        t.copy_(torch.randperm(n)[: t.numel()].reshape(t.shape))
    return fix


def group_norm_stats(args):
    # the saved mean and rstd of the forward, as in training
    x, N, C, HxW, G = args[1], args[5], args[6], args[7], args[8]
    _, mean, rstd = torch.ops.aten.native_group_norm.default(x, None, None, N, C, HxW, G, 1e-5)
    args[2].copy_(mean)
    args[3].copy_(rstd)


def small_ints(args):
    for a in args:
        if isinstance(a, torch.Tensor) and a.dtype == i64:
            randint_(a, -9, 10)
            a.masked_fill_(a == 0, 7)


def grid_wide(args):
    # sample points beyond [-1, 1] too, so zeros and border padding both matter
    args[-5 if len(args) == 7 else 1].mul_(1.4)


def mask_fix(args):
    m = args[1][0]
    m.copy_(torch.rand(m.shape) < 0.5)


CASES = [
    # embedding bags: sum with per-sample weights, mean, max, include_last_offset, padding_idx
    ("aten._embedding_bag.default", "((T([7, 3], f64), T([9], i64), T([4], i64), False, 0, False, T([9], f64)), {})", bags(7), [0]),
    ("aten._embedding_bag.default", "((T([7, 3], f64), T([9], i64), T([4], i64), False, 1, False, None, False, 2), {})", bags(7), [0]),
    ("aten._embedding_bag.default", "((T([7, 3], f64), T([10], i64), T([4], i64), False, 2, False, None, True), {})", bags(7, True, True), [0, 3]),
    ("aten._embedding_bag.default", "((T([5, 4], f64, stride=(1, 5)), T([6], i64), T([3], i64), False, 0, False, None, False, 1), {})", bags(5), [0]),
    ("aten._embedding_bag_per_sample_weights_backward.default", "((T([4, 3], f64), T([7, 3], f64), T([9], i64), T([4], i64), T([9], i64), 0), {})", psw_backward, [0]),
    ("aten._embedding_bag_per_sample_weights_backward.default", "((T([3, 5], f64, stride=(10, 1)), T([6, 5], f64), T([8], i64), T([3], i64), T([8], i64), 0, 3), {})", psw_backward, [0]),
    # advanced indexing
    ("aten.index.Tensor", "((T([6, 4], f64), [T([5], i64)]), {})", index_fix((-6, 6)), [0]),
    ("aten.index.Tensor", "((T([3, 5, 4], f64), [None, T([2, 3], i64)]), {})", index_fix((0, 5)), [0]),
    ("aten.index.Tensor", "((T([3, 5, 4], f64), [T([2, 1], i64), None, T([3], i64)]), {})", index_fix((0, 3), (0, 4)), [0]),
    ("aten.index.Tensor", "((T([3, 5, 4], f64), [None, T([2], i64), T([2], i64)]), {})", index_fix((0, 5), (0, 4)), [0]),
    ("aten.index.Tensor", "((T([4, 3], f64, stride=(1, 4)), [T([4], b8)]), {})", mask_fix, [0]),
    ("aten.index_put.default", "((T([6, 3], f64), [T([8], i64)], T([8, 3], f64), True), {})", index_fix((0, 6)), [0]),
    ("aten.index_put.default", "((T([4, 5], f64), [None, T([3], i64)], T([4, 3], f64)), {})", unique_rows(5), [0]),
    ("aten.index_put.default", "((T([4, 5, 2], f64), [T([3], i64), T([3], i64)], T([2], f64), True), {})", index_fix((0, 4), (0, 5)), [0]),
    ("aten._index_put_impl_.default", "((T([5, 3], f64), [T([7], i64)], T([7, 3], f64), True, True), {})", index_fix((0, 5)), [0]),
    ("aten.index_put_.default", "((T([6, 2], f64), [T([4], i64)], T([4, 2], f64)), {})", unique_rows(6), [0]),
    ("aten.nonzero.default", "((T([3, 4], b8),), {})", None, [0]),
    # group norm
    ("aten.native_group_norm.default", "((T([2, 6, 3, 2], f64), T([6], f64), T([6], f64), 2, 6, 6, 3, 1e-05), {})", None, [0, 1, 2]),
    ("aten.native_group_norm.default", "((T([3, 4, 5], f64), None, None, 3, 4, 5, 1, 1e-05), {})", None, [0, 1, 2]),
    ("aten.native_group_norm_backward.default", "((T([2, 6, 3, 2], f64), T([2, 6, 3, 2], f64), T([2, 3], f64), T([2, 3], f64), T([6], f64), 2, 6, 6, 3, [True, True, True]), {})", group_norm_stats, [0, 1, 2]),
    ("aten.native_group_norm_backward.default", "((T([3, 4, 5], f64), T([3, 4, 5], f64), T([3, 2], f64), T([3, 2], f64), None, 3, 4, 5, 2, [True, False, True]), {})", None, [0, 1, 2]),
    # reflection padding
    ("aten.reflection_pad2d.default", "((T([2, 3, 4, 5], f64), [2, 1, 3, 0]), {})", None, [0]),
    ("aten.reflection_pad2d.default", "((T([2, 4, 3], f64, stride=(1, 6, 2)), [1, 1, 1, 1]), {})", None, [0]),
    ("aten.reflection_pad2d_backward.default", "((T([2, 3, 7, 8], f64), T([2, 3, 4, 5], f64), [2, 1, 3, 0]), {})", None, [0]),
    # sliding windows
    ("aten.im2col.default", "((T([2, 3, 6, 5], f64), [3, 2], [1, 2], [1, 0], [2, 1]), {})", None, [0]),
    ("aten.im2col.default", "((T([2, 5, 5], f64, stride=(1, 10, 2)), [2, 2], [1, 1], [1, 1], [2, 2]), {})", None, [0]),
    ("aten.col2im.default", "((T([2, 18, 9], f64), [6, 5], [3, 2], [1, 2], [1, 0], [2, 1]), {})", None, [0]),
    ("aten.im2col_backward.default", "((T([2, 18, 9], f64), [6, 5], [3, 2], [1, 2], [1, 0], [2, 1]), {})", None, [0]),
    ("aten.col2im_backward.default", "((T([2, 3, 6, 5], f64), [3, 2], [1, 2], [1, 0], [2, 1]), {})", None, [0]),
    ("aten.unfold_backward.default", "((T([2, 4, 4, 3], f64), [2, 9, 4], 1, 3, 2), {})", None, [0]),
    ("aten.unfold_backward.default", "((T([2, 2, 5], f64), [2, 7], 1, 5, 2), {})", None, [0]),
    # grid sampling: bilinear and nearest, zeros and border, align_corners both ways
    ("aten.grid_sampler_2d.default", "((T([2, 3, 5, 4], f64), T([2, 3, 6, 2], f64), 0, 0, False), {})", grid_wide, [0]),
    ("aten.grid_sampler_2d.default", "((T([2, 3, 5, 4], f64), T([2, 3, 6, 2], f64), 0, 1, True), {})", grid_wide, [0]),
    ("aten.grid_sampler_2d.default", "((T([1, 2, 4, 4], f64), T([1, 5, 5, 2], f64), 1, 0, False), {})", grid_wide, [0]),
    ("aten.grid_sampler_2d_backward.default", "((T([2, 3, 3, 6], f64), T([2, 3, 5, 4], f64), T([2, 3, 6, 2], f64), 0, 0, False, [True, True]), {})", grid_wide, [0, 1]),
    ("aten.grid_sampler_2d_backward.default", "((T([2, 3, 3, 6], f64), T([2, 3, 5, 4], f64), T([2, 3, 6, 2], f64), 0, 1, True, [False, True]), {})", grid_wide, [0, 1]),
    # topk, norms, mse
    ("aten.topk.default", "((T([3, 10], f64), 4), {})", None, [0, 1]),
    ("aten.topk.default", "((T([6, 3], f64, stride=(1, 6)), 2, 0, False), {})", None, [0, 1]),
    ("aten.norm.ScalarOpt_dim", "((T([4, 6], f64, stride=(12, 1)), 2, [1], True), {})", None, [0]),
    ("aten.norm.ScalarOpt_dim", "((T([3, 4, 5], f64), 3, [0, 2]), {})", None, [0]),
    ("aten.norm.ScalarOpt_dim", "((T([3, 4], f64), 1, [0]), {})", None, [0]),
    ("aten.mse_loss.default", "((T([3, 4], f64), T([3, 4], f64)), {})", None, [0]),
    ("aten.mse_loss.default", "((T([3, 4], f64), T([3, 4], f64), 0), {})", None, [0]),
    ("aten.mse_loss.default", "((T([3, 4], f64), T([3, 4], f64), 2), {})", None, [0]),
    ("aten.mse_loss_backward.default", "((T([], f64), T([3, 4], f64), T([3, 4], f64), 1), {})", None, [0]),
    ("aten.mse_loss_backward.default", "((T([3, 4], f64), T([3, 4], f64), T([3, 4], f64), 0), {})", None, [0]),
    # rounding divisions (negative operands), elu_backward, unsqueeze_
    ("aten.floor_divide.default", "((T([12], i64), 4), {})", small_ints, [0]),
    ("aten.floor_divide.default", "((T([12], i64), -4), {})", small_ints, [0]),
    ("aten.floor_divide.default", "((T([3, 4], f64), T([4], f64)), {})", None, [0]),
    ("aten.fmod.Scalar", "((T([12], i64), 4), {})", small_ints, [0]),
    ("aten.fmod.Scalar", "((T([12], i64), -3), {})", small_ints, [0]),
    ("aten.remainder.Scalar", "((T([12], i64), 4), {})", small_ints, [0]),
    ("aten.remainder.Scalar", "((T([12], i64), -3), {})", small_ints, [0]),
    ("aten.remainder.Scalar", "((T([3, 4], f64), 0.3), {})", None, [0]),
    ("aten.elu_backward.default", "((T([3, 4], f64), 1.6732632423543772, 1.0507009873554805, 1, False, T([3, 4], f64)), {})", None, [0]),
    ("aten.elu_backward.default", "((T([3, 4], f64), 0.5, 1.0, 2.0, True, T([3, 4], f64)), {})", None, [0]),
    ("aten.unsqueeze_.default", "((T([2, 3], f64), -1), {})", None, [0]),
]


class Maker:
    def __init__(self):
        self.storages = []

    def T(self, shape, dtype, stride=None):
        stride, span = aten_goldens.strides_and_span(shape, stride)
        if dtype == i64:
            base = torch.zeros(span, dtype=dtype)
        elif dtype == b8:
            base = torch.rand(span) < 0.5
        else:
            # centred, so signs vary (elu, norms, remainders)
            base = torch.randn(span, dtype=dtype)
        self.storages.append(base)
        return torch.as_strided(base, tuple(shape), tuple(stride))


ALIASES = {
    "aten.im2col_backward.default": torch.ops.aten.col2im.default,
    "aten.col2im_backward.default": torch.ops.aten.im2col.default,
}


def run_case(op, text, fix, compare):
    m = Maker()
    args, kwargs = eval(text, {"T": m.T, "f64": f64, "i64": i64, "b8": b8, "None": None, "True": True, "False": False})
    args = list(args)
    if fix is not None:
        fix(args)
    inputs = [(s.to(i64) if s.dtype == b8 else s).tolist() for s in m.storages]
    _, fn_name, overload = op.split(".")
    fn = ALIASES.get(op) or getattr(getattr(torch.ops.aten, fn_name), overload)
    out = fn(*args, **kwargs)
    if isinstance(out, torch.Tensor):
        out = [out]
    outs = []
    for k, o in enumerate(out):
        if o is None or k not in compare:
            outs.append(None)
        else:
            vals = o.contiguous().flatten()
            vals = vals.to(torch.int64) if o.dtype == b8 else vals
            outs.append({"shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", ""), "values": vals.tolist()})
    return {"op": op, "args": text, "inputs": inputs, "outputs": outs}


def main():
    cases = [run_case(*c) for c in CASES]
    aten_goldens.write("aten_more.json", cases)


if __name__ == "__main__":
    main()
