// kb_cpu_dsa_paged: DeepSeek sparse attention's two kernels on the CPU,
// float32, written apart from the oracle:
//  - sparse attention in one pass over the selected rows with an online
//    softmax (running max and sum rescaled as rows arrive), all heads of a
//    token against each gathered row before the next;
//  - the fp8 indexer dequantizes each page it visits once, scores every
//    token of the sequence in float, and keeps the top-k in a bounded
//    min-heap, emitted in descending score order.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <queue>
#include <vector>

#include "harness/implementation.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {
namespace {

const Tensor* arg(const ImplementationCall& c, std::string_view name) {
  auto i = input_index(c.definition, name);
  return i ? c.inputs[*i].tensor : nullptr;
}

Status attention(const ImplementationCall& c) {
  const Definition& d = c.definition;
  const Tensor &qn = *arg(c, "q_nope"), &qp = *arg(c, "q_pe"), &ckv = *arg(c, "ckv_cache"), &kpe = *arg(c, "kpe_cache"),
               &idx = *arg(c, "sparse_indices");
  auto sc = scalar_as_double(c.inputs[*input_index(d, "sm_scale")]);
  if (!sc) return make_error(Code::invalid_argument, d.name + ": sm_scale must be a number");
  const float scale = static_cast<float>(*sc);
  const std::int64_t T = qn.dim(0), H = qn.dim(1), Dc = qn.dim(2), Dp = qp.dim(2), K = idx.dim(1);
  const std::int64_t rows = ckv.dim(0) * ckv.dim(1);
  const auto q0 = to_float(qn), q1 = to_float(qp);
  std::vector<float> out(static_cast<std::size_t>(T * H * Dc), 0.0f);
  std::vector<float> lse(static_cast<std::size_t>(T * H), -std::numeric_limits<float>::infinity());
  std::vector<float> kc(Dc), kp(Dp), m(H), l(H), acc(H * Dc);
  for (std::int64_t t = 0; t < T; ++t) {
    std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
    std::fill(l.begin(), l.end(), 0.0f);
    std::fill(acc.begin(), acc.end(), 0.0f);
    bool any = false;
    for (std::int64_t j = 0; j < K; ++j) {
      const auto r = static_cast<std::int64_t>(element_as_double(idx, t * K + j));
      if (r == -1) continue;
      if (r < 0 || r >= rows) return make_error(Code::invalid_argument, fmt::format("{}: sparse index {} outside the cache", d.name, r));
      any = true;
      for (std::int64_t e = 0; e < Dc; ++e) kc[e] = static_cast<float>(element_as_double(ckv, r * Dc + e));
      for (std::int64_t e = 0; e < Dp; ++e) kp[e] = static_cast<float>(element_as_double(kpe, r * Dp + e));
      for (std::int64_t h = 0; h < H; ++h) {
        float s = 0;
        for (std::int64_t e = 0; e < Dc; ++e) s += q0[(t * H + h) * Dc + e] * kc[e];
        for (std::int64_t e = 0; e < Dp; ++e) s += q1[(t * H + h) * Dp + e] * kp[e];
        s *= scale;
        const float m_new = std::max(m[h], s);
        const float keep = std::exp(m[h] - m_new), p = std::exp(s - m_new);
        l[h] = l[h] * keep + p;
        float* a = &acc[h * Dc];
        for (std::int64_t e = 0; e < Dc; ++e) a[e] = a[e] * keep + p * kc[e];
        m[h] = m_new;
      }
    }
    if (!any) continue;
    for (std::int64_t h = 0; h < H; ++h) {
      for (std::int64_t e = 0; e < Dc; ++e) out[(t * H + h) * Dc + e] = acc[h * Dc + e] / l[h];
      lse[t * H + h] = (m[h] + std::log(l[h])) * static_cast<float>(1.0 / std::log(2.0));
    }
  }
  KB_TRY(store_float(out, c.outputs[*output_index(d, "output")]));
  if (auto li = output_index(d, "lse")) KB_TRY(store_float(lse, c.outputs[*li]));
  return ok_status();
}

Status indexer(const ImplementationCall& c) {
  const Definition& d = c.definition;
  const Tensor &q = *arg(c, "q_index_fp8"), &cache = *arg(c, "k_index_cache_fp8"), &w = *arg(c, "weights"),
               &lens = *arg(c, "seq_lens"), &table = *arg(c, "block_table");
  const std::int64_t B = q.dim(0), H = q.dim(1), D = q.dim(2), pages = cache.dim(0), ps = cache.dim(1);
  const std::int64_t max_pages = table.dim(1);
  Tensor& out = c.outputs[0];
  const std::int64_t topk = out.dim(1);
  const auto qf = to_float(q), wf = to_float(w);
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(cache.bytes());
  std::vector<float> keys(static_cast<std::size_t>(ps * D));
  using Entry = std::pair<float, std::int64_t>;  // (score, -position): the heap's top is the weakest kept
  for (std::int64_t b = 0; b < B; ++b) {
    const auto len = static_cast<std::int64_t>(element_as_double(lens, b));
    if (len < 0 || len > max_pages * ps) return make_error(Code::invalid_argument, d.name + ": seq_len outside the block table");
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
    std::vector<std::int64_t> global(static_cast<std::size_t>(len));
    for (std::int64_t pi = 0; pi * ps < len; ++pi) {
      const auto page = static_cast<std::int64_t>(element_as_double(table, b * max_pages + pi));
      if (page < 0 || page >= pages) return make_error(Code::invalid_argument, d.name + ": block_table page outside the cache");
      const std::uint8_t* base = bytes + page * ps * (D + 4);
      for (std::int64_t s = 0; s < ps; ++s) {
        float sc;
        std::memcpy(&sc, base + ps * D + s * 4, 4);
        for (std::int64_t e = 0; e < D; ++e) keys[s * D + e] = fp8_e4m3fn_to_float(base[s * D + e]) * sc;
      }
      for (std::int64_t s = 0; s < ps && pi * ps + s < len; ++s) {
        float score = 0;
        for (std::int64_t h = 0; h < H; ++h) {
          float dot = 0;
          for (std::int64_t e = 0; e < D; ++e) dot += qf[(b * H + h) * D + e] * keys[s * D + e];
          score += std::max(dot, 0.0f) * wf[b * H + h];
        }
        const std::int64_t j = pi * ps + s;
        global[static_cast<std::size_t>(j)] = page * ps + s;
        heap.emplace(score, -j);
        if (static_cast<std::int64_t>(heap.size()) > topk) heap.pop();
      }
    }
    std::vector<std::int64_t> picked;
    while (!heap.empty()) {
      picked.push_back(global[static_cast<std::size_t>(-heap.top().second)]);
      heap.pop();
    }
    std::reverse(picked.begin(), picked.end());
    picked.resize(static_cast<std::size_t>(topk), -1);
    for (std::int64_t i = 0; i < topk; ++i) {
      if (out.dtype() == DType::int64) out.data<std::int64_t>()[b * topk + i] = picked[static_cast<std::size_t>(i)];
      else out.data<std::int32_t>()[b * topk + i] = static_cast<std::int32_t>(picked[static_cast<std::size_t>(i)]);
    }
  }
  return ok_status();
}

}  // namespace

void add_dsa_paged_cpu(Registry& r) {
  Implementation impl;
  impl.name = "kb_cpu_dsa_paged";
  impl.author = "kb";
  impl.device = Device::cpu;
  impl.description = "DSA sparse attention (online softmax over the selected rows) and fp8 top-k indexer (heap) on the CPU, fp32";
  impl.supports = [](const Definition& d) -> std::string {
    if (d.op_type != "dsa_paged") return "not a dsa_paged definition";
    if (auto o = find_oracle(d); !o) return o.error().message;
    return {};
  };
  impl.run = [](const ImplementationCall& c) -> Status {
    return input_index(c.definition, "sparse_indices") ? attention(c) : indexer(c);
  };
  r.add(std::move(impl));
}

}  // namespace kb::kernels
