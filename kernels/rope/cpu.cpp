// kb_cpu_rope: rotary position embedding with a cos/sin cache on the CPU
// (flashinfer.rope.apply_rope_with_cos_sin_cache). Per token, the cache row
// cos_sin_cache[positions[t]] (first half cos, second half sin) is read once
// into double and applied to every q and k head; each rotated pair is
// computed in double and rounded once to the output dtype. Threads split the
// tokens. The oracle instead works head by head in float32, rounding every
// product and sum as torch does.
//
// Handled: NeoX (rotate halves x[:r/2], x[r/2:]) and GPT-J (rotate pairs
// x[2i], x[2i+1]) layouts, partial rotary_dim (the rest of each head passes
// through), references that upcast q / k to float32 before rotating (or have
// float32 q / k). A reference rotating in bfloat16 / float16 rounds after
// every operation, which this solution does not reproduce: it says so.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "harness/implementation.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {
namespace {

enum class Layout { neox, gptj };

std::string without_spaces(std::string_view s) {
  std::string out;
  for (char ch : s)
    if (ch != ' ' && ch != '\t') out.push_back(static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch));
  return out;
}

// The layout, from the definition's name and reference, or why it is unclear.
std::string layout_of(const Definition& d, Layout& layout) {
  const std::string name = without_spaces(d.name), ref = without_spaces(d.reference);
  const bool neox = name.find("neox") != std::string::npos || ref.find("neox") != std::string::npos;
  const bool gptj = name.find("gptj") != std::string::npos || ref.find("[...,::2]") != std::string::npos ||
                    ref.find("[...,0::2]") != std::string::npos;
  if (neox == gptj) return neox ? "both NeoX and GPT-J layouts are mentioned" : "cannot tell NeoX from GPT-J layout";
  layout = neox ? Layout::neox : Layout::gptj;
  return {};
}

bool rotates_in_fp32(const Definition& d) {
  const std::string ref = without_spaces(d.reference);
  const TensorSpec* q = d.find_input("q");
  return (q && q->dtype == DType::float32) || ref.find("q.to(torch.float32)") != std::string::npos ||
         ref.find("q.float()") != std::string::npos;
}

std::string supports(const Definition& d) {
  if (d.op_type != "rope") return "not a rope definition";
  for (const char* n : {"q", "k", "cos_sin_cache", "positions"}) {
    const TensorSpec* s = d.find_input(n);
    if (!s || s->is_scalar()) return fmt::format("needs tensor input '{}'", n);
  }
  if (d.inputs.size() != 4) return "expects exactly q, k, cos_sin_cache, positions";
  const TensorSpec* qo = d.find_output("q_out");
  const TensorSpec* ko = d.find_output("k_out");
  if (!qo || !ko || d.outputs.size() != 2) return "expects outputs q_out and k_out";
  if (!dtype_is_integer(d.find_input("positions")->dtype)) return "positions must be integers";
  Layout layout;
  if (std::string why = layout_of(d, layout); !why.empty()) return why;
  if (!rotates_in_fp32(d)) return "the reference rotates in q's half-precision dtype; this solution rotates in double";
  return {};
}

Status run(const ImplementationCall& c) {
  const Definition& d = c.definition;
  Layout layout = Layout::neox;
  (void)layout_of(d, layout);
  auto arg = [&](const char* n) -> const Tensor* {
    auto i = input_index(d, n);
    return i && *i < c.inputs.size() ? c.inputs[*i].tensor : nullptr;
  };
  const Tensor* q = arg("q");
  const Tensor* k = arg("k");
  const Tensor* cache = arg("cos_sin_cache");
  const Tensor* pos = arg("positions");
  auto qo_i = output_index(d, "q_out");
  auto ko_i = output_index(d, "k_out");
  auto bad = [&](std::string what) { return make_error(Code::invalid_argument, d.name + ": " + what); };
  if (!q || !k || !cache || !pos || !qo_i || !ko_i || *qo_i >= c.outputs.size() || *ko_i >= c.outputs.size())
    return bad("q, k, cos_sin_cache, positions, q_out and k_out must all be passed");
  if (q->rank() != 3 || k->rank() != 3 || cache->rank() != 2 || pos->rank() != 1)
    return bad("expects q / k [tokens, heads, head_size], cos_sin_cache [max_seq_len, rotary_dim], positions [tokens]");
  const std::int64_t tokens = q->dim(0), head = q->dim(2), max_seq = cache->dim(0);
  const std::int64_t rot = c.axes.get("rotary_dim").value_or(cache->dim(1));
  if (k->dim(0) != tokens || pos->dim(0) != tokens || k->dim(2) != head)
    return bad("q, k and positions disagree in tokens or head_size");
  if (c.axes.get("head_size") && *c.axes.get("head_size") != head) return bad("q's last dim is not head_size");
  if (rot < 2 || rot % 2 != 0 || rot > head || cache->dim(1) != rot)
    return bad(fmt::format("rotary_dim {} must be even, in [2, head_size {}] and cos_sin_cache's last dim {}", rot, head,
                           cache->dim(1)));
  Tensor& q_out = c.outputs[*qo_i];
  Tensor& k_out = c.outputs[*ko_i];
  if (q_out.shape() != q->shape() || k_out.shape() != k->shape()) return bad("q_out / k_out must have q / k's shapes");

  std::vector<std::int64_t> p(static_cast<std::size_t>(tokens));
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t v = pos->dtype() == DType::int64   ? pos->data<std::int64_t>()[t]
                            : pos->dtype() == DType::int32 ? pos->data<std::int32_t>()[t]
                                                           : static_cast<std::int64_t>(element_as_double(*pos, t));
    if (v < 0 || v >= max_seq) return bad(fmt::format("positions[{}] = {} is outside [0, {})", t, v, max_seq));
    p[static_cast<std::size_t>(t)] = v;
  }

  const std::int64_t half = rot / 2;
  std::vector<float> qy(static_cast<std::size_t>(q->numel())), ky(static_cast<std::size_t>(k->numel()));
  // Rotates tokens [t0, t1) of q and k.
  auto work = [&](std::int64_t t0, std::int64_t t1) {
    std::vector<double> cs(static_cast<std::size_t>(rot));
    std::vector<float> x(static_cast<std::size_t>(head));
    for (std::int64_t t = t0; t < t1; ++t) {
      for (std::int64_t i = 0; i < rot; ++i)
        cs[static_cast<std::size_t>(i)] = element_as_double(*cache, p[static_cast<std::size_t>(t)] * rot + i);
      for (int which = 0; which < 2; ++which) {
        const Tensor& in = which == 0 ? *q : *k;
        std::vector<float>& y = which == 0 ? qy : ky;
        const std::int64_t heads = in.dim(1);
        for (std::int64_t h = 0; h < heads; ++h) {
          const std::int64_t base = (t * heads + h) * head;
          for (std::int64_t i = 0; i < head; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(element_as_double(in, base + i));
          float* yr = y.data() + base;
          for (std::int64_t i = 0; i < half; ++i) {
            const std::int64_t a = layout == Layout::neox ? i : 2 * i;
            const std::int64_t b = layout == Layout::neox ? i + half : 2 * i + 1;
            const double cv = cs[static_cast<std::size_t>(i)], sv = cs[static_cast<std::size_t>(half + i)];
            const double xa = x[static_cast<std::size_t>(a)], xb = x[static_cast<std::size_t>(b)];
            yr[a] = static_cast<float>(xa * cv - xb * sv);
            yr[b] = static_cast<float>(xb * cv + xa * sv);
          }
          std::copy(x.begin() + rot, x.end(), yr + rot);
        }
      }
    }
  };
  const unsigned hw = std::max(1u, std::min(std::thread::hardware_concurrency(), 16u));
  const std::int64_t threads = std::max<std::int64_t>(1, std::min<std::int64_t>(hw, tokens / 64));
  if (threads == 1) {
    work(0, tokens);
  } else {
    std::vector<std::thread> pool;
    const std::int64_t per = (tokens + threads - 1) / threads;
    for (std::int64_t i = 0; i < threads; ++i)
      if (i * per < tokens) pool.emplace_back(work, i * per, std::min(tokens, (i + 1) * per));
    for (auto& th : pool) th.join();
  }
  KB_TRY(store_float(qy, q_out));
  return store_float(ky, k_out);
}

}  // namespace

void add_rope_cpu(Registry& r) {
  Implementation impl;
  impl.name = "kb_cpu_rope";
  impl.author = "kb";
  impl.device = Device::cpu;
  impl.description = "rope with cos/sin cache (NeoX / GPT-J, partial rotary_dim), per-token fp64 rotation, threaded";
  impl.supports = supports;
  impl.run = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
