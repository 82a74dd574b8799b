#include "rope_reference.hpp"

#include <cmath>

#include "oracle/oracle.hpp"

namespace kb::kernels {
namespace {

std::string squeezed(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != ' ' && c != '\t') out.push_back(c);
  return out;
}

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

}  // namespace

std::string read_rope_reference(const Definition& d, RopeReference& out) {
  const std::string r = squeezed(d.reference);
  const bool neox = lower(r).find("neox") != std::string::npos;
  const bool gptj = r.find("[...,::2]") != std::string::npos && r.find("[...,1::2]") != std::string::npos;
  if (neox == gptj)
    return neox ? "rope: the reference mentions both NeoX and interleaved (GPT-J) layouts"
                : "rope: cannot tell the rotation layout from the reference (neither 'neox' nor x[..., ::2] / x[..., 1::2])";
  if (r.find("cos_sin_cache[positions]") == std::string::npos)
    return "rope: the reference does not index cos_sin_cache by positions";
  if (r.find("chunk(2") == std::string::npos)
    return "rope: the reference does not split the cache row into cos and sin halves";
  out.style = neox ? RopeStyle::neox : RopeStyle::gptj;
  out.upcast = r.find("q.to(torch.float32)") != std::string::npos || r.find("q.float()") != std::string::npos;
  return {};
}

std::optional<std::int64_t> rope_reference_constant(const Definition& d, const char* name) {
  auto v = reference_constant(d, name);
  if (!v || *v != std::floor(*v)) return std::nullopt;
  return static_cast<std::int64_t>(*v);
}

std::optional<std::int64_t> rope_constant(const Definition& d, const AxisValues& axes, const char* name) {
  if (auto v = axes.get(name)) return v;
  return rope_reference_constant(d, name);
}

std::optional<std::int64_t> rope_constant(const Definition& d, const char* name) {
  if (const Axis* a = d.find_axis(name); a && a->kind == AxisKind::const_) return a->value;
  return rope_reference_constant(d, name);
}

}  // namespace kb::kernels
