// A call built from trace text with its tensors' storage set by hand, run
// through kb's CPU oracle; shared by the ATen oracle tests.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backendbench/materialize.hpp"
#include "backendbench/ops.hpp"
#include "backendbench/tensor.hpp"

namespace kb_test {

namespace bb = kb::backendbench;
using bb::HostTensor;

// One call built from trace text, with the tensors' storage elements set by hand.
struct Fixture {
  bb::Args args;
  bb::Call call;
  std::vector<HostTensor> outs;
  std::string error;

  Fixture(const std::string& op, const std::string& text, const std::vector<std::vector<double>>& storage = {}) {
    auto a = bb::parse_args(text);
    REQUIRE_MESSAGE(a.ok(), text);
    args = std::move(*a);
    auto c = bb::materialize_call(op, args, 1, 0, false);
    REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.error().message));
    call = std::move(*c);
    std::size_t k = 0;
    auto fill = [&](HostTensor& t) {
      if (k >= storage.size()) return;
      REQUIRE(static_cast<std::int64_t>(storage[k].size()) == t.span());
      for (std::size_t i = 0; i < storage[k].size(); ++i) t.store(static_cast<std::int64_t>(i), storage[k][i]);
      ++k;
    };
    for (auto& p : call.positional) {
      if (p.tensor) fill(*p.tensor);
      for (auto& t : p.tensors) fill(t);
    }
    for (auto& kv : call.kwargs)
      if (kv.second.tensor) fill(*kv.second.tensor);
    const bb::OpInfo* info = bb::find_aten_op(op);
    REQUIRE_MESSAGE(info != nullptr, op);
    auto r = bb::run_cpu(*info, call);
    if (r) outs = std::move(*r);
    else error = r.error().message;
  }
  const HostTensor& out(std::size_t k = 0) {
    REQUIRE_MESSAGE(error.empty(), error);
    REQUIRE(k < outs.size());
    return outs[k];
  }
};

inline std::vector<double> values(const HostTensor& t) { return bb::to_doubles(t); }

inline void check_values(const HostTensor& t, const std::vector<double>& want, double tol = 1e-6) {
  auto got = values(t);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    if (std::isnan(want[i])) CHECK(std::isnan(got[i]));
    else CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol));
  }
}


}  // namespace kb_test
