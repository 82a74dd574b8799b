// Helpers shared by the gdn / mamba_ssu / dsa_paged tests: shipped
// definitions with their constants shrunk, random tensors, and one oracle
// call with every output allocated from the bound axes.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "inputs/inputs.hpp"
#include "oracle/oracle.hpp"
#include "schema/io.hpp"
#include "tensor/convert.hpp"

namespace linear_test {

namespace fs = std::filesystem;

inline std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

inline fs::path definitions_dir() {
  return fs::path(env_or("KB_SHARED_DIR", "../shared")) / "flashinfer-trace" / "definitions";
}

inline kb::Definition shipped(const std::string& op, const std::string& name) {
  auto p = definitions_dir() / op / (name + ".json");
  auto d = kb::read_definition_file(p.string());
  INFO(p.string());
  REQUIRE(d.ok());
  return *d;
}

inline void set_const(kb::Definition& d, const std::string& axis, std::int64_t v) {
  for (auto& a : d.axes)
    if (a.name == axis) {
      REQUIRE(a.kind == kb::AxisKind::const_);
      a.value = v;
      return;
    }
  FAIL("no axis " << axis);
}

inline kb::AxisValues bind(const kb::Definition& d, const std::map<std::string, std::int64_t>& vars) {
  kb::AxisValues ax;
  for (const auto& a : d.axes) {
    if (a.kind == kb::AxisKind::const_) {
      ax.values.emplace_back(a.name, a.value);
    } else {
      auto it = vars.find(a.name);
      REQUIRE_MESSAGE(it != vars.end(), "unbound axis " << a.name);
      ax.values.emplace_back(a.name, it->second);
    }
  }
  return ax;
}

inline kb::Tensor make(kb::DType t, std::vector<std::int64_t> shape, const std::vector<float>& v) {
  auto x = kb::Tensor::allocate(t, std::move(shape));
  REQUIRE(x.ok());
  REQUIRE(static_cast<std::int64_t>(v.size()) == x->numel());
  REQUIRE(kb::store_float(v, *x).ok());
  return std::move(*x);
}

inline kb::Tensor make_ints(kb::DType t, std::vector<std::int64_t> shape, const std::vector<std::int64_t>& v) {
  auto x = kb::Tensor::allocate(t, std::move(shape));
  REQUIRE(x.ok());
  REQUIRE(static_cast<std::int64_t>(v.size()) == x->numel());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t == kb::DType::int64) x->data<std::int64_t>()[i] = v[i];
    else x->data<std::int32_t>()[i] = static_cast<std::int32_t>(v[i]);
  }
  return std::move(*x);
}

inline std::vector<float> uniform(std::mt19937& rng, std::size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// The values a tensor of dtype t holds after rounding v.
inline std::vector<float> rounded(kb::DType t, const std::vector<float>& v) {
  auto x = make(t, {static_cast<std::int64_t>(v.size())}, v);
  return kb::to_float(x);
}

// One oracle call. `inputs`: name -> tensor, or absent (None); `scalars`:
// name -> value. Outputs are allocated from the bound axes and poisoned.
struct Call {
  Call(const kb::Definition& def, kb::AxisValues ax) : d(def), axes(std::move(ax)) {}
  const kb::Definition& d;
  kb::AxisValues axes;
  std::map<std::string, kb::Tensor> tensors;
  std::map<std::string, double> scalars;
  std::vector<kb::Tensor> outputs;

  kb::Status run() {
    std::vector<kb::Arg> args(d.inputs.size());
    for (std::size_t i = 0; i < d.inputs.size(); ++i) {
      const auto& n = d.inputs[i].name;
      if (auto it = tensors.find(n); it != tensors.end()) args[i].tensor = &it->second;
      if (auto it = scalars.find(n); it != scalars.end()) args[i].scalar = kb::ScalarValue{it->second};
    }
    auto o = kb::allocate_outputs(d, axes);
    REQUIRE(o.ok());
    outputs = std::move(*o);
    for (auto& t : outputs) t.fill_bytes(0xFF);
    auto oracle = kb::find_oracle(d);
    REQUIRE_MESSAGE(oracle.ok(), (oracle.ok() ? "" : oracle.error().message));
    kb::OracleCall call{d, axes, args, outputs, 0};
    auto st = (*oracle)->run(call);
    for (const auto& t : outputs) CHECK(t.guards_intact());
    return st;
  }
  const kb::Tensor& out(const std::string& name) const { return outputs[*kb::output_index(d, name)]; }
};

// Builds a packed fp8 key cache ([pages, ps, 1, dim + 4] int8) from float
// keys, as FlashInfer-Bench does (per-token scale amax / 448); returns the
// dequantized keys too.
inline kb::Tensor pack_keys(const std::vector<float>& keys, std::int64_t pages, std::int64_t ps, std::int64_t dim,
                 std::vector<float>* dequant) {
  auto t = kb::Tensor::allocate(kb::DType::int8, {pages, ps, 1, dim + 4});
  REQUIRE(t.ok());
  auto* bytes = reinterpret_cast<std::uint8_t*>(t->bytes());
  dequant->assign(pages * ps * dim, 0.0f);
  for (std::int64_t p = 0; p < pages; ++p)
    for (std::int64_t s = 0; s < ps; ++s) {
      const float* k = &keys[(p * ps + s) * dim];
      float amax = 1e-4f;
      for (std::int64_t e = 0; e < dim; ++e) amax = std::max(amax, std::fabs(k[e]));
      const float scale = amax / 448.0f;
      for (std::int64_t e = 0; e < dim; ++e) {
        std::uint8_t q = kb::float_to_fp8_e4m3fn(k[e] * (1.0f / scale));
        bytes[p * ps * (dim + 4) + s * dim + e] = q;
        (*dequant)[(p * ps + s) * dim + e] = kb::fp8_e4m3fn_to_float(q) * scale;
      }
      std::memcpy(bytes + p * ps * (dim + 4) + ps * dim + s * 4, &scale, 4);
    }
  return std::move(*t);
}

}  // namespace linear_test
