// libFuzzer target for lib/expr: any byte sequence must parse or be refused
// cleanly, and whatever parses must evaluate without UB against a small
// fixed world (a few axes, an int tensor with contents, a shape-only tensor).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "expr/expr.hpp"

namespace {

const kb::expr::MapEnvironment& world() {
  static const kb::expr::MapEnvironment env = [] {
    using kb::expr::Value;
    kb::expr::MapEnvironment e;
    e.set_scalar("a", Value::integer(3));
    e.set_scalar("b", Value::integer(-7));
    e.set_scalar("n", Value::integer(0));
    e.set_scalar("big", Value::integer(INT64_MAX));
    e.set_scalar("small", Value::integer(INT64_MIN));
    e.set_scalar("r", Value::floating(0.5));
    e.set_scalar("t", Value::boolean(true));
    e.set_tensor("v", {4}, std::vector<std::int64_t>{0, 3, 7, 12});
    e.set_tensor("m", {2, 3}, std::vector<std::int64_t>{1, -2, 3, INT64_MIN, 5, INT64_MAX});
    e.set_tensor("z", {0}, std::vector<std::int64_t>{});
    e.set_tensor("s", {}, std::vector<std::int64_t>{9});
    e.set_tensor("w", {5, 16, 512});  // shape only
    return e;
  }();
  return env;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = kb::expr::parse(text);
  if (!parsed.ok()) {
    // Only these codes are legitimate for bad text.
    const kb::Code c = parsed.error().code;
    if (c != kb::Code::parse_error && c != kb::Code::limit_exceeded) std::abort();
    if (parsed.error().message.empty()) std::abort();
    return 0;
  }
  const kb::expr::Expression& e = *parsed;
  if (e.text() != text) std::abort();
  (void)e.structure();
  const kb::expr::Outcome o = kb::expr::evaluate(e, world());
  // Verdicts and details must agree with each other.
  switch (o.verdict) {
    case kb::expr::Verdict::holds:
      if (!o.value || !o.value->truthy() || !o.detail.empty()) std::abort();
      break;
    case kb::expr::Verdict::violated:
      if (!o.value || o.value->truthy() || o.detail.empty()) std::abort();
      break;
    case kb::expr::Verdict::unchecked:
      if (o.value || o.detail.empty()) std::abort();
      break;
  }
  return 0;
}
