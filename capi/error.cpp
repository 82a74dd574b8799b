// The error model (thread-local last error, status names, the exception
// firewall), version queries and the small enum conversions of kb.h.
#include <fmt/format.h>

#include <cstring>
#include <exception>

#include "capi.hpp"
#include "common/printable.hpp"
#include "schema/dtype.hpp"

// kb.h pins these values; the internal enums must agree.
static_assert(KB_OK == static_cast<int>(kb::Code::ok));
static_assert(KB_ERROR_INVALID_ARGUMENT == static_cast<int>(kb::Code::invalid_argument));
static_assert(KB_ERROR_PARSE == static_cast<int>(kb::Code::parse_error));
static_assert(KB_ERROR_INVALID_DATA == static_cast<int>(kb::Code::invalid_data));
static_assert(KB_ERROR_IO == static_cast<int>(kb::Code::io_error));
static_assert(KB_ERROR_NOT_FOUND == static_cast<int>(kb::Code::not_found));
static_assert(KB_ERROR_UNSUPPORTED == static_cast<int>(kb::Code::unsupported));
static_assert(KB_ERROR_LIMIT == static_cast<int>(kb::Code::limit_exceeded));
static_assert(KB_ERROR_OUT_OF_MEMORY == static_cast<int>(kb::Code::out_of_memory));
static_assert(KB_ERROR_NO_CUDA_DEVICE == static_cast<int>(kb::Code::no_cuda_device));
static_assert(KB_ERROR_CUDA == static_cast<int>(kb::Code::cuda_error));
static_assert(KB_ERROR_ABI_MISMATCH == static_cast<int>(kb::Code::abi_mismatch));
static_assert(KB_ERROR_INTERNAL == static_cast<int>(kb::Code::internal));

static_assert(KB_DTYPE_FLOAT32 == static_cast<int>(kb::DType::float32));
static_assert(KB_DTYPE_FLOAT16 == static_cast<int>(kb::DType::float16));
static_assert(KB_DTYPE_BFLOAT16 == static_cast<int>(kb::DType::bfloat16));
static_assert(KB_DTYPE_FLOAT8_E4M3FN == static_cast<int>(kb::DType::float8_e4m3fn));
static_assert(KB_DTYPE_FLOAT8_E5M2 == static_cast<int>(kb::DType::float8_e5m2));
static_assert(KB_DTYPE_FLOAT4_E2M1 == static_cast<int>(kb::DType::float4_e2m1));
static_assert(KB_DTYPE_INT64 == static_cast<int>(kb::DType::int64));
static_assert(KB_DTYPE_INT32 == static_cast<int>(kb::DType::int32));
static_assert(KB_DTYPE_INT16 == static_cast<int>(kb::DType::int16));
static_assert(KB_DTYPE_INT8 == static_cast<int>(kb::DType::int8));
static_assert(KB_DTYPE_BOOL == static_cast<int>(kb::DType::bool_));
static_assert(kb::dtype_count == 11);

static_assert(KB_EVAL_PASSED == static_cast<int>(kb::EvalStatus::passed));
static_assert(KB_EVAL_INCORRECT_SHAPE == static_cast<int>(kb::EvalStatus::incorrect_shape));
static_assert(KB_EVAL_INCORRECT_DTYPE == static_cast<int>(kb::EvalStatus::incorrect_dtype));
static_assert(KB_EVAL_INCORRECT_NUMERICAL == static_cast<int>(kb::EvalStatus::incorrect_numerical));
static_assert(KB_EVAL_RUNTIME_ERROR == static_cast<int>(kb::EvalStatus::runtime_error));
static_assert(KB_EVAL_COMPILE_ERROR == static_cast<int>(kb::EvalStatus::compile_error));
static_assert(KB_EVAL_TIMEOUT == static_cast<int>(kb::EvalStatus::timeout));

static_assert(KB_AXIS_CONST == static_cast<int>(kb::AxisKind::const_));
static_assert(KB_AXIS_VAR == static_cast<int>(kb::AxisKind::var));
static_assert(KB_INPUT_RANDOM == static_cast<int>(kb::InputKind::random));
static_assert(KB_INPUT_SCALAR == static_cast<int>(kb::InputKind::scalar));
static_assert(KB_INPUT_SAFETENSORS == static_cast<int>(kb::InputKind::safetensors));

// 32-bit enums, as the FORCE_32BIT members promise.
static_assert(sizeof(kb_status) == 4 && sizeof(kb_dtype) == 4 && sizeof(kb_eval_status) == 4);

namespace kb::capi {
namespace {

// The last error of this thread. A message that cannot be stored (no memory)
// falls back to a static text, so recording an error never fails.
struct LastError {
  std::string message;
  const char* fallback = nullptr;
};
thread_local LastError t_last_error;

}  // namespace

kb_status fail(kb_status status, std::string_view message) noexcept {
  LastError& e = t_last_error;
  try {
    // One line, controls escaped and long names cut: callers print it as it is.
    e.message = kb::printable(message, kb::Lines::many);
    for (char& c : e.message)
      if (c == '\n' || c == '\t') c = ' ';
    e.fallback = nullptr;
  } catch (...) {
    e.fallback = "out of memory while recording an error message";
  }
  return status;
}

kb_status fail(const kb::Error& error) noexcept { return fail(to_status(error.code), error.message); }

kb_status null_argument(const char* function, const char* name) noexcept {
  try {
    return fail(KB_ERROR_INVALID_ARGUMENT, fmt::format("{}: argument `{}` is NULL", function, name));
  } catch (...) {
    return fail(KB_ERROR_INVALID_ARGUMENT, "argument is NULL");
  }
}

kb_status bad_index(const char* function, const char* what, std::size_t index, std::size_t count) noexcept {
  try {
    return fail(KB_ERROR_INVALID_ARGUMENT,
                fmt::format("{}: {} index {} is out of range ({} present)", function, what, index, count));
  } catch (...) {
    return fail(KB_ERROR_INVALID_ARGUMENT, "index out of range");
  }
}

kb_status short_struct(const char* function, const char* arg, std::size_t got, std::size_t need,
                       const char* init) noexcept {
  try {
    return fail(KB_ERROR_INVALID_ARGUMENT,
                fmt::format("{}: {}->struct_size is {} but must be at least {} (initialize it with {})", function,
                            arg, got, need, init));
  } catch (...) {
    return fail(KB_ERROR_INVALID_ARGUMENT, "struct_size too small");
  }
}

kb_status on_exception(const char* function) noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return fail(KB_ERROR_OUT_OF_MEMORY, std::string_view("out of memory"));
  } catch (const std::exception& e) {
    try {
      return fail(KB_ERROR_INTERNAL, fmt::format("{}: internal error: {}", function, e.what()));
    } catch (...) {
      return fail(KB_ERROR_INTERNAL, "internal error");
    }
  } catch (...) {
    return fail(KB_ERROR_INTERNAL, "internal error: unknown exception");
  }
}

}  // namespace kb::capi

using kb::capi::fail;

extern "C" {

KB_API const char* kb_version(void) { return KB_VERSION_STRING; }

KB_API int kb_abi_version(void) { return KB_ABI_VERSION; }

KB_API const char* kb_build_info(void) {
#if KB_HAVE_CUDA
  return "kb " KB_VERSION_STRING " abi=1 cuda=on";
#else
  return "kb " KB_VERSION_STRING " abi=1 cuda=off";
#endif
}

KB_API const char* kb_status_string(kb_status status) {
  int v = static_cast<int>(status);
  if (v < KB_OK || v > KB_ERROR_INTERNAL) return "unknown status";
  return kb::code_name(static_cast<kb::Code>(v));
}

KB_API const char* kb_last_error(void) {
  const auto& e = kb::capi::t_last_error;
  return e.fallback ? e.fallback : e.message.c_str();
}

KB_API const char* kb_dtype_name(kb_dtype dtype) {
  const std::int64_t v = kb::capi::enum_bits(dtype);
  if (v < 0 || v >= kb::dtype_count) {
    kb::capi::guarded(__func__, [&] {
      return fail(KB_ERROR_INVALID_ARGUMENT, fmt::format("kb_dtype_name: {} is not a kb_dtype", v));
    });
    return nullptr;
  }
  // dtype_name returns views of string literals, so data() is NUL-terminated.
  return kb::dtype_name(static_cast<kb::DType>(static_cast<int>(v))).data();
}

KB_API kb_status kb_dtype_from_name(const char* name, kb_dtype* out) {
  KB_CAPI_REQUIRE(name);
  KB_CAPI_REQUIRE(out);
  return kb::capi::guarded(__func__, [&] {
    auto t = kb::dtype_from_name(name);
    if (!t) return fail(KB_ERROR_NOT_FOUND, fmt::format("kb_dtype_from_name: unknown dtype \"{}\"", name));
    *out = static_cast<kb_dtype>(*t);
    return KB_OK;
  });
}

}  // extern "C"
