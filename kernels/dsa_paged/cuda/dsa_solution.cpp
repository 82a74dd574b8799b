// kb's CUDA solutions for op_type "dsa_paged" (DeepSeek sparse attention):
//  - kb_cuda_dsa_sparse_attention: the definitions with sparse_indices
//    (kernel: sparse_attention.cu);
//  - kb_cuda_dsa_topk_indexer: the fp8 indexer, output topk_indices
//    (kernels: topk_indexer.cu).
// Both are generic over the definitions' constants (heads, dims, top-k, page
// size); supports() names what a definition asks that the kernels do not do.
#include <fmt/format.h>

#include <string>
#include <variant>

#include "dsa_cuda.hpp"
#include "harness/implementation.hpp"
#include "harness/per_definition.hpp"

namespace kb::kernels {
namespace {

const char* kAttention = "kb_cuda_dsa_sparse_attention";
const char* kIndexer = "kb_cuda_dsa_topk_indexer";

const TensorSpec* input(const Definition& d, std::string_view name) {
  auto i = input_index(d, name);
  return i ? &d.inputs[*i] : nullptr;
}

const TensorSpec* output(const Definition& d, std::string_view name) {
  auto i = output_index(d, name);
  return i ? &d.outputs[*i] : nullptr;
}

// The value of a tensor's dimension `dim` where its axis is const.
std::optional<std::int64_t> const_dim(const Definition& d, const TensorSpec& t, std::size_t dim) {
  if (!t.shape || dim >= t.shape->size()) return std::nullopt;
  const Axis* a = d.find_axis((*t.shape)[dim]);
  if (!a || a->kind != AxisKind::const_) return std::nullopt;
  return a->value;
}

std::string check_attention(const Definition& d) {
  if (d.op_type != "dsa_paged") return fmt::format("op_type {} is not dsa_paged", d.op_type);
  if (!input(d, "sparse_indices")) return "not the sparse attention form (no input sparse_indices)";
  if (auto o = find_oracle(d); !o) return o.error().message;  // the oracle's form checks (ranks, names, scalar sm_scale)
  const TensorSpec *qn = input(d, "q_nope"), *qp = input(d, "q_pe"), *ckv = input(d, "ckv_cache"),
                   *kpe = input(d, "kpe_cache"), *idx = input(d, "sparse_indices"), *out = output(d, "output");
  for (const TensorSpec* t : {qp, ckv, kpe})
    if (t->dtype != qn->dtype)
      return fmt::format("{} is {} but q_nope is {}; the kernel reads one 16-bit dtype", t->name, dtype_name(t->dtype),
                         dtype_name(qn->dtype));
  if (idx->dtype != DType::int32) return fmt::format("sparse_indices is {}; the kernel reads int32", dtype_name(idx->dtype));
  const auto dc = const_dim(d, *qn, 2), dp = const_dim(d, *qp, 2);
  if (const char* why = dsa_sparse_attention_unsupported(qn->dtype, out->dtype, dc.value_or(2), dp.value_or(2)))
    return why;
  if (output(d, "lse") && d.reference.find("log(2") == std::string::npos && d.reference.find("log2") == std::string::npos)
    return "the reference's lse is not recognisably base 2 (logsumexp / log(2)); the kernel writes base-2 lse";
  return {};
}

std::string check_indexer(const Definition& d) {
  if (d.op_type != "dsa_paged") return fmt::format("op_type {} is not dsa_paged", d.op_type);
  if (!output(d, "topk_indices")) return "not the top-k indexer form (no output topk_indices)";
  if (auto o = find_oracle(d); !o) return o.error().message;
  const TensorSpec *q = input(d, "q_index_fp8"), *w = input(d, "weights"), *lens = input(d, "seq_lens"),
                   *table = input(d, "block_table"), *out = output(d, "topk_indices");
  if (q->dtype != DType::float8_e4m3fn) return fmt::format("q_index_fp8 is {}; the kernel reads float8_e4m3fn", dtype_name(q->dtype));
  if (w->dtype != DType::float32) return fmt::format("weights is {}; the kernel reads float32", dtype_name(w->dtype));
  if (lens->dtype != DType::int32 || table->dtype != DType::int32) return "seq_lens and block_table must be int32";
  if (const char* why = dsa_topk_indexer_unsupported(const_dim(d, *q, 1).value_or(1), const_dim(d, *q, 2).value_or(1), out->dtype))
    return why;
  if (d.reference.find("relu") == std::string::npos || d.reference.find("topk") == std::string::npos)
    return "the reference is not recognisably sum(relu(q . k) * weights) then topk";
  return {};
}

// Once per definition (harness/per_definition.hpp): find_oracle reads the reference, which allocates.
std::string supports_attention(const Definition& d) {
  static PerDefinition<std::string> memo;
  return memo.get(d, check_attention);
}

std::string supports_indexer(const Definition& d) {
  static PerDefinition<std::string> memo;
  return memo.get(d, check_indexer);
}

const cuda::DeviceTensor* tensor(const CudaCall& c, std::string_view name) {
  auto i = input_index(c.definition, name);
  return i && *i < c.inputs.size() ? c.inputs[*i].tensor : nullptr;
}

Status bad(const char* who, const std::string& what) {
  return make_error(Code::invalid_argument, fmt::format("{}: {}", who, what));
}

Status run_attention(const CudaCall& c) {
  const Definition& d = c.definition;
  if (std::string why = supports_attention(d); !why.empty()) return make_error(Code::unsupported, fmt::format("{}: {}", kAttention, why));
  const cuda::DeviceTensor *qn = tensor(c, "q_nope"), *qp = tensor(c, "q_pe"), *ckv = tensor(c, "ckv_cache"),
                           *kpe = tensor(c, "kpe_cache"), *idx = tensor(c, "sparse_indices");
  auto si = input_index(d, "sm_scale");
  if (!qn || !qp || !ckv || !kpe || !idx || !si || *si >= c.inputs.size() || !c.inputs[*si].scalar)
    return bad(kAttention, "q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices (tensors) and sm_scale (a scalar) are required");
  auto oi = output_index(d, "output");
  auto li = output_index(d, "lse");
  if (!oi || *oi >= c.outputs.size() || (li && *li >= c.outputs.size())) return bad(kAttention, "missing outputs");
  const cuda::DeviceTensor& out = c.outputs[*oi];
  const cuda::DeviceTensor* lse = li ? &c.outputs[*li] : nullptr;
  if (qn->shape.size() != 3 || qp->shape.size() != 3 || ckv->shape.size() != 3 || kpe->shape.size() != 3 ||
      idx->shape.size() != 2)
    return bad(kAttention, "q_nope, q_pe, ckv_cache, kpe_cache must be rank 3 and sparse_indices rank 2");
  const std::int64_t T = qn->dim(0), H = qn->dim(1), Dc = qn->dim(2), Dp = qp->dim(2);
  if (qp->dim(0) != T || qp->dim(1) != H || ckv->dim(2) != Dc || kpe->dim(0) != ckv->dim(0) ||
      kpe->dim(1) != ckv->dim(1) || kpe->dim(2) != Dp || idx->dim(0) != T)
    return bad(kAttention, "shapes disagree: q_nope [T, H, Dc], q_pe [T, H, Dp], ckv_cache [P, S, Dc], kpe_cache [P, S, Dp], "
                           "sparse_indices [T, K]");
  if (out.numel() != T * H * Dc || (lse && (lse->numel() != T * H || lse->dtype != DType::float32)))
    return bad(kAttention, "output must be [T, H, Dc] and lse [T, H] float32");
  for (const cuda::DeviceTensor* t : {qp, ckv, kpe})
    if (t->dtype != qn->dtype) return bad(kAttention, "q_nope, q_pe, ckv_cache, kpe_cache must share one dtype");
  if (idx->dtype != DType::int32) return bad(kAttention, "sparse_indices must be int32");
  DsaSparseAttentionArgs a;
  a.q_nope = qn->data;
  a.q_pe = qp->data;
  a.ckv = ckv->data;
  a.kpe = kpe->data;
  a.sparse_indices = static_cast<const std::int32_t*>(idx->data);
  a.output = out.data;
  a.lse = lse ? static_cast<float*>(lse->data) : nullptr;
  a.dtype = qn->dtype;
  a.out_dtype = out.dtype;
  a.tokens = T;
  a.heads = H;
  a.dim_ckv = Dc;
  a.dim_kpe = Dp;
  a.rows = ckv->dim(0) * ckv->dim(1);
  a.topk = idx->dim(1);
  a.sm_scale = static_cast<float>(std::visit([](auto x) { return static_cast<double>(x); }, *c.inputs[*si].scalar));
  return launch_dsa_sparse_attention(a, c.stream);
}

Status run_indexer(const CudaCall& c) {
  const Definition& d = c.definition;
  if (std::string why = supports_indexer(d); !why.empty()) return make_error(Code::unsupported, fmt::format("{}: {}", kIndexer, why));
  const cuda::DeviceTensor *q = tensor(c, "q_index_fp8"), *cache = tensor(c, "k_index_cache_fp8"), *w = tensor(c, "weights"),
                           *lens = tensor(c, "seq_lens"), *table = tensor(c, "block_table");
  if (!q || !cache || !w || !lens || !table || c.outputs.size() != 1)
    return bad(kIndexer, "q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table (tensors) and one output are required");
  const cuda::DeviceTensor& out = c.outputs[0];
  if (q->shape.size() != 3 || cache->shape.size() != 4 || w->shape.size() != 2 || table->shape.size() != 2 ||
      out.shape.size() != 2)
    return bad(kIndexer, "ranks: q_index_fp8 3, k_index_cache_fp8 4, weights 2, block_table 2, topk_indices 2");
  const std::int64_t B = q->dim(0), H = q->dim(1), D = q->dim(2);
  if (cache->dim(2) != 1 || cache->dim(3) != D + 4)
    return bad(kIndexer, fmt::format("k_index_cache_fp8 must be [pages, page_size, 1, {}] (dim + 4 scale bytes)", D + 4));
  if (w->dim(0) != B || w->dim(1) != H || lens->numel() != B || table->dim(0) != B || out.dim(0) != B)
    return bad(kIndexer, "weights [B, H], seq_lens [B], block_table [B, max_pages], topk_indices [B, topk] disagree with q");
  if (q->dtype != DType::float8_e4m3fn || w->dtype != DType::float32 || lens->dtype != DType::int32 ||
      table->dtype != DType::int32)
    return bad(kIndexer, "dtypes: q_index_fp8 float8_e4m3fn, weights float32, seq_lens and block_table int32");
  DsaTopkIndexerArgs a;
  a.q = q->data;
  a.cache = cache->data;
  a.weights = static_cast<const float*>(w->data);
  a.seq_lens = static_cast<const std::int32_t*>(lens->data);
  a.block_table = static_cast<const std::int32_t*>(table->data);
  a.topk_indices = out.data;
  a.out_dtype = out.dtype;
  a.batch = B;
  a.heads = H;
  a.dim = D;
  a.page_size = cache->dim(1);
  a.num_pages = cache->dim(0);
  a.max_pages = table->dim(1);
  a.topk = out.dim(1);
  return launch_dsa_topk_indexer(a, c.stream);
}

}  // namespace

void add_dsa_paged_cuda(Registry& r) {
  Implementation attention;
  attention.name = kAttention;
  attention.author = "kb";
  attention.device = Device::cuda;
  attention.description =
      "DSA sparse MLA attention, bf16/fp16: a CTA per (token, 16 heads, split of the top-k list) gathers 64 "
      "selected rows at a time (cp.async) into shared memory for all its heads, Q K^T and P V on tensor cores "
      "(mma.sync bf16, fp32 accumulate), online softmax in base 2; splits merged by lse. Shapes off the mma tiles "
      "(fp16, other head dims): fp32 FMA kernel, 32 rows a tile";
  attention.supports = supports_attention;
  attention.run_cuda = run_attention;
  r.add(std::move(attention));

  Implementation indexer;
  indexer.name = kIndexer;
  indexer.author = "kb";
  indexer.device = Device::cuda;
  indexer.description =
      "DSA fp8 top-k indexer: scores sum_h w_h relu(q_h . k) in fp32 (queries in shared memory, keys dequantized "
      "per tile through the block table), then a per-sequence 4-pass radix select of the top k (no sort), "
      "indices in token order";
  indexer.supports = supports_indexer;
  indexer.run_cuda = run_indexer;
  r.add(std::move(indexer));
}

}  // namespace kb::kernels
