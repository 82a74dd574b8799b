// Errors as values: every fallible function in lib/ returns kb::Result<T>.
// The C ABI (capi/) maps Error::code onto kb_status and Error::message onto
// kb_last_error(); nothing in lib/ throws across a public boundary or prints.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace kb {

// Mirrors kb_status in include/kb/kb.h (values pinned there).
enum class Code : int {
  ok = 0,
  invalid_argument = 1,  // caller passed something unusable (NULL, bad enum)
  parse_error = 2,       // text is not well-formed (JSON, expression, header)
  invalid_data = 3,      // well-formed but breaks a rule of the format
  io_error = 4,          // file cannot be read or written
  not_found = 5,         // named thing does not exist
  unsupported = 6,       // valid request kb cannot serve (yet)
  limit_exceeded = 7,    // input larger or deeper than kb accepts
  out_of_memory = 8,
  no_cuda_device = 9,    // built with CUDA but no usable device/driver
  cuda_error = 10,
  abi_mismatch = 11,
  internal = 12,
};

const char* code_name(Code code) noexcept;

struct Error {
  Code code = Code::internal;
  std::string message;
};

// Minimal std::expected stand-in (C++20 has none).
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error error) : v_(std::move(error)) {}

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

struct Unit {};
using Status = Result<Unit>;
inline Status ok_status() { return Unit{}; }

inline Error make_error(Code code, std::string message) {
  return Error{code, std::move(message)};
}

}  // namespace kb

// Propagate an error from an expression returning kb::Result / kb::Status.
#define KB_TRY(expr)                                    \
  do {                                                  \
    auto kb_try_r_ = (expr);                            \
    if (!kb_try_r_.ok()) return std::move(kb_try_r_).error(); \
  } while (0)
