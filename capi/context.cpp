// kb_context: created against the caller's ABI version, with size-checked
// options; its tuning string resolved once, and the scope that makes its
// settings and log callback those of a call.
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "capi.hpp"

using kb::capi::fail;

namespace kb::capi {

CallScope::CallScope(const CallSettings& call) noexcept
    : scope_(call.settings.get(), call.log ? &CallScope::deliver : nullptr, const_cast<CallSettings*>(&call)) {}

void CallScope::deliver(kb::tuning::LogLevel level, const char* message, void* call) noexcept {
  const auto* c = static_cast<const CallSettings*>(call);
  c->log(static_cast<kb_log_level>(static_cast<int>(level)), message, c->log_user_data);
}

}  // namespace kb::capi

namespace {

// kb_context_options as version 1 had it (up to flags).
constexpr std::size_t kContextOptionsV1Size = offsetof(kb_context_options, flags) + sizeof(std::uint32_t);

// "name=value, ..." for each entry where `s` differs from `base`.
std::string differences(const kb::tuning::Settings& s, const kb::tuning::Settings& base) {
  std::string out;
  for (const auto& e : kb::tuning::entries())
    if (kb::tuning::get(s, e.name) != kb::tuning::get(base, e.name))
      out += fmt::format("{}{}={}", out.empty() ? "" : ", ", e.name, kb::tuning::get(s, e.name));
  return out;
}

}  // namespace

extern "C" {

KB_API kb_status kb_context_create(const kb_context_options* opts, int abi_version, kb_context** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  return kb::capi::guarded(__func__, [&] {
    if (abi_version != KB_ABI_VERSION)
      return fail(KB_ERROR_ABI_MISMATCH,
                  fmt::format("kb_context_create: the caller was built with kb.h of ABI version {}, but this libkb "
                              "{} has ABI version {}",
                              abi_version, KB_VERSION_STRING, KB_ABI_VERSION));
    kb_context_options o = KB_CONTEXT_OPTIONS_INIT;
    if (opts) {
      if (kb_status s = kb::capi::read_grown_struct("kb_context_create", "opts", opts, kContextOptionsV1Size,
                                                    "KB_CONTEXT_OPTIONS_INIT", o);
          s != KB_OK)
        return s;
      if (o.flags != 0)
        return fail(KB_ERROR_INVALID_ARGUMENT,
                    fmt::format("kb_context_create: opts->flags is {:#x}, but no flags are defined (pass 0)", o.flags));
    }
    auto ctx = std::make_unique<kb_context>();
    ctx->call.log = o.log;
    ctx->call.log_user_data = o.log_user_data;
    if (o.tuning && *o.tuning) {
      const kb::tuning::Settings base = kb::tuning::process_default();
      kb::tuning::Settings s = base;
      if (auto applied = kb::tuning::apply(s, o.tuning); !applied)
        return fail(KB_ERROR_INVALID_ARGUMENT, "kb_context_create: opts->tuning: " + applied.error().message);
      ctx->call.settings = std::make_shared<const kb::tuning::Settings>(s);
      kb::capi::CallScope scope(ctx->call);
      if (kb::log::enabled(kb::tuning::LogLevel::info)) {
        const std::string diff = differences(s, base);
        kb::log::emit(kb::tuning::LogLevel::info,
                      diff.empty() ? std::string("kb context: the process defaults")
                                   : "kb context: the process defaults with " + diff);
      }
    }
    o.tuning = nullptr;  // the caller's string is not kept
    o.log = nullptr;
    o.log_user_data = nullptr;
    ctx->options = o;
    *out = ctx.release();
    return KB_OK;
  });
}

KB_API void kb_context_destroy(kb_context* ctx) { delete ctx; }

}  // extern "C"
