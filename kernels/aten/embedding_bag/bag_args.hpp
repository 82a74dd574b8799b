// _embedding_bag's arguments, checked once for the CPU oracle
// (embedding_bag.cpp) and the CUDA plans (cuda/embedding_bag_cuda.cpp): a
// 2-D floating weight, 1-D integral indices and offsets, mode 0 (sum), 1
// (mean) or 2 (max), per_sample_weights only for sum, the bag count with
// include_last_offset.
#pragma once

#include <fmt/format.h>

#include "../common/args.hpp"

namespace kb::backendbench::aten {

inline void require_index_vector(const HostTensor& t, std::string_view what) {
  if (!is_integral(t.dtype)) fail(fmt::format("{} must be integral, got {}", what, dtype_abbrev(t.dtype)));
  if (t.rank() != 1) fail(fmt::format("{} must be 1-D, got {}", what, shape_text(t.shape)));
}

// Element i of a 1-D index tensor.
inline std::int64_t index_element(const HostTensor& t, std::int64_t i) {
  double v = t.load(t.offset + i * t.strides[0]);
  if (!(v >= -9.0e18 && v <= 9.0e18)) fail(fmt::format("index {} is not an integer", v));
  return static_cast<std::int64_t>(v);
}

struct BagArgs {
  std::int64_t mode = 0, padding = -1, n = 0, bags = 0;
  const HostTensor* per_sample_weights = nullptr;
};

// _embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
//                per_sample_weights=None, include_last_offset=False, padding_idx=-1)
inline BagArgs bag_args_of(const Call& c) {
  const HostTensor& w = tensor_arg(c, 0, "weight");
  const HostTensor& indices = tensor_arg(c, 1, "indices");
  const HostTensor& offsets = tensor_arg(c, 2, "offsets");
  BagArgs a;
  a.mode = int_arg(c, 4, "mode", 0);
  const HostTensor* psw = optional_tensor(c, 6, "per_sample_weights");
  const bool include_last = bool_arg(c, 7, "include_last_offset", false);
  a.padding = int_arg(c, 8, "padding_idx", -1);
  if (w.rank() != 2) fail("weight must be 2-D");
  if (!is_floating(w.dtype)) fail(fmt::format("weight must be floating, got {}", dtype_abbrev(w.dtype)));
  require_index_vector(indices, "indices");
  require_index_vector(offsets, "offsets");
  if (a.mode < 0 || a.mode > 2) fail(fmt::format("mode {} is not 0 (sum), 1 (mean) or 2 (max)", a.mode));
  a.n = indices.shape[0];
  if (psw) {
    if (a.mode != 0) fail("per_sample_weights are only supported for mode sum");
    if (psw->rank() != 1 || psw->shape[0] != a.n)
      fail(fmt::format("per_sample_weights must be [{}], got {}", a.n, shape_text(psw->shape)));
    if (psw->dtype != w.dtype) fail("per_sample_weights must have weight's dtype");
  }
  a.per_sample_weights = psw;
  a.bags = offsets.shape[0];
  if (include_last) {
    if (a.bags < 1) fail("include_last_offset needs at least one offset");
    --a.bags;
  }
  return a;
}

}  // namespace kb::backendbench::aten
