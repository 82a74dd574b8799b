// GPU oracle for the four attention op_types (gqa_paged, gqa_ragged,
// mla_paged, mla_ragged): the CPU oracle's math (oracle.hpp says
// what it is) as a plain fp32 CUDA kernel (gpu_oracle.cu), for
// calls whose keys are too many for the CPU. Shapes and index tensors are
// checked on the host by the code the CPU oracle uses (the index tensors are
// small and are copied back first), so a bad page id is the same clear error
// on either path and never an out-of-bounds read on the device. The kernel
// then reads each sequence's keys from a flat list of cache rows built here,
// a block per chunk of query rows (one sequence's tokens times the query heads
// of one KV head, cut here), walking the keys in tiles shared by its rows.
// fp32 on CUDA cores, no tensor cores: slow next to kb's solutions, and simple
// enough to trust once it agrees with the CPU oracle
// (tests/gpu/test_gpu_oracles.cpp).
#include "gpu_oracle.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include "oracle.hpp"
#include "cuda/runtime.hpp"
#include "oracle/gpu_oracle.hpp"
#include "tensor/tensor.hpp"

namespace kb::kernels {
namespace {

using namespace attention_gpu_oracle;

enum class Family { gqa_paged, mla_paged, gqa_ragged, mla_ragged };

Error bad(const Definition& d, std::string message) {
  return make_error(Code::invalid_argument, fmt::format("{} (GPU oracle): {}", d.name, message));
}

Result<int> elem_type(const Definition& d, std::string_view name, DType t) {
  switch (t) {
    case DType::float32: return static_cast<int>(kF32);
    case DType::float16: return static_cast<int>(kF16);
    case DType::bfloat16: return static_cast<int>(kBF16);
    default:
      return make_error(Code::unsupported,
                        fmt::format("{} (GPU oracle): '{}' is {}; float32, float16 and bfloat16 only", d.name, name,
                                    dtype_name(t)));
  }
}

// The device tensor of input `name`; null when the definition has no such input.
Result<const cuda::DeviceTensor*> device_input(const GpuOracleCall& c, std::string_view name, bool required) {
  auto i = input_index(c.definition, name);
  if (!i) {
    if (required) return bad(c.definition, fmt::format("input '{}' is missing", name));
    return static_cast<const cuda::DeviceTensor*>(nullptr);
  }
  if (*i >= c.inputs.size() || !c.inputs[*i].tensor)
    return bad(c.definition, fmt::format("input '{}' must be a tensor", name));
  return c.inputs[*i].tensor;
}

// An index tensor's values, copied back from the device.
Result<std::vector<std::int64_t>> host_indices(const GpuOracleCall& c, std::string_view name,
                                               const cuda::DeviceTensor& t) {
  auto host = Tensor::allocate(t.dtype, t.shape);
  if (!host) return std::move(host).error();
  KB_TRY(cuda::download(t, *host, c.stream));
  return attention::index_values(c.definition, name, *host);
}

Result<float> scale_of(const GpuOracleCall& c) {
  auto i = input_index(c.definition, "sm_scale");
  if (!i || *i >= c.inputs.size()) return bad(c.definition, "input 'sm_scale' was not passed");
  const cuda::DeviceArg& a = c.inputs[*i];
  if (a.scalar) {
    if (const auto* v = std::get_if<double>(&*a.scalar)) return static_cast<float>(*v);
    if (const auto* v = std::get_if<std::int64_t>(&*a.scalar)) return static_cast<float>(*v);
  }
  if (a.tensor && a.tensor->numel() == 1 && a.tensor->dtype == DType::float32) {
    float v = 0;
    KB_TRY(cuda::check(cudaMemcpy(&v, a.tensor->data, sizeof v, cudaMemcpyDeviceToHost), "reading sm_scale"));
    return v;
  }
  return bad(c.definition, "input 'sm_scale' must be a number");
}

// A list for the kernel on the device (cuda::upload, freed with the copy).
template <class T>
Result<cuda::DeviceCopy> upload_list(const std::vector<T>& v, DType dtype, void* stream) {
  auto host = Tensor::allocate(dtype, {static_cast<std::int64_t>(v.size())});
  if (!host) return host.error();
  if (!v.empty()) std::memcpy(host->bytes(), v.data(), v.size() * sizeof(T));
  return cuda::upload(*host, stream);  // a pageable source: copied out before this returns
}

Status run(const GpuOracleCall& c, Family family) {
  const Definition& d = c.definition;
  const bool mla = family == Family::mla_paged || family == Family::mla_ragged;
  const bool paged = family == Family::gqa_paged || family == Family::mla_paged;
  if (std::string why = paged ? attention::supports_paged(d, mla ? attention::PagedKind::mla
                                                                 : attention::PagedKind::gqa)
                              : attention::supports_ragged(d);
      !why.empty())
    return make_error(Code::unsupported, fmt::format("{} (GPU oracle): {}", d.name, why));

  // Inputs: paged GQA q, k_cache, v_cache; paged MLA q_nope, q_pe, ckv_cache,
  // kpe_cache (the values are ckv); ragged q, k, v.
  const char* q_name = paged && mla ? "q_nope" : "q";
  const char* k_name = paged ? (mla ? "ckv_cache" : "k_cache") : "k";
  const char* v_name = paged ? (mla ? "kpe_cache" : "v_cache") : "v";
  auto q = device_input(c, q_name, true);
  if (!q) return std::move(q).error();
  auto q_pe = device_input(c, "q_pe", paged && mla);
  if (!q_pe) return std::move(q_pe).error();
  auto k = device_input(c, k_name, true);
  if (!k) return std::move(k).error();
  auto v = device_input(c, v_name, true);
  if (!v) return std::move(v).error();
  auto qo_t = device_input(c, "qo_indptr", !paged);
  if (!qo_t) return std::move(qo_t).error();
  auto indptr_t = device_input(c, "kv_indptr", true);
  if (!indptr_t) return std::move(indptr_t).error();
  auto indices_t = device_input(c, "kv_indices", paged);
  if (!indices_t) return std::move(indices_t).error();
  auto last_t = device_input(c, "kv_last_page_len", false);
  if (!last_t) return std::move(last_t).error();
  auto scale = scale_of(c);
  if (!scale) return std::move(scale).error();

  auto shapes_r = paged ? attention::paged_shapes(d, mla ? attention::PagedKind::mla : attention::PagedKind::gqa,
                                                  (*q)->shape, *q_pe ? &(*q_pe)->shape : nullptr, (*k)->shape,
                                                  (*v)->shape)
                        : attention::ragged_shapes(d, (*q)->shape, (*k)->shape, (*v)->shape);
  if (!shapes_r) return std::move(shapes_r).error();
  const attention::AttentionShapes& sh = *shapes_r;
  if (sh.d_qk > kMaxHeadDim || sh.d_v > kMaxHeadDim || sh.d_pe > kMaxRopeDim)
    return make_error(Code::unsupported,
                      fmt::format("{} (GPU oracle): head dims {} / {} / {}: at most {} ({} for the rope part)", d.name,
                                  sh.d_qk, sh.d_v, sh.d_pe, kMaxHeadDim, kMaxRopeDim));

  // The index tensors, checked on the host as the CPU oracle checks them.
  std::vector<std::int64_t> qo, indptr, indices, last;
  if (*qo_t) {
    auto r = host_indices(c, "qo_indptr", **qo_t);
    if (!r) return std::move(r).error();
    qo = std::move(*r);
  }
  {
    auto r = host_indices(c, "kv_indptr", **indptr_t);
    if (!r) return std::move(r).error();
    indptr = std::move(*r);
  }
  if (*indices_t) {
    auto r = host_indices(c, "kv_indices", **indices_t);
    if (!r) return std::move(r).error();
    indices = std::move(*r);
  }
  if (*last_t) {
    auto r = host_indices(c, "kv_last_page_len", **last_t);
    if (!r) return std::move(r).error();
    last = std::move(*r);
  }
  auto seqs_r = paged ? attention::paged_sequences(d, sh, *qo_t ? &qo : nullptr, indptr, indices,
                                                   *last_t ? &last : nullptr)
                      : attention::ragged_sequences(d, sh, qo, indptr);
  if (!seqs_r) return std::move(seqs_r).error();

  // Outputs.
  auto oi = output_index(d, "output");
  auto li = output_index(d, "lse");
  if (!oi || *oi >= c.outputs.size()) return bad(d, "output 'output' was not passed");
  const cuda::DeviceTensor& out = c.outputs[*oi];
  const cuda::DeviceTensor* lse = li && *li < c.outputs.size() ? &c.outputs[*li] : nullptr;
  if (out.shape != std::vector<std::int64_t>{sh.tokens, sh.q_heads, sh.d_v})
    return bad(d, fmt::format("'output' has shape [{}], expected [{}, {}, {}]", fmt::join(out.shape, ", "), sh.tokens,
                              sh.q_heads, sh.d_v));
  if (lse && lse->shape != std::vector<std::int64_t>{sh.tokens, sh.q_heads})
    return bad(d, fmt::format("'lse' has shape [{}], expected [{}, {}]", fmt::join(lse->shape, ", "), sh.tokens,
                              sh.q_heads));

  // Flat lists for the kernel: each sequence's keys as rows, each token's sequence.
  std::vector<int> token_seq(static_cast<std::size_t>(sh.tokens), -1);
  std::vector<long long> q_begin, q_len, kv_begin, kv_len, kv_rows;
  for (const attention::Sequence& s : *seqs_r) {
    const auto index = static_cast<int>(q_begin.size());
    for (std::int64_t t = s.q_begin; t < s.q_begin + s.q_len; ++t) token_seq[static_cast<std::size_t>(t)] = index;
    q_begin.push_back(s.q_begin);
    q_len.push_back(s.q_len);
    kv_begin.push_back(static_cast<long long>(kv_rows.size()));
    if (paged) {
      for (std::int64_t i = 0; i < s.pages; ++i) {
        const std::int64_t page = indices[static_cast<std::size_t>(s.first + i)];
        const std::int64_t used = i + 1 < s.pages ? sh.page_size : s.last_len;
        for (std::int64_t slot = 0; slot < used; ++slot) kv_rows.push_back(page * sh.page_size + slot);
      }
    } else {
      for (std::int64_t r = s.first; r < s.first + s.last_len; ++r) kv_rows.push_back(r);
    }
    kv_len.push_back(static_cast<long long>(kv_rows.size()) - kv_begin.back());
  }
  if (q_begin.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    return make_error(Code::limit_exceeded, fmt::format("{} (GPU oracle): too many sequences", d.name));

  // The blocks' chunks of rows: each run of tokens with one sequence (or none),
  // times the group's heads, cut into pieces of at most rows_per_chunk() rows.
  const long long group = sh.q_heads / sh.kv_heads, per_chunk = rows_per_chunk();
  std::vector<long long> chunks;
  for (std::int64_t a = 0; a < sh.tokens;) {
    std::int64_t b = a + 1;
    while (b < sh.tokens && token_seq[static_cast<std::size_t>(b)] == token_seq[static_cast<std::size_t>(a)]) ++b;
    for (long long u = a * group; u < b * group; u += per_chunk) {
      chunks.push_back(u);
      chunks.push_back(std::min(per_chunk, b * group - u));
    }
    a = b;
  }

  Params p{};
  // A tensor's data and element type into the kernel's parameters (data: const void* or void*).
  auto types = [&](const cuda::DeviceTensor* t, std::string_view name, auto* data, int* type) -> Status {
    if (!t) return ok_status();
    auto e = elem_type(d, name, t->dtype);
    if (!e) return std::move(e).error();
    *data = t->data;
    *type = *e;
    return ok_status();
  };
  KB_TRY(types(*q, q_name, &p.q0, &p.q0_type));
  if (paged && mla) {
    KB_TRY(types(*q_pe, "q_pe", &p.q1, &p.q1_type));
    KB_TRY(types(*k, k_name, &p.k0, &p.k0_type));
    KB_TRY(types(*v, v_name, &p.k1, &p.k1_type));
    KB_TRY(types(*k, k_name, &p.v, &p.v_type));  // the values are ckv
  } else {
    KB_TRY(types(*k, k_name, &p.k0, &p.k0_type));
    KB_TRY(types(*v, v_name, &p.v, &p.v_type));
  }
  KB_TRY(types(&out, "output", &p.out, &p.out_type));
  KB_TRY(types(lse, "lse", &p.lse, &p.lse_type));
  p.tokens = sh.tokens;
  p.q_heads = static_cast<int>(sh.q_heads);
  p.kv_heads = static_cast<int>(sh.kv_heads);
  p.group = static_cast<int>(sh.q_heads / sh.kv_heads);
  p.d_qk = static_cast<int>(sh.d_qk);
  p.d_pe = static_cast<int>(sh.d_pe);
  p.d_v = static_cast<int>(sh.d_v);
  p.scale = *scale;
  p.causal = !paged || *qo_t;  // ragged is always causal prefill; paged with qo_indptr
  p.n_chunks = static_cast<long long>(chunks.size() / 2);

  std::vector<cuda::DeviceCopy> lists;
  for (auto [list, field] : {std::pair{&q_begin, &p.seq_q_begin}, {&q_len, &p.seq_q_len}, {&kv_begin, &p.seq_kv_begin},
                             {&kv_len, &p.seq_kv_len}, {&kv_rows, &p.kv_rows}, {&chunks, &p.chunks}}) {
    auto up = upload_list(*list, DType::int64, c.stream);
    if (!up) return up.error();
    *field = up->view.as<const long long>();
    lists.push_back(std::move(*up));
  }
  auto seq_of = upload_list(token_seq, DType::int32, c.stream);
  if (!seq_of) return seq_of.error();
  p.token_seq = seq_of->view.as<const int>();

  KB_TRY(cuda::check(launch(p, c.stream), "attention GPU oracle launch"));
  // The index lists are freed on return: wait for the kernel that reads them.
  return cuda::check(cudaStreamSynchronize(static_cast<cudaStream_t>(c.stream)), "attention GPU oracle");
}

}  // namespace

Status gqa_paged_gpu_oracle(const GpuOracleCall& c) { return run(c, Family::gqa_paged); }
Status mla_paged_gpu_oracle(const GpuOracleCall& c) { return run(c, Family::mla_paged); }
Status gqa_ragged_gpu_oracle(const GpuOracleCall& c) { return run(c, Family::gqa_ragged); }
Status mla_ragged_gpu_oracle(const GpuOracleCall& c) { return run(c, Family::mla_ragged); }

}  // namespace kb::kernels
