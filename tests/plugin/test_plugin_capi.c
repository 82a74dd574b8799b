/* kb_plugin_* through the C ABI alone (kb.h + libkb): a plugin loads and its table reads back, a
 * hostile solution's crash is a RUNTIME_ERROR result (not a failed call, not a dead caller), an ABI
 * mismatch is KB_ERROR_ABI_MISMATCH, Solution JSON builds (or is refused by language).
 * usage: test_plugin_capi EXAMPLE.so HOSTILE.so BAD_ABI.so DATASET CACHE_DIR */
#include <stdio.h>
#include <string.h>

#include <kb/kb.h>

static int failures = 0;
#define CHECK(cond)                                                                         \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__, __LINE__, #cond, kb_last_error()); \
      ++failures;                                                                           \
    }                                                                                       \
  } while (0)

static kb_eval_status bench(kb_context* ctx, kb_plugin* p, const char* name, const kb_definition* def,
                            const kb_workload* w, const char** log) {
  kb_benchmark_options o = KB_BENCHMARK_OPTIONS_INIT;
  kb_result* r = NULL;
  kb_result_info info = KB_RESULT_INFO_INIT;
  o.trials = 2;
  o.time = 0;
  if (kb_plugin_benchmark_run(ctx, p, name, def, w, &o, &r) != KB_OK) return KB_EVAL_STATUS_FORCE_32BIT;
  kb_result_get(r, &info);
  if (log) *log = strstr(info.log, "SIGSEGV") ? "SIGSEGV" : "";
  kb_result_destroy(r);
  return info.status;
}

int main(int argc, char** argv) {
  char path[4096];
  const char* line = "{\"uuid\": \"capi-1\", \"axes\": {\"batch_size\": 3}, \"inputs\": {\"hidden_states\": "
                     "{\"type\": \"random\"}, \"weight\": {\"type\": \"random\"}}}";
  kb_context* ctx = NULL;
  kb_definition* def = NULL;
  kb_workload* w = NULL;
  kb_plugin* p = NULL;
  kb_plugin_options po = KB_PLUGIN_OPTIONS_INIT;
  kb_plugin_solution_info info = KB_PLUGIN_SOLUTION_INFO_INIT;
  const char* log = NULL;
  kb_solution* sol = NULL;
  if (argc != 6) return 2;
  po.timeout_s = 5;
  po.cache_dir = argv[5];
  CHECK(kb_context_create(NULL, KB_ABI_VERSION, &ctx) == KB_OK);
  snprintf(path, sizeof path, "%s/definitions/rmsnorm/rmsnorm_h64.json", argv[4]);
  CHECK(kb_definition_load_file(ctx, path, &def) == KB_OK);
  CHECK(kb_workload_load(ctx, line, strlen(line), &w) == KB_OK);

  CHECK(kb_plugin_load(ctx, argv[1], &po, &p) == KB_OK);
  CHECK(kb_plugin_solution_count(p) == 3);
  CHECK(kb_plugin_solution_get(p, 2, &info) == KB_OK);
  CHECK(strcmp(info.name, "example_c_rmsnorm_h64") == 0 && strcmp(info.definition, "rmsnorm_h64") == 0);
  CHECK(info.device == KB_PLUGIN_DEVICE_CPU && info.build_failed == 0);
  CHECK(kb_plugin_solution_get(p, 3, &info) == KB_ERROR_INVALID_ARGUMENT);
  CHECK(bench(ctx, p, "example_c_rmsnorm_h64", def, w, NULL) == KB_EVAL_PASSED);
  CHECK(bench(ctx, p, "example_c_rmsnorm_h4096", def, w, NULL) == KB_EVAL_STATUS_FORCE_32BIT); /* other definition */
  { /* cupti asked of a plugin: its CUDA solutions are timed so in kb-worker (test_plugin_gpu); a CPU
     * solution is timed as always, with no CUPTI field */
    kb_benchmark_options o = KB_BENCHMARK_OPTIONS_INIT;
    kb_result* r = NULL;
    kb_result_info info = KB_RESULT_INFO_INIT;
    o.trials = 1;
    o.cupti = 1;
    CHECK(kb_plugin_benchmark_run(ctx, p, "example_c_rmsnorm_h64", def, w, &o, &r) == KB_OK);
    if (r) {
      CHECK(kb_result_get(r, &info) == KB_OK && info.status == KB_EVAL_PASSED);
      CHECK(strstr(kb_result_json(r), "\"latency_ms\"") != NULL && strstr(kb_result_json(r), "cupti") == NULL);
      kb_result_destroy(r);
    }
  }
  kb_plugin_destroy(p);
  p = NULL;

  CHECK(kb_plugin_load(ctx, argv[2], &po, &p) == KB_OK);
  CHECK(bench(ctx, p, "hostile_segfault", def, w, &log) == KB_EVAL_RUNTIME_ERROR);
  CHECK(log && strcmp(log, "SIGSEGV") == 0);
  CHECK(bench(ctx, p, "hostile_good", def, w, NULL) == KB_EVAL_PASSED);
  CHECK(bench(ctx, p, "hostile_wrong_shape", def, w, NULL) == KB_EVAL_INCORRECT_SHAPE);
  CHECK(bench(ctx, p, "no_such_solution", def, w, NULL) == KB_EVAL_STATUS_FORCE_32BIT);
  kb_plugin_destroy(p);
  p = NULL;

  CHECK(kb_plugin_load(ctx, argv[3], &po, &p) == KB_ERROR_ABI_MISMATCH);
  CHECK(p == NULL && strstr(kb_last_error(), "plugin ABI version 99") != NULL);
  CHECK(kb_plugin_load(ctx, NULL, &po, &p) == KB_ERROR_INVALID_ARGUMENT);
  kb_plugin_destroy(NULL);

  snprintf(path, sizeof path, "%s/solutions/kb-tests/rmsnorm/rmsnorm_h64/cpp_good.json", argv[4]);
  CHECK(kb_solution_load_file(ctx, path, &sol) == KB_OK);
  CHECK(kb_plugin_load_solution(ctx, sol, def, &po, &p) == KB_OK);
  CHECK(bench(ctx, p, "cpp_good", def, w, NULL) == KB_EVAL_PASSED);
  kb_plugin_destroy(p);
  kb_solution_destroy(sol);
  p = NULL;
  snprintf(path, sizeof path, "%s/solutions/kb-tests/rmsnorm/rmsnorm_h64/cpp_compile_error.json", argv[4]);
  CHECK(kb_solution_load_file(ctx, path, &sol) == KB_OK);
  CHECK(kb_plugin_load_solution(ctx, sol, def, &po, &p) == KB_OK);
  CHECK(kb_plugin_solution_get(p, 0, &info) == KB_OK && info.build_failed == 1);
  CHECK(bench(ctx, p, "cpp_compile_error", def, w, NULL) == KB_EVAL_COMPILE_ERROR);
  kb_plugin_destroy(p);
  kb_solution_destroy(sol);
  p = NULL;
  snprintf(path, sizeof path, "%s/solutions/kb-tests/rmsnorm/rmsnorm_h64/python_solution.json", argv[4]);
  CHECK(kb_solution_load_file(ctx, path, &sol) == KB_OK);
  CHECK(kb_plugin_load_solution(ctx, sol, def, &po, &p) == KB_ERROR_UNSUPPORTED);
  CHECK(strstr(kb_last_error(), "language python is not supported") != NULL);
  kb_solution_destroy(sol);

  kb_workload_destroy(w);
  kb_definition_destroy(def);
  kb_context_destroy(ctx);
  if (failures == 0) printf("ok\n");
  return failures ? 1 : 0;
}
