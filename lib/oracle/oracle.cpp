#include "oracle/oracle.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>

namespace kb {

// Each kernels/<op_type>/oracle.cpp defines one entry.
namespace kernels {
extern const OracleEntry gemm_oracle;
extern const OracleEntry rmsnorm_oracle;
extern const OracleEntry silu_and_mul_oracle;
extern const OracleEntry rope_oracle;
extern const OracleEntry sampling_oracle;
extern const OracleEntry gqa_paged_oracle;
extern const OracleEntry gqa_ragged_oracle;
extern const OracleEntry mla_paged_oracle;
extern const OracleEntry mla_ragged_oracle;
extern const OracleEntry moe_oracle;
extern const OracleEntry gdn_oracle;
extern const OracleEntry mamba_ssu_oracle;
extern const OracleEntry dsa_paged_oracle;
Result<ExpertChoices> moe_expert_choices(const Definition& d, std::span<const Arg> inputs);  // kernels/moe/routing.cpp
}  // namespace kernels

std::span<const OracleEntry> oracles() {
  static const OracleEntry table[] = {
      kernels::gemm_oracle,      kernels::rmsnorm_oracle,    kernels::silu_and_mul_oracle, kernels::rope_oracle,
      kernels::sampling_oracle,  kernels::gqa_paged_oracle,  kernels::gqa_ragged_oracle,
      kernels::mla_paged_oracle, kernels::mla_ragged_oracle,
      kernels::moe_oracle,
      kernels::gdn_oracle,       kernels::mamba_ssu_oracle,  kernels::dsa_paged_oracle,
  };
  return table;
}

Result<ExpertChoices> moe_expert_choices(const Definition& d, std::span<const Arg> inputs) {
  return kernels::moe_expert_choices(d, inputs);
}

Result<const OracleEntry*> find_oracle(const Definition& d) {
  std::string why;
  for (const auto& e : oracles()) {
    if (e.op_type != d.op_type) continue;
    why = e.supports(d);
    if (why.empty()) return &e;
  }
  if (why.empty()) why = fmt::format("no oracle yet for op_type {}", d.op_type);
  return make_error(Code::unsupported, fmt::format("{}: {}", d.name, why));
}

std::optional<std::int64_t> AxisValues::get(std::string_view name) const {
  for (const auto& [k, v] : values)
    if (k == name) return v;
  return std::nullopt;
}

std::optional<double> reference_constant(const Definition& d, std::string_view name) {
  std::string_view src = d.reference;
  std::size_t pos = 0;
  while (pos < src.size()) {
    std::size_t end = src.find('\n', pos);
    if (end == std::string_view::npos) end = src.size();
    std::string_view line = src.substr(pos, end - pos);
    pos = end + 1;
    std::size_t i = 0;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (line.substr(i, name.size()) != name) continue;
    i += name.size();
    if (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_')) continue;
    while (i < line.size() && line[i] == ' ') ++i;
    if (i >= line.size() || line[i] != '=' || (i + 1 < line.size() && line[i + 1] == '=')) continue;
    ++i;
    std::string rest(line.substr(i));
    const char* begin = rest.c_str();
    while (*begin == ' ') ++begin;
    char* stop = nullptr;
    double v = std::strtod(begin, &stop);
    if (stop == begin) continue;
    while (*stop == ' ' || *stop == '\t' || *stop == '\r') ++stop;  // CRLF references end lines in '\r'
    if (*stop != '\0' && *stop != '#') continue;  // an expression, not a plain number
    return v;
  }
  return std::nullopt;
}

std::optional<std::size_t> input_index(const Definition& d, std::string_view name) {
  for (std::size_t i = 0; i < d.inputs.size(); ++i)
    if (d.inputs[i].name == name) return i;
  return std::nullopt;
}

std::optional<std::size_t> output_index(const Definition& d, std::string_view name) {
  for (std::size_t i = 0; i < d.outputs.size(); ++i)
    if (d.outputs[i].name == name) return i;
  return std::nullopt;
}

std::optional<double> scalar_as_double(const Arg& a) {
  if (!a.scalar) return std::nullopt;
  return std::visit([](auto v) { return static_cast<double>(v); }, *a.scalar);
}

}  // namespace kb
