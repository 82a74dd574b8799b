// kb.h on its own from C++ (-Wall -Wextra -pedantic -Werror): extern "C" linkage, initializers
// that need no designated-initializer support, no C++ types in the way.
#include <kb/kb.h>

#include <type_traits>

static_assert(std::is_standard_layout_v<kb_tensor_info> && std::is_trivially_copyable_v<kb_tensor_info>);
static_assert(std::is_standard_layout_v<kb_check_result> && std::is_trivially_copyable_v<kb_check_result>);
static_assert(std::is_standard_layout_v<kb_result_info> && std::is_trivially_copyable_v<kb_result_info>);
static_assert(sizeof(kb_status) == 4 && sizeof(kb_dtype) == 4 && sizeof(kb_eval_status) == 4);
static_assert(KB_OK == 0 && KB_ERROR_INTERNAL == 12 && KB_DTYPE_BOOL == 10 && KB_EVAL_TIMEOUT == 6);

int main() {
  kb_context_options opts = KB_CONTEXT_OPTIONS_INIT;
  kb_tensor_info tensor = KB_TENSOR_INFO_INIT;
  kb_check_result check = KB_CHECK_RESULT_INIT;
  kb_result_info result = KB_RESULT_INFO_INIT;
  kb_cuda_device_info device = KB_CUDA_DEVICE_INFO_INIT;
  kb_context* ctx = nullptr;
  bool ok = tensor.struct_size == sizeof tensor && check.struct_size == sizeof check &&
            result.struct_size == sizeof result && device.struct_size == sizeof device;
  ok = ok && kb_context_create(&opts, KB_ABI_VERSION, &ctx) == KB_OK && ctx != nullptr;
  kb_context_destroy(ctx);
  return ok ? 0 : 1;
}
