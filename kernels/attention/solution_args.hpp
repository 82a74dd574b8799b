// What kb's CUDA attention solutions (kernels/{gqa,mla}_{paged,ragged}/cuda/
// *_solution.cpp) check the same way: the definition's signature in
// supports(), and the call's tensors and sm_scale in run(). Each solution
// keeps what is its own: op_type, the decode/prefill split, the head dims it
// handles, and the shapes of its call.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>

#include "harness/implementation.hpp"
#include "harness/per_definition.hpp"

namespace kb::kernels::attention_args {

inline std::string check_dtype(const Definition& d, const char* name, DType want) {
  const TensorSpec* s = d.find_tensor(name);
  if (!s) return fmt::format("no tensor {}", name);
  if (s->dtype != want) return fmt::format("{} is {}; this kernel needs {}", name, dtype_name(s->dtype), dtype_name(want));
  return {};
}

// s == want, without building a vector for `want`.
inline bool shape_is(const std::vector<std::int64_t>& s, std::initializer_list<std::int64_t> want) {
  return std::equal(s.begin(), s.end(), want.begin(), want.end());
}

// True when the axis is absent, a variable, or the constant `want`.
inline bool const_is(const Definition& d, const char* axis, std::int64_t want) {
  const Axis* a = d.find_axis(axis);
  return !a || a->kind != AxisKind::const_ || a->value == want;
}

// The signature every attention kernel of kb takes: bf16 tensors, int32 index
// tensors, optional int32 ones (kv_last_page_len), a scalar sm_scale; outputs
// "output" (bf16) and optionally "lse" (fp32). "" when the definition has it.
inline std::string check_signature(const Definition& d, std::initializer_list<const char*> bf16_inputs,
                                   std::initializer_list<const char*> int32_inputs,
                                   std::initializer_list<const char*> optional_int32_inputs = {}) {
  auto listed = [](std::initializer_list<const char*> names, const std::string& n) {
    return std::any_of(names.begin(), names.end(), [&](const char* m) { return n == m; });
  };
  for (auto names : {bf16_inputs, int32_inputs})
    for (const char* n : names)
      if (!d.find_input(n)) return fmt::format("input {} is missing", n);
  if (!d.find_input("sm_scale")) return "input sm_scale is missing";
  if (!d.find_output("output")) return "output 'output' is missing";
  for (const auto& s : d.inputs)
    if (!listed(bf16_inputs, s.name) && !listed(int32_inputs, s.name) && !listed(optional_int32_inputs, s.name) &&
        s.name != "sm_scale")
      return fmt::format("input {} is not one this kernel understands", s.name);
  for (const auto& s : d.outputs)
    if (s.name != "output" && s.name != "lse") return fmt::format("output {} is not one this kernel produces", s.name);
  for (const char* n : bf16_inputs)
    if (auto why = check_dtype(d, n, DType::bfloat16); !why.empty()) return why;
  if (auto why = check_dtype(d, "output", DType::bfloat16); !why.empty()) return why;
  for (const char* n : int32_inputs)
    if (auto why = check_dtype(d, n, DType::int32); !why.empty()) return why;
  for (const char* n : optional_int32_inputs)
    if (d.find_input(n))
      if (auto why = check_dtype(d, n, DType::int32); !why.empty()) return why;
  if (d.find_output("lse"))
    if (auto why = check_dtype(d, "lse", DType::float32); !why.empty()) return why;
  if (!d.find_input("sm_scale")->is_scalar()) return "sm_scale must be a scalar (shape null)";
  return {};
}

// num_qo_heads a multiple of num_kv_heads, where both are constants.
inline std::string check_head_groups(const Definition& d) {
  const Axis* hq = d.find_axis("num_qo_heads");
  const Axis* hkv = d.find_axis("num_kv_heads");
  if (hq && hkv && hq->kind == AxisKind::const_ && hkv->kind == AxisKind::const_ &&
      (hkv->value < 1 || hq->value % hkv->value != 0))
    return fmt::format("{} query heads over {} kv heads", hq->value, hkv->value);
  return {};
}

// The input tensor `name` of a call; nullptr when the definition has no such
// input or the call passed a scalar for it.
inline const cuda::DeviceTensor* input_tensor(const CudaCall& c, const char* name) {
  auto i = input_index(c.definition, name);
  return i ? c.inputs[*i].tensor : nullptr;
}

// The output `name` of a call; nullptr when the definition has none.
inline const cuda::DeviceTensor* output_tensor(const CudaCall& c, const char* name) {
  auto i = output_index(c.definition, name);
  return i ? &c.outputs[*i] : nullptr;
}

// The call's sm_scale as a double (a Python float or int).
inline Result<double> sm_scale(const CudaCall& c, std::string_view solution) {
  auto i = input_index(c.definition, "sm_scale");
  const cuda::DeviceArg* a = i ? &c.inputs[*i] : nullptr;
  if (!a || !a->scalar) return make_error(Code::invalid_argument, fmt::format("{}: sm_scale must be a scalar", solution));
  if (const auto* v = std::get_if<double>(&*a->scalar)) return *v;
  if (const auto* v = std::get_if<std::int64_t>(&*a->scalar)) return static_cast<double>(*v);
  return make_error(Code::invalid_argument, fmt::format("{}: sm_scale must be a number", solution));
}

// The checks every run() starts with: the definition is supported and the
// call has one argument per declared input and output.
// supports() is worked out once per solution and definition (it reads the
// reference, which allocates; engines call run() on their hot path).
inline Status check_call(const CudaCall& c, std::string_view solution, std::string (*supports)(const Definition&)) {
  if (std::string why = per_definition_of<std::string (*)(const Definition&), std::string>(supports).get(
          c.definition, supports);
      !why.empty())
    return make_error(Code::unsupported, fmt::format("{}: {}", solution, why));
  if (c.inputs.size() != c.definition.inputs.size() || c.outputs.size() != c.definition.outputs.size())
    return make_error(Code::invalid_argument, fmt::format("{}: wrong number of arguments", solution));
  return ok_status();
}

}  // namespace kb::kernels::attention_args
