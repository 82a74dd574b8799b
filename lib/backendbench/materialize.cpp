// Trace lines -> tensors (see materialize.hpp).
#include "backendbench/materialize.hpp"

#include <fmt/format.h>

#include <cstring>

namespace kb::backendbench {

std::uint64_t Rng::next() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
std::int64_t Rng::below(std::int64_t n) { return static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n)); }

const CallArg* Call::find(std::size_t pos, std::string_view name) const {
  if (pos < positional.size()) return &positional[pos];
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}
CallArg* Call::find(std::size_t pos, std::string_view name) {
  return const_cast<CallArg*>(static_cast<const Call*>(this)->find(pos, name));
}

namespace {
std::uint64_t fnv1a(std::string_view s, std::uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}
}  // namespace

std::uint64_t line_seed(std::uint64_t seed, std::string_view op, std::size_t line_index) {
  Rng r(seed ^ fnv1a(op) ^ (static_cast<std::uint64_t>(line_index) * 0xD1B54A32D192ED03ull));
  return r.next();
}

Result<HostTensor> materialize_tensor(const Value& v, Rng& rng, bool meta, std::int64_t max_elements,
                                      std::int64_t defer_above) {
  if (v.kind != Kind::tensor) return make_error(Code::invalid_argument, "not a tensor");
  std::vector<std::int64_t> strides = v.has_strides() ? v.strides : contiguous_strides(v.shape);
  if (strides.size() != v.shape.size())
    return make_error(Code::invalid_data, fmt::format("{} strides for a tensor of rank {}", strides.size(), v.shape.size()));
  HostTensor probe;
  probe.shape = v.shape;
  probe.strides = strides;
  if (probe.span() > max_elements)
    return make_error(Code::limit_exceeded,
                      fmt::format("tensor {} needs {} storage elements, over the limit of {}", shape_text(v.shape),
                                  probe.span(), max_elements));
  if (!meta && defer_above > 0 && probe.span() > defer_above && (is_floating(v.dtype) || v.dtype == Dtype::b8)) {
    HostTensor t = empty_strided(v.dtype, v.shape, strides, true);
    t.storage = std::make_shared<std::vector<std::byte>>();
    t.device_fill = rng.state();
    rng.skip(static_cast<std::uint64_t>(probe.span()));  // one draw per element, as below
    return t;
  }
  HostTensor t = empty_strided(v.dtype, v.shape, strides, meta);
  if (meta) return t;
  const std::int64_t n = t.span();
  const std::size_t es = dtype_size(t.dtype);
  for (std::int64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case Dtype::b8: t.store(i, static_cast<double>(rng.next() >> 63)); break;
      case Dtype::u8: t.store(i, static_cast<double>(rng.below(10))); break;
      case Dtype::i8: case Dtype::i16: case Dtype::i32: case Dtype::i64:
        t.store(i, static_cast<double>(rng.below(19) - 9));
        break;
      case Dtype::c32: case Dtype::c64: case Dtype::c128: {
        // Two parts, each uniform in [0, 1), in the part's precision.
        std::byte* p = t.storage->data() + static_cast<std::size_t>(i) * es;
        for (int part = 0; part < 2; ++part) {
          double u = rng.uniform();
          if (t.dtype == Dtype::c128) {
            std::memcpy(p + part * 8, &u, 8);
          } else if (t.dtype == Dtype::c64) {
            float f = static_cast<float>(u);
            std::memcpy(p + part * 4, &f, 4);
          } else {
            HostTensor h = empty_tensor(Dtype::f16, {1});
            h.store(0, u);
            std::memcpy(p + part * 2, h.storage->data(), 2);
          }
        }
        break;
      }
      default: t.store(i, rng.uniform()); break;
    }
  }
  return t;
}

namespace {
Result<CallArg> materialize_arg(const Value& v, Rng& rng, bool meta, std::int64_t defer_above) {
  CallArg a;
  a.value = &v;
  if (v.kind == Kind::tensor) {
    auto t = materialize_tensor(v, rng, meta, std::int64_t{1} << 34, defer_above);
    if (!t) return std::move(t).error();
    a.tensor = std::move(*t);
  } else if (v.kind == Kind::list || v.kind == Kind::tuple) {
    for (const Value& e : v.children) {
      if (e.kind != Kind::tensor) continue;
      auto t = materialize_tensor(e, rng, meta, std::int64_t{1} << 34, defer_above);
      if (!t) return std::move(t).error();
      a.tensors.push_back(std::move(*t));
    }
  }
  return a;
}
}  // namespace

Result<Call> materialize_call(std::string_view op, const Args& args, std::uint64_t seed, std::size_t line_index,
                              bool meta, std::int64_t defer_above) {
  Call c;
  c.op = op;
  c.meta = meta;
  Rng rng(line_seed(seed, op, line_index));
  for (std::size_t i = 0; i < args.positional.size(); ++i) {
    auto a = materialize_arg(args.positional[i], rng, meta, defer_above);
    if (!a) return make_error(a.error().code, fmt::format("argument {}: {}", i, a.error().message));
    c.positional.push_back(std::move(*a));
  }
  for (const Kwarg& kw : args.kwargs) {
    auto a = materialize_arg(kw.value, rng, meta, defer_above);
    if (!a) return make_error(a.error().code, fmt::format("argument {}: {}", kw.key.str_value, a.error().message));
    c.kwargs.emplace_back(kw.key.str_value, std::move(*a));
  }
  return c;
}

Result<Call> materialize_prepared(const OpInfo& info, const Args& args, std::uint64_t seed, std::size_t line_index,
                                  std::int64_t defer_above) {
  auto call = materialize_call(info.name, args, seed, line_index, false, defer_above);
  if (!call) return make_error(call.error().code, "materialize: " + call.error().message);
  Rng rng(line_seed(seed, info.name, line_index) ^ 0xA5A5A5A5A5A5A5A5ull);
  if (auto st = prepare_call(info, *call, rng); !st) return make_error(st.error().code, "prepare: " + st.error().message);
  return call;
}

}  // namespace kb::backendbench
