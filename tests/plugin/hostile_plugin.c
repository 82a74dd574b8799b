/*
 * Hostile plugin for kb's tests: solutions of the test definition rmsnorm_h64 (float32) that
 * misbehave in every way tests/plugin expects kb to survive and name. Each runs only in kb's
 * worker process. "hostile_good" is correct, so a test can check that kb carries on after a fault.
 *
 * "hostile_every_tenth" is correct except when batch_size % 10 == 0, where it commits fault number
 * (batch_size / 10) % 10: segfault, abort, write past the output, write an input, hang, error
 * status, wrong shape, stale output (leave the output untouched), raise SIGFPE, exit(3).
 *
 * Five write values outside the enums of kb.h and DLPack, which kb reads as integers and names:
 * run statuses -1 and KB_PLUGIN_STATUS_FORCE_32BIT, an output's device type 99 and -7, an output's
 * dtype code 200.
 *
 * Two game kb's timing: "hostile_lazy" computes on its first 6 calls in a worker (the checked calls
 * and the warm-up of a timed evaluation) and then returns at once; "hostile_memo" keeps results
 * by a fingerprint of its input and computes slowly (2 ms more per call) only when it meets an input
 * it has not seen.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kb/kb.h>

static void compute(const kb_plugin_call* call) {
  const DLTensor* x = call->inputs[0].tensor;
  const DLTensor* w = call->inputs[1].tensor;
  const DLTensor* y = &call->outputs[0];
  const float* xs = (const float*)x->data;
  const float* ws = (const float*)w->data;
  float* ys = (float*)y->data;
  int64_t rows = x->shape[0], hidden = x->shape[1];
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < hidden; ++c) sum += (double)xs[r * hidden + c] * xs[r * hidden + c];
    float inv = (float)(1.0 / sqrt(sum / (double)hidden + 1e-5));
    for (int64_t c = 0; c < hidden; ++c) ys[r * hidden + c] = xs[r * hidden + c] * inv * ws[c];
  }
}

static size_t nbytes(const DLTensor* t) {
  size_t n = t->dtype.bits / 8u;
  for (int i = 0; i < t->ndim; ++i) n *= (size_t)t->shape[i];
  return n;
}

static volatile int* volatile null_pointer = NULL;

static kb_plugin_status good(const kb_plugin_call* call) {
  compute(call);
  return KB_PLUGIN_OK;
}

static kb_plugin_status segfault(const kb_plugin_call* call) {
  (void)call;
  *null_pointer = 1;
  return KB_PLUGIN_OK;
}

static kb_plugin_status do_abort(const kb_plugin_call* call) {
  (void)call;
  fprintf(stderr, "hostile: about to abort\n");
  abort();
}

static kb_plugin_status hang(const kb_plugin_call* call) {
  (void)call;
  for (;;) pause();
  return KB_PLUGIN_OK; /* not reached */
}

static kb_plugin_status write_past_output(const kb_plugin_call* call) {
  compute(call);
  const DLTensor* y = &call->outputs[0];
  memset((char*)y->data + nbytes(y), 0x42, 16); /* into kb's guard bytes */
  return KB_PLUGIN_OK;
}

/* Writes one float 1, 2, ... 6 KiB past the end of its output, as a kernel with a wrong row stride
 * would: past kb's guard bytes of old, into its guard pages now. */
static kb_plugin_status overrun_6k(const kb_plugin_call* call) {
  compute(call);
  const DLTensor* y = &call->outputs[0];
  for (int k = 1; k <= 6; ++k) *(volatile float*)((char*)y->data + nbytes(y) + 1024 * k) = 42.0f;
  return KB_PLUGIN_OK;
}

static kb_plugin_status write_input(const kb_plugin_call* call) {
  compute(call);
  float* x = (float*)call->inputs[0].tensor->data; /* casting away const: not allowed */
  x[0] += 1.0f;
  return KB_PLUGIN_OK;
}

/* Remembers the first result and returns it forever after (FlashInfer-Bench #228). */
static float remembered[64 * 4096];
static int have_remembered = 0;
static kb_plugin_status stale(const kb_plugin_call* call) {
  const DLTensor* y = &call->outputs[0];
  size_t n = nbytes(y);
  if (n > sizeof remembered) n = sizeof remembered;
  if (!have_remembered) {
    compute(call);
    memcpy(remembered, y->data, n);
    have_remembered = 1;
  } else {
    memcpy(y->data, remembered, n);
  }
  return KB_PLUGIN_OK;
}

static kb_plugin_status wrong_shape(const kb_plugin_call* call) {
  compute(call);
  DLTensor* y = (DLTensor*)&call->outputs[0]; /* casting away const: not allowed */
  y->shape[1] = 32;                          /* "my output is [batch, 32]" */
  return KB_PLUGIN_OK;
}

static kb_plugin_status wrong_dtype(const kb_plugin_call* call) {
  compute(call);
  DLTensor* y = (DLTensor*)&call->outputs[0];
  y->dtype.bits = 16;
  return KB_PLUGIN_OK;
}

/* Values outside the enums kb declares: kb reads them as integers and names them. */
static kb_plugin_status status_minus_one(const kb_plugin_call* call) {
  compute(call);
  int32_t bits = -1;
  kb_plugin_status st;
  memcpy(&st, &bits, sizeof st);
  return st;
}

static kb_plugin_status status_force_32bit(const kb_plugin_call* call) {
  compute(call);
  return KB_PLUGIN_STATUS_FORCE_32BIT;
}

static kb_plugin_status output_device(const kb_plugin_call* call) {
  compute(call);
  DLTensor* y = (DLTensor*)&call->outputs[0];
  int32_t bits = 99; /* no DLPack device type */
  memcpy(&y->device.device_type, &bits, sizeof bits);
  return KB_PLUGIN_OK;
}

static kb_plugin_status output_device_negative(const kb_plugin_call* call) {
  compute(call);
  DLTensor* y = (DLTensor*)&call->outputs[0];
  int32_t bits = -7;
  memcpy(&y->device.device_type, &bits, sizeof bits);
  return KB_PLUGIN_OK;
}

static kb_plugin_status output_dtype_code(const kb_plugin_call* call) {
  compute(call);
  DLTensor* y = (DLTensor*)&call->outputs[0];
  y->dtype.code = 200; /* no DLPack type code */
  return KB_PLUGIN_OK;
}

static kb_plugin_status error_status(const kb_plugin_call* call) {
  snprintf(call->message, call->message_size, "hostile: refusing on purpose");
  return KB_PLUGIN_ERROR;
}

static kb_plugin_status chatty(const kb_plugin_call* call) {
  compute(call);
  for (int i = 0; i < 5000; ++i) printf("chatty line %d of output that kb must bound\n", i);
  fprintf(stderr, "chatty: done\n");
  return KB_PLUGIN_OK;
}

static kb_plugin_status every_tenth(const kb_plugin_call* call) {
  int64_t batch = call->inputs[0].tensor->shape[0];
  if (batch % 10 != 0) return good(call);
  switch ((batch / 10) % 10) {
    case 1: return segfault(call);
    case 2: return do_abort(call);
    case 3: return write_past_output(call);
    case 4: return write_input(call);
    case 5: return hang(call);
    case 6: return error_status(call);
    case 7: return wrong_shape(call);
    case 8: return KB_PLUGIN_OK; /* output left poisoned */
    case 9: raise(SIGFPE); return KB_PLUGIN_OK;
    default: _exit(3);
  }
}

static int lazy_calls = 0;
static kb_plugin_status lazy(const kb_plugin_call* call) {
  if (lazy_calls++ < 6) compute(call);
  return KB_PLUGIN_OK;
}

#define MEMO_ENTRIES 16
static uint64_t memo_keys[MEMO_ENTRIES];
static float memo_values[MEMO_ENTRIES][4 * 64];
static int memo_used = 0;
static kb_plugin_status memo(const kb_plugin_call* call) {
  const DLTensor* x = call->inputs[0].tensor;
  const DLTensor* y = &call->outputs[0];
  size_t n = nbytes(y);
  if (n > sizeof memo_values[0]) {
    compute(call);
    return KB_PLUGIN_OK;
  }
  /* FNV-1a over the first 256 bytes of the input: a cheap fingerprint. */
  uint64_t h = 1469598103934665603ull;
  const unsigned char* p = (const unsigned char*)x->data;
  size_t m = nbytes(x) < 256 ? nbytes(x) : 256;
  for (size_t i = 0; i < m; ++i) h = (h ^ p[i]) * 1099511628211ull;
  for (int i = 0; i < memo_used; ++i)
    if (memo_keys[i] == h) {
      memcpy(y->data, memo_values[i], n);
      return KB_PLUGIN_OK;
    }
  compute(call);
  struct timespec pause_for = {0, 2000000}; /* 2 ms */
  nanosleep(&pause_for, NULL);
  int slot = memo_used < MEMO_ENTRIES ? memo_used++ : (int)(h % MEMO_ENTRIES);
  memo_keys[slot] = h;
  memcpy(memo_values[slot], y->data, n);
  return KB_PLUGIN_OK;
}

#define SOLUTION(name, fn) \
  { sizeof(kb_plugin_solution), "rmsnorm_h64", name, "kb-tests", NULL, KB_PLUGIN_DEVICE_CPU, fn, NULL }

static const kb_plugin_solution solutions[] = {
    SOLUTION("hostile_good", good),
    SOLUTION("hostile_segfault", segfault),
    SOLUTION("hostile_abort", do_abort),
    SOLUTION("hostile_hang", hang),
    SOLUTION("hostile_write_past_output", write_past_output),
    SOLUTION("hostile_write_input", write_input),
    SOLUTION("hostile_overrun_6k", overrun_6k),
    SOLUTION("hostile_stale", stale),
    SOLUTION("hostile_wrong_shape", wrong_shape),
    SOLUTION("hostile_wrong_dtype", wrong_dtype),
    SOLUTION("hostile_error", error_status),
    SOLUTION("hostile_chatty", chatty),
    SOLUTION("hostile_every_tenth", every_tenth),
    SOLUTION("hostile_lazy", lazy),
    SOLUTION("hostile_memo", memo),
    SOLUTION("hostile_status_minus_one", status_minus_one),
    SOLUTION("hostile_status_force_32bit", status_force_32bit),
    SOLUTION("hostile_output_device", output_device),
    SOLUTION("hostile_output_device_negative", output_device_negative),
    SOLUTION("hostile_output_dtype_code", output_dtype_code),
};

static const kb_plugin_table table = {sizeof(kb_plugin_table), KB_PLUGIN_ABI_VERSION,
                                      sizeof solutions / sizeof solutions[0], solutions};

KB_PLUGIN_EXPORT const kb_plugin_table* kb_plugin_entry_v1(uint32_t kb_plugin_abi) {
  (void)kb_plugin_abi;
  return &table;
}
