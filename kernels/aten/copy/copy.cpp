// Copies, views materialized as copies, concatenation, padding and the
// backwards of slicing: clone, copy_, _to_copy, _unsafe_view, cat, stack,
// new_zeros/new_ones/new_full, constant_pad_nd, slice_backward,
// select_backward, split, split_with_sizes, unbind, repeat, flip, roll,
// triu/tril. Outputs are contiguous (BackendBench ignores strides); values
// are copied through double, which is exact for every dtype but i64 beyond 2^53.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "../common/args.hpp"
#include "../families.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

// dst (any strides) = src broadcast to dst's shape, converted to dst's dtype.
void copy_into(HostTensor& dst, const HostTensor& src) {
  map_into(dst, {&src}, [](const double* v) { return v[0]; });
}

HostTensor copy_as(const HostTensor& x, Dtype dt, bool meta) {
  HostTensor out = empty_tensor(dt, x.shape, meta);
  if (!meta) copy_into(out, x);
  return out;
}

// A view of `x` narrowed to [start, start + len) along dim.
HostTensor narrow(const HostTensor& x, std::size_t dim, std::int64_t start, std::int64_t len) {
  HostTensor v = x;
  v.offset += start * x.strides[dim];
  v.shape[dim] = len;
  return v;
}

Out clone(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  return {copy_as(x, x.dtype, c.meta)};
}

Out copy_inplace(Call& c) {
  HostTensor& self = tensor_arg_mut(c, 0, "self");
  const HostTensor& src = tensor_arg(c, 1, "src");
  (void)broadcast_strides(src, self.shape);
  if (c.meta) return {self};
  // src may alias self's storage in the traces only through distinct tensors; copy src first anyway.
  HostTensor s = contiguous_copy(src);
  copy_into(self, s);
  return {self};
}

Out to_copy(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  Dtype dt = dtype_arg(c, 99, "dtype").value_or(x.dtype);
  return {copy_as(x, dt, c.meta)};
}

std::vector<std::int64_t> infer_size(std::vector<std::int64_t> size, std::int64_t numel) {
  std::int64_t known = 1;
  int infer = -1;
  for (std::size_t i = 0; i < size.size(); ++i) {
    if (size[i] == -1) {
      if (infer >= 0) fail("only one dimension can be -1");
      infer = static_cast<int>(i);
    } else if (size[i] < 0) {
      fail(fmt::format("invalid size {}", size[i]));
    } else {
      known *= size[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) fail(fmt::format("shape {} is invalid for {} elements", shape_text(size), numel));
    size[static_cast<std::size_t>(infer)] = numel / known;
  } else if (known != numel) {
    fail(fmt::format("shape {} is invalid for input of size {}", shape_text(size), numel));
  }
  return size;
}

Out unsafe_view(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  auto size = infer_size(int_list_arg(c, 1, "size").value_or(std::vector<std::int64_t>{}), x.numel());
  HostTensor flat = copy_as(x, x.dtype, c.meta);
  flat.shape = size;
  flat.strides = contiguous_strides(size);
  return {flat};
}

// new_zeros / new_ones / new_full(self, size, [fill_value,] *, dtype=None, ...)
template <int Kind>  // 0 zeros, 1 ones, 2 full
Out new_filled(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  auto size = int_list_arg(c, 1, "size").value_or(std::vector<std::int64_t>{});
  for (auto s : size)
    if (s < 0) fail(fmt::format("negative size {}", s));
  Dtype dt = dtype_arg(c, 99, "dtype").value_or(x.dtype);
  double v = Kind == 0 ? 0.0 : Kind == 1 ? 1.0 : number_arg(c, 2, "fill_value");
  HostTensor out = empty_tensor(dt, size, c.meta);
  if (c.meta) return {out};
  map_into(out, {}, [v](const double*) { return v; });
  return {out};
}

Out cat(Call& c) {
  const auto& ts = tensor_list(c, 0, "tensors");
  if (ts.empty()) fail("cat needs at least one tensor");
  // Legacy rule: 1-D empty tensors ([0]) are skipped.
  std::vector<const HostTensor*> parts;
  for (const auto& t : ts)
    if (!(t.rank() == 1 && t.shape[0] == 0)) parts.push_back(&t);
  Dtype dt = ts[0].dtype;
  for (const auto& t : ts) dt = promote_types(dt, t.dtype);
  if (parts.empty()) return {empty_tensor(dt, {0}, c.meta)};
  const HostTensor& ref = *parts[0];
  auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 1, "dim", 0), ref.rank()));
  if (ref.rank() == 0) fail("cat: zero-dimensional tensors cannot be concatenated");
  std::vector<std::int64_t> shape = ref.shape;
  shape[dim] = 0;
  for (const HostTensor* t : parts) {
    if (t->rank() != ref.rank()) fail(fmt::format("cat: tensors of rank {} and {}", ref.rank(), t->rank()));
    for (std::size_t i = 0; i < ref.rank(); ++i)
      if (i != dim && t->shape[i] != ref.shape[i])
        fail(fmt::format("cat: sizes {} and {} differ outside dim {}", shape_text(ref.shape), shape_text(t->shape), dim));
    shape[dim] += t->shape[dim];
  }
  HostTensor out = empty_tensor(dt, shape, c.meta);
  if (c.meta) return {out};
  std::int64_t at = 0;
  for (const HostTensor* t : parts) {
    HostTensor dst = narrow(out, dim, at, t->shape[dim]);
    copy_into(dst, *t);
    at += t->shape[dim];
  }
  return {out};
}

Out stack(Call& c) {
  const auto& ts = tensor_list(c, 0, "tensors");
  if (ts.empty()) fail("stack needs at least one tensor");
  auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 1, "dim", 0), ts[0].rank() + 1));
  Dtype dt = ts[0].dtype;
  for (const auto& t : ts) {
    if (t.shape != ts[0].shape) fail(fmt::format("stack: shapes {} and {} differ", shape_text(ts[0].shape), shape_text(t.shape)));
    dt = promote_types(dt, t.dtype);
  }
  std::vector<std::int64_t> shape = ts[0].shape;
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(dim), static_cast<std::int64_t>(ts.size()));
  HostTensor out = empty_tensor(dt, shape, c.meta);
  if (c.meta) return {out};
  for (std::size_t i = 0; i < ts.size(); ++i) {
    HostTensor dst = narrow(out, dim, static_cast<std::int64_t>(i), 1);
    dst.shape.erase(dst.shape.begin() + static_cast<std::ptrdiff_t>(dim));
    dst.strides.erase(dst.strides.begin() + static_cast<std::ptrdiff_t>(dim));
    copy_into(dst, ts[i]);
  }
  return {out};
}

// constant_pad_nd(self, pad, value=0): pad pairs (left, right) from the last dim backwards; negative pads crop.
Out constant_pad_nd(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  auto pad = int_list_arg(c, 1, "pad").value_or(std::vector<std::int64_t>{});
  double value = number_arg(c, 2, "value", 0.0);
  if (pad.size() % 2 != 0 || pad.size() / 2 > x.rank())
    fail(fmt::format("pad of length {} does not fit a tensor of rank {}", pad.size(), x.rank()));
  std::vector<std::int64_t> shape = x.shape;
  std::vector<std::int64_t> lo(x.rank(), 0);
  for (std::size_t i = 0; i < pad.size() / 2; ++i) {
    std::size_t d = x.rank() - 1 - i;
    lo[d] = pad[2 * i];
    shape[d] += pad[2 * i] + pad[2 * i + 1];
    if (shape[d] < 0) fail(fmt::format("padding {} makes dim {} negative", shape_text(pad), d));
  }
  HostTensor out = empty_tensor(x.dtype, shape, c.meta);
  if (c.meta) return {out};
  map_into(out, {}, [value](const double*) { return value; });
  // The overlap of input and output: along each dim, out index = in index + lo.
  HostTensor src = x, dst = out;
  for (std::size_t d = 0; d < x.rank(); ++d) {
    std::int64_t in_start = std::max<std::int64_t>(0, -lo[d]);
    std::int64_t out_start = std::max<std::int64_t>(0, lo[d]);
    std::int64_t len = std::min(x.shape[d] - in_start, shape[d] - out_start);
    if (len <= 0) return {out};
    src = narrow(src, d, in_start, len);
    dst = narrow(dst, d, out_start, len);
  }
  copy_into(dst, src);
  return {out};
}

// slice_backward(grad_output, input_sizes, dim, start, end, step): zeros of input_sizes with grad scattered in.
Out slice_backward(Call& c) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  auto sizes = int_list_arg(c, 1, "input_sizes").value_or(std::vector<std::int64_t>{});
  auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 2, "dim"), sizes.size()));
  std::int64_t start = int_arg(c, 3, "start"), end = int_arg(c, 4, "end"), step = int_arg(c, 5, "step");
  if (step <= 0) fail("slice step must be positive");
  const std::int64_t n = sizes[dim];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<std::int64_t>(start, 0, n);
  end = std::clamp<std::int64_t>(end, start, n);
  std::int64_t len = (end - start + step - 1) / step;
  std::vector<std::int64_t> expect = sizes;
  expect[dim] = len;
  if (g.shape != expect)
    fail(fmt::format("grad_output has shape {}, the slice gives {}", shape_text(g.shape), shape_text(expect)));
  HostTensor out = empty_tensor(g.dtype, sizes, c.meta);
  if (c.meta) return {out};
  HostTensor dst = narrow(out, dim, start, len);
  dst.strides[dim] *= step;
  copy_into(dst, g);
  return {out};
}

// select_backward(grad_output, input_sizes, dim, index)
Out select_backward(Call& c) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  auto sizes = int_list_arg(c, 1, "input_sizes").value_or(std::vector<std::int64_t>{});
  auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 2, "dim"), sizes.size()));
  std::int64_t index = int_arg(c, 3, "index");
  if (index < -sizes[dim] || index >= sizes[dim]) fail(fmt::format("index {} out of range for size {}", index, sizes[dim]));
  if (index < 0) index += sizes[dim];
  std::vector<std::int64_t> expect = sizes;
  expect.erase(expect.begin() + static_cast<std::ptrdiff_t>(dim));
  if (g.shape != expect) fail(fmt::format("grad_output has shape {}, expected {}", shape_text(g.shape), shape_text(expect)));
  HostTensor out = empty_tensor(g.dtype, sizes, c.meta);
  if (c.meta) return {out};
  HostTensor dst = narrow(out, dim, index, 1);
  dst.shape.erase(dst.shape.begin() + static_cast<std::ptrdiff_t>(dim));
  dst.strides.erase(dst.strides.begin() + static_cast<std::ptrdiff_t>(dim));
  copy_into(dst, g);
  return {out};
}

Out split_by(Call& c, const HostTensor& x, std::size_t dim, const std::vector<std::int64_t>& lens) {
  Out outs;
  std::int64_t at = 0;
  for (auto len : lens) {
    HostTensor part = narrow(x, dim, at, len);
    outs.push_back(copy_as(part, x.dtype, c.meta));
    at += len;
  }
  return outs;
}

Out split(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  std::int64_t size = int_arg(c, 1, "split_size");
  auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 2, "dim", 0), x.rank()));
  if (x.rank() == 0) fail("split of a 0-D tensor");
  if (size < 0) fail("split_size must be non-negative");
  const std::int64_t n = x.shape[dim];
  if (size == 0 && n != 0) fail("split_size 0 on a non-empty dim");
  std::vector<std::int64_t> lens;
  if (size == 0) lens.push_back(0);
  for (std::int64_t at = 0; at < n; at += size) lens.push_back(std::min(size, n - at));
  return split_by(c, x, dim, lens);
}

Out split_with_sizes(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  auto lens = int_list_arg(c, 1, "split_sizes").value_or(std::vector<std::int64_t>{});
  auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 2, "dim", 0), x.rank()));
  if (x.rank() == 0) fail("split of a 0-D tensor");
  std::int64_t total = 0;
  for (auto l : lens) {
    if (l < 0) fail("split sizes must be non-negative");
    total += l;
  }
  if (total != x.shape[dim]) fail(fmt::format("split sizes add up to {}, dim {} has {}", total, dim, x.shape[dim]));
  return split_by(c, x, dim, lens);
}

Out unbind(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  if (x.rank() == 0) fail("unbind of a 0-D tensor");
  auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 1, "dim", 0), x.rank()));
  Out outs;
  for (std::int64_t i = 0; i < x.shape[dim]; ++i) {
    HostTensor part = narrow(x, dim, i, 1);
    part.shape.erase(part.shape.begin() + static_cast<std::ptrdiff_t>(dim));
    part.strides.erase(part.strides.begin() + static_cast<std::ptrdiff_t>(dim));
    outs.push_back(copy_as(part, x.dtype, c.meta));
  }
  return outs;
}

// repeat(self, repeats): tile; len(repeats) >= rank, leading dims added.
Out repeat(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  auto reps = int_list_arg(c, 1, "repeats").value_or(std::vector<std::int64_t>{});
  if (reps.size() < x.rank()) fail("repeats has fewer entries than the tensor has dims");
  std::size_t lead = reps.size() - x.rank();
  std::vector<std::int64_t> shape(reps.size());
  for (std::size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) fail("negative repeat");
    shape[i] = reps[i] * (i < lead ? 1 : x.shape[i - lead]);
  }
  HostTensor out = empty_tensor(x.dtype, shape, c.meta);
  if (c.meta) return {out};
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    std::int64_t r = i, o = x.offset;
    for (std::size_t d = shape.size(); d-- > 0;) {
      std::int64_t k = r % shape[d];
      r /= shape[d];
      if (d >= lead) o += (k % x.shape[d - lead]) * x.strides[d - lead];
    }
    out.store(i, x.load(o));
  }
  return {out};
}

Out flip(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  auto dims = int_list_arg(c, 1, "dims").value_or(std::vector<std::int64_t>{});
  HostTensor v = x;
  for (auto d : dims) {
    auto w = static_cast<std::size_t>(wrap_dim(d, x.rank()));
    if (x.shape[w] > 0) v.offset += (x.shape[w] - 1) * x.strides[w];
    v.strides[w] = -x.strides[w];
  }
  return {copy_as(v, x.dtype, c.meta)};
}

// roll(self, shifts, dims=[]): without dims the flattened tensor is rolled.
Out roll(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  auto shifts = int_list_arg(c, 1, "shifts").value_or(std::vector<std::int64_t>{});
  auto dims = int_list_arg(c, 2, "dims").value_or(std::vector<std::int64_t>{});
  HostTensor out = empty_tensor(x.dtype, x.shape, c.meta);
  if (c.meta) return {out};
  const std::int64_t n = x.numel();
  if (dims.empty()) {
    if (shifts.size() != 1) fail("roll without dims takes one shift");
    if (n == 0) return {out};
    std::int64_t s = ((shifts[0] % n) + n) % n;
    for (std::int64_t i = 0; i < n; ++i) out.store((i + s) % n, x.at(i));
    return {out};
  }
  if (dims.size() != shifts.size()) fail("shifts and dims differ in length");
  std::vector<std::int64_t> shift(x.rank(), 0);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    auto w = static_cast<std::size_t>(wrap_dim(dims[i], x.rank()));
    shift[w] += shifts[i];
  }
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t r = i, o = 0;
    for (std::size_t d = x.rank(); d-- > 0;) {
      std::int64_t k = r % x.shape[d];
      r /= x.shape[d];
      std::int64_t kk = (((k + shift[d]) % x.shape[d]) + x.shape[d]) % x.shape[d];
      o += kk * out.strides[d];
    }
    out.store(o, x.at(i));
  }
  return {out};
}

template <bool Upper>
Out tri(Call& c) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  std::int64_t diag = int_arg(c, 1, "diagonal", 0);
  if (x.rank() < 2) fail("triu/tril need a tensor of rank >= 2");
  HostTensor out = empty_tensor(x.dtype, x.shape, c.meta);
  if (c.meta) return {out};
  const std::int64_t rows = x.shape[x.rank() - 2], cols = x.shape[x.rank() - 1];
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    std::int64_t col = i % cols, row = (i / cols) % rows;
    bool keep = Upper ? col - row >= diag : col - row <= diag;
    out.store(i, keep ? x.at(i) : 0.0);
  }
  return {out};
}

const OpInfo kOps[] = {
    {"aten.clone.default", "copy", clone, nullptr},
    {"aten.lift_fresh_copy.default", "copy", clone, nullptr},
    {"aten.copy_.default", "copy", copy_inplace, nullptr},
    {"aten._to_copy.default", "copy", to_copy, nullptr},
    {"aten._unsafe_view.default", "copy", unsafe_view, nullptr},
    {"aten.new_zeros.default", "copy", new_filled<0>, nullptr},
    {"aten.new_ones.default", "copy", new_filled<1>, nullptr},
    {"aten.new_full.default", "copy", new_filled<2>, nullptr},
    {"aten.cat.default", "copy", cat, nullptr},
    {"aten.stack.default", "copy", stack, nullptr},
    {"aten.constant_pad_nd.default", "copy", constant_pad_nd, nullptr},
    {"aten.slice_backward.default", "copy", slice_backward, nullptr},
    {"aten.select_backward.default", "copy", select_backward, nullptr},
    {"aten.split.Tensor", "copy", split, nullptr},
    {"aten.split_with_sizes.default", "copy", split_with_sizes, nullptr},
    {"aten.unbind.int", "copy", unbind, nullptr},
    {"aten.repeat.default", "copy", repeat, nullptr},
    {"aten.flip.default", "copy", flip, nullptr},
    {"aten.roll.default", "copy", roll, nullptr},
    {"aten.triu.default", "copy", tri<true>, nullptr},
    {"aten.tril.default", "copy", tri<false>, nullptr},
};

}  // namespace

std::span<const OpInfo> copy_ops() { return kOps; }

}  // namespace kb::backendbench::aten
