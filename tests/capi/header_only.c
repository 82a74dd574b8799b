/* kb.h on its own, compiled as strict C99 (-std=c99 -Wall -Wextra -pedantic -Werror): the header
 * needs nothing included before it, and every KB_..._INIT initializer is complete. */
#include <kb/kb.h>

int main(void) {
  kb_context_options opts = KB_CONTEXT_OPTIONS_INIT;
  kb_axis_info axis = KB_AXIS_INFO_INIT;
  kb_tensor_info tensor = KB_TENSOR_INFO_INIT;
  kb_check_result check = KB_CHECK_RESULT_INIT;
  kb_workload_input_info input = KB_WORKLOAD_INPUT_INFO_INIT;
  kb_source_info source = KB_SOURCE_INFO_INIT;
  kb_result_info result = KB_RESULT_INFO_INIT;
  kb_cuda_device_info device = KB_CUDA_DEVICE_INFO_INIT;
  kb_context* ctx = NULL;
  kb_status s;
  int ok = 1;

  ok &= opts.struct_size == sizeof opts && axis.struct_size == sizeof axis && tensor.struct_size == sizeof tensor;
  ok &= check.struct_size == sizeof check && input.struct_size == sizeof input && source.struct_size == sizeof source;
  ok &= result.struct_size == sizeof result && device.struct_size == sizeof device;
  ok &= sizeof(kb_status) == 4 && sizeof(kb_dtype) == 4 && sizeof(kb_eval_status) == 4;
  ok &= kb_abi_version() == KB_ABI_VERSION;
  s = kb_context_create(&opts, KB_ABI_VERSION, &ctx);
  ok &= s == KB_OK && ctx != NULL;
  kb_context_destroy(ctx);
  return ok ? 0 : 1;
}
