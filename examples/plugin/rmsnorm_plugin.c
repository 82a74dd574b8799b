/*
 * An example kb plugin in C99: RMSNorm for the bundled definitions rmsnorm_h4096 (EPS 1e-5) and
 * rmsnorm_h7168 (EPS 1e-6), and the test definition rmsnorm_h64 (float32, EPS 1e-5).
 *
 *   output = hidden_states * rsqrt(mean(hidden_states^2) + EPS) * weight     (fp32 math)
 *
 * Build it as a shared library against kb.h (meson does: examples/plugin/meson.build) and run it
 * with   kb bench --plugin libkb_example_plugin.so --definitions rmsnorm_h4096
 * kb loads it in a worker process; nothing here runs inside kb itself.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <kb/kb.h>

static float bf16_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static uint16_t float_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40u); /* quiet NaN */
  bits += 0x7fffu + ((bits >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(bits >> 16);
}

static int is_type(const DLTensor* t, uint8_t code, uint8_t bits) {
  return t->dtype.code == code && t->dtype.bits == bits && t->dtype.lanes == 1;
}

static float load(const DLTensor* t, int64_t i) {
  if (t->dtype.code == kDLBfloat) return bf16_to_float(((const uint16_t*)t->data)[i]);
  return ((const float*)t->data)[i];
}

static void store(const DLTensor* t, int64_t i, float v) {
  if (t->dtype.code == kDLBfloat) ((uint16_t*)t->data)[i] = float_to_bf16(v);
  else ((float*)t->data)[i] = v;
}

/* user_data points at the definition's EPS. */
static kb_plugin_status rmsnorm(const kb_plugin_call* call) {
  const double eps = *(const double*)call->user_data;
  if (call->n_inputs != 2 || call->n_outputs != 1 || call->inputs[0].kind != KB_ARG_TENSOR ||
      call->inputs[1].kind != KB_ARG_TENSOR) {
    snprintf(call->message, call->message_size, "expected (hidden_states, weight) -> output");
    return KB_PLUGIN_ERROR;
  }
  const DLTensor* x = call->inputs[0].tensor;
  const DLTensor* w = call->inputs[1].tensor;
  const DLTensor* y = &call->outputs[0];
  int ok = 1;
  const DLTensor* all[3];
  all[0] = x;
  all[1] = w;
  all[2] = y;
  for (int i = 0; i < 3; ++i) ok = ok && (is_type(all[i], kDLFloat, 32) || is_type(all[i], kDLBfloat, 16));
  if (!ok) {
    snprintf(call->message, call->message_size, "this example handles float32 and bfloat16 only");
    return KB_PLUGIN_UNSUPPORTED;
  }
  if (x->ndim != 2 || w->ndim != 1 || y->ndim != 2 || w->shape[0] != x->shape[1]) {
    snprintf(call->message, call->message_size, "unexpected shapes");
    return KB_PLUGIN_ERROR;
  }
  int64_t rows = x->shape[0], hidden = x->shape[1];
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < hidden; ++c) {
      double v = load(x, r * hidden + c);
      sum += v * v;
    }
    float inv = (float)(1.0 / sqrt(sum / (double)hidden + eps));
    for (int64_t c = 0; c < hidden; ++c)
      store(y, r * hidden + c, (load(x, r * hidden + c) * inv) * load(w, c));
  }
  return KB_PLUGIN_OK;
}

static double eps_1e5 = 1e-5;
static double eps_1e6 = 1e-6;

static const kb_plugin_solution solutions[] = {
    {sizeof(kb_plugin_solution), "rmsnorm_h4096", "example_c_rmsnorm_h4096", "kb-examples",
     "RMSNorm in plain C (example plugin)", KB_PLUGIN_DEVICE_CPU, rmsnorm, &eps_1e5},
    {sizeof(kb_plugin_solution), "rmsnorm_h7168", "example_c_rmsnorm_h7168", "kb-examples",
     "RMSNorm in plain C (example plugin)", KB_PLUGIN_DEVICE_CPU, rmsnorm, &eps_1e6},
    {sizeof(kb_plugin_solution), "rmsnorm_h64", "example_c_rmsnorm_h64", "kb-examples",
     "RMSNorm in plain C (example plugin)", KB_PLUGIN_DEVICE_CPU, rmsnorm, &eps_1e5},
};

static const kb_plugin_table table = {sizeof(kb_plugin_table), KB_PLUGIN_ABI_VERSION,
                                      sizeof solutions / sizeof solutions[0], solutions};

KB_PLUGIN_EXPORT const kb_plugin_table* kb_plugin_entry_v1(uint32_t kb_plugin_abi) {
  (void)kb_plugin_abi; /* the table's abi_version tells kb which ABI this plugin speaks */
  return &table;
}
