// The arguments of _sparse_coo_tensor_with_dims_and_tensors, checked once
// for the CPU oracle (sparse_coo.cpp) and the CUDA plan
// (cuda/sparse_coo_cuda.cpp): sparse_dim + dense_dim = len(size), indices
// [sparse_dim, nnz] int64, values [nnz] + size[sparse_dim:] in `dtype`.
#pragma once

#include <fmt/format.h>

#include "../common/args.hpp"

namespace kb::backendbench::aten {

struct Coo {
  std::int64_t sparse_dim, dense_dim, nnz;
  std::vector<std::int64_t> size;
};

inline Coo check_coo(const Call& c) {
  Coo s{int_arg(c, 0, "sparse_dim"), int_arg(c, 1, "dense_dim"), 0, {}};
  auto size = int_list_arg(c, 2, "size");
  if (!size) fail("size is required");
  s.size = *size;
  const HostTensor& idx = tensor_arg(c, 3, "indices");
  const HostTensor& val = tensor_arg(c, 4, "values");
  if (s.sparse_dim < 0 || s.dense_dim < 0)
    fail(fmt::format("sparse_dim {} and dense_dim {} must not be negative", s.sparse_dim, s.dense_dim));
  if (static_cast<std::int64_t>(s.size.size()) != s.sparse_dim + s.dense_dim)
    fail(fmt::format("number of dimensions must be sparse_dim ({}) + dense_dim ({}), but got {}", s.sparse_dim,
                     s.dense_dim, s.size.size()));
  for (std::int64_t v : s.size)
    if (v < 0) fail(fmt::format("size {} has a negative dimension", shape_text(s.size)));
  if (idx.dtype != Dtype::i64) fail(fmt::format("indices must be an int64 tensor, got {}", dtype_abbrev(idx.dtype)));
  if (idx.rank() != 2 || idx.shape[0] != s.sparse_dim)
    fail(fmt::format("indices must be [sparse_dim = {}, nnz], got {}", s.sparse_dim, shape_text(idx.shape)));
  s.nnz = idx.shape[1];
  std::vector<std::int64_t> want{s.nnz};
  want.insert(want.end(), s.size.begin() + s.sparse_dim, s.size.end());
  if (val.shape != want)
    fail(fmt::format("values must be [nnz] + size[sparse_dim:] = {}, got {}", shape_text(want), shape_text(val.shape)));
  if (auto dt = dtype_arg(c, 5, "dtype"); dt && *dt != val.dtype)
    fail(fmt::format("values have dtype {}, the tensor's dtype is {}", dtype_abbrev(val.dtype), dtype_abbrev(*dt)));
  return s;
}

}  // namespace kb::backendbench::aten
