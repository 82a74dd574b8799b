/* Tests of the C ABI, written in C99 against kb.h and libkb only.
 *
 * Usage: test_capi SHARED_DIR   (the folder holding flashinfer-trace/)
 *
 * A tiny harness: CHECK counts failures and the exit status is non-zero when
 * any failed. Every failing call is also checked to have set kb_last_error().
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kb/kb.h>

static int g_checks = 0;
static int g_failures = 0;

#define CHECK(cond)                                                                                  \
  do {                                                                                               \
    ++g_checks;                                                                                      \
    if (!(cond)) {                                                                                   \
      ++g_failures;                                                                                  \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n  (kb_last_error: %s)\n", __FILE__, __LINE__, #cond, \
              kb_last_error());                                                                      \
    }                                                                                                \
  } while (0)

/* Streq that treats NULL as distinct from every string. */
static int str_eq(const char* a, const char* b) { return a && b && strcmp(a, b) == 0; }
static int contains(const char* hay, const char* needle) { return hay && needle && strstr(hay, needle) != NULL; }

/* The call returns `expected`; when that is a failure, kb_last_error() must be
 * set and contain `needle` (NULL: any non-empty message). */
static void expect_status(const char* file, int line, kb_status got, kb_status expected, const char* needle) {
  const char* msg = kb_last_error();
  ++g_checks;
  if (got != expected) {
    ++g_failures;
    fprintf(stderr, "%s:%d: expected status %d (%s), got %d (%s)\n  (kb_last_error: %s)\n", file, line,
            (int)expected, kb_status_string(expected), (int)got, kb_status_string(got), msg);
    return;
  }
  if (expected == KB_OK) return;
  ++g_checks;
  if (msg == NULL || msg[0] == '\0' || (needle && !strstr(msg, needle))) {
    ++g_failures;
    fprintf(stderr, "%s:%d: kb_last_error() is \"%s\", expected it to contain \"%s\"\n", file, line,
            msg ? msg : "(null)", needle ? needle : "(anything)");
  }
}
#define EXPECT_OK(call) expect_status(__FILE__, __LINE__, (call), KB_OK, NULL)
#define EXPECT_FAIL(call, status, needle) expect_status(__FILE__, __LINE__, (call), (status), (needle))

/* kb_benchmark_options as a caller built against version 1 of the header has it: it ends at
 * required_matched_ratio, before the fields added since (cupti). */
#define BENCHMARK_OPTIONS_V1_SIZE (offsetof(kb_benchmark_options, required_matched_ratio) + sizeof(double))

/* Checks that a kb_benchmark_run result PASSED and whether its JSON mentions `word` (has_word 1 or 0; word
 * NULL: not checked), then destroys it. */
static void check_passed(kb_result** res, const char* word, int has_word) {
  if (!*res) return;
  CHECK(strstr(kb_result_json(*res), "\"status\":\"PASSED\"") != NULL);
  if (word) CHECK((strstr(kb_result_json(*res), word) != NULL) == has_word);
  kb_result_destroy(*res);
  *res = NULL;
}

/* Makes the last error recognizable, so a later check can tell it changed. */
static void poison_last_error(void) {
  kb_context* ctx = NULL;
  (void)kb_context_create(NULL, -12345, &ctx);
}

static char* read_file(const char* path, size_t* len) {
  FILE* f = fopen(path, "rb");
  char* buf;
  long n;
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return NULL;
  }
  buf = (char*)malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  if (buf) buf[n] = '\0';
  fclose(f);
  if (len) *len = (size_t)n;
  return buf;
}

static char g_shared[4096];
static char* shared_path(char* buf, size_t cap, const char* rel) {
  snprintf(buf, cap, "%s/%s", g_shared, rel);
  return buf;
}

#define DEF_PS64 "flashinfer-trace/definitions/gqa_paged/gqa_paged_decode_h16_kv2_d128_ps64.json"
#define DEF_H32_PS1 "flashinfer-trace/definitions/gqa_paged/gqa_paged_decode_h32_kv4_d128_ps1.json"
#define WL_H32_PS1 "flashinfer-trace/workloads/gqa_paged/gqa_paged_decode_h32_kv4_d128_ps1.jsonl"

/* ---- versions, statuses, dtypes -------------------------------------------------------------- */

static void test_versions(void) {
  CHECK(str_eq(kb_last_error(), "")); /* nothing has failed on this thread yet */
  CHECK(str_eq(kb_version(), KB_VERSION_STRING));
  CHECK(str_eq(kb_version(), "0.1.0"));
  CHECK(kb_abi_version() == KB_ABI_VERSION);
  CHECK(KB_ABI_VERSION == 1);
  CHECK(KB_VERSION_MAJOR == 0 && KB_VERSION_MINOR == 1 && KB_VERSION_PATCH == 0);
  CHECK(strncmp(kb_build_info(), "kb 0.1.0 ", 9) == 0);
  CHECK(contains(kb_build_info(), "cuda=on") || contains(kb_build_info(), "cuda=off"));
}

static void test_status_strings(void) {
  int i, j;
  CHECK(str_eq(kb_status_string(KB_OK), "ok"));
  CHECK(str_eq(kb_status_string(KB_ERROR_INVALID_ARGUMENT), "invalid argument"));
  CHECK(str_eq(kb_status_string(KB_ERROR_ABI_MISMATCH), "ABI mismatch"));
  CHECK(str_eq(kb_status_string(KB_ERROR_NO_CUDA_DEVICE), "no CUDA device"));
  for (i = 0; i <= KB_ERROR_INTERNAL; ++i) {
    const char* s = kb_status_string((kb_status)i);
    CHECK(s != NULL && s[0] != '\0' && !str_eq(s, "unknown status"));
    for (j = 0; j < i; ++j) CHECK(!str_eq(s, kb_status_string((kb_status)j)));
  }
  CHECK(str_eq(kb_status_string((kb_status)13), "unknown status"));
  CHECK(str_eq(kb_status_string((kb_status)-1), "unknown status"));
  /* Pinned values. */
  CHECK(KB_ERROR_PARSE == 2 && KB_ERROR_INVALID_DATA == 3 && KB_ERROR_IO == 4 && KB_ERROR_NOT_FOUND == 5);
  CHECK(KB_ERROR_UNSUPPORTED == 6 && KB_ERROR_LIMIT == 7 && KB_ERROR_OUT_OF_MEMORY == 8);
  CHECK(KB_ERROR_CUDA == 10 && KB_ERROR_INTERNAL == 12);
  CHECK(sizeof(kb_status) == 4);
}

static void test_dtypes(void) {
  static const char* names[] = {"float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1",
                                "int64",   "int32",   "int16",    "int8",          "bool"};
  int i;
  kb_dtype t = KB_DTYPE_FLOAT32;
  DLDataType d;
  for (i = 0; i < 11; ++i) {
    CHECK(str_eq(kb_dtype_name((kb_dtype)i), names[i]));
    EXPECT_OK(kb_dtype_from_name(names[i], &t));
    CHECK((int)t == i);
  }
  EXPECT_OK(kb_dtype_from_name("float8_e4m3", &t)); /* seed-001 alias */
  CHECK(t == KB_DTYPE_FLOAT8_E4M3FN);
  t = KB_DTYPE_INT8;
  EXPECT_FAIL(kb_dtype_from_name("float64", &t), KB_ERROR_NOT_FOUND, "\"float64\"");
  CHECK(t == KB_DTYPE_INT8); /* unchanged on failure */
  EXPECT_FAIL(kb_dtype_from_name(NULL, &t), KB_ERROR_INVALID_ARGUMENT, "argument `name` is NULL");
  EXPECT_FAIL(kb_dtype_from_name("int8", NULL), KB_ERROR_INVALID_ARGUMENT, "argument `out` is NULL");

  poison_last_error();
  CHECK(kb_dtype_name((kb_dtype)11) == NULL);
  CHECK(contains(kb_last_error(), "not a kb_dtype"));
  /* integers far outside the enum are read as integers, never loaded as kb_dtype */
  CHECK(kb_dtype_name((kb_dtype)1000) == NULL);
  CHECK(contains(kb_last_error(), "kb_dtype_name: 1000 is not a kb_dtype"));
  EXPECT_FAIL(kb_dtype_to_dlpack((kb_dtype)-5, &d), KB_ERROR_INVALID_ARGUMENT, "kb_dtype_to_dlpack: -5 is not a kb_dtype");

  EXPECT_OK(kb_dtype_to_dlpack(KB_DTYPE_BFLOAT16, &d));
  CHECK(d.code == kDLBfloat && d.bits == 16 && d.lanes == 1);
  EXPECT_OK(kb_dtype_to_dlpack(KB_DTYPE_BOOL, &d));
  CHECK(d.code == KB_DLPACK_BOOL && d.bits == 8 && d.lanes == 1);
  EXPECT_OK(kb_dtype_to_dlpack(KB_DTYPE_FLOAT8_E4M3FN, &d));
  CHECK(d.code == KB_DLPACK_FLOAT8_E4M3FN && d.bits == 8 && d.lanes == 1);
  EXPECT_OK(kb_dtype_to_dlpack(KB_DTYPE_FLOAT8_E5M2, &d));
  CHECK(d.code == KB_DLPACK_FLOAT8_E5M2 && d.bits == 8);
  EXPECT_OK(kb_dtype_to_dlpack(KB_DTYPE_FLOAT4_E2M1, &d));
  CHECK(d.code == KB_DLPACK_FLOAT4_E2M1FN && d.bits == 4 && d.lanes == 2);
  EXPECT_OK(kb_dtype_to_dlpack(KB_DTYPE_INT32, &d));
  CHECK(d.code == kDLInt && d.bits == 32 && d.lanes == 1);
  EXPECT_FAIL(kb_dtype_to_dlpack((kb_dtype)42, &d), KB_ERROR_INVALID_ARGUMENT, "not a kb_dtype");
  EXPECT_FAIL(kb_dtype_to_dlpack(KB_DTYPE_INT8, NULL), KB_ERROR_INVALID_ARGUMENT, "`out`");
}

/* ---- context ----------------------------------------------------------------------------------- */

static void test_context(void) {
  kb_context* ctx = (kb_context*)&g_checks; /* garbage: must be overwritten */
  kb_context_options opts = KB_CONTEXT_OPTIONS_INIT;

  EXPECT_FAIL(kb_context_create(NULL, KB_ABI_VERSION + 1, &ctx), KB_ERROR_ABI_MISMATCH, "ABI version 2");
  CHECK(ctx == NULL);
  EXPECT_FAIL(kb_context_create(NULL, 0, &ctx), KB_ERROR_ABI_MISMATCH, "ABI version");

  opts.struct_size = sizeof(size_t);
  EXPECT_FAIL(kb_context_create(&opts, KB_ABI_VERSION, &ctx), KB_ERROR_INVALID_ARGUMENT, "struct_size");
  CHECK(ctx == NULL);
  opts.struct_size = sizeof(opts);
  opts.flags = 1;
  EXPECT_FAIL(kb_context_create(&opts, KB_ABI_VERSION, &ctx), KB_ERROR_INVALID_ARGUMENT, "flags");
  EXPECT_FAIL(kb_context_create(NULL, KB_ABI_VERSION, NULL), KB_ERROR_INVALID_ARGUMENT,
              "kb_context_create: argument `out` is NULL");

  opts.flags = 0;
  EXPECT_OK(kb_context_create(&opts, KB_ABI_VERSION, &ctx));
  CHECK(ctx != NULL);
  kb_context_destroy(ctx);
  ctx = NULL;
  EXPECT_OK(kb_context_create(NULL, KB_ABI_VERSION, &ctx));
  CHECK(ctx != NULL);
  kb_context_destroy(ctx);

  /* destroy(NULL) is a no-op for every handle type. */
  kb_context_destroy(NULL);
  kb_definition_destroy(NULL);
  kb_workload_destroy(NULL);
  kb_solution_destroy(NULL);
  kb_result_destroy(NULL);
  CHECK(1);
}

/* ---- definitions ------------------------------------------------------------------------------ */

static void test_definition_inspect(kb_context* ctx, const kb_definition* def) {
  kb_axis_info axis = KB_AXIS_INFO_INIT;
  kb_tensor_info t = KB_TENSOR_INFO_INIT;
  kb_definition* again = NULL;
  const char* json;

  CHECK(str_eq(kb_definition_name(def), "gqa_paged_decode_h16_kv2_d128_ps64"));
  CHECK(str_eq(kb_definition_op_type(def), "gqa_paged"));
  CHECK(contains(kb_definition_description(def), "page_size=64"));
  CHECK(contains(kb_definition_reference(def), "def run(q, k_cache, v_cache"));

  /* axes, in document order */
  CHECK(kb_definition_axis_count(def) == 8);
  EXPECT_OK(kb_definition_axis(def, 0, &axis));
  CHECK(str_eq(axis.name, "batch_size") && axis.kind == KB_AXIS_VAR && axis.value == 0 && axis.description == NULL);
  EXPECT_OK(kb_definition_axis(def, 3, &axis));
  CHECK(str_eq(axis.name, "head_dim") && axis.kind == KB_AXIS_CONST && axis.value == 128);
  EXPECT_OK(kb_definition_axis(def, 4, &axis));
  CHECK(str_eq(axis.name, "page_size") && axis.value == 64);
  EXPECT_OK(kb_definition_axis(def, 6, &axis));
  CHECK(str_eq(axis.name, "len_indptr") && str_eq(axis.description, "Length of kv_indptr array."));
  EXPECT_FAIL(kb_definition_axis(def, 8, &axis), KB_ERROR_INVALID_ARGUMENT, "axis index 8 is out of range (8 present)");
  axis.struct_size = 8;
  EXPECT_FAIL(kb_definition_axis(def, 0, &axis), KB_ERROR_INVALID_ARGUMENT, "out->struct_size is 8");
  EXPECT_FAIL(kb_definition_axis(def, 0, NULL), KB_ERROR_INVALID_ARGUMENT, "argument `out` is NULL");
  EXPECT_FAIL(kb_definition_axis(NULL, 0, &axis), KB_ERROR_INVALID_ARGUMENT, "argument `def` is NULL");

  /* inputs and outputs: the call signature */
  CHECK(kb_definition_input_count(def) == 7);
  CHECK(kb_definition_output_count(def) == 2);
  EXPECT_OK(kb_definition_input(def, 0, &t));
  CHECK(str_eq(t.name, "q") && t.dtype == KB_DTYPE_BFLOAT16 && t.rank == 3 && t.description == NULL && !t.optional);
  CHECK(t.shape && str_eq(t.shape[0], "batch_size") && str_eq(t.shape[1], "num_qo_heads") &&
        str_eq(t.shape[2], "head_dim"));
  EXPECT_OK(kb_definition_input(def, 1, &t));
  CHECK(str_eq(t.name, "k_cache") && t.rank == 4 && str_eq(t.shape[0], "num_pages") && str_eq(t.shape[1], "page_size"));
  EXPECT_OK(kb_definition_input(def, 3, &t));
  CHECK(str_eq(t.name, "kv_indptr") && t.dtype == KB_DTYPE_INT32 && t.rank == 1 &&
        str_eq(t.description, "KV page offsets for each sequence."));
  EXPECT_OK(kb_definition_input(def, 6, &t));
  CHECK(str_eq(t.name, "sm_scale") && t.dtype == KB_DTYPE_FLOAT32 && t.rank == -1 && t.shape == NULL);
  EXPECT_OK(kb_definition_output(def, 0, &t));
  CHECK(str_eq(t.name, "output") && t.dtype == KB_DTYPE_BFLOAT16 && t.rank == 3);
  EXPECT_OK(kb_definition_output(def, 1, &t));
  CHECK(str_eq(t.name, "lse") && t.dtype == KB_DTYPE_FLOAT32 && t.rank == 2 && str_eq(t.shape[1], "num_qo_heads"));
  EXPECT_FAIL(kb_definition_input(def, 7, &t), KB_ERROR_INVALID_ARGUMENT, "input index 7");
  EXPECT_FAIL(kb_definition_output(def, 2, &t), KB_ERROR_INVALID_ARGUMENT, "output index 2");
  t.struct_size = 0;
  EXPECT_FAIL(kb_definition_input(def, 0, &t), KB_ERROR_INVALID_ARGUMENT, "KB_TENSOR_INFO_INIT");

  /* constraints and tags */
  CHECK(kb_definition_constraint_count(def) == 2);
  CHECK(str_eq(kb_definition_constraint(def, 0), "len_indptr == batch_size + 1"));
  CHECK(str_eq(kb_definition_constraint(def, 1), "num_kv_indices == kv_indptr[-1].item()"));
  poison_last_error();
  CHECK(kb_definition_constraint(def, 2) == NULL);
  CHECK(contains(kb_last_error(), "constraint index 2"));
  CHECK(kb_definition_tag_count(def) == 6);
  CHECK(str_eq(kb_definition_tag(def, 0), "stage:decode"));
  CHECK(str_eq(kb_definition_tag(def, 5), "tp:4"));
  poison_last_error();
  CHECK(kb_definition_tag(def, 6) == NULL);
  CHECK(contains(kb_last_error(), "tag index 6"));

  /* NULL handles */
  poison_last_error();
  CHECK(kb_definition_name(NULL) == NULL);
  CHECK(contains(kb_last_error(), "kb_definition_name: argument `def` is NULL"));
  CHECK(kb_definition_axis_count(NULL) == 0);
  CHECK(kb_definition_json(NULL) == NULL);

  /* canonical JSON reads back to the same definition */
  json = kb_definition_json(def);
  CHECK(json && json[0] == '{' && contains(json, "\"name\": \"gqa_paged_decode_h16_kv2_d128_ps64\""));
  EXPECT_OK(kb_definition_load(ctx, json, strlen(json), &again));
  CHECK(str_eq(kb_definition_json(again), json));
  CHECK(kb_definition_axis_count(again) == 8);
  kb_definition_destroy(again);
}

static void test_definition_errors(kb_context* ctx) {
  static const char* bad_axis =
      "{\"name\": \"d\", \"op_type\": \"x\", \"axes\": {\"N\": {\"type\": \"var\"}},"
      " \"inputs\": {\"x\": {\"shape\": [\"N\", \"H\"], \"dtype\": \"float32\"}},"
      " \"outputs\": {\"y\": {\"shape\": [\"N\"], \"dtype\": \"float32\"}},"
      " \"reference\": \"def run(x):\\n    return x\"}";
  static const char* bad_dtype =
      "{\"name\": \"d\", \"op_type\": \"x\", \"axes\": {\"N\": {\"type\": \"var\"}},"
      " \"inputs\": {\"x\": {\"shape\": [\"N\"], \"dtype\": \"float64\"}},"
      " \"outputs\": {\"y\": {\"shape\": [\"N\"], \"dtype\": \"float32\"}},"
      " \"reference\": \"def run(x):\\n    return x\"}";
  char path[4200];
  kb_definition* def = (kb_definition*)&g_checks;
  FILE* f;

  EXPECT_FAIL(kb_definition_load(ctx, bad_axis, strlen(bad_axis), &def), KB_ERROR_INVALID_DATA,
              "<memory>: definition.inputs.x.shape[1]: unknown axis \"H\"");
  CHECK(def == NULL);
  EXPECT_FAIL(kb_definition_load(ctx, bad_dtype, strlen(bad_dtype), &def), KB_ERROR_INVALID_DATA,
              "definition.inputs.x.dtype");
  EXPECT_FAIL(kb_definition_load(ctx, "{\"name\": ", 9, &def), KB_ERROR_PARSE, "invalid JSON");
  /* len is honoured: the text after len bytes is not read */
  EXPECT_FAIL(kb_definition_load(ctx, bad_axis, 10, &def), KB_ERROR_PARSE, NULL);
  EXPECT_FAIL(kb_definition_load(ctx, "[1, 2]", 6, &def), KB_ERROR_INVALID_DATA, NULL);
  EXPECT_FAIL(kb_definition_load(NULL, bad_axis, strlen(bad_axis), &def), KB_ERROR_INVALID_ARGUMENT,
              "argument `ctx` is NULL");
  EXPECT_FAIL(kb_definition_load(ctx, NULL, 0, &def), KB_ERROR_INVALID_ARGUMENT, "argument `json` is NULL");
  EXPECT_FAIL(kb_definition_load(ctx, bad_axis, strlen(bad_axis), NULL), KB_ERROR_INVALID_ARGUMENT,
              "argument `out` is NULL");

  /* from a file: messages start with the path */
  EXPECT_FAIL(kb_definition_load_file(ctx, "/nonexistent/kb/def.json", &def), KB_ERROR_IO, "/nonexistent/kb/def.json");
  CHECK(def == NULL);
  snprintf(path, sizeof path, "test_capi_broken_definition.json");
  f = fopen(path, "wb");
  CHECK(f != NULL);
  if (f) {
    fputs(bad_axis, f);
    fclose(f);
    EXPECT_FAIL(kb_definition_load_file(ctx, path, &def), KB_ERROR_INVALID_DATA,
                "test_capi_broken_definition.json: definition.inputs.x.shape[1]: unknown axis \"H\"");
    remove(path);
  }
}

/* ---- check_tensors ---------------------------------------------------------------------------- */

/* A call of gqa_paged_decode_h16_kv2_d128_ps64 on CPU tensors. */
enum { N_IN = 7, N_OUT = 2 };
typedef struct {
  DLTensor in[N_IN], out[N_OUT];
  const DLTensor* inputs[N_IN];
  const DLTensor* outputs[N_OUT];
  int64_t shapes[N_IN + N_OUT][4];
  int32_t indptr[8];
  int32_t indices[8];
  int32_t last_len[8];
  float sm_scale;
} Call;

static unsigned char g_pool[1 << 18]; /* backs the float tensors (contents unused) */

static DLTensor tensor(void* data, int ndim, int64_t* shape, uint8_t code, uint8_t bits) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype.code = code;
  t.dtype.bits = bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = NULL;
  t.byte_offset = 0;
  return t;
}

static void set_shape(int64_t* s, int64_t a, int64_t b, int64_t c, int64_t d) {
  s[0] = a;
  s[1] = b;
  s[2] = c;
  s[3] = d;
}

/* batch sequences over num_pages pages; kv_indptr = 0, 1, 3, 6, ... (sequence i has i+1 pages). */
static void make_call(Call* c, int64_t batch, int64_t num_pages) {
  int64_t i, n = 0;
  memset(c, 0, sizeof *c);
  c->indptr[0] = 0;
  for (i = 0; i < batch; ++i) {
    c->indptr[i + 1] = c->indptr[i] + (int32_t)(i + 1);
    c->last_len[i] = 17;
  }
  n = c->indptr[batch];
  for (i = 0; i < n; ++i) c->indices[i] = (int32_t)(i % num_pages);
  c->sm_scale = 0.08838834764831845f;

  set_shape(c->shapes[0], batch, 16, 128, 0);
  set_shape(c->shapes[1], num_pages, 64, 2, 128);
  set_shape(c->shapes[2], num_pages, 64, 2, 128);
  set_shape(c->shapes[3], batch + 1, 0, 0, 0);
  set_shape(c->shapes[4], n, 0, 0, 0);
  set_shape(c->shapes[5], batch, 0, 0, 0);
  set_shape(c->shapes[7], batch, 16, 128, 0);
  set_shape(c->shapes[8], batch, 16, 0, 0);
  c->in[0] = tensor(g_pool, 3, c->shapes[0], kDLBfloat, 16);
  c->in[1] = tensor(g_pool, 4, c->shapes[1], kDLBfloat, 16);
  c->in[2] = tensor(g_pool, 4, c->shapes[2], kDLBfloat, 16);
  c->in[3] = tensor(c->indptr, 1, c->shapes[3], kDLInt, 32);
  c->in[4] = tensor(c->indices, 1, c->shapes[4], kDLInt, 32);
  c->in[5] = tensor(c->last_len, 1, c->shapes[5], kDLInt, 32);
  c->in[6] = tensor(&c->sm_scale, 0, NULL, kDLFloat, 32);
  c->out[0] = tensor(g_pool, 3, c->shapes[7], kDLBfloat, 16);
  c->out[1] = tensor(g_pool, 2, c->shapes[8], kDLFloat, 32);
  for (i = 0; i < N_IN; ++i) c->inputs[i] = &c->in[i];
  for (i = 0; i < N_OUT; ++i) c->outputs[i] = &c->out[i];
  c->inputs[6] = NULL; /* the scalar: value unknown */
}

static kb_status run_check(const kb_definition* def, Call* c, kb_check_result* r) {
  return kb_definition_check_tensors(def, c->inputs, N_IN, c->outputs, N_OUT, r);
}

static void test_check_tensors_ok(const kb_definition* def) {
  Call c;
  int64_t axes[8];
  int64_t strides_q[3];
  kb_check_result r = KB_CHECK_RESULT_INIT;
  int i;

  make_call(&c, 2, 3); /* kv_indptr = [0, 1, 3]: num_kv_indices == 3 */
  for (i = 0; i < 8; ++i) axes[i] = -99;
  r.axis_values = axes;
  r.axis_capacity = 8;
  EXPECT_OK(run_check(def, &c, &r));
  CHECK(r.axis_count == 8);
  CHECK(r.constraints_held == 2 && r.constraints_unchecked == 0);
  /* batch_size, num_qo_heads, num_kv_heads, head_dim, page_size, num_pages, len_indptr, num_kv_indices */
  CHECK(axes[0] == 2 && axes[1] == 16 && axes[2] == 2 && axes[3] == 128 && axes[4] == 64 && axes[5] == 3 &&
        axes[6] == 3 && axes[7] == 3);

  /* out is optional */
  EXPECT_OK(run_check(def, &c, NULL));

  /* the scalar as a 0-D CPU tensor (float32, or float64 for a Python float) */
  c.inputs[6] = &c.in[6];
  EXPECT_OK(run_check(def, &c, &r));
  {
    double scale64 = 0.125;
    DLTensor s = tensor(&scale64, 0, NULL, kDLFloat, 64);
    c.inputs[6] = &s;
    EXPECT_OK(run_check(def, &c, &r));
    c.inputs[6] = &c.in[6];
  }

  /* explicit compact strides are fine; size-1 dimensions may have any stride */
  strides_q[0] = 16 * 128;
  strides_q[1] = 128;
  strides_q[2] = 1;
  c.in[0].strides = strides_q;
  EXPECT_OK(run_check(def, &c, &r));
  make_call(&c, 1, 3);
  strides_q[0] = 999999;
  c.in[0].strides = strides_q;
  EXPECT_OK(run_check(def, &c, &r));
  CHECK(r.constraints_held == 2);

  /* too small an axis array: not an error; the array is left alone, axis_count says what is needed */
  for (i = 0; i < 8; ++i) axes[i] = -99;
  r.axis_capacity = 4;
  EXPECT_OK(run_check(def, &c, &r));
  CHECK(axes[0] == -99 && r.axis_count == 8);
  r.axis_capacity = 8;

  /* byte_offset is respected when reading kv_indptr[-1] */
  make_call(&c, 2, 3);
  {
    int32_t shifted[5] = {777, 777, 0, 1, 3};
    c.in[3].data = shifted;
    c.in[3].byte_offset = 2 * sizeof(int32_t);
    EXPECT_OK(run_check(def, &c, &r));
    CHECK(r.constraints_held == 2);
    c.in[3].byte_offset = sizeof(int32_t); /* now kv_indptr = [777, 0, 1]: last is 1, not 3 */
    EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT, "num_kv_indices == kv_indptr[-1].item()");
  }

  /* index tensors in CUDA host (pinned) memory are read like CPU ones */
  make_call(&c, 2, 3);
  c.in[3].device.device_type = kDLCUDAHost;
  EXPECT_OK(run_check(def, &c, &r));
  CHECK(r.constraints_held == 2 && r.constraints_unchecked == 0);

  /* all on one CUDA device: shapes checked, device memory never read (fake pointers) */
  make_call(&c, 2, 3);
  for (i = 0; i < N_IN; ++i) {
    c.in[i].device.device_type = kDLCUDA;
    c.in[i].device.device_id = 1;
    c.in[i].data = (void*)(uintptr_t)0x1000; /* never dereferenced */
  }
  for (i = 0; i < N_OUT; ++i) {
    c.out[i].device.device_type = kDLCUDA;
    c.out[i].device.device_id = 1;
    c.out[i].data = (void*)(uintptr_t)0x1000;
  }
  EXPECT_OK(run_check(def, &c, &r));
  CHECK(r.constraints_held == 1 && r.constraints_unchecked == 1);
}

static void test_check_tensors_errors(const kb_definition* def) {
  Call c;
  int64_t strides[3];
  kb_check_result r = KB_CHECK_RESULT_INIT;
  DLTensor vec;
  int64_t vec_shape[1] = {1};

  /* counts */
  make_call(&c, 2, 3);
  poison_last_error();
  EXPECT_FAIL(kb_definition_check_tensors(def, c.inputs, 6, c.outputs, N_OUT, &r), KB_ERROR_INVALID_ARGUMENT,
              "expected 7 inputs (q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale), got 6");
  EXPECT_FAIL(kb_definition_check_tensors(def, c.inputs, N_IN, c.outputs, 1, &r), KB_ERROR_INVALID_ARGUMENT,
              "expected 2 outputs (output, lse), got 1");
  EXPECT_FAIL(kb_definition_check_tensors(def, NULL, N_IN, c.outputs, N_OUT, &r), KB_ERROR_INVALID_ARGUMENT,
              "argument `inputs` is NULL");
  EXPECT_FAIL(kb_definition_check_tensors(NULL, c.inputs, N_IN, c.outputs, N_OUT, &r), KB_ERROR_INVALID_ARGUMENT,
              "argument `def` is NULL");
  r.struct_size = 4;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT, "KB_CHECK_RESULT_INIT");
  r.struct_size = sizeof r;

  /* wrong dtype */
  make_call(&c, 2, 3);
  c.in[0].dtype.code = kDLFloat;
  poison_last_error();
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "gqa_paged_decode_h16_kv2_d128_ps64: input \"q\": dtype is float16 but the definition says bfloat16");
  make_call(&c, 2, 3);
  c.in[3].dtype.bits = 64;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"kv_indptr\": dtype is int64 but the definition says int32");
  make_call(&c, 2, 3);
  c.out[1].dtype.lanes = 4;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "output \"lse\": dtype is DLPack type {code 2, bits 32, lanes 4}");
  make_call(&c, 2, 3);
  c.in[3].dtype.code = kDLUInt; /* uint32 for int32 */
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT, "dtype is uint32");

  /* wrong rank */
  make_call(&c, 2, 3);
  c.in[0].ndim = 2;
  poison_last_error();
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"q\": rank is 2 but the definition's shape [batch_size, num_qo_heads, head_dim] has rank 3");

  /* const axis mismatch */
  make_call(&c, 2, 3);
  c.shapes[0][2] = 64;
  poison_last_error();
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"q\": dim 2 is 64 but axis head_dim is const 128");

  /* inconsistent var axis, within inputs and between an input and an output */
  make_call(&c, 2, 3);
  c.shapes[2][0] = 4;
  poison_last_error();
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"v_cache\": axis num_pages is 4 here but 3 in input \"k_cache\" dim 0");
  make_call(&c, 2, 3);
  c.shapes[8][0] = 5;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "output \"lse\": axis batch_size is 5 here but 2 in input \"q\" dim 0");

  /* non-contiguous strides (a transposed view) */
  make_call(&c, 2, 3);
  strides[0] = 1;
  strides[1] = 2;
  strides[2] = 32;
  c.in[0].strides = strides;
  poison_last_error();
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"q\": strides [1, 2, 32] are not compact row-major for shape [2, 16, 128] (expected [2048, 128, 1])");

  /* constraints violated */
  make_call(&c, 2, 3);
  c.indptr[2] = 2; /* kv_indptr[-1] = 2 but num_kv_indices = 3 */
  poison_last_error();
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "constraint \"num_kv_indices == kv_indptr[-1].item()\" violated: ");
  CHECK(r.constraints_held == 1); /* the first constraint held before the second failed */
  CHECK(contains(kb_last_error(), "3 == 2"));
  make_call(&c, 2, 3);
  c.shapes[3][0] = 4; /* len_indptr 4 with batch_size 2 */
  c.indptr[3] = 3;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "constraint \"len_indptr == batch_size + 1\" violated: ");

  /* NULL tensor for a non-scalar */
  make_call(&c, 2, 3);
  c.inputs[1] = NULL;
  poison_last_error();
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT, "input \"k_cache\" is NULL");
  make_call(&c, 2, 3);
  c.outputs[1] = NULL;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT, "output \"lse\" is NULL");

  /* a tensor with elements but NULL data */
  make_call(&c, 2, 3);
  c.in[1].data = NULL;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT, "input \"k_cache\": data is NULL");

  /* negative dimension */
  make_call(&c, 2, 3);
  c.shapes[5][0] = -2;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT, "input \"kv_last_page_len\": dim 0 is -2");

  /* the scalar passed as a rank-1 tensor, or on the GPU */
  make_call(&c, 2, 3);
  vec = tensor(&c.sm_scale, 1, vec_shape, kDLFloat, 32);
  c.inputs[6] = &vec;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"sm_scale\" is a scalar: pass NULL or a 0-D tensor, not a tensor of rank 1");
  c.in[6].device.device_type = kDLCUDA;
  c.inputs[6] = &c.in[6];
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT, "must be in host memory");

  /* CPU and CUDA mixed; two CUDA devices; an unsupported device type */
  make_call(&c, 2, 3);
  c.in[1].device.device_type = kDLCUDA;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"k_cache\" is on CUDA device 0 but input \"q\" is on the CPU");
  make_call(&c, 2, 3);
  c.in[0].device.device_type = kDLCUDA;
  c.in[1].device.device_type = kDLCUDA;
  c.in[1].device.device_id = 1;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"k_cache\" is on CUDA device 1 but input \"q\" is on CUDA device 0");
  make_call(&c, 2, 3);
  c.in[2].device.device_type = kDLVulkan;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_UNSUPPORTED, "input \"v_cache\" is on device type 7");

  /* absurd rank */
  make_call(&c, 2, 3);
  c.in[0].ndim = 40;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_LIMIT, "rank 40 exceeds the limit");
}

/* Hostile DLTensor fields: each is refused before kb reads the field as an enum or does pointer
 * arithmetic with it (the sanitized build runs this too). */
static void test_check_tensors_hostile(const kb_definition* def) {
  Call c;
  kb_check_result r = KB_CHECK_RESULT_INIT;
  int64_t strides_k[4];
  double scale64 = 0.125;
  DLTensor s;

  /* a device_type outside DLDeviceType, on a tensor and on a scalar's 0-D tensor */
  make_call(&c, 2, 3);
  c.in[2].device.device_type = (DLDeviceType)99;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"v_cache\": device.device_type is 99, not a DLPack device type");
  make_call(&c, 2, 3);
  c.in[6].device.device_type = (DLDeviceType)-1;
  c.inputs[6] = &c.in[6];
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"sm_scale\": device.device_type is -1, not a DLPack device type");

  /* a byte_offset that wraps data past the end of the address space */
  make_call(&c, 2, 3);
  c.in[1].byte_offset = UINT64_MAX - 8;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"k_cache\": byte_offset 18446744073709551607 plus its extent of 98304 bytes overflows the "
              "address space past data");
  make_call(&c, 2, 3);
  c.in[3].byte_offset = UINT64_MAX - 8; /* an index tensor, whose elements constraints read */
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT, "input \"kv_indptr\": byte_offset 18446744073709551607");
  make_call(&c, 2, 3);
  s = tensor(&scale64, 0, NULL, kDLFloat, 64);
  s.byte_offset = UINT64_MAX - 3;
  c.inputs[6] = &s;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"sm_scale\": byte_offset 18446744073709551612 plus its extent of 8 bytes overflows");

  /* dims whose product overflows int64 (each alone is below it) */
  make_call(&c, 2, 3);
  set_shape(c.shapes[1], INT64_C(1) << 40, INT64_C(1) << 40, 2, 128);
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"k_cache\": shape [1099511627776, 1099511627776, 2, 128]: the product of its dims overflows "
              "int64");
  make_call(&c, 2, 3);
  set_shape(c.shapes[1], INT64_MAX, 2, 2, 128); /* one dim past kb's element limit: refused there */
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_LIMIT,
              "input \"k_cache\": shape [9223372036854775807, 2, 2, 128] has more than 1099511627776 elements");
  make_call(&c, 2, 3);
  set_shape(c.shapes[1], INT64_MIN, 64, 2, 128);
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"k_cache\": dim 0 is -9223372036854775808");

  /* strides that would overflow an element offset: refused as not compact */
  make_call(&c, 2, 3);
  strides_k[0] = INT64_MAX;
  strides_k[1] = INT64_MAX / 2;
  strides_k[2] = 128;
  strides_k[3] = 1;
  c.in[1].strides = strides_k;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"k_cache\": strides [9223372036854775807, 4611686018427387903, 128, 1] are not compact "
              "row-major for shape [3, 64, 2, 128] (expected [16384, 256, 128, 1])");
  strides_k[0] = 16384;
  strides_k[1] = 256;
  strides_k[2] = 128;
  strides_k[3] = -1;
  EXPECT_FAIL(run_check(def, &c, &r), KB_ERROR_INVALID_ARGUMENT, "are not compact row-major");
}

/* A definition with a float4 input and an optional tensor, loaded from memory. */
static void test_check_tensors_fp4_optional(kb_context* ctx) {
  static const char* json =
      "{\"name\": \"fp4_opt\", \"op_type\": \"test\","
      " \"axes\": {\"M\": {\"type\": \"var\"}, \"K\": {\"type\": \"const\", \"value\": 8}},"
      " \"inputs\": {\"a\": {\"shape\": [\"M\", \"K\"], \"dtype\": \"float4_e2m1\"},"
      "              \"state\": {\"shape\": [\"M\"], \"dtype\": \"bool\", \"optional\": true}},"
      " \"outputs\": {\"y\": {\"shape\": [\"M\"], \"dtype\": \"float32\"}},"
      " \"constraints\": [\"M >= 1\", \"state[0] == 1\"],"
      " \"reference\": \"def run(a, state):\\n    return a\"}";
  kb_definition* def = NULL;
  kb_tensor_info info = KB_TENSOR_INFO_INIT;
  unsigned char a_data[16] = {0}, state_data[2] = {1, 0};
  float y_data[2];
  int64_t a_shape[2] = {2, 8}, m_shape[1] = {2};
  DLTensor a = tensor(a_data, 2, a_shape, KB_DLPACK_FLOAT4_E2M1FN, 4);
  DLTensor state = tensor(state_data, 1, m_shape, KB_DLPACK_BOOL, 8);
  DLTensor y = tensor(y_data, 1, m_shape, kDLFloat, 32);
  const DLTensor* inputs[2];
  const DLTensor* outputs[1];
  kb_check_result r = KB_CHECK_RESULT_INIT;

  EXPECT_OK(kb_definition_load(ctx, json, strlen(json), &def));
  if (!def) return;
  EXPECT_OK(kb_definition_input(def, 1, &info));
  CHECK(info.optional == 1 && info.dtype == KB_DTYPE_BOOL);
  inputs[0] = &a;
  inputs[1] = &state;
  outputs[0] = &y;

  a.dtype.lanes = 2; /* torch float4_e2m1fn_x2 */
  EXPECT_OK(kb_definition_check_tensors(def, inputs, 2, outputs, 1, &r));
  CHECK(r.constraints_held == 2);
  a.dtype.lanes = 1;
  EXPECT_OK(kb_definition_check_tensors(def, inputs, 2, outputs, 1, &r));
  a.dtype.lanes = 4;
  EXPECT_FAIL(kb_definition_check_tensors(def, inputs, 2, outputs, 1, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"a\": dtype is DLPack type {code 17, bits 4, lanes 4} but the definition says float4_e2m1");
  a.dtype.lanes = 2;

  /* bool elements are read as 0/1 */
  state_data[0] = 0;
  EXPECT_FAIL(kb_definition_check_tensors(def, inputs, 2, outputs, 1, &r), KB_ERROR_INVALID_ARGUMENT,
              "constraint \"state[0] == 1\" violated");
  /* bool is code 6 bits 8 only: uint8 is refused */
  state.dtype.code = kDLUInt;
  EXPECT_FAIL(kb_definition_check_tensors(def, inputs, 2, outputs, 1, &r), KB_ERROR_INVALID_ARGUMENT,
              "input \"state\": dtype is uint8 but the definition says bool");

  /* the optional tensor may be NULL: its constraint is then unchecked */
  inputs[1] = NULL;
  EXPECT_OK(kb_definition_check_tensors(def, inputs, 2, outputs, 1, &r));
  CHECK(r.constraints_held == 1 && r.constraints_unchecked == 1);
  kb_definition_destroy(def);
}

/* ---- workloads --------------------------------------------------------------------------------- */

#define WL_INPUTS                                                                                           \
  "\"inputs\": {\"q\": {\"type\": \"random\"}, \"k_cache\": {\"type\": \"random\"}, "                        \
  "\"v_cache\": {\"type\": \"random\"}, "                                                                   \
  "\"kv_indptr\": {\"type\": \"safetensors\", \"path\": \"blob/w.safetensors\", \"tensor_key\": \"kv_indptr\"}, " \
  "\"kv_indices\": {\"type\": \"random\"}, \"kv_last_page_len\": {\"type\": \"random\"}, "                  \
  "\"sm_scale\": {\"type\": \"scalar\", \"value\": 0.08838834764831845}}"

static const char* k_workload =
    "{\"uuid\": \"w-1\", \"axes\": {\"batch_size\": 2, \"num_pages\": 3, \"len_indptr\": 3, \"num_kv_indices\": 3}, "
    WL_INPUTS "}";
static const char* k_workload_bad_constraint =
    "{\"uuid\": \"w-2\", \"axes\": {\"batch_size\": 2, \"num_pages\": 3, \"len_indptr\": 4, \"num_kv_indices\": 3}, "
    WL_INPUTS "}";

static void test_workloads(kb_context* ctx, const kb_definition* def) {
  kb_workload* w = NULL;
  kb_workload* bad = NULL;
  kb_workload* line_w = NULL;
  kb_definition* h32 = NULL;
  kb_workload_input_info in = KB_WORKLOAD_INPUT_INFO_INIT;
  const char* name = NULL;
  int64_t value = -1;
  char path[4200];
  char* text;
  size_t len = 0;

  EXPECT_OK(kb_workload_load(ctx, k_workload, strlen(k_workload), &w));
  if (!w) return;
  CHECK(str_eq(kb_workload_uuid(w), "w-1"));
  CHECK(kb_workload_definition(w) == NULL);
  CHECK(kb_workload_axis_count(w) == 4);
  EXPECT_OK(kb_workload_axis(w, 1, &name, &value));
  CHECK(str_eq(name, "num_pages") && value == 3);
  EXPECT_OK(kb_workload_axis(w, 0, NULL, &value)); /* either out may be NULL */
  CHECK(value == 2);
  EXPECT_FAIL(kb_workload_axis(w, 4, &name, &value), KB_ERROR_INVALID_ARGUMENT, "axis index 4");
  CHECK(kb_workload_input_count(w) == 7);
  EXPECT_OK(kb_workload_input(w, 0, &in));
  CHECK(str_eq(in.name, "q") && in.kind == KB_INPUT_RANDOM && in.path == NULL);
  EXPECT_OK(kb_workload_input(w, 3, &in));
  CHECK(str_eq(in.name, "kv_indptr") && in.kind == KB_INPUT_SAFETENSORS && str_eq(in.path, "blob/w.safetensors") &&
        str_eq(in.tensor_key, "kv_indptr"));
  EXPECT_OK(kb_workload_input(w, 6, &in));
  CHECK(str_eq(in.name, "sm_scale") && in.kind == KB_INPUT_SCALAR && in.scalar_kind == KB_SCALAR_FLOAT &&
        in.float_value > 0.0883 && in.float_value < 0.0884 && in.path == NULL);
  EXPECT_FAIL(kb_workload_input(w, 7, &in), KB_ERROR_INVALID_ARGUMENT, "input index 7");
  in.struct_size = 1;
  EXPECT_FAIL(kb_workload_input(w, 0, &in), KB_ERROR_INVALID_ARGUMENT, "struct_size");
  CHECK(contains(kb_workload_json(w), "\"uuid\":\"w-1\"") || contains(kb_workload_json(w), "\"uuid\": \"w-1\""));

  EXPECT_OK(kb_workload_check(w, def));
  EXPECT_FAIL(kb_workload_check(NULL, def), KB_ERROR_INVALID_ARGUMENT, "argument `workload` is NULL");

  EXPECT_OK(kb_workload_load(ctx, k_workload_bad_constraint, strlen(k_workload_bad_constraint), &bad));
  EXPECT_FAIL(kb_workload_check(bad, def), KB_ERROR_INVALID_DATA, "len_indptr == batch_size + 1");
  kb_workload_destroy(bad);

  EXPECT_FAIL(kb_workload_load(ctx, "{\"uuid\": \"\", \"axes\": {}, \"inputs\": {}}", 38, &bad),
              KB_ERROR_INVALID_DATA, "workload.uuid");
  CHECK(bad == NULL);

  /* the first line of a shipped workload file (a workload-only Trace line) */
  text = read_file(shared_path(path, sizeof path, WL_H32_PS1), &len);
  CHECK(text != NULL);
  if (text) {
    char* nl = strchr(text, '\n');
    size_t line_len = nl ? (size_t)(nl - text) : len;
    EXPECT_OK(kb_workload_load_trace_line(ctx, text, line_len, &line_w));
    CHECK(str_eq(kb_workload_definition(line_w), "gqa_paged_decode_h32_kv4_d128_ps1"));
    CHECK(kb_workload_uuid(line_w) && strlen(kb_workload_uuid(line_w)) > 0);
    EXPECT_FAIL(kb_workload_check(line_w, def), KB_ERROR_INVALID_DATA,
                "belongs to definition \"gqa_paged_decode_h32_kv4_d128_ps1\"");
    EXPECT_OK(kb_definition_load_file(ctx, shared_path(path, sizeof path, DEF_H32_PS1), &h32));
    EXPECT_OK(kb_workload_check(line_w, h32));
    kb_definition_destroy(h32);
    kb_workload_destroy(line_w);
    free(text);
  }
  kb_workload_destroy(w);
}

/* ---- solutions ---------------------------------------------------------------------------------- */

static void test_solutions(kb_context* ctx) {
  static const char* json =
      "{\"name\": \"gqa_decode_cuda_v1\", \"definition\": \"gqa_paged_decode_h16_kv2_d128_ps64\","
      " \"author\": \"kb-tests\", \"description\": \"a test solution\","
      " \"spec\": {\"language\": \"cuda\", \"target_hardware\": [\"NVIDIA_H100\"],"
      "          \"entry_point\": \"kernel.cu::run\", \"dependencies\": [], \"destination_passing_style\": true},"
      " \"sources\": [{\"path\": \"kernel.cu\", \"content\": \"extern \\\"C\\\" void run() {}\\n\"},"
      "              {\"path\": \"util.h\", \"content\": \"#pragma once\\n\"}]}";
  static const char* bad =
      "{\"name\": \"s\", \"definition\": \"d\", \"author\": \"a\","
      " \"spec\": {\"language\": \"cuda\", \"target_hardware\": [], \"entry_point\": \"missing.cu::run\","
      "          \"dependencies\": []},"
      " \"sources\": [{\"path\": \"kernel.cu\", \"content\": \"\"}]}";
  kb_solution* s = NULL;
  kb_solution* again = NULL;
  kb_source_info src = KB_SOURCE_INFO_INIT;

  EXPECT_OK(kb_solution_load(ctx, json, strlen(json), &s));
  if (!s) return;
  CHECK(str_eq(kb_solution_name(s), "gqa_decode_cuda_v1"));
  CHECK(str_eq(kb_solution_definition(s), "gqa_paged_decode_h16_kv2_d128_ps64"));
  CHECK(str_eq(kb_solution_author(s), "kb-tests"));
  CHECK(str_eq(kb_solution_description(s), "a test solution"));
  CHECK(str_eq(kb_solution_language(s), "cuda"));
  CHECK(str_eq(kb_solution_entry_point(s), "kernel.cu::run"));
  CHECK(kb_solution_source_count(s) == 2);
  EXPECT_OK(kb_solution_source(s, 0, &src));
  CHECK(str_eq(src.path, "kernel.cu") && str_eq(src.content, "extern \"C\" void run() {}\n") &&
        src.content_size == strlen("extern \"C\" void run() {}\n"));
  EXPECT_OK(kb_solution_source(s, 1, &src));
  CHECK(str_eq(src.path, "util.h"));
  EXPECT_FAIL(kb_solution_source(s, 2, &src), KB_ERROR_INVALID_ARGUMENT, "source index 2");
  EXPECT_OK(kb_solution_load(ctx, kb_solution_json(s), strlen(kb_solution_json(s)), &again));
  CHECK(str_eq(kb_solution_json(again), kb_solution_json(s)));
  kb_solution_destroy(again);
  kb_solution_destroy(s);

  EXPECT_FAIL(kb_solution_load(ctx, bad, strlen(bad), &s), KB_ERROR_INVALID_DATA,
              "solution.spec.entry_point: entry file \"missing.cu\" is not among the sources");
  CHECK(s == NULL);
  EXPECT_FAIL(kb_solution_load_file(ctx, "/nonexistent/kb/solution.json", &s), KB_ERROR_IO, "/nonexistent/kb/solution.json");
  poison_last_error();
  CHECK(kb_solution_name(NULL) == NULL);
  CHECK(contains(kb_last_error(), "argument `solution` is NULL"));
}

/* ---- results ------------------------------------------------------------------------------------- */

#define TRACE_WORKLOAD                                                                               \
  "\"workload\": {\"uuid\": \"w-1\", \"axes\": {\"batch_size\": 2, \"num_pages\": 3, \"len_indptr\": 3," \
  " \"num_kv_indices\": 3}, " WL_INPUTS "}"

static void test_results(kb_context* ctx) {
  static const char* passed =
      "{\"definition\": \"gqa_paged_decode_h16_kv2_d128_ps64\", " TRACE_WORKLOAD ","
      " \"solution\": \"gqa_decode_cuda_v1\","
      " \"evaluation\": {\"status\": \"PASSED\", \"environment\": {\"hardware\": \"NVIDIA H100 80GB HBM3\","
      " \"libs\": {\"torch\": \"2.11.0\"}}, \"timestamp\": \"2025-01-02T03:04:05\", \"log\": \"ok\","
      " \"correctness\": {\"max_relative_error\": 0.001, \"max_absolute_error\": 0.002},"
      " \"performance\": {\"latency_ms\": 0.5, \"reference_latency_ms\": 1.5, \"speedup_factor\": 3.0}}}";
  static const char* timeout =
      "{\"definition\": \"gqa_paged_decode_h16_kv2_d128_ps64\", " TRACE_WORKLOAD ","
      " \"solution\": \"s\", \"evaluation\": {\"status\": \"TIMEOUT\", \"environment\": {\"hardware\": \"H100\","
      " \"libs\": {}}, \"timestamp\": \"2025-01-02T03:04:05Z\", \"log\": \"killed after 60 s\"}}";
  static const char* workload_only =
      "{\"definition\": \"gqa_paged_decode_h16_kv2_d128_ps64\", " TRACE_WORKLOAD ", \"solution\": null,"
      " \"evaluation\": null}";
  static const char* bad =
      "{\"definition\": \"gqa_paged_decode_h16_kv2_d128_ps64\", " TRACE_WORKLOAD ", \"solution\": \"s\","
      " \"evaluation\": {\"status\": \"PASSED\", \"environment\": {\"hardware\": \"H100\", \"libs\": {}},"
      " \"timestamp\": \"2025-01-02T03:04:05\", \"log\": \"\","
      " \"correctness\": {\"max_relative_error\": 0.0, \"max_absolute_error\": 0.0}}}";
  kb_result* r = NULL;
  kb_result* again = NULL;
  kb_result_info info = KB_RESULT_INFO_INIT;

  CHECK(str_eq(kb_eval_status_name(KB_EVAL_PASSED), "PASSED"));
  CHECK(str_eq(kb_eval_status_name(KB_EVAL_INCORRECT_NUMERICAL), "INCORRECT_NUMERICAL"));
  CHECK(str_eq(kb_eval_status_name(KB_EVAL_TIMEOUT), "TIMEOUT"));
  poison_last_error();
  CHECK(kb_eval_status_name((kb_eval_status)7) == NULL);
  CHECK(kb_eval_status_name((kb_eval_status)999) == NULL);
  CHECK(contains(kb_last_error(), "kb_eval_status_name: 999 is not a kb_eval_status"));
  CHECK(contains(kb_last_error(), "not a kb_eval_status"));

  EXPECT_OK(kb_result_load(ctx, passed, strlen(passed), &r));
  EXPECT_OK(kb_result_get(r, &info));
  CHECK(str_eq(info.definition, "gqa_paged_decode_h16_kv2_d128_ps64"));
  CHECK(str_eq(info.solution, "gqa_decode_cuda_v1"));
  CHECK(str_eq(info.workload_uuid, "w-1"));
  CHECK(info.has_evaluation == 1 && info.status == KB_EVAL_PASSED);
  CHECK(str_eq(info.hardware, "NVIDIA H100 80GB HBM3"));
  CHECK(str_eq(info.timestamp, "2025-01-02T03:04:05"));
  CHECK(str_eq(info.log, "ok"));
  CHECK(info.has_correctness == 1 && info.max_relative_error == 0.001 && info.max_absolute_error == 0.002);
  CHECK(info.has_performance == 1 && info.latency_ms == 0.5 && info.reference_latency_ms == 1.5 &&
        info.speedup_factor == 3.0);
  CHECK(kb_result_json(r) != NULL && strchr(kb_result_json(r), '\n') == NULL);
  EXPECT_OK(kb_result_load(ctx, kb_result_json(r), strlen(kb_result_json(r)), &again));
  CHECK(str_eq(kb_result_json(again), kb_result_json(r)));
  kb_result_destroy(again);
  info.struct_size = sizeof(size_t);
  EXPECT_FAIL(kb_result_get(r, &info), KB_ERROR_INVALID_ARGUMENT, "KB_RESULT_INFO_INIT");
  info.struct_size = sizeof info;
  kb_result_destroy(r);
  r = NULL;

  EXPECT_OK(kb_result_load(ctx, timeout, strlen(timeout), &r));
  EXPECT_OK(kb_result_get(r, &info));
  CHECK(info.has_evaluation == 1 && info.status == KB_EVAL_TIMEOUT && info.has_correctness == 0 &&
        info.has_performance == 0 && info.latency_ms == 0.0 && str_eq(info.log, "killed after 60 s"));
  kb_result_destroy(r);
  r = NULL;

  EXPECT_OK(kb_result_load(ctx, workload_only, strlen(workload_only), &r));
  EXPECT_OK(kb_result_get(r, &info));
  CHECK(info.solution == NULL && info.has_evaluation == 0 && info.hardware == NULL && info.log == NULL);
  CHECK(str_eq(info.workload_uuid, "w-1"));
  kb_result_destroy(r);
  r = NULL;

  EXPECT_FAIL(kb_result_load(ctx, bad, strlen(bad), &r), KB_ERROR_INVALID_DATA,
              "evaluation.performance: required when status is PASSED");
  CHECK(r == NULL);
  EXPECT_FAIL(kb_result_get(NULL, &info), KB_ERROR_INVALID_ARGUMENT, "argument `result` is NULL");
}

/* ---- CUDA ---------------------------------------------------------------------------------------- */

/* kb_cuda_device_info as version 1 had it: up to l2_bytes, before pci_bus_id. */
#define CUDA_DEVICE_INFO_V1_SIZE (offsetof(kb_cuda_device_info, l2_bytes) + sizeof(uint64_t))

static void test_cuda(void) {
  int n = -1;
  kb_status s = kb_cuda_device_count(&n);
  kb_cuda_device_info info = KB_CUDA_DEVICE_INFO_INIT;
  CHECK(s == KB_OK || s == KB_ERROR_NO_CUDA_DEVICE || s == KB_ERROR_UNSUPPORTED);
  if (s == KB_OK) {
    CHECK(n >= 1);
    EXPECT_OK(kb_cuda_device_get(0, &info));
    CHECK(info.name[0] != '\0' && info.sm_count > 0 && info.compute_major > 0 && info.memory_bytes > 0);
    /* "0000:19:00.0": domain, bus, device, function */
    CHECK(strlen(info.pci_bus_id) == 12 && info.pci_bus_id[4] == ':' && info.pci_bus_id[7] == ':' &&
          info.pci_bus_id[10] == '.');
    printf("cuda: %d device(s); device 0: %s, sm_%d%d, %d SMs, PCI %s\n", n, info.name, info.compute_major,
           info.compute_minor, info.sm_count, info.pci_bus_id);
    /* A caller built against version 1 (struct ending at l2_bytes): served, pci_bus_id left untouched. */
    memset(&info, 0x5a, sizeof info);
    info.struct_size = CUDA_DEVICE_INFO_V1_SIZE;
    EXPECT_OK(kb_cuda_device_get(0, &info));
    CHECK(info.sm_count > 0 && (unsigned char)info.pci_bus_id[0] == 0x5a);
    info.struct_size = sizeof info;
    EXPECT_FAIL(kb_cuda_device_get(n, &info), KB_ERROR_INVALID_ARGUMENT, "does not exist");
  } else {
    CHECK(n == 0);
    CHECK(kb_last_error()[0] != '\0');
    printf("cuda: %s (%s)\n", kb_status_string(s), kb_last_error());
    EXPECT_FAIL(kb_cuda_device_get(0, &info), s, NULL);
  }
  EXPECT_FAIL(kb_cuda_device_count(NULL), KB_ERROR_INVALID_ARGUMENT, "argument `out` is NULL");
  info.struct_size = 0;
  EXPECT_FAIL(kb_cuda_device_get(0, &info), KB_ERROR_INVALID_ARGUMENT, "struct_size");
  info.struct_size = CUDA_DEVICE_INFO_V1_SIZE - 1;
  EXPECT_FAIL(kb_cuda_device_get(0, &info), KB_ERROR_INVALID_ARGUMENT, "struct_size");
}

/* kb_benchmark_run on a CUDA solution with cupti set (a device only): the trace's extra carries CUPTI's kernel
 * time, or the reason CUPTI could not record; a version-1 struct_size leaves cupti unread (no CUPTI field). */
static const char SILU_BF16_DEF[] =
    "{\"name\": \"silu_and_mul_bf16_i64\", \"op_type\": \"silu_and_mul\", \"axes\": {\"T\": {\"type\": \"var\"},"
    " \"I\": {\"type\": \"const\", \"value\": 64}, \"I2\": {\"type\": \"const\", \"value\": 128}},"
    " \"inputs\": {\"x\": {\"shape\": [\"T\", \"I2\"], \"dtype\": \"bfloat16\"}},"
    " \"outputs\": {\"out\": {\"shape\": [\"T\", \"I\"], \"dtype\": \"bfloat16\"}},"
    " \"reference\": \"def run(x):\\n    return torch.nn.functional.silu(x[..., :64]) * x[..., 64:]\\n\"}";

static void test_cuda_benchmark(kb_context* ctx) {
  int n = 0;
  kb_definition* def = NULL;
  kb_workload* wl = NULL;
  kb_result* res = NULL;
  kb_benchmark_options opts = KB_BENCHMARK_OPTIONS_INIT;
  const char* wl_json = "{\"uuid\": \"w-cuda\", \"axes\": {\"T\": 64}, \"inputs\": {\"x\": {\"type\": \"random\"}}}";
  if (kb_cuda_device_count(&n) != KB_OK || n < 1) {
    printf("cuda benchmark: skipped (no CUDA device)\n");
    return;
  }
  EXPECT_OK(kb_definition_load(ctx, SILU_BF16_DEF, strlen(SILU_BF16_DEF), &def));
  EXPECT_OK(kb_workload_load(ctx, wl_json, strlen(wl_json), &wl));
  if (!def || !wl) return;
  opts.trials = 1;
  opts.cupti = 1;
  EXPECT_OK(kb_benchmark_run(ctx, def, wl, "kb_cuda_silu_and_mul", &opts, &res));
  if (res)
    printf("cuda benchmark with cupti: %s\n", strstr(kb_result_json(res), "cupti_kernel_ms")
                                                  ? "CUPTI kernel time recorded"
                                                  : "CUPTI could not record (reason in the trace)");
  check_passed(&res, "cupti", 1); /* the kernel time, or `cupti` with the reason it could not record */
  opts.struct_size = BENCHMARK_OPTIONS_V1_SIZE;
  EXPECT_OK(kb_benchmark_run(ctx, def, wl, "kb_cuda_silu_and_mul", &opts, &res));
  check_passed(&res, "cupti", 0);
  kb_workload_destroy(wl);
  kb_definition_destroy(def);
}

/* kb_gemm_race_file_set: accepted in every build; with a device, kb_cuda_gemm's small-M race appends its winner
 * to the file set (created), and a file whose line is bad makes the next new problem's run fail, naming the file
 * and line. */
static const char GEMM_DEF[] =
    "{\"name\": \"gemm_n1024_k1024\", \"op_type\": \"gemm\", \"axes\": {\"M\": {\"type\": \"var\"},"
    " \"N\": {\"type\": \"const\", \"value\": 1024}, \"K\": {\"type\": \"const\", \"value\": 1024}},"
    " \"inputs\": {\"A\": {\"shape\": [\"M\", \"K\"], \"dtype\": \"float16\"},"
    " \"B\": {\"shape\": [\"N\", \"K\"], \"dtype\": \"float16\"}},"
    " \"outputs\": {\"C\": {\"shape\": [\"M\", \"N\"], \"dtype\": \"float16\"}},"
    " \"reference\": \"def run(A, B):\\n    return A @ B.T\\n\"}";

static void test_gemm_race_file(kb_context* ctx) {
  int n = 0;
  char dir[] = "/tmp/kb-capi-races-XXXXXX";
  char path[256], bad_path[256];
  kb_definition* def = NULL;
  kb_workload* wl = NULL;
  kb_result* res = NULL;
  kb_benchmark_options opts = KB_BENCHMARK_OPTIONS_INIT;
  const char* wl8 = "{\"uuid\": \"w-race-8\", \"axes\": {\"M\": 8}, \"inputs\": {\"A\": {\"type\": \"random\"},"
                    " \"B\": {\"type\": \"random\"}}}";
  const char* wl9 = "{\"uuid\": \"w-race-9\", \"axes\": {\"M\": 9}, \"inputs\": {\"A\": {\"type\": \"random\"},"
                    " \"B\": {\"type\": \"random\"}}}";
  char* text;
  size_t len = 0;
  FILE* f;
  kb_status s;

  EXPECT_OK(kb_gemm_race_file_set(NULL));
  EXPECT_OK(kb_gemm_race_file_set(""));
  if (kb_cuda_device_count(&n) != KB_OK || n < 1) {
    printf("gemm race file: skipped (no CUDA device)\n");
    return;
  }
  if (!mkdtemp(dir)) {
    CHECK(!"mkdtemp");
    return;
  }
  snprintf(path, sizeof path, "%s/races.jsonl", dir);
  snprintf(bad_path, sizeof bad_path, "%s/bad.jsonl", dir);
  EXPECT_OK(kb_definition_load(ctx, GEMM_DEF, strlen(GEMM_DEF), &def));
  opts.trials = 1;
  EXPECT_OK(kb_gemm_race_file_set(path));
  EXPECT_OK(kb_workload_load(ctx, wl8, strlen(wl8), &wl));
  if (def && wl) {
    EXPECT_OK(kb_benchmark_run(ctx, def, wl, "kb_cuda_gemm", &opts, &res));
    check_passed(&res, NULL, 0);
    text = read_file(path, &len);
    CHECK(text && strstr(text, "\"kb_gemm_race\":\"small_m\"") && strstr(text, "\"M\":8,") &&
          strstr(text, "\"N\":1024,"));
    free(text);
  }
  kb_workload_destroy(wl);
  wl = NULL;
  /* A file with a bad line: the next new problem (M = 9) fails, naming it. */
  f = fopen(bad_path, "wb");
  if (f) {
    fputs("{\"kb_gemm_race\": \"small_m\"}\n", f);
    fclose(f);
  }
  EXPECT_OK(kb_gemm_race_file_set(bad_path));
  EXPECT_OK(kb_workload_load(ctx, wl9, strlen(wl9), &wl));
  if (def && wl) {
    s = kb_benchmark_run(ctx, def, wl, "kb_cuda_gemm", &opts, &res);
    if (s == KB_OK) {
      CHECK(res && strstr(kb_result_json(res), "\"status\":\"PASSED\"") == NULL &&
            strstr(kb_result_json(res), "bad.jsonl:1: ") != NULL);
      if (res) printf("gemm race file, bad line: %.200s\n", strstr(kb_result_json(res), "\"log\""));
    } else {
      CHECK(strstr(kb_last_error(), "bad.jsonl:1: ") != NULL);
    }
    kb_result_destroy(res);
    res = NULL;
  }
  EXPECT_OK(kb_gemm_race_file_set(NULL));
  kb_workload_destroy(wl);
  kb_definition_destroy(def);
  remove(path);
  remove(bad_path);
  rmdir(dir);
  printf("gemm race file: the small-M race's line appended; a bad line refused with its place\n");
}

/* ---- threads: the last error is per thread; handles are shared read-only ----------------------- */

typedef struct {
  const kb_definition* def;
  int ok;
} ThreadArg;

static void* thread_main(void* p) {
  ThreadArg* a = (ThreadArg*)p;
  Call c;
  int i;
  a->ok = kb_last_error()[0] == '\0'; /* the main thread's error is not visible here */
  for (i = 0; i < 200; ++i) {
    make_call(&c, 2, 3);
    if (kb_definition_check_tensors(a->def, c.inputs, N_IN, c.outputs, N_OUT, NULL) != KB_OK) a->ok = 0;
    c.shapes[0][2] = 64;
    if (kb_definition_check_tensors(a->def, c.inputs, N_IN, c.outputs, N_OUT, NULL) != KB_ERROR_INVALID_ARGUMENT)
      a->ok = 0;
    if (!strstr(kb_last_error(), "head_dim is const 128")) a->ok = 0;
  }
  return NULL;
}

static void test_threads(const kb_definition* def) {
  pthread_t th[4];
  ThreadArg args[4];
  int i;
  poison_last_error();
  for (i = 0; i < 4; ++i) {
    args[i].def = def;
    args[i].ok = 0;
    CHECK(pthread_create(&th[i], NULL, thread_main, &args[i]) == 0);
  }
  for (i = 0; i < 4; ++i) {
    pthread_join(th[i], NULL);
    CHECK(args[i].ok);
  }
  CHECK(contains(kb_last_error(), "ABI version")); /* this thread's message is untouched */
}

/* A small silu_and_mul definition with an oracle and a kb CPU solution. */
static const char* SILU_DEF =
    "{\"name\": \"silu_and_mul_i8\", \"op_type\": \"silu_and_mul\", \"axes\": {\"T\": {\"type\": \"var\"},"
    " \"I\": {\"type\": \"const\", \"value\": 8}, \"I2\": {\"type\": \"const\", \"value\": 16}},"
    " \"inputs\": {\"x\": {\"shape\": [\"T\", \"I2\"], \"dtype\": \"float32\"}},"
    " \"outputs\": {\"out\": {\"shape\": [\"T\", \"I\"], \"dtype\": \"float32\"}},"
    " \"reference\": \"def run(x):\\n    pass\\n\"}";

/* A 2-D float32 tensor in host memory over `data` and `shape`. */
static void host_f32(DLTensor* t, float* data, int64_t* shape) {
  memset(t, 0, sizeof *t);
  t->data = data;
  t->device.device_type = kDLCPU;
  t->ndim = 2;
  t->dtype.code = kDLFloat;
  t->dtype.bits = 32;
  t->dtype.lanes = 1;
  t->shape = shape;
}

/* kb_context_options as a caller built against version 1 of the header has it: it ends at flags, before
 * tuning, log and log_user_data. */
#define CONTEXT_OPTIONS_V1_SIZE (offsetof(kb_context_options, flags) + sizeof(uint32_t))

/* What a log callback received. */
typedef struct {
  int count;
  kb_log_level level;
  char last[512];
} log_seen;

static void record_log(kb_log_level level, const char* message, void* user_data) {
  log_seen* seen = (log_seen*)user_data;
  ++seen->count;
  seen->level = level;
  snprintf(seen->last, sizeof seen->last, "%s", message);
}

/* Tuning strings and log callbacks: a bad name or value refused, naming it; a version-1 struct_size
 * still accepted; two contexts with different settings both run; a context's log callback receives the
 * info note of its creation (log=info), and one at the default level (warn) receives nothing. */
static void test_context_tuning(void) {
  kb_context* a = NULL;
  kb_context* b = NULL;
  kb_context_options opts = KB_CONTEXT_OPTIONS_INIT;
  log_seen seen_a, seen_b;
  kb_definition* def = NULL;
  float x[2 * 16], out_a[2 * 8], out_b[2 * 8];
  int64_t xs[2] = {2, 16}, os[2] = {2, 8};
  DLTensor tx, ta, tb;
  const DLTensor* ins[1];
  const DLTensor* outs[1];
  int i;
  memset(&seen_a, 0, sizeof seen_a);
  memset(&seen_b, 0, sizeof seen_b);

  CHECK(opts.tuning == NULL && opts.log == NULL && opts.log_user_data == NULL);
  opts.tuning = "gemm_race=0, no_such_setting=1";
  EXPECT_FAIL(kb_context_create(&opts, KB_ABI_VERSION, &a), KB_ERROR_INVALID_ARGUMENT,
              "unknown tuning name \"no_such_setting\"");
  CHECK(a == NULL);
  opts.tuning = "l2_flush=sometimes";
  EXPECT_FAIL(kb_context_create(&opts, KB_ABI_VERSION, &a), KB_ERROR_INVALID_ARGUMENT, "KB_L2_FLUSH");
  opts.tuning = "gemm_race";
  EXPECT_FAIL(kb_context_create(&opts, KB_ABI_VERSION, &a), KB_ERROR_INVALID_ARGUMENT, "not name=value");

  /* Version 1's struct: the fields after flags are not read (garbage there must not matter). */
  opts.tuning = "no_such_setting=1";
  opts.struct_size = CONTEXT_OPTIONS_V1_SIZE;
  EXPECT_OK(kb_context_create(&opts, KB_ABI_VERSION, &a));
  kb_context_destroy(a);
  a = NULL;
  opts.struct_size = CONTEXT_OPTIONS_V1_SIZE - 1;
  EXPECT_FAIL(kb_context_create(&opts, KB_ABI_VERSION, &a), KB_ERROR_INVALID_ARGUMENT, "struct_size");
  opts.struct_size = sizeof opts;

  opts.tuning = "gemm_race=0,cublaslt_autotune=0,l2_flush=write,log=info";
  opts.log = record_log;
  opts.log_user_data = &seen_a;
  EXPECT_OK(kb_context_create(&opts, KB_ABI_VERSION, &a));
  CHECK(seen_a.count == 1 && seen_a.level == KB_LOG_INFO);
  CHECK(contains(seen_a.last, "gemm_race=0") && contains(seen_a.last, "l2_flush=write") &&
        contains(seen_a.last, "log=info"));
  opts.tuning = "throttle_threshold=0.9";
  opts.log_user_data = &seen_b;
  EXPECT_OK(kb_context_create(&opts, KB_ABI_VERSION, &b));
  CHECK(seen_b.count == 0); /* log=warn (the default): the info note is not passed on */
  if (!a || !b) {
    kb_context_destroy(a);
    kb_context_destroy(b);
    return;
  }

  /* Both contexts run the same solution on the same tensors, and agree. */
  EXPECT_OK(kb_definition_load(a, SILU_DEF, strlen(SILU_DEF), &def));
  if (def) {
    for (i = 0; i < 32; ++i) x[i] = (float)(i % 5) * 0.5f - 1.0f;
    host_f32(&tx, x, xs);
    host_f32(&ta, out_a, os);
    host_f32(&tb, out_b, os);
    ins[0] = &tx;
    outs[0] = &ta;
    EXPECT_OK(kb_solution_run(a, def, "kb_cpu_silu_and_mul", ins, 1, outs, 1, NULL));
    outs[0] = &tb;
    EXPECT_OK(kb_solution_run(b, def, "kb_cpu_silu_and_mul", ins, 1, outs, 1, NULL));
    for (i = 0; i < 16; ++i) CHECK(out_a[i] == out_b[i]);
    kb_definition_destroy(def);
  }
  CHECK(seen_b.count == 0);
  kb_context_destroy(a);
  kb_context_destroy(b);
}

static void test_running(kb_context* ctx) {
  kb_definition* def = NULL;
  kb_workload* wl = NULL;
  kb_result* res = NULL;
  kb_result_info info = KB_RESULT_INFO_INIT;
  kb_benchmark_options opts = KB_BENCHMARK_OPTIONS_INIT;
  char needle[160];
  float x[2 * 16], out[2 * 8];
  int64_t xs[2] = {2, 16}, os[2] = {2, 8};
  DLTensor tx, to;
  const DLTensor* ins[1];
  const DLTensor* outs[1];
  int i;
  const char* wl_json = "{\"uuid\": \"w1\", \"axes\": {\"T\": 3}, \"inputs\": {\"x\": {\"type\": \"random\"}}}";

  EXPECT_OK(kb_definition_load(ctx, SILU_DEF, strlen(SILU_DEF), &def));
  if (!def) return;
  EXPECT_OK(kb_workload_load(ctx, wl_json, strlen(wl_json), &wl));
  if (wl) {
    opts.trials = 2;
    opts.time = 0;
    EXPECT_OK(kb_benchmark_run(ctx, def, wl, "kb_cpu_silu_and_mul", &opts, &res));
    if (res) {
      EXPECT_OK(kb_result_get(res, &info));
      CHECK(info.has_evaluation == 1);
      CHECK(info.status == KB_EVAL_PASSED);
      CHECK(info.has_correctness == 1);
      CHECK(str_eq(info.solution, "kb_cpu_silu_and_mul"));
      CHECK(strstr(kb_result_json(res), "\"status\":\"PASSED\"") != NULL);
      kb_result_destroy(res);
      res = NULL;
    }
    /* A caller built against version 1 of kb_benchmark_options (struct_size ends at
     * required_matched_ratio, before cupti) still runs; one byte shorter is refused. */
    opts.struct_size = BENCHMARK_OPTIONS_V1_SIZE;
    EXPECT_OK(kb_benchmark_run(ctx, def, wl, "kb_cpu_silu_and_mul", &opts, &res));
    check_passed(&res, NULL, 0);
    opts.struct_size -= 1;
    snprintf(needle, sizeof needle, "kb_benchmark_run: opts->struct_size is %zu but must be at least %zu",
             opts.struct_size, opts.struct_size + 1);
    EXPECT_FAIL(kb_benchmark_run(ctx, def, wl, "kb_cpu_silu_and_mul", &opts, &res), KB_ERROR_INVALID_ARGUMENT, needle);
    CHECK(res == NULL);
    opts.struct_size = sizeof opts;
    CHECK(kb_benchmark_run(ctx, def, wl, "no_such_solution", &opts, &res) == KB_ERROR_NOT_FOUND);
    CHECK(res == NULL);
    CHECK(strstr(kb_last_error(), "no solution \"no_such_solution\"") != NULL);
    kb_workload_destroy(wl);
  }

  /* kb_solution_run on caller tensors: the oracle, then kb's CPU solution, agree. */
  for (i = 0; i < 32; ++i) x[i] = (float)(i % 7) * 0.25f - 0.75f;
  host_f32(&tx, x, xs);
  host_f32(&to, out, os);
  ins[0] = &tx;
  outs[0] = &to;
  EXPECT_OK(kb_solution_run(ctx, def, "reference", ins, 1, outs, 1, NULL));
  {
    float ref[16];
    memcpy(ref, out, sizeof ref);
    /* x[0] = -0.75, x[8] = -0.5: silu(-0.75) * -0.5 = 0.75 / (1 + e^0.75) * 0.5 = 0.120314 */
    CHECK(ref[0] > 0.1202f && ref[0] < 0.1204f);
    memset(out, 0, sizeof out);
    EXPECT_OK(kb_solution_run(ctx, def, "kb_cpu_silu_and_mul", ins, 1, outs, 1, NULL));
    for (i = 0; i < 16; ++i) CHECK(out[i] - ref[i] < 1e-5f && ref[i] - out[i] < 1e-5f);
  }
  os[1] = 7; /* wrong output shape: refused before running */
  CHECK(kb_solution_run(ctx, def, "reference", ins, 1, outs, 1, NULL) == KB_ERROR_INVALID_ARGUMENT);
  os[1] = 8;
  /* an input or output whose byte_offset wraps past the end of the address space: refused before
   * kb copies from or into it */
  tx.byte_offset = UINT64_MAX - 8;
  EXPECT_FAIL(kb_solution_run(ctx, def, "kb_cpu_silu_and_mul", ins, 1, outs, 1, NULL), KB_ERROR_INVALID_ARGUMENT,
              "input \"x\": byte_offset 18446744073709551607 plus its extent of 128 bytes overflows the address "
              "space past data");
  tx.byte_offset = 0;
  to.byte_offset = UINT64_MAX - 8;
  EXPECT_FAIL(kb_solution_run(ctx, def, "reference", ins, 1, outs, 1, NULL), KB_ERROR_INVALID_ARGUMENT,
              "output \"out\": byte_offset 18446744073709551607");
  to.byte_offset = 0;
  to.device.device_type = (DLDeviceType)99;
  EXPECT_FAIL(kb_solution_run(ctx, def, "kb_cpu_silu_and_mul", ins, 1, outs, 1, NULL), KB_ERROR_INVALID_ARGUMENT,
              "output \"out\": device.device_type is 99, not a DLPack device type");
  to.device.device_type = kDLCPU;
  CHECK(kb_solution_run(ctx, def, "nope", ins, 1, outs, 1, NULL) == KB_ERROR_NOT_FOUND);
  CHECK(kb_solution_run(ctx, def, NULL, ins, 1, outs, 1, NULL) == KB_ERROR_INVALID_ARGUMENT);
  kb_definition_destroy(def);
}

/* kb_solution_run_seeded: a sampling solution draws the same samples from the same inputs and seed,
 * others from another seed; every sample is a token of the row. */
static const char* SAMPLING_DEF =
    "{\"name\": \"top_p_sampling_v16\", \"op_type\": \"sampling\", \"axes\": {\"B\": {\"type\": \"var\"},"
    " \"V\": {\"type\": \"const\", \"value\": 16}},"
    " \"inputs\": {\"probs\": {\"shape\": [\"B\", \"V\"], \"dtype\": \"float32\"},"
    " \"top_p\": {\"shape\": [\"B\"], \"dtype\": \"float32\"}},"
    " \"outputs\": {\"samples\": {\"shape\": [\"B\"], \"dtype\": \"int64\"}},"
    " \"reference\": \"def run(probs, top_p):\\n    pass\\n\"}";

static void test_seeded_sampling(kb_context* ctx) {
  enum { B = 64, V = 16 };
  kb_definition* def = NULL;
  float probs[B * V], top_p[B];
  int64_t a[B], b[B], c[B];
  int64_t ps[2] = {B, V}, bs[1] = {B};
  DLTensor tp, tt, to;
  const DLTensor* ins[2];
  const DLTensor* outs[1];
  int i, same_ab = 1, same_ac = 1, in_range = 1;

  EXPECT_OK(kb_definition_load(ctx, SAMPLING_DEF, strlen(SAMPLING_DEF), &def));
  if (!def) return;
  for (i = 0; i < B * V; ++i) probs[i] = 1.0f / V;
  for (i = 0; i < B; ++i) top_p[i] = 1.0f;
  host_f32(&tp, probs, ps);
  host_f32(&tt, top_p, bs);
  tt.ndim = 1;
  host_f32(&to, NULL, bs);
  to.ndim = 1;
  to.dtype.code = kDLInt;
  to.dtype.bits = 64;
  ins[0] = &tp;
  ins[1] = &tt;
  outs[0] = &to;
  to.data = a;
  EXPECT_OK(kb_solution_run_seeded(ctx, def, "kb_cpu_sampling", ins, 2, outs, 1, NULL, 7));
  to.data = b;
  EXPECT_OK(kb_solution_run_seeded(ctx, def, "kb_cpu_sampling", ins, 2, outs, 1, NULL, 7));
  to.data = c;
  EXPECT_OK(kb_solution_run_seeded(ctx, def, "kb_cpu_sampling", ins, 2, outs, 1, NULL, 8));
  for (i = 0; i < B; ++i) {
    same_ab &= a[i] == b[i];
    same_ac &= a[i] == c[i];
    in_range &= a[i] >= 0 && a[i] < V && c[i] >= 0 && c[i] < V;
  }
  CHECK(same_ab);   /* same seed, same samples */
  CHECK(!same_ac);  /* 64 uniform draws over 16 tokens agree by chance with probability 16^-64 */
  CHECK(in_range);
  EXPECT_FAIL(kb_solution_run_seeded(ctx, def, "nope", ins, 2, outs, 1, NULL, 7), KB_ERROR_NOT_FOUND,
              "kb_solution_run_seeded: no solution \"nope\"");
  kb_definition_destroy(def);
}

/* A PASSED record of kb's CUDA silu_and_mul at T = 64, as `kb bench` on a GPU writes one, for the
 * definition named NAME. */
#define SILU_CUDA_RECORD(NAME)                                                                              \
  "{\"definition\":\"" NAME "\",\"workload\":{\"uuid\":\"g64\",\"axes\":{\"T\":64},"                        \
  "\"inputs\":{\"x\":{\"type\":\"random\"}}},\"solution\":\"kb_cuda_silu_and_mul\",\"evaluation\":"         \
  "{\"status\":\"PASSED\",\"environment\":{\"hardware\":\"NVIDIA H100 80GB HBM3\",\"libs\":{}},"           \
  "\"timestamp\":\"2026-11-28T00:00:00.000Z\",\"log\":\"\",\"correctness\":{\"max_relative_error\":0.0,"   \
  "\"max_absolute_error\":0.0},\"performance\":{\"latency_ms\":0.004,\"reference_latency_ms\":0.01,"      \
  "\"speedup_factor\":2.5}}}"

static void write_line(FILE* f, const char* line) { fprintf(f, "%s\n", line); }

/* kb_dispatch over real records: kb_benchmark_run measures kb's CPU solution and the oracle, their
 * trace lines go into a file beside a GPU record, and the dispatch picks and runs per call. */
static void test_dispatch(kb_context* ctx) {
  kb_definition* def = NULL;
  kb_workload* wl = NULL;
  kb_result* res = NULL;
  kb_dispatch* dp = NULL;
  kb_dispatch_options dopts = KB_DISPATCH_OPTIONS_INIT;
  kb_dispatch_choice choice = KB_DISPATCH_CHOICE_INIT;
  kb_benchmark_options opts = KB_BENCHMARK_OPTIONS_INIT;
  const int cuda_build = strstr(kb_build_info(), "cuda=on") != NULL;
  char dir[] = "/tmp/kb-capi-dispatch-XXXXXX";
  char file[256], torn[256], bf16_file[256];
  kb_definition* bf16 = NULL;
  const char* solutions[2] = {"kb_cpu_silu_and_mul", "reference"};
  const char* wl_json = "{\"uuid\": \"w3\", \"axes\": {\"T\": 3}, \"inputs\": {\"x\": {\"type\": \"random\"}}}";
  float x[2 * 16], out[2 * 8], ref[2 * 8];
  int64_t xs[2] = {2, 16}, os[2] = {2, 8};
  DLTensor tx, to, gx, go;
  const DLTensor* ins[1];
  const DLTensor* outs[1];
  FILE* f;
  int i;

  EXPECT_OK(kb_definition_load(ctx, SILU_DEF, strlen(SILU_DEF), &def));
  EXPECT_OK(kb_workload_load(ctx, wl_json, strlen(wl_json), &wl));
  CHECK(mkdtemp(dir) != NULL);
  snprintf(file, sizeof file, "%s/silu_and_mul_i8.jsonl", dir);
  snprintf(torn, sizeof torn, "%s/torn.jsonl", dir);
  snprintf(bf16_file, sizeof bf16_file, "%s/bf16.jsonl", dir);
  f = fopen(file, "w");
  CHECK(f != NULL);
  if (!def || !wl || !f) return;
  opts.trials = 1;
  opts.time = 1;
  for (i = 0; i < 2; ++i) {
    EXPECT_OK(kb_benchmark_run(ctx, def, wl, solutions[i], &opts, &res));
    if (res) write_line(f, kb_result_json(res));
    kb_result_destroy(res);
    res = NULL;
  }
  /* kb's CUDA silu_and_mul takes bfloat16 and float16 only: its record of this float32 definition
   * does not count. */
  write_line(f, SILU_CUDA_RECORD("silu_and_mul_i8"));
  fclose(f);
  f = fopen(bf16_file, "w");
  CHECK(f != NULL);
  if (f) {
    write_line(f, SILU_CUDA_RECORD("silu_and_mul_bf16_i64"));
    fclose(f);
  }

  /* The folder: kb's CPU solution at T = 3 (the oracle is not a candidate); the bf16 file is another
   * definition's. */
  EXPECT_OK(kb_dispatch_create(ctx, def, dir, NULL, &dp));
  CHECK(kb_dispatch_entry_count(dp) == 1);

  /* A CPU call at T = 2: the nearest record is T = 3's. */
  for (i = 0; i < 32; ++i) x[i] = (float)(i % 5) * 0.5f - 1.0f;
  host_f32(&tx, x, xs);
  host_f32(&to, out, os);
  ins[0] = &tx;
  outs[0] = &to;
  EXPECT_OK(kb_dispatch_choose(dp, ins, 1, outs, 1, &choice));
  CHECK(str_eq(choice.solution, "kb_cpu_silu_and_mul"));
  CHECK(str_eq(choice.workload_uuid, "w3"));
  CHECK(choice.exact == 0);
  CHECK(choice.recorded_latency_ms > 0);
  memset(out, 0, sizeof out);
  EXPECT_OK(kb_dispatch_run(dp, ins, 1, outs, 1, NULL));
  memcpy(ref, out, sizeof ref); /* the dispatched solution's output, against the oracle's: */
  memset(out, 0, sizeof out);
  EXPECT_OK(kb_solution_run(ctx, def, "reference", ins, 1, outs, 1, NULL));
  for (i = 0; i < 16; ++i) CHECK(out[i] - ref[i] < 1e-5f && ref[i] - out[i] < 1e-5f);
  CHECK(out[0] != 0.0f);
  os[1] = 7; /* a call that does not fit the definition is refused before choosing */
  EXPECT_FAIL(kb_dispatch_run(dp, ins, 1, outs, 1, NULL), KB_ERROR_INVALID_ARGUMENT, "dim 1");
  os[1] = 8;

  /* A CUDA call has no CUDA record of this definition to go by, and kb has no CUDA solution of
   * float32 silu_and_mul to fall back on. Choosing reads metadata only, never device memory. */
  gx = tx;
  go = to;
  gx.device.device_type = kDLCUDA;
  go.device.device_type = kDLCUDA;
  ins[0] = &gx;
  outs[0] = &go;
  EXPECT_FAIL(kb_dispatch_choose(dp, ins, 1, outs, 1, &choice), KB_ERROR_UNSUPPORTED,
              "kb_dispatch_choose: silu_and_mul_i8: no CUDA solution");
  ins[0] = &tx;
  outs[0] = &to;
  choice.struct_size = sizeof choice - 1;
  EXPECT_FAIL(kb_dispatch_choose(dp, ins, 1, outs, 1, &choice), KB_ERROR_INVALID_ARGUMENT, "out->struct_size");
  choice.struct_size = sizeof choice;
  kb_dispatch_destroy(dp);
  dp = NULL;

  /* Exact only: T = 2 takes the fallback (kb's CPU solution, no workload), T = 3 the record. */
  dopts.flags = KB_DISPATCH_EXACT;
  EXPECT_OK(kb_dispatch_create(ctx, def, file, &dopts, &dp));
  EXPECT_OK(kb_dispatch_choose(dp, ins, 1, outs, 1, &choice));
  CHECK(str_eq(choice.solution, "kb_cpu_silu_and_mul"));
  CHECK(choice.workload_uuid == NULL);
  CHECK(choice.recorded_latency_ms == 0.0);
  xs[0] = 3;
  os[0] = 3;
  {
    float x3[3 * 16], out3[3 * 8];
    memset(x3, 0, sizeof x3);
    tx.data = x3;
    to.data = out3;
    EXPECT_OK(kb_dispatch_choose(dp, ins, 1, outs, 1, &choice));
    CHECK(str_eq(choice.workload_uuid, "w3"));
    CHECK(choice.exact == 1);
    tx.data = x;
    to.data = out;
  }
  xs[0] = 2;
  os[0] = 2;
  kb_dispatch_destroy(dp);
  dp = NULL;

  /* Records of other hardware only: nothing counts, every call takes the fallback. */
  dopts.flags = 0;
  dopts.hardware = "no such GPU";
  EXPECT_OK(kb_dispatch_create(ctx, def, file, &dopts, &dp));
  CHECK(kb_dispatch_entry_count(dp) == 0);
  EXPECT_OK(kb_dispatch_choose(dp, ins, 1, outs, 1, &choice));
  CHECK(str_eq(choice.solution, "kb_cpu_silu_and_mul") && choice.workload_uuid == NULL);
  kb_dispatch_destroy(dp);
  dp = NULL;
  dopts.hardware = NULL;

  /* bfloat16: in a CUDA build the GPU record counts and a CUDA call takes it; without CUDA it
   * cannot run here, so it does not count and there is nothing to fall back on. */
  EXPECT_OK(kb_definition_load(ctx, SILU_BF16_DEF, strlen(SILU_BF16_DEF), &bf16));
  if (bf16) {
    int64_t bxs[2] = {16, 128}, bos[2] = {16, 64};
    gx.shape = bxs;
    go.shape = bos;
    gx.dtype.code = kDLBfloat;
    gx.dtype.bits = 16;
    go.dtype = gx.dtype;
    ins[0] = &gx;
    outs[0] = &go;
    EXPECT_OK(kb_dispatch_create(ctx, bf16, dir, NULL, &dp));
    CHECK(kb_dispatch_entry_count(dp) == (size_t)(cuda_build ? 1 : 0));
    if (cuda_build) {
      EXPECT_OK(kb_dispatch_choose(dp, ins, 1, outs, 1, &choice));
      CHECK(str_eq(choice.solution, "kb_cuda_silu_and_mul"));
      CHECK(str_eq(choice.workload_uuid, "g64"));
      CHECK(choice.exact == 0 && choice.recorded_latency_ms == 0.004);
    } else {
      EXPECT_FAIL(kb_dispatch_choose(dp, ins, 1, outs, 1, &choice), KB_ERROR_UNSUPPORTED, "no CUDA solution");
    }
    kb_dispatch_destroy(dp);
    dp = NULL;
    ins[0] = &tx;
    outs[0] = &to;
    kb_definition_destroy(bf16);
  }

  /* Errors. */
  EXPECT_FAIL(kb_dispatch_create(ctx, def, "/nonexistent/traces", NULL, &dp), KB_ERROR_IO, "/nonexistent/traces");
  CHECK(dp == NULL);
  dopts.fallback = "nope";
  EXPECT_FAIL(kb_dispatch_create(ctx, def, file, &dopts, &dp), KB_ERROR_NOT_FOUND, "fallback: no solution \"nope\"");
  dopts.fallback = "kb_cpu_gemm";
  EXPECT_FAIL(kb_dispatch_create(ctx, def, file, &dopts, &dp), KB_ERROR_UNSUPPORTED, "does not handle silu_and_mul_i8");
  dopts.fallback = NULL;
  dopts.flags = 2;
  EXPECT_FAIL(kb_dispatch_create(ctx, def, file, &dopts, &dp), KB_ERROR_INVALID_ARGUMENT, "unknown flags");
  dopts.flags = 0;
  /* tie_margin: in [0, 1]; a caller whose struct ends at flags (the first version) gets the default. */
  dopts.tie_margin = -0.01;
  EXPECT_FAIL(kb_dispatch_create(ctx, def, file, &dopts, &dp), KB_ERROR_INVALID_ARGUMENT, "tie_margin -0.01");
  dopts.tie_margin = 0.0 / 0.0;
  EXPECT_FAIL(kb_dispatch_create(ctx, def, file, &dopts, &dp), KB_ERROR_INVALID_ARGUMENT, "is not in [0, 1]");
  dopts.struct_size = offsetof(kb_dispatch_options, flags) + sizeof(uint32_t);
  EXPECT_OK(kb_dispatch_create(ctx, def, file, &dopts, &dp));
  CHECK(kb_dispatch_entry_count(dp) == 1);
  kb_dispatch_destroy(dp);
  dp = NULL;
  dopts.struct_size = offsetof(kb_dispatch_options, flags);
  EXPECT_FAIL(kb_dispatch_create(ctx, def, file, &dopts, &dp), KB_ERROR_INVALID_ARGUMENT, "struct_size");
  dopts.struct_size = sizeof dopts;
  dopts.tie_margin = 0;
  EXPECT_OK(kb_dispatch_create(ctx, def, file, &dopts, &dp));
  kb_dispatch_destroy(dp);
  dp = NULL;
  dopts.tie_margin = 0.02;
  EXPECT_FAIL(kb_dispatch_create(ctx, NULL, file, NULL, &dp), KB_ERROR_INVALID_ARGUMENT, "def");
  EXPECT_FAIL(kb_dispatch_choose(NULL, ins, 1, outs, 1, &choice), KB_ERROR_INVALID_ARGUMENT, "dispatch");
  f = fopen(torn, "w");
  CHECK(f != NULL);
  if (f) {
    write_line(f, SILU_CUDA_RECORD("silu_and_mul_i8"));
    fprintf(f, "%.60s\n", SILU_CUDA_RECORD("silu_and_mul_i8")); /* a line cut short, as a killed writer leaves it */
    fclose(f);
    EXPECT_FAIL(kb_dispatch_create(ctx, def, dir, NULL, &dp), KB_ERROR_PARSE, "torn.jsonl:2");
    CHECK(dp == NULL);
  }
  kb_dispatch_destroy(NULL);
  CHECK(kb_dispatch_entry_count(NULL) == 0);

  remove(torn);
  remove(bf16_file);
  remove(file);
  rmdir(dir);
  kb_workload_destroy(wl);
  kb_definition_destroy(def);
}

int main(int argc, char** argv) {
  kb_context* ctx = NULL;
  kb_definition* def = NULL;
  char path[4200];

  if (argc < 2) {
    fprintf(stderr, "usage: %s SHARED_DIR\n", argv[0]);
    return 2;
  }
  snprintf(g_shared, sizeof g_shared, "%s", argv[1]);

  test_versions();
  test_status_strings();
  test_dtypes();
  test_context();
  test_context_tuning();

  EXPECT_OK(kb_context_create(NULL, KB_ABI_VERSION, &ctx));
  if (!ctx) return 1;
  EXPECT_OK(kb_definition_load_file(ctx, shared_path(path, sizeof path, DEF_PS64), &def));
  if (def) {
    test_definition_inspect(ctx, def);
    test_check_tensors_ok(def);
    test_check_tensors_errors(def);
    test_check_tensors_hostile(def);
    test_workloads(ctx, def);
    test_threads(def);
  }
  test_definition_errors(ctx);
  test_check_tensors_fp4_optional(ctx);
  test_solutions(ctx);
  test_results(ctx);
  test_running(ctx);
  test_seeded_sampling(ctx);
  test_dispatch(ctx);
  test_cuda();
  test_cuda_benchmark(ctx);
  test_gemm_race_file(ctx);

  /* a handle outlives its context */
  kb_context_destroy(ctx);
  CHECK(def == NULL || str_eq(kb_definition_name(def), "gqa_paged_decode_h16_kv2_d128_ps64"));
  kb_definition_destroy(def);

  printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
