// CPU oracle for op_type "rope": rope_with_cos_sin_cache (q, k, cos_sin_cache,
// positions) -> (q_out, k_out), as flashinfer.rope.apply_rope_with_cos_sin_cache.
//
// cos_sin_cache[pos] holds rotary_dim values: the first half cos, the second
// half sin. The first rotary_dim entries of every head are rotated, the rest
// pass through. Two layouts of the rotated part, told from the reference:
//   NeoX  (reference mentions "neox"):        x1 = x[:r/2],  x2 = x[r/2:]; out = cat(o1, o2)
//   GPT-J (reference slices x[..., ::2] and x[..., 1::2]): x1 = even, x2 = odd; out interleaves o1, o2
// with o1 = x1 * cos - x2 * sin, o2 = x2 * cos + x1 * sin, each product and
// sum rounded to the compute dtype as torch does. The compute dtype is the
// dtype of x inside the reference: float32 when it upcasts q/k first (the
// shipped definition), else q's dtype; cos/sin are cast to it (`.to(x.dtype)`).
// head_size and rotary_dim come from the axes of those names, else from the
// reference's constants. Positions outside [0, max_seq_len) are refused.
#include <fmt/format.h>

#include <cmath>
#include <new>
#include <string>
#include <vector>

#include "oracle/oracle.hpp"
#include "rope_reference.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {
namespace {

bool float_dtype(DType t) { return t == DType::float32 || t == DType::float16 || t == DType::bfloat16; }

std::string supports(const Definition& d) {
  if (d.op_type != "rope") return fmt::format("op_type {} is not rope", d.op_type);
  const char* in_names[] = {"q", "k", "cos_sin_cache", "positions"};
  if (d.inputs.size() != 4) return "rope oracle expects inputs q, k, cos_sin_cache, positions";
  for (std::size_t i = 0; i < 4; ++i)
    if (d.inputs[i].name != in_names[i] || d.inputs[i].is_scalar())
      return "rope oracle expects tensor inputs q, k, cos_sin_cache, positions in that order";
  if (d.outputs.size() != 2 || d.outputs[0].name != "q_out" || d.outputs[1].name != "k_out")
    return "rope oracle expects outputs q_out, k_out";
  const TensorSpec& q = d.inputs[0];
  const TensorSpec& k = d.inputs[1];
  const TensorSpec& cache = d.inputs[2];
  const TensorSpec& pos = d.inputs[3];
  if (q.rank() != 3 || k.rank() != 3 || cache.rank() != 2 || pos.rank() != 1)
    return "rope oracle expects q [tokens, qo_heads, head_size], k [tokens, kv_heads, head_size], "
           "cos_sin_cache [max_seq_len, rotary_dim], positions [tokens]";
  if (d.outputs[0].shape != q.shape || d.outputs[1].shape != k.shape || d.outputs[0].dtype != q.dtype ||
      d.outputs[1].dtype != k.dtype)
    return "rope oracle: q_out / k_out must have the shapes and dtypes of q / k";
  if (pos.dtype != DType::int64 && pos.dtype != DType::int32) return "rope oracle: positions must be int64 or int32";
  if (!float_dtype(q.dtype) || !float_dtype(k.dtype) || !float_dtype(cache.dtype))
    return "rope oracle handles float32/float16/bfloat16 q, k and cos_sin_cache";
  if (q.dtype != k.dtype) return "rope oracle: q and k must share a dtype";
  RopeReference ref;
  return read_rope_reference(d, ref);
}

// Rounds a float to the compute dtype.
float round_to(DType t, float v) {
  switch (t) {
    case DType::float16: return half_to_float(float_to_half(v));
    case DType::bfloat16: return bf16_to_float(float_to_bf16(v));
    default: return v;
  }
}

Status run_checked(const OracleCall& call) {
  const Definition& d = call.definition;
  RopeReference plan;
  if (std::string why = supports(d); !why.empty()) return make_error(Code::unsupported, d.name + ": " + why);
  (void)read_rope_reference(d, plan);
  if (call.inputs.size() != 4 || call.outputs.size() != 2)
    return make_error(Code::invalid_argument, d.name + ": rope oracle: wrong number of arguments");
  for (const Arg& a : call.inputs)
    if (!a.tensor) return make_error(Code::invalid_argument, d.name + ": rope oracle: every input must be a tensor");
  const Tensor& q = *call.inputs[0].tensor;
  const Tensor& k = *call.inputs[1].tensor;
  const Tensor& cache = *call.inputs[2].tensor;
  const Tensor& pos = *call.inputs[3].tensor;
  if (q.rank() != 3 || k.rank() != 3 || cache.rank() != 2 || pos.rank() != 1)
    return make_error(Code::invalid_argument, d.name + ": rope oracle: tensor ranks differ from the definition");
  const std::int64_t tokens = q.dim(0);
  const std::int64_t max_seq = cache.dim(0);
  const std::int64_t cache_dim = cache.dim(1);

  // head_size / rotary_dim: axes, else reference constants.
  std::int64_t head_size = rope_constant(d, call.axes, "head_size").value_or(q.dim(2));
  std::int64_t rotary_dim = rope_constant(d, call.axes, "rotary_dim").value_or(cache_dim);
  if (q.dim(2) != head_size || k.dim(2) != head_size || k.dim(0) != tokens || pos.dim(0) != tokens)
    return make_error(Code::invalid_argument,
                      fmt::format("{}: rope oracle: q [{}, {}, {}] / k [{}, {}, {}] / positions [{}] do not fit head_size {}",
                                  d.name, q.dim(0), q.dim(1), q.dim(2), k.dim(0), k.dim(1), k.dim(2), pos.dim(0),
                                  head_size));
  if (rotary_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim > head_size || cache_dim != rotary_dim)
    return make_error(Code::invalid_argument,
                      fmt::format("{}: rope oracle: rotary_dim {} must be even, in (0, head_size {}] and equal "
                                  "cos_sin_cache's last dim {}",
                                  d.name, rotary_dim, head_size, cache_dim));
  for (int o = 0; o < 2; ++o) {
    const Tensor& in = o == 0 ? q : k;
    if (call.outputs[o].shape() != in.shape() || call.outputs[o].dtype() != in.dtype())
      return make_error(Code::invalid_argument, d.name + ": rope oracle: q_out / k_out must match q / k");
  }
  std::vector<std::int64_t> positions(static_cast<std::size_t>(tokens));
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::int64_t p = pos.dtype() == DType::int64 ? pos.data<std::int64_t>()[t] : pos.data<std::int32_t>()[t];
    if (p < 0 || p >= max_seq)
      return make_error(Code::invalid_argument,
                        fmt::format("{}: rope oracle: positions[{}] = {} is outside the cache [0, {})", d.name, t, p,
                                    max_seq));
    positions[static_cast<std::size_t>(t)] = p;
  }

  const DType compute = plan.upcast ? DType::float32 : q.dtype();
  const std::int64_t half = rotary_dim / 2;
  std::vector<float> cache_f = to_float(cache);
  for (int o = 0; o < 2; ++o) {
    const Tensor& in = o == 0 ? q : k;
    const std::int64_t heads = in.dim(1);
    std::vector<float> x = to_float(in);  // exact: q/k dtype widened to float32
    std::vector<float> y(x.size());
    for (std::int64_t t = 0; t < tokens; ++t) {
      const float* cs = cache_f.data() + positions[static_cast<std::size_t>(t)] * rotary_dim;
      for (std::int64_t h = 0; h < heads; ++h) {
        const float* xr = x.data() + (t * heads + h) * head_size;
        float* yr = y.data() + (t * heads + h) * head_size;
        for (std::int64_t i = 0; i < half; ++i) {
          float c = round_to(compute, cs[i]);
          float s = round_to(compute, cs[half + i]);
          std::int64_t i1 = plan.style == RopeStyle::neox ? i : 2 * i;
          std::int64_t i2 = plan.style == RopeStyle::neox ? half + i : 2 * i + 1;
          float x1 = xr[i1], x2 = xr[i2];
          float a = round_to(compute, x1 * c);
          float b = round_to(compute, x2 * s);
          float o1 = round_to(compute, a - b);
          float e = round_to(compute, x2 * c);
          float f = round_to(compute, x1 * s);
          float o2 = round_to(compute, e + f);
          yr[i1] = o1;
          yr[i2] = o2;
        }
        for (std::int64_t i = rotary_dim; i < head_size; ++i) yr[i] = xr[i];
      }
    }
    KB_TRY(store_float(y, call.outputs[o]));
  }
  return ok_status();
}

Status run(const OracleCall& call) {
  try {
    return run_checked(call);
  } catch (const std::bad_alloc&) {
    return make_error(Code::out_of_memory, call.definition.name + ": rope oracle: out of memory");
  }
}

}  // namespace
extern const OracleEntry rope_oracle{"rope", "rope_with_cos_sin_cache (NeoX / GPT-J)", supports, run};
}  // namespace kb::kernels
