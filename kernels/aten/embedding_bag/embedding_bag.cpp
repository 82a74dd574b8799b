// Embedding bags: _embedding_bag (sum, mean, max over bags of weight rows,
// per-sample weights in sum mode, padding_idx) and
// _embedding_bag_per_sample_weights_backward.
//
// The traces come from CUDA, and the auxiliary outputs follow PyTorch's CUDA
// kernel (its CPU kernel leaves some of them empty in sum mode):
//   offset2bag  [N]            the bag of every index
//   bag_size    offsets.shape  indices per bag, padding_idx not counted (with
//                              include_last_offset the last entry is left
//                              unwritten by PyTorch; kb writes 0)
//   max_indices [B, D] in max mode (the chosen weight row, -1 for an empty
//               bag), else [0]
// Bag b spans indices [offsets[b], offsets[b + 1]) and the last bag runs to
// N; the first bag starts at 0 whatever offsets[0] holds, as on CUDA.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "../common/args.hpp"
#include "../families.hpp"
#include "bag_args.hpp"

namespace kb::backendbench::aten {
namespace {

using Out = std::vector<HostTensor>;

constexpr std::int64_t mode_sum = 0, mode_mean = 1, mode_max = 2;

// Random indices in [0, rows) and sorted offsets in [0, N] starting at 0 (the
// last one N with include_last_offset), so every bag is a valid range.
void fill_bags(HostTensor& indices, HostTensor& offsets, std::int64_t rows, bool include_last, Rng& rng) {
  require_index_vector(indices, "indices");
  require_index_vector(offsets, "offsets");
  if (indices.is_meta()) return;
  const std::int64_t n = indices.shape[0], b = offsets.shape[0];
  if (n > 0 && rows <= 0) fail("no valid index: weight has no rows");
  for (std::int64_t i = 0; i < n; ++i) indices.store(indices.offset + i * indices.strides[0], static_cast<double>(rng.below(rows)));
  std::vector<std::int64_t> off(static_cast<std::size_t>(b));
  for (auto& o : off) o = rng.below(n + 1);
  std::sort(off.begin(), off.end());
  if (b > 0) off[0] = 0;
  if (b > 0 && include_last) off.back() = n;
  for (std::int64_t i = 0; i < b; ++i) offsets.store(offsets.offset + i * offsets.strides[0], static_cast<double>(off[static_cast<std::size_t>(i)]));
}

// _embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
//                per_sample_weights=None, include_last_offset=False, padding_idx=-1)
void prep_embedding_bag(Call& c, Rng& rng) {
  const HostTensor& w = tensor_arg(c, 0, "weight");
  if (w.rank() != 2) fail("weight must be 2-D");
  fill_bags(tensor_arg_mut(c, 1, "indices"), tensor_arg_mut(c, 2, "offsets"), w.shape[0],
            bool_arg(c, 7, "include_last_offset", false), rng);
}

Out embedding_bag(Call& c) {
  const HostTensor& w = tensor_arg(c, 0, "weight");
  const HostTensor& indices = tensor_arg(c, 1, "indices");
  const HostTensor& offsets = tensor_arg(c, 2, "offsets");
  const BagArgs a = bag_args_of(c);
  const std::int64_t mode = a.mode, padding = a.padding, n = a.n, bags = a.bags, rows = w.shape[0], d = w.shape[1];
  const HostTensor* psw = a.per_sample_weights;
  Out outs{empty_tensor(w.dtype, {bags, d}, c.meta), empty_tensor(indices.dtype, {n}, c.meta),
           empty_tensor(indices.dtype, offsets.shape, c.meta),
           empty_tensor(indices.dtype, mode == mode_max ? std::vector<std::int64_t>{bags, d} : std::vector<std::int64_t>{0},
                        c.meta)};
  if (c.meta) return outs;
  HostTensor &out = outs[0], &offset2bag = outs[1], &bag_size = outs[2], &max_indices = outs[3];
  std::vector<double> acc(static_cast<std::size_t>(d));
  std::vector<std::int64_t> arg(static_cast<std::size_t>(d));
  for (std::int64_t b = 0; b < bags; ++b) {
    const std::int64_t begin = b == 0 ? 0 : index_element(offsets, b);
    const std::int64_t end = b + 1 < bags ? index_element(offsets, b + 1) : n;
    if (begin < 0 || end > n || end < begin)
      fail(fmt::format("bag {} spans [{}, {}), outside the {} indices", b, begin, end, n));
    std::fill(acc.begin(), acc.end(), mode == mode_max ? -std::numeric_limits<double>::infinity() : 0.0);
    std::fill(arg.begin(), arg.end(), -1);
    std::int64_t count = 0;
    for (std::int64_t i = begin; i < end; ++i) {
      offset2bag.store(i, static_cast<double>(b));
      const std::int64_t row = index_element(indices, i);
      if (row < 0 || row >= rows) fail(fmt::format("index {} is out of range for {} weight rows", row, rows));
      if (row == padding) continue;
      ++count;
      const double s = psw ? psw->load(psw->offset + i * psw->strides[0]) : 1.0;
      for (std::int64_t j = 0; j < d; ++j) {
        const double v = w.load(w.offset + row * w.strides[0] + j * w.strides[1]);
        auto k = static_cast<std::size_t>(j);
        if (mode == mode_max) {
          // The first value of the bag, then any greater one (a NaN only when first), as on CUDA.
          if (arg[k] < 0 || v > acc[k]) {
            acc[k] = v;
            arg[k] = row;
          }
        } else {
          acc[k] += s * v;
        }
      }
    }
    for (std::int64_t j = 0; j < d; ++j) {
      auto k = static_cast<std::size_t>(j);
      double v = acc[k];
      if (mode == mode_mean && count > 0) v /= static_cast<double>(count);
      if (mode == mode_max && arg[k] < 0) v = 0.0;
      out.store(b * d + j, v);
      if (mode == mode_max) max_indices.store(b * d + j, static_cast<double>(arg[k]));
    }
    bag_size.store(b, static_cast<double>(count));
  }
  return outs;
}

// _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode, padding_idx=-1):
// the gradient of sum-mode output with respect to each index's weight:
// out[i] = <grad[offset2bag[i]], weight[indices[i]]>, 0 where indices[i] == padding_idx.
void prep_per_sample_weights_backward(Call& c, Rng& rng) {
  const HostTensor& w = tensor_arg(c, 1, "weight");
  if (w.rank() != 2) fail("weight must be 2-D");
  HostTensor& indices = tensor_arg_mut(c, 2, "indices");
  HostTensor& offsets = tensor_arg_mut(c, 3, "offsets");
  HostTensor& offset2bag = tensor_arg_mut(c, 4, "offset2bag");
  fill_bags(indices, offsets, w.shape[0], false, rng);
  require_index_vector(offset2bag, "offset2bag");
  if (offset2bag.is_meta()) return;
  if (offset2bag.shape[0] != indices.shape[0]) fail("offset2bag must have one entry per index");
  // The bags the forward would have given: bag b holds [offsets[b], offsets[b + 1]).
  const std::int64_t b = offsets.shape[0];
  const HostTensor* g = optional_tensor(c, 0, "grad");
  const std::int64_t bags = g && g->rank() == 2 ? std::min(b, g->shape[0]) : b;
  std::int64_t bag = 0;
  for (std::int64_t i = 0; i < indices.shape[0]; ++i) {
    while (bag + 1 < bags && index_element(offsets, bag + 1) <= i) ++bag;
    offset2bag.store(offset2bag.offset + i * offset2bag.strides[0], static_cast<double>(bag));
  }
}

Out per_sample_weights_backward(Call& c) {
  const HostTensor& g = tensor_arg(c, 0, "grad");
  const HostTensor& w = tensor_arg(c, 1, "weight");
  const HostTensor& indices = tensor_arg(c, 2, "indices");
  const HostTensor& offset2bag = tensor_arg(c, 4, "offset2bag");
  const std::int64_t mode = int_arg(c, 5, "mode");
  const std::int64_t padding = int_arg(c, 6, "padding_idx", -1);
  if (mode != mode_sum) fail("per_sample_weights are only supported for mode sum");
  if (w.rank() != 2 || g.rank() != 2 || g.shape[1] != w.shape[1])
    fail(fmt::format("grad {} and weight {} must be 2-D with the same width", shape_text(g.shape), shape_text(w.shape)));
  require_index_vector(indices, "indices");
  require_index_vector(offset2bag, "offset2bag");
  const std::int64_t n = indices.shape[0], d = w.shape[1];
  if (offset2bag.shape[0] != n) fail("offset2bag must have one entry per index");
  HostTensor out = empty_tensor(g.dtype, {n}, c.meta);
  if (c.meta) return {out};
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t row = index_element(indices, i), bag = index_element(offset2bag, i);
    if (row < 0 || row >= w.shape[0]) fail(fmt::format("index {} is out of range for {} weight rows", row, w.shape[0]));
    if (bag < 0 || bag >= g.shape[0]) fail(fmt::format("offset2bag {} is out of range for {} bags", bag, g.shape[0]));
    double s = 0;
    if (row != padding)
      for (std::int64_t j = 0; j < d; ++j)
        s += g.load(g.offset + bag * g.strides[0] + j * g.strides[1]) * w.load(w.offset + row * w.strides[0] + j * w.strides[1]);
    out.store(i, s);
  }
  return {out};
}

const OpInfo kOps[] = {
    {"aten._embedding_bag.default", "embedding_bag", embedding_bag, prep_embedding_bag},
    {"aten._embedding_bag_per_sample_weights_backward.default", "embedding_bag", per_sample_weights_backward,
     prep_per_sample_weights_backward},
};

}  // namespace

std::span<const OpInfo> embedding_bag_ops() { return kOps; }

}  // namespace kb::backendbench::aten
