/* The C ABI of the model-level records (Kernel Calling Records, Benchmark Results, Agent traces)
 * and kb_estimate, in C99 against kb.h and libkb only.
 *
 * Usage: test_capi_model SHARED_DIR PROJECT_DIR
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int str_eq(const char* a, const char* b) { return a && b && strcmp(a, b) == 0; }

/* The call returns `expected`; a failure must leave kb_last_error() equal to `message` (NULL:
 * any non-empty message). */
static void expect_status(const char* file, int line, kb_status got, kb_status expected, const char* message) {
  const char* msg = kb_last_error();
  ++g_checks;
  if (got != expected) {
    ++g_failures;
    fprintf(stderr, "%s:%d: expected status %d, got %d (%s)\n", file, line, (int)expected, (int)got, msg);
    return;
  }
  if (expected == KB_OK) return;
  ++g_checks;
  if (msg == NULL || msg[0] == '\0' || (message && strcmp(msg, message) != 0)) {
    ++g_failures;
    fprintf(stderr, "%s:%d: kb_last_error() is\n  \"%s\"\nexpected\n  \"%s\"\n", file, line, msg ? msg : "(null)",
            message ? message : "(anything)");
  }
}
#define EXPECT_OK(call) expect_status(__FILE__, __LINE__, (call), KB_OK, NULL)
#define EXPECT_FAIL(call, status, message) expect_status(__FILE__, __LINE__, (call), (status), (message))

static kb_context* g_ctx = NULL;

static const char kRecord[] =
    "{\n"
    "  \"model\": \"meta-llama/Llama-3.1-8B\",\n"
    "  \"framework\": \"vLLM\",\n"
    "  \"step\": \"decode\",\n"
    "  \"kernels\": [\n"
    "    {\"id\": \"gemm_n8_k4\", \"count\": 32, \"axes\": {\"M\": 16}, \"notes\": \"o_proj\"},\n"
    "    {\"id\": \"gemm_n8_k5\", \"count\": 1}\n"
    "  ]\n"
    "}\n";

static const char kGemm[] =
    "{\"name\": \"gemm_n8_k4\", \"op_type\": \"gemm\","
    " \"axes\": {\"M\": {\"type\": \"var\"}, \"N\": {\"type\": \"const\", \"value\": 8}, \"K\": {\"type\": \"const\", \"value\": 4}},"
    " \"inputs\": {\"A\": {\"shape\": [\"M\", \"K\"], \"dtype\": \"float16\"}, \"B\": {\"shape\": [\"N\", \"K\"], \"dtype\": \"float16\"}},"
    " \"outputs\": {\"C\": {\"shape\": [\"M\", \"N\"], \"dtype\": \"float16\"}},"
    " \"reference\": \"def run(A, B):\\n    return A @ B.T\\n\"}";

static void test_calling_record(void) {
  kb_calling_record* r = NULL;
  kb_calling_record* back = NULL;
  kb_definition* def = NULL;
  const kb_definition* defs[2];
  kb_kernel_call_info k = KB_KERNEL_CALL_INFO_INIT;
  kb_kernel_call_info short_info = KB_KERNEL_CALL_INFO_INIT;
  const char* json;

  EXPECT_OK(kb_calling_record_load(g_ctx, kRecord, strlen(kRecord), &r));
  if (!r) return;
  CHECK(str_eq(kb_calling_record_model(r), "meta-llama/Llama-3.1-8B"));
  CHECK(str_eq(kb_calling_record_framework(r), "vLLM"));
  CHECK(str_eq(kb_calling_record_step(r), "decode"));
  CHECK(kb_calling_record_source(r) == NULL);
  CHECK(kb_calling_record_kernel_count(r) == 2);
  EXPECT_OK(kb_calling_record_kernel(r, 0, &k));
  CHECK(str_eq(k.id, "gemm_n8_k4"));
  CHECK(k.count == 32);
  CHECK(k.axis_count == 1 && str_eq(k.axis_names[0], "M") && k.axis_values[0] == 16);
  CHECK(str_eq(k.notes, "o_proj"));
  EXPECT_OK(kb_calling_record_kernel(r, 1, &k));
  CHECK(k.axis_count == 0 && k.axis_names == NULL && k.axis_values == NULL && k.notes == NULL);
  EXPECT_FAIL(kb_calling_record_kernel(r, 2, &k), KB_ERROR_INVALID_ARGUMENT,
              "kb_calling_record_kernel: kernel index 2 is out of range (2 present)");
  short_info.struct_size = 8;
  EXPECT_FAIL(kb_calling_record_kernel(r, 0, &short_info), KB_ERROR_INVALID_ARGUMENT, NULL);

  /* The canonical JSON reads back to the same text. */
  json = kb_calling_record_json(r);
  EXPECT_OK(kb_calling_record_load(g_ctx, json, strlen(json), &back));
  CHECK(back && str_eq(kb_calling_record_json(back), json));
  kb_calling_record_destroy(back);

  /* Against definitions: the unknown id, with its line and a near match. */
  EXPECT_OK(kb_definition_load(g_ctx, kGemm, strlen(kGemm), &def));
  defs[0] = def;
  defs[1] = NULL;
  EXPECT_FAIL(kb_calling_record_check(r, defs, 2), KB_ERROR_INVALID_DATA,
              "<memory>:7: kernels[1].id: no definition \"gemm_n8_k5\" among the 1 loaded; did you mean gemm_n8_k4?");
  EXPECT_FAIL(kb_calling_record_check(r, NULL, 0), KB_ERROR_INVALID_DATA,
              "<memory>:6: kernels[0].id: no definition \"gemm_n8_k4\" among the 0 loaded (and 1 more error)");
  EXPECT_FAIL(kb_calling_record_check(r, NULL, 1), KB_ERROR_INVALID_ARGUMENT,
              "kb_calling_record_check: argument `defs` is NULL");
  kb_calling_record_destroy(r);

  /* A record whose ids all exist. */
  {
    static const char ok[] = "{\"model\": \"m\", \"framework\": \"TRT-LLM\", \"kernels\": [{\"id\": \"gemm_n8_k4\", \"count\": 2}]}";
    EXPECT_OK(kb_calling_record_load(g_ctx, ok, strlen(ok), &r));
    EXPECT_OK(kb_calling_record_check(r, defs, 1));
    kb_calling_record_destroy(r);
  }
  kb_definition_destroy(def);

  /* Errors name the line and path. */
  {
    static const char bad[] = "{\n  \"model\": \"m\",\n  \"framework\": \"vllm\",\n  \"kernels\": [{\"id\": \"x\", \"count\": 0}]\n}";
    EXPECT_FAIL(kb_calling_record_load(g_ctx, bad, strlen(bad), &r), KB_ERROR_INVALID_DATA,
                "<memory>:3: framework: unknown framework \"vllm\"; did you mean \"vLLM\"? (and 1 more error)");
    CHECK(r == NULL);
    EXPECT_FAIL(kb_calling_record_load(g_ctx, "{", 1, &r), KB_ERROR_PARSE, NULL);
    EXPECT_FAIL(kb_calling_record_load(NULL, bad, strlen(bad), &r), KB_ERROR_INVALID_ARGUMENT,
                "kb_calling_record_load: argument `ctx` is NULL");
    EXPECT_FAIL(kb_calling_record_load_file(g_ctx, "/nonexistent/r.json", &r), KB_ERROR_IO, NULL);
  }
  CHECK(kb_calling_record_model(NULL) == NULL);
  CHECK(kb_calling_record_kernel_count(NULL) == 0);
  kb_calling_record_destroy(NULL);
}

static void test_benchmark_result(void) {
  static const char ok[] =
      "{\"device\": {\"name\": \"NVIDIA H100\"}, \"kernel_id\": \"gemm\", \"source\": \"flashinfer\", \"compiled\": true,"
      " \"time\": 0.25, \"speedup\": 2.0, \"max_diff\": 1e-6}";
  static const char failed[] =
      "{\"device\": {\"name\": \"NVIDIA H100\"}, \"kernel_id\": \"gemm\", \"source\": \"x\", \"compiled\": false,"
      " \"compile_error\": \"nvcc: error\"}";
  static const char bad[] =
      "{\n\"device\": {\"name\": \"NVIDIA H100\"}, \"kernel_id\": \"gemm\", \"source\": \"x\", \"compiled\": false,\n"
      "\"time\": 1.0, \"compile_error\": \"e\"}";
  kb_benchmark_result* r = NULL;
  kb_benchmark_result_info info = KB_BENCHMARK_RESULT_INFO_INIT;

  EXPECT_OK(kb_benchmark_result_load(g_ctx, ok, strlen(ok), &r));
  EXPECT_OK(kb_benchmark_result_get(r, &info));
  CHECK(str_eq(info.device_name, "NVIDIA H100") && str_eq(info.kernel_id, "gemm") && str_eq(info.source, "flashinfer"));
  CHECK(info.compiled == 1 && info.has_time && info.time_ms == 0.25 && info.has_speedup && info.speedup == 2.0);
  CHECK(info.has_max_diff && info.max_diff == 1e-6 && info.compile_error == NULL);
  CHECK(strstr(kb_benchmark_result_json(r), "\"time\": 0.25") != NULL);
  kb_benchmark_result_destroy(r);

  EXPECT_OK(kb_benchmark_result_load(g_ctx, failed, strlen(failed), &r));
  EXPECT_OK(kb_benchmark_result_get(r, &info));
  CHECK(info.compiled == 0 && !info.has_time && !info.has_speedup && !info.has_max_diff);
  CHECK(str_eq(info.compile_error, "nvcc: error"));
  kb_benchmark_result_destroy(r);

  EXPECT_FAIL(kb_benchmark_result_load(g_ctx, bad, strlen(bad), &r), KB_ERROR_INVALID_DATA,
              "<memory>:3: time: a result that did not compile has no time, speedup or max_diff");
  EXPECT_FAIL(kb_benchmark_result_get(NULL, &info), KB_ERROR_INVALID_ARGUMENT,
              "kb_benchmark_result_get: argument `result` is NULL");
}

static void test_agent_trace(const char* project) {
  char path[4200];
  kb_agent_trace* t = NULL;
  kb_agent_entry_info e = KB_AGENT_ENTRY_INFO_INIT;
  kb_agent_message_info m = KB_AGENT_MESSAGE_INFO_INIT;

  snprintf(path, sizeof path, "%s/tests/fuzz/corpus/model/agent_conversation.json", project);
  EXPECT_OK(kb_agent_trace_load_file(g_ctx, path, &t));
  if (t) {
    CHECK(kb_agent_trace_is_conversation(t) == 1);
    CHECK(kb_agent_trace_entry_count(t) == 1);
    EXPECT_OK(kb_agent_trace_entry(t, 0, &e));
    CHECK(e.kind == KB_AGENT_LLM_REQUEST && str_eq(e.model, "gpt-4o") && e.message_count == 4);
    CHECK(e.response_json == NULL && e.tool_name == NULL);
    EXPECT_OK(kb_agent_trace_message(t, 0, 1, &m));
    CHECK(str_eq(m.role, "assistant") && m.tool_call_count == 1);
    CHECK(str_eq(m.tool_calls_json,
                 "[{\"id\":\"call_123\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                 "\"arguments\":\"{\\\"location\\\": \\\"New York, NY\\\"}\"}}]"));
    EXPECT_OK(kb_agent_trace_message(t, 0, 2, &m));
    CHECK(str_eq(m.role, "tool") && m.tool_calls_json == NULL && m.tool_call_id == NULL);
    EXPECT_FAIL(kb_agent_trace_message(t, 0, 4, &m), KB_ERROR_INVALID_ARGUMENT,
                "kb_agent_trace_message: message index 4 is out of range (4 present)");
    kb_agent_trace_destroy(t);
  }

  snprintf(path, sizeof path, "%s/tests/fuzz/corpus/model/agent_entries_tools_mcp.json", project);
  EXPECT_OK(kb_agent_trace_load_file(g_ctx, path, &t));
  if (t) {
    CHECK(kb_agent_trace_is_conversation(t) == 0);
    CHECK(kb_agent_trace_entry_count(t) == 3);
    EXPECT_OK(kb_agent_trace_entry(t, 0, &e));
    CHECK(e.kind == KB_AGENT_LLM_REQUEST && str_eq(e.finish_reason, "tool_calls") && e.response_content == NULL);
    CHECK(e.response_json && strstr(e.response_json, "\"total_tokens\":43") != NULL);
    EXPECT_OK(kb_agent_trace_message(t, 0, 1, &m));
    CHECK(m.content == NULL && str_eq(m.content_parts_json, "[{\"type\":\"text\",\"text\":\"Make rmsnorm faster.\"}]"));
    CHECK(str_eq(m.name, "alice"));
    EXPECT_OK(kb_agent_trace_entry(t, 1, &e));
    CHECK(e.kind == KB_AGENT_TOOL_CALL && str_eq(e.tool_name, "kb_bench") && str_eq(e.result, "PASSED 0.012 ms"));
    CHECK(e.model == NULL && e.message_count == 0);
    CHECK(str_eq(e.arguments_json, "{\"definition\":\"rmsnorm_h4096\",\"trials\":3,\"nested\":{\"x\":[1,2.5,true,null]}}"));
    EXPECT_OK(kb_agent_trace_entry(t, 2, &e));
    CHECK(e.kind == KB_AGENT_MCP && str_eq(e.json, "{\"type\":\"mcp\",\"server\":\"files\",\"method\":\"read\",\"params\":{\"path\":\"a.cu\"}}"));
    EXPECT_FAIL(kb_agent_trace_message(t, 1, 0, &m), KB_ERROR_INVALID_ARGUMENT,
                "kb_agent_trace_message: entry 1 is not an llm_request: it has no messages");
    kb_agent_trace_destroy(t);
  }
  {
    static const char bad[] = "[{\"type\": \"tool_call\", \"tool_name\": \"ls\", \"arguments\": {}}]";
    EXPECT_FAIL(kb_agent_trace_load(g_ctx, bad, strlen(bad), &t), KB_ERROR_INVALID_DATA,
                "<memory>:1: [0].result: required field is missing");
  }
  CHECK(kb_agent_trace_entry_count(NULL) == 0);
  kb_agent_trace_destroy(NULL);
}

/* One Trace line of `def` at one var-axis value, PASSED in `latency` ms against the reference's `reference`. */
static void put_line(FILE* f, const char* def, const char* axes, const char* solution, double latency, double reference) {
  fprintf(f,
          "{\"definition\": \"%s\", \"workload\": {\"uuid\": \"u\", \"axes\": {%s}, \"inputs\": {}}, "
          "\"solution\": \"%s\", \"evaluation\": {\"status\": \"PASSED\", \"environment\": {\"hardware\": "
          "\"GPU-A\"}, \"timestamp\": \"2025-01-01T00:00:00\", \"correctness\": {\"max_relative_error\": 0.0, "
          "\"max_absolute_error\": 0.0}, \"performance\": {\"latency_ms\": %.17g, \"reference_latency_ms\": "
          "%.17g, \"speedup_factor\": %.17g}}}\n",
          def, axes, solution, latency, reference, reference / latency);
}

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * (fabs(a) + fabs(b)) + 1e-15; }

/* The hand-worked case: gemm x32 at M=32 (baseline 0.020, best s2 0.008), norm x65 at batch 48
 * matched to the recorded batch 64 (0.006 against 0.003), attn unmeasured. Step: 0.64 + 0.39 =
 * 1.03 ms against 0.256 + 0.195 = 0.451 ms. */
static void test_estimate(void) {
  static const char rec[] =
      "{\"model\": \"m\", \"framework\": \"SGLang\", \"kernels\": [{\"id\": \"gemm\", \"count\": 32, \"axes\": {\"M\": 32}},"
      " {\"id\": \"norm\", \"count\": 65, \"axes\": {\"batch_size\": 48}}, {\"id\": \"attn\", \"count\": 2}]}";
  char dir[] = "/tmp/kb_capi_estimate_XXXXXX";
  char file[sizeof dir + 32];
  const char* paths[1];
  FILE* f;
  kb_calling_record* r = NULL;
  kb_estimate* e = NULL;
  kb_estimate_info info = KB_ESTIMATE_INFO_INIT;
  kb_kernel_estimate_info k = KB_KERNEL_ESTIMATE_INFO_INIT;
  kb_estimate_options opts = KB_ESTIMATE_OPTIONS_INIT;

  if (!mkdtemp(dir)) {
    CHECK(!"mkdtemp");
    return;
  }
  snprintf(file, sizeof file, "%s/t.jsonl", dir);
  f = fopen(file, "w");
  CHECK(f != NULL);
  if (!f) return;
  put_line(f, "gemm", "\"M\": 32", "s1", 0.010, 0.020);
  put_line(f, "gemm", "\"M\": 32", "s2", 0.008, 0.020);
  put_line(f, "norm", "\"batch_size\": 32", "s1", 0.002, 0.004);
  put_line(f, "norm", "\"batch_size\": 64", "s1", 0.003, 0.006);
  fclose(f);
  paths[0] = dir;

  EXPECT_OK(kb_calling_record_load(g_ctx, rec, strlen(rec), &r));
  EXPECT_OK(kb_estimate_create(g_ctx, r, paths, 1, NULL, &e));
  if (e) {
    EXPECT_OK(kb_estimate_get(e, &info));
    CHECK(str_eq(info.hardware, "GPU-A") && str_eq(info.baseline, "reference"));
    CHECK(info.records == 4 && info.kernel_count == 3 && info.measured_count == 2);
    CHECK(near(info.baseline_ms, 32 * 0.020 + 65 * 0.006));
    CHECK(near(info.best_ms, 32 * 0.008 + 65 * 0.003));
    CHECK(near(info.speedup, (32 * 0.020 + 65 * 0.006) / (32 * 0.008 + 65 * 0.003)));
    EXPECT_OK(kb_estimate_kernel(e, 0, &k));
    CHECK(str_eq(k.id, "gemm") && k.count == 32 && k.measured && k.exact && k.reason == NULL);
    CHECK(str_eq(k.best_solution, "s2") && near(k.best_ms, 0.008) && near(k.baseline_ms, 0.020));
    CHECK(near(k.baseline_share, 0.64 / 1.03) && near(k.speedup, 2.5));
    EXPECT_OK(kb_estimate_kernel(e, 1, &k));
    CHECK(k.measured && !k.exact && near(k.distance, 6 - log2(48.0)) && near(k.best_step_ms, 65 * 0.003));
    EXPECT_OK(kb_estimate_kernel(e, 2, &k));
    CHECK(!k.measured && str_eq(k.reason, "no trace records of this definition") && k.best_solution == NULL);
    EXPECT_FAIL(kb_estimate_kernel(e, 3, &k), KB_ERROR_INVALID_ARGUMENT,
                "kb_estimate_kernel: kernel index 3 is out of range (3 present)");
    CHECK(strstr(kb_estimate_json(e), "\"kernels_measured\": 2") != NULL);
    kb_estimate_destroy(e);
    e = NULL;
  }
  /* A named baseline solution. */
  opts.baseline = "s1";
  EXPECT_OK(kb_estimate_create(g_ctx, r, paths, 1, &opts, &e));
  if (e) {
    EXPECT_OK(kb_estimate_get(e, &info));
    CHECK(str_eq(info.baseline, "s1") && near(info.baseline_ms, 32 * 0.010 + 65 * 0.003));
    kb_estimate_destroy(e);
    e = NULL;
  }
  paths[0] = "/nonexistent/traces";
  EXPECT_FAIL(kb_estimate_create(g_ctx, r, paths, 1, NULL, &e), KB_ERROR_IO, "/nonexistent/traces: no such file or folder");
  CHECK(e == NULL);
  EXPECT_FAIL(kb_estimate_create(g_ctx, r, paths, 0, NULL, &e), KB_ERROR_INVALID_ARGUMENT,
              "kb_estimate_create: no traces path given (n_paths is 0)");
  EXPECT_FAIL(kb_estimate_create(g_ctx, NULL, paths, 1, NULL, &e), KB_ERROR_INVALID_ARGUMENT,
              "kb_estimate_create: argument `record` is NULL");
  kb_calling_record_destroy(r);
  kb_estimate_destroy(NULL);
  remove(file);
  remove(dir);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s SHARED_DIR PROJECT_DIR\n", argv[0]);
    return 2;
  }
  EXPECT_OK(kb_context_create(NULL, KB_ABI_VERSION, &g_ctx));
  if (!g_ctx) return 1;
  test_calling_record();
  test_benchmark_result();
  test_agent_trace(argv[2]);
  test_estimate();
  kb_context_destroy(g_ctx);
  printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
