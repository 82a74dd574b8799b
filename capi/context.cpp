// kb_context: created against the caller's ABI version, with size-checked options.
#include <fmt/format.h>

#include <memory>

#include "capi.hpp"

using kb::capi::fail;

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
      if (opts->struct_size < sizeof(kb_context_options))
        return kb::capi::short_struct("kb_context_create", "opts", opts->struct_size, sizeof(kb_context_options),
                                      "KB_CONTEXT_OPTIONS_INIT");
      if (opts->flags != 0)
        return fail(KB_ERROR_INVALID_ARGUMENT,
                    fmt::format("kb_context_create: opts->flags is {:#x}, but no flags are defined (pass 0)",
                                opts->flags));
      o.flags = opts->flags;
    }
    auto ctx = std::make_unique<kb_context>();
    ctx->options = o;
    *out = ctx.release();
    return KB_OK;
  });
}

KB_API void kb_context_destroy(kb_context* ctx) { delete ctx; }

}  // extern "C"
