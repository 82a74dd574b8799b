// Internal to capi/: the handle types behind kb.h's opaque pointers, the
// thread-local last error and the exception firewall every entry point uses.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <cstdint>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "common/tuning.hpp"
#include "expr/expr.hpp"
#include "kb/kb.h"
#include "schema/model.hpp"

// ---- Handles ----------------------------------------------------------------
// Immutable after creation; everything an accessor hands out is stored here so
// that borrowed pointers stay valid until destroy.

namespace kb::capi {

// What a context gives the calls made with it: its resolved settings (null:
// the process default at each call) and its log callback. Handles that run
// kernels later without a context (kb_dispatch) keep a copy.
struct CallSettings {
  std::shared_ptr<const kb::tuning::Settings> settings;
  kb_log_fn log = nullptr;
  void* log_user_data = nullptr;
};

// For the duration of a C entry point: the context's settings and log
// callback become the calling thread's (kb::tuning::current(), kb::log::emit).
class CallScope {
 public:
  explicit CallScope(const CallSettings& call) noexcept;
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  static void deliver(kb::tuning::LogLevel level, const char* message, void* call) noexcept;
  kb::tuning::Scope scope_;
};

}  // namespace kb::capi

struct kb_context {
  kb_context_options options;  // flags only: tuning is resolved into `call`, not kept
  kb::capi::CallSettings call;
};

struct kb_definition {
  kb::Definition def;
  std::string json;
  // kb_tensor_info.shape: per tensor (inputs then outputs), pointers into def.
  std::vector<std::vector<const char*>> shape_ptrs;
  // Per tensor (inputs then outputs), per dimension: index into def.axes (-1 if undeclared).
  std::vector<std::vector<int>> dim_axis;
  // Constraints parsed once at load; nullopt where parsing failed.
  std::vector<std::optional<kb::expr::Expression>> constraints;
  // Per constraint: true when it reads const axes only and held at load, so a call need not
  // evaluate it again (evaluating allocates; kb_definition_check_tensors is on engines' hot path).
  std::vector<bool> holds_for_every_call;
};

struct kb_workload {
  kb::Workload workload;
  std::optional<std::string> definition;  // set when read from a Trace line
  std::string json;
};

struct kb_solution {
  kb::Solution solution;
  std::string json;
};

struct kb_result {
  kb::Trace trace;
  std::string json;
};

namespace kb {
struct BenchOptions;
struct Implementation;
}

namespace kb::capi {

// Records `message` (made one line) as this thread's last error; returns status.
kb_status fail(kb_status status, std::string_view message) noexcept;
kb_status fail(const kb::Error& error) noexcept;
// "<function>: argument `<name>` is NULL"
kb_status null_argument(const char* function, const char* name) noexcept;
// "<function>: <what> index <i> is out of range (<n> present)"
kb_status bad_index(const char* function, const char* what, std::size_t index, std::size_t count) noexcept;
// "<function>: <arg>->struct_size is <got> but must be at least <need> (initialize it with <init>)"
kb_status short_struct(const char* function, const char* arg, std::size_t got, std::size_t need,
                       const char* init) noexcept;

inline kb_status to_status(kb::Code code) noexcept { return static_cast<kb_status>(static_cast<int>(code)); }

// The exception firewall: runs body (returning kb_status) and turns anything
// thrown into OUT_OF_MEMORY or INTERNAL with a message.
kb_status on_exception(const char* function) noexcept;

template <class F>
kb_status guarded(const char* function, F&& body) noexcept {
  try {
    return std::forward<F>(body)();
  } catch (...) {
    return on_exception(function);
  }
}

// For accessors returning a pointer or a count: exceptions give `fallback`.
template <class T, class F>
T guarded_value(const char* function, T fallback, F&& body) noexcept {
  try {
    return std::forward<F>(body)();
  } catch (...) {
    on_exception(function);
    return fallback;
  }
}

// An enum field or parameter that came from the caller, as its underlying
// integer. A C caller may store any integer in it, and loading a value outside
// the enum's range as the enum type is undefined behaviour; the bytes are
// copied instead, as the signed integer a C caller stores (C enums are int),
// and the caller validates the integer before using it as E.
template <class E>
std::int64_t enum_bits(const E& value) noexcept {
  static_assert(std::is_enum_v<E>);
  std::make_signed_t<std::underlying_type_t<E>> bits;
  std::memcpy(&bits, &value, sizeof bits);
  return static_cast<std::int64_t>(bits);
}

// The DLPack device type of a caller's tensor, read as enum_bits does.
inline std::int64_t device_type_of(const DLTensor& t) noexcept { return enum_bits(t.device.device_type); }

// Reading JSON from the caller: (pointer, length) -> string_view, refusing NULL.
constexpr std::string_view memory_origin = "<memory>";

// An input struct that has grown since version 1: the caller's copy, read only
// as far as its struct_size reaches, over `defaults` (which holds the INIT
// values). A caller built against an older header keeps working; a
// struct_size below `version1_size` is rejected.
template <class T>
kb_status read_grown_struct(const char* function, const char* arg, const T* in, std::size_t version1_size,
                            const char* init, T& defaults) noexcept {
  if (in->struct_size < version1_size) return short_struct(function, arg, in->struct_size, version1_size, init);
  std::memcpy(static_cast<void*>(&defaults), in, std::min(in->struct_size, sizeof(T)));
  defaults.struct_size = sizeof(T);
  return KB_OK;
}

// kb_benchmark_options as version 1 had it (up to required_matched_ratio).
inline constexpr std::size_t kBenchmarkOptionsV1Size =
    offsetof(kb_benchmark_options, required_matched_ratio) + sizeof(double);

// The caller's kb_benchmark_options (nullable: the defaults), read as far as
// its struct_size reaches, as kb's BenchOptions (run.cpp).
kb_status read_benchmark_options(const char* function, const kb_benchmark_options* opts, BenchOptions& out);

// Small fixed buffer with a heap fallback: definitions have a handful of axes,
// so checking a call's tensors (and holding its axis values) allocates nothing.
template <class T, std::size_t N>
class SmallBuf {
 public:
  explicit SmallBuf(std::size_t n) : size_(n) {
    if (n > N) {
      heap_ = std::make_unique<T[]>(n);
      p_ = heap_.get();
    }
  }
  SmallBuf(const SmallBuf&) = delete;
  SmallBuf& operator=(const SmallBuf&) = delete;
  T& operator[](std::size_t i) { return p_[i]; }
  const T& operator[](std::size_t i) const { return p_[i]; }
  std::span<T> span() { return {p_, size_}; }
  std::span<const T> span() const { return {p_, size_}; }

 private:
  T stack_[N] = {};
  std::unique_ptr<T[]> heap_;
  T* p_ = stack_;
  std::size_t size_;
};

// A call's axis values (kb_check_result.axis_values), definition axis order.
using CallAxes = SmallBuf<std::int64_t, 32>;

// Runs `implementation` on tensors kb_definition_check_tensors() accepted, with
// the axis values it bound, in definition axis order (run.cpp; kb_solution_run
// and kb_dispatch_run). The GPU path keeps its bookkeeping in per-thread
// buffers reused from call to call: once they have grown to a call's size, a
// repeated call allocates nothing on the host. Messages begin with `function`.
// `seed` reaches the solution (sampling draws from it; other solutions ignore it).
kb_status run_checked(const char* function, const kb::Definition& d, std::span<const std::int64_t> axis_values,
                      const kb::Implementation& implementation, const DLTensor* const* inputs, size_t n_inputs,
                      const DLTensor* const* outputs, size_t n_outputs, void* stream, std::uint64_t seed = 0);

}  // namespace kb::capi

// Early return from an entry point when a pointer argument is NULL.
#define KB_CAPI_REQUIRE(ptr)                                            \
  do {                                                                  \
    if ((ptr) == nullptr) return ::kb::capi::null_argument(__func__, #ptr); \
  } while (0)

// Same, for accessors returning `fallback` (NULL or 0).
#define KB_CAPI_REQUIRE_OR(ptr, fallback)                  \
  do {                                                     \
    if ((ptr) == nullptr) {                                \
      ::kb::capi::null_argument(__func__, #ptr);           \
      return fallback;                                     \
    }                                                      \
  } while (0)

// Checks out->struct_size against the version-1 size of its type. (While a
// struct has only its version-1 fields that is sizeof; once it grows, the
// minimum stays the version-1 size: offsetof + size of its last v1 field.)
#define KB_CAPI_REQUIRE_STRUCT(out, type, init)                                              \
  do {                                                                                       \
    if ((out)->struct_size < sizeof(type))                                                   \
      return ::kb::capi::short_struct(__func__, #out, (out)->struct_size, sizeof(type), init);     \
  } while (0)
