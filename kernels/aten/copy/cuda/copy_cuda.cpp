// CUDA plans for the copy family: copies, conversions, fills, cat/stack,
// padding and the slice/select backwards as engine copies into views of the
// output; split/unbind (and _unsafe_view of a contiguous tensor) return views
// of the input, with no kernel, as PyTorch does.
#include <fmt/format.h>

#include <algorithm>

#include "../../common/args.hpp"
#include "../../common/cuda_engine.hpp"
#include "../../cuda_families.hpp"
#include "copy_kernels.hpp"

namespace kb::backendbench::aten {
namespace {

using Outs = std::vector<DView>;

Launch none() {
  return [](void*) { return ok_status(); };
}

DView narrow(DView v, std::size_t dim, std::int64_t start, std::int64_t len) {
  v.offset += start * v.strides[dim];
  v.shape[dim] = len;
  return v;
}

DView drop_dim(DView v, std::size_t dim) {
  v.shape.erase(v.shape.begin() + static_cast<std::ptrdiff_t>(dim));
  v.strides.erase(v.strides.begin() + static_cast<std::ptrdiff_t>(dim));
  return v;
}

Launch clone(Call& c, const DeviceArgs& d, Outs& o) { return cuda::copy(o[0], d.view(tensor_arg(c, 0, "self"))); }

Launch copy_inplace(Call& c, const DeviceArgs& d, Outs& o) {
  return cuda::copy(o[0], d.view(tensor_arg(c, 1, "src")));
}

Launch unsafe_view(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  if (x.is_contiguous()) {  // a view, as PyTorch returns
    DView v = d.view(x);
    v.shape = o[0].shape;
    v.strides = cuda::contiguous(v.shape);
    o[0] = v;
    return none();
  }
  DView dst = o[0];  // contiguous: the input's row-major order is the output's
  dst.shape = x.shape;
  dst.strides = cuda::contiguous(x.shape);
  return cuda::copy(dst, d.view(x));
}

template <int Kind>
Launch new_filled(Call& c, const DeviceArgs&, Outs& o) {
  return cuda::fill(o[0], Kind == 0 ? 0.0 : Kind == 1 ? 1.0 : number_arg(c, 2, "fill_value"));
}

Launch cat(Call& c, const DeviceArgs& d, Outs& o) {
  const auto& ts = tensor_list(c, 0, "tensors");
  std::vector<const HostTensor*> parts;
  for (const auto& t : ts)
    if (!(t.rank() == 1 && t.shape[0] == 0)) parts.push_back(&t);
  if (parts.empty()) return none();
  auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 1, "dim", 0), parts[0]->rank()));
  std::vector<Launch> steps;
  std::int64_t at = 0;
  for (const HostTensor* t : parts) {
    steps.push_back(cuda::copy(narrow(o[0], dim, at, t->shape[dim]), d.view(*t)));
    at += t->shape[dim];
  }
  return sequence(std::move(steps));
}

Launch stack(Call& c, const DeviceArgs& d, Outs& o) {
  const auto& ts = tensor_list(c, 0, "tensors");
  if (ts.empty()) fail("stack needs at least one tensor");
  auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 1, "dim", 0), ts[0].rank() + 1));
  std::vector<Launch> steps;
  for (std::size_t i = 0; i < ts.size(); ++i)
    steps.push_back(cuda::copy(drop_dim(narrow(o[0], dim, static_cast<std::int64_t>(i), 1), dim), d.view(ts[i])));
  return sequence(std::move(steps));
}

Launch constant_pad_nd(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  auto pad = int_list_arg(c, 1, "pad").value_or(std::vector<std::int64_t>{});
  double value = number_arg(c, 2, "value", 0.0);
  std::vector<std::int64_t> lo(x.rank(), 0);
  for (std::size_t i = 0; i < pad.size() / 2; ++i) lo[x.rank() - 1 - i] = pad[2 * i];
  std::vector<Launch> steps{cuda::fill(o[0], value)};
  DView src = d.view(x), dst = o[0];
  bool covers = true;  // the copy writes every output element (no positive pad: a crop)
  for (std::size_t k = 0; k < x.rank(); ++k) {
    std::int64_t in_start = std::max<std::int64_t>(0, -lo[k]);
    std::int64_t out_start = std::max<std::int64_t>(0, lo[k]);
    std::int64_t len = std::min(x.shape[k] - in_start, o[0].shape[k] - out_start);
    if (len <= 0) return sequence(std::move(steps));
    covers = covers && out_start == 0 && len == o[0].shape[k];
    src = narrow(src, k, in_start, len);
    dst = narrow(dst, k, out_start, len);
  }
  // Why: a crop (pads <= 0, e.g. [0, -1, 0, -1]) filled the whole output only to overwrite it; skip the fill.
  if (covers) steps.clear();
  steps.push_back(cuda::copy(dst, src));
  return sequence(std::move(steps));
}

Launch slice_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  auto sizes = int_list_arg(c, 1, "input_sizes").value_or(std::vector<std::int64_t>{});
  auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 2, "dim"), sizes.size()));
  std::int64_t start = int_arg(c, 3, "start"), step = int_arg(c, 5, "step");
  const std::int64_t n = sizes[dim];
  if (start < 0) start += n;
  start = std::clamp<std::int64_t>(start, 0, n);
  DView dst = narrow(o[0], dim, start, g.shape[dim]);
  dst.strides[dim] *= step;
  return sequence({cuda::fill(o[0], 0.0), cuda::copy(dst, d.view(g))});
}

Launch select_backward(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& g = tensor_arg(c, 0, "grad_output");
  auto sizes = int_list_arg(c, 1, "input_sizes").value_or(std::vector<std::int64_t>{});
  auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 2, "dim"), sizes.size()));
  std::int64_t index = int_arg(c, 3, "index");
  if (index < 0) index += sizes[dim];
  DView dst = drop_dim(narrow(o[0], dim, index, 1), dim);
  return sequence({cuda::fill(o[0], 0.0), cuda::copy(dst, d.view(g))});
}

// Outputs are views of the input along `dim`, one per length.
Launch split_views(const DView& x, std::size_t dim, Outs& o, bool drop) {
  std::int64_t at = 0;
  for (DView& out : o) {
    std::int64_t len = drop ? 1 : out.shape[dim];
    DView v = narrow(x, dim, at, len);
    out = drop ? drop_dim(v, dim) : v;
    at += len;
  }
  return none();
}

Launch split(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  return split_views(d.view(x), static_cast<std::size_t>(wrap_dim(int_arg(c, 2, "dim", 0), x.rank())), o, false);
}

Launch unbind(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  return split_views(d.view(x), static_cast<std::size_t>(wrap_dim(int_arg(c, 1, "dim", 0), x.rank())), o, true);
}

// flip(self, dims): a copy of self viewed with each listed dim reversed (the oracle's view, repeated dims included).
Launch flip(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  auto dims = int_list_arg(c, 1, "dims").value_or(std::vector<std::int64_t>{});
  DView v = d.view(x);
  for (auto dim : dims) {
    auto w = static_cast<std::size_t>(wrap_dim(dim, x.rank()));
    if (x.shape[w] > 0) v.offset += (x.shape[w] - 1) * x.strides[w];
    v.strides[w] = -x.strides[w];
  }
  return cuda::copy(o[0], v);
}

// repeat(self, repeats): one copy over the output viewed as (repeat, size) pairs, self broadcast along the repeats.
Launch repeat(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  auto reps = int_list_arg(c, 1, "repeats").value_or(std::vector<std::int64_t>{});
  if (reps.size() < x.rank()) fail("repeats has fewer entries than the tensor has dims");
  const std::size_t lead = reps.size() - x.rank();
  for (auto r : reps)
    if (r < 0) fail("negative repeat");
  DView dst = o[0], src = d.view(x);
  dst.shape.clear();
  dst.strides.clear();
  src.shape.clear();
  src.strides.clear();
  for (std::size_t i = 0; i < reps.size(); ++i) {
    const std::int64_t os = o[0].strides[i];
    if (i < lead) {
      dst.shape.push_back(reps[i]);
      dst.strides.push_back(os);
      src.shape.push_back(reps[i]);
      src.strides.push_back(0);
      continue;
    }
    const std::int64_t n = x.shape[i - lead];
    dst.shape.insert(dst.shape.end(), {reps[i], n});
    dst.strides.insert(dst.strides.end(), {n * os, os});
    src.shape.insert(src.shape.end(), {reps[i], n});
    src.strides.insert(src.strides.end(), {0, x.strides[i - lead]});
  }
  return cuda::copy(dst, src);
}

// roll(self, shifts, dims=[]): each rolled dim in two pieces, one copy per combination of pieces;
// without dims the row-major order of self is rolled (self copied contiguous first when it is not).
Launch roll(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  auto shifts = int_list_arg(c, 1, "shifts").value_or(std::vector<std::int64_t>{});
  auto dims = int_list_arg(c, 2, "dims").value_or(std::vector<std::int64_t>{});
  const std::int64_t n = x.numel();
  std::vector<Launch> parts;
  DView src = d.view(x), dst = o[0];
  std::vector<std::int64_t> shift(x.rank(), 0);
  if (dims.empty()) {
    if (shifts.size() != 1) fail("roll without dims takes one shift");
    if (n == 0) return none();
    if (!x.is_contiguous()) {
      DView tmp = cuda::device_empty(x.dtype, x.shape);
      parts.push_back(cuda::copy(tmp, src));
      src = tmp;
    }
    src.shape = {n};
    src.strides = {1};
    dst.shape = {n};
    dst.strides = {1};
    shift = {shifts[0]};
  } else {
    if (dims.size() != shifts.size()) fail("shifts and dims differ in length");
    for (std::size_t i = 0; i < dims.size(); ++i) shift[static_cast<std::size_t>(wrap_dim(dims[i], x.rank()))] += shifts[i];
    if (n == 0) return none();
  }
  // Per dim: (source start, destination start, length) pieces.
  struct Piece {
    std::int64_t from, to, len;
  };
  std::vector<std::vector<Piece>> pieces(src.shape.size());
  for (std::size_t k = 0; k < src.shape.size(); ++k) {
    const std::int64_t len = src.shape[k], s = ((shift[k] % len) + len) % len;
    if (s == 0) pieces[k] = {{0, 0, len}};
    else pieces[k] = {{0, s, len - s}, {len - s, 0, s}};
  }
  std::vector<std::size_t> pick(src.shape.size(), 0);
  while (true) {
    DView a = src, b = dst;
    for (std::size_t k = 0; k < pick.size(); ++k) {
      const Piece& p = pieces[k][pick[k]];
      a = narrow(a, k, p.from, p.len);
      b = narrow(b, k, p.to, p.len);
    }
    parts.push_back(cuda::copy(b, a));
    std::size_t k = 0;
    for (; k < pick.size(); ++k) {
      if (++pick[k] < pieces[k].size()) break;
      pick[k] = 0;
    }
    if (k == pick.size()) break;
  }
  return sequence(std::move(parts));
}

// triu / tril(self, diagonal=0)
template <bool Upper>
Launch triangle(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& x = tensor_arg(c, 0, "self");
  if (x.rank() < 2) fail("triu/tril need a tensor of rank >= 2");
  return cuda::triangle(o[0], d.view(x), int_arg(c, 1, "diagonal", 0), Upper);
}

// unsqueeze_(self, dim): self's view gains a dim of size 1 (the oracle's stride rule, inplace_view.cpp); no kernel.
Launch unsqueeze_inplace(Call& c, const DeviceArgs& d, Outs& o) {
  const HostTensor& self = tensor_arg(c, 0, "self");
  const auto dim = static_cast<std::size_t>(wrap_dim(int_arg(c, 1, "dim"), self.rank() + 1));
  const std::int64_t stride = dim >= self.rank() ? 1 : self.shape[dim] * self.strides[dim];
  DView v = d.view(self);
  v.shape.insert(v.shape.begin() + static_cast<std::ptrdiff_t>(dim), 1);
  v.strides.insert(v.strides.begin() + static_cast<std::ptrdiff_t>(dim), stride);
  o[0] = v;
  return none();
}

const CudaOpInfo kOps[] = {
    {"aten.clone.default", clone},
    {"aten.lift_fresh_copy.default", clone},
    {"aten.copy_.default", copy_inplace},
    {"aten._to_copy.default", clone},
    {"aten._unsafe_view.default", unsafe_view},
    {"aten.new_zeros.default", new_filled<0>},
    {"aten.new_ones.default", new_filled<1>},
    {"aten.new_full.default", new_filled<2>},
    {"aten.cat.default", cat},
    {"aten.stack.default", stack},
    {"aten.constant_pad_nd.default", constant_pad_nd},
    {"aten.slice_backward.default", slice_backward},
    {"aten.select_backward.default", select_backward},
    {"aten.split.Tensor", split},
    {"aten.split_with_sizes.default", split},
    {"aten.unbind.int", unbind},
    {"aten.flip.default", flip},
    {"aten.repeat.default", repeat},
    {"aten.roll.default", roll},
    {"aten.triu.default", triangle<true>},
    {"aten.tril.default", triangle<false>},
    {"aten.unsqueeze_.default", unsqueeze_inplace},
};

}  // namespace

std::span<const CudaOpInfo> copy_cuda_ops() { return kOps; }

}  // namespace kb::backendbench::aten
