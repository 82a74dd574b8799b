// What kb reads from a rope definition's PyTorch reference, shared by the CPU
// oracle (oracle.cpp), the GPU oracle (gpu_oracle.cu) and kb_cuda_rope
// (cuda/rope_solution.cpp), so the three agree on one reading.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "oracle/oracle.hpp"
#include "schema/model.hpp"

namespace kb::kernels {

// NeoX: x1 = x[:r/2], x2 = x[r/2:]; GPT-J: x1 = x[..., ::2], x2 = x[..., 1::2].
enum class RopeStyle { neox, gptj };

struct RopeReference {
  RopeStyle style = RopeStyle::neox;
  bool upcast = true;  // the math in float32 (q.to(torch.float32) / q.float()), else in q's dtype
};

// Fills `out` and returns "", or says why the reference cannot be read: the
// layout ("neox" in it, or the x[..., ::2] / x[..., 1::2] slices: exactly one
// of the two), cos_sin_cache indexed by positions, the row chunked into cos
// and sin halves.
std::string read_rope_reference(const Definition& d, RopeReference& out);

// An integral constant of the reference (`head_size = 128`), if it has one.
std::optional<std::int64_t> rope_reference_constant(const Definition& d, const char* name);

// head_size / rotary_dim as the oracles read them: the call's axis of that
// name (the definition's axes are what its tensors have), else the reference's
// constant.
std::optional<std::int64_t> rope_constant(const Definition& d, const AxisValues& axes, const char* name);
// The same before a call: the definition's const axis of that name, else the reference's constant.
std::optional<std::int64_t> rope_constant(const Definition& d, const char* name);

}  // namespace kb::kernels
