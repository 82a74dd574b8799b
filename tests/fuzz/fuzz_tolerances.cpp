// libFuzzer target for the tolerance file of `kb bench --tolerances` (TolerancePolicy::parse,
// lib/harness/judge.hpp): any bytes give a policy or are refused with a message naming the file;
// every tolerance a policy gives, for any op type, name or low-bit definition, has non-negative
// finite atol and rtol and a matched ratio from 0 to 1, and a definition's own entry wins over a
// name_contains one as FlashInfer-Bench's precedence says.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "harness/judge.hpp"

namespace {

void check(const kb::Tolerance& t) {
  if (!(t.atol >= 0) || !(t.rtol >= 0) || !std::isfinite(t.atol) || !std::isfinite(t.rtol)) std::abort();
  if (!(t.required_matched_ratio >= 0 && t.required_matched_ratio <= 1)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto policy = kb::TolerancePolicy::parse(text, "fuzz.json");
  if (!policy) {
    if (policy.error().message.rfind("fuzz.json", 0) != 0) std::abort();
    return 0;
  }
  kb::Definition low_bit;
  low_bit.op_type = "moe";
  low_bit.name = "trtllm_fp4_block_scale_moe_topk1_e16_h5120_i8192";
  low_bit.tags = {"quantization:float4_e2m1fn_mxfp4"};
  check(policy->for_definition(low_bit));
  for (std::string_view op : {"gemm", "moe", "rmsnorm", ""})
    for (std::string_view name : {"gemm_n128_k2048", "moe_fp8_block_scale_x", "rmsnorm_h4096", "", "a"})
      check(policy->for_definition(op, name));
  return 0;
}
