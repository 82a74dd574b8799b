// The ATen operator table: every implemented overload, gathered from the
// families, and the calls that run a row without letting an exception out.
#include <fmt/format.h>

#include <new>
#include <vector>

#include "common/args.hpp"
#include "families.hpp"

namespace kb::backendbench {

namespace {
std::vector<OpInfo> build_table() {
  std::vector<OpInfo> all;
  for (auto fam : {aten::elementwise_ops(), aten::reduction_ops(), aten::softmax_ops(), aten::layer_norm_ops(),
                   aten::batch_norm_ops(), aten::matmul_ops(), aten::copy_ops(), aten::index_ops(),
                   aten::convolution_ops(), aten::pooling_ops(), aten::upsample_ops(),
                   aten::embedding_bag_ops(), aten::advanced_index_ops(), aten::factory_ops(), aten::group_norm_ops(),
                   aten::padding_ops(), aten::fold_ops(), aten::grid_sampler_ops(), aten::division_ops(),
                   aten::norm_topk_ops(), aten::inplace_view_ops(), aten::spectral_ops(), aten::sparse_ops(),
                   aten::rnn_ops()})
    all.insert(all.end(), fam.begin(), fam.end());
  return all;
}
}  // namespace

std::span<const OpInfo> aten_ops() {
  static const std::vector<OpInfo> table = build_table();
  return table;
}

const OpInfo* find_aten_op(std::string_view name) {
  for (const OpInfo& o : aten_ops())
    if (name == o.name) return &o;
  return nullptr;
}

bool OpInfo::inplace() const {
  std::string_view n(name);
  auto last = n.rfind('.');
  return last != std::string_view::npos && last > 0 && n[last - 1] == '_';
}

namespace {

// PyTorch refuses to write through a tensor in which several elements share
// one memory location (at::assert_no_internal_overlap: a dimension of size > 1
// with stride 0), since the result would depend on the order of the writes.
// An in-place operator writes `self`.
Status check_written_overlap(const OpInfo& info, const Call& call) {
  if (!info.inplace()) return ok_status();
  const CallArg* self = call.find(0, "self");
  if (!self || !self->tensor) return ok_status();
  const HostTensor& t = *self->tensor;
  for (std::size_t d = 0; d < t.rank(); ++d)
    if (t.shape[d] > 1 && t.strides[d] == 0)
      return make_error(Code::invalid_argument,
                        fmt::format("{}: unsupported operation: more than one element of the written-to tensor "
                                    "refers to a single memory location (self has stride 0 in dimension {} of size "
                                    "{}); PyTorch refuses the write",
                                    info.name, d, t.shape[d]));
  return ok_status();
}

}  // namespace

Result<std::vector<HostTensor>> run_cpu(const OpInfo& info, Call& call) {
  if (auto st = check_written_overlap(info, call); !st) return std::move(st).error();
  try {
    return info.cpu(call);
  } catch (const aten::OpError& e) {
    return make_error(Code::invalid_argument, fmt::format("{}: {}", info.name, e.what()));
  } catch (const std::bad_alloc&) {
    return make_error(Code::out_of_memory, fmt::format("{}: out of memory", info.name));
  } catch (const std::exception& e) {
    return make_error(Code::internal, fmt::format("{}: {}", info.name, e.what()));
  }
}

Status prepare_call(const OpInfo& info, Call& call, Rng& rng) {
  if (!info.prepare) return ok_status();
  try {
    info.prepare(call, rng);
    return ok_status();
  } catch (const aten::OpError& e) {
    return make_error(Code::invalid_argument, fmt::format("{}: {}", info.name, e.what()));
  } catch (const std::bad_alloc&) {
    return make_error(Code::out_of_memory, fmt::format("{}: out of memory", info.name));
  }
}

}  // namespace kb::backendbench
