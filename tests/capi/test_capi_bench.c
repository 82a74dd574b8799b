/* kb_bench_run from C99, through kb.h and libkb only: a small run of kb's bundled dataset on the CPU.
 *
 * Usage: test_capi_bench DATASET_DIR   (kb's kernels/ folder)
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kb/kb.h>

static int g_failures = 0;

#define CHECK(cond)                                                                                            \
  do {                                                                                                         \
    if (!(cond)) {                                                                                             \
      ++g_failures;                                                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n  (kb_last_error: %s)\n", __FILE__, __LINE__, #cond,           \
              kb_last_error());                                                                                \
    }                                                                                                          \
  } while (0)

/* What the callback saw. */
typedef struct counts {
  size_t started, evaluated, passed, skipped, problems, next_index;
  int bad_result; /* an EVALUATED event whose kb_result did not read back as it should */
} counts;

static void on_event(void* user, const kb_bench_event* e) {
  counts* c = (counts*)user;
  kb_result_info info = KB_RESULT_INFO_INIT;
  CHECK(e->struct_size >= sizeof(kb_bench_event));
  switch (e->kind) {
    case KB_BENCH_EVENT_STARTED:
      ++c->started;
      CHECK(e->index == c->next_index);
      CHECK(e->definition && e->solution && e->workload_uuid && e->result == NULL);
      break;
    case KB_BENCH_EVENT_EVALUATED:
      ++c->evaluated;
      ++c->next_index;
      if (!e->result || kb_result_get(e->result, &info) != KB_OK || !info.has_evaluation ||
          strcmp(info.definition, e->definition) != 0 || strcmp(info.solution, e->solution) != 0 ||
          strcmp(info.workload_uuid, e->workload_uuid) != 0 || kb_result_json(e->result) == NULL) {
        c->bad_result = 1;
        break;
      }
      if (info.status == KB_EVAL_PASSED) ++c->passed;
      else fprintf(stderr, "%s %s: %s\n%s\n", info.definition, info.solution, kb_eval_status_name(info.status), info.log);
      break;
    case KB_BENCH_EVENT_SKIPPED:
      ++c->skipped;
      CHECK(e->message != NULL && e->result == NULL);
      break;
    case KB_BENCH_EVENT_PROBLEM:
      ++c->problems;
      fprintf(stderr, "problem: %s\n", e->message ? e->message : "(null)");
      break;
    default: CHECK(!"an event of no known kind"); break;
  }
}

/* Lines in every .jsonl file under `dir`. */
static size_t count_lines(const char* dir) {
  size_t n = 0;
  DIR* d = opendir(dir);
  struct dirent* ent;
  if (!d) return 0;
  while ((ent = readdir(d)) != NULL) {
    char path[4096];
    struct stat st;
    size_t len = strlen(ent->d_name);
    if (ent->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
    if (stat(path, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      n += count_lines(path);
    } else if (len > 6 && strcmp(ent->d_name + len - 6, ".jsonl") == 0) {
      FILE* f = fopen(path, "r");
      int ch;
      while (f && (ch = fgetc(f)) != EOF) n += ch == '\n';
      if (f) fclose(f);
    }
  }
  closedir(d);
  return n;
}

static void remove_tree(const char* dir) {
  DIR* d = opendir(dir);
  struct dirent* ent;
  if (!d) return;
  while ((ent = readdir(d)) != NULL) {
    char path[4096];
    struct stat st;
    if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(path);
    else unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

int main(int argc, char** argv) {
  kb_context* ctx = NULL;
  kb_bench_options opts = KB_BENCH_OPTIONS_INIT;
  kb_bench_summary summary = KB_BENCH_SUMMARY_INIT;
  counts c;
  char out[] = "/tmp/kb-test-capi-bench-XXXXXX";
  char traces[sizeof out + 16];
  kb_status st;

  if (argc != 2) {
    fprintf(stderr, "usage: %s DATASET_DIR\n", argv[0]);
    return 2;
  }
  if (!mkdtemp(out)) {
    perror("mkdtemp");
    return 1;
  }
  snprintf(traces, sizeof traces, "%s/traces", out);
  CHECK(kb_context_create(NULL, KB_ABI_VERSION, &ctx) == KB_OK);

  opts.dataset = argv[1];
  opts.out_dir = out;
  opts.definitions = "rmsnorm_h4096,silu_and_mul_i14336";
  opts.device = "cpu";
  opts.trials = 1;
  opts.time = 0;
  opts.max_workloads = 1;

  memset(&c, 0, sizeof c);
  st = kb_bench_run(ctx, &opts, on_event, &c, &summary);
  CHECK(st == KB_OK);
  CHECK(summary.evaluations >= 2);
  CHECK(c.started == summary.evaluations);
  CHECK(c.evaluated == summary.evaluations);
  CHECK(c.passed == summary.evaluations);
  CHECK(summary.passed == summary.evaluations);
  CHECK(summary.failed == 0 && summary.errors == 0 && summary.problems == 0);
  CHECK(c.problems == 0);
  CHECK(!c.bad_result);
  CHECK(summary.cuda == 0);
  CHECK(count_lines(traces) == summary.evaluations);

  /* resume: nothing left to run, nothing appended; NULL callback and summary are fine. */
  opts.resume = 1;
  CHECK(kb_bench_run(ctx, &opts, NULL, NULL, NULL) == KB_OK);
  {
    kb_bench_summary again = KB_BENCH_SUMMARY_INIT;
    CHECK(kb_bench_run(ctx, &opts, NULL, NULL, &again) == KB_OK);
    CHECK(again.evaluations == 0 && again.already_recorded == summary.evaluations);
  }
  CHECK(count_lines(traces) == summary.evaluations);
  opts.resume = 0;

  /* Errors: each a status with a message naming the option, and nothing run. */
  memset(&c, 0, sizeof c);
  opts.definitions = "rmsnorm_h4096,no_such_definition";
  st = kb_bench_run(ctx, &opts, on_event, &c, NULL);
  CHECK(st == KB_ERROR_NOT_FOUND);
  CHECK(strstr(kb_last_error(), "opts->definitions: no definition \"no_such_definition\"") != NULL);
  CHECK(c.started == 0);
  opts.definitions = "rmsnorm_h4096";

  opts.device = "gpu";
  CHECK(kb_bench_run(ctx, &opts, NULL, NULL, NULL) == KB_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(kb_last_error(), "opts->device \"gpu\"") != NULL);
  opts.device = "cuda:4095";
  st = kb_bench_run(ctx, &opts, NULL, NULL, NULL);
  CHECK(st == KB_ERROR_INVALID_ARGUMENT || st == KB_ERROR_NO_CUDA_DEVICE || st == KB_ERROR_UNSUPPORTED);
  CHECK(strstr(kb_last_error(), "kb_bench_run: opts->device \"cuda:4095\": ") != NULL);
  opts.device = "cpu";

  /* an integer outside kb_bench_reference: read as an integer and refused, never loaded as the enum */
  opts.reference = (kb_bench_reference)99;
  CHECK(kb_bench_run(ctx, &opts, NULL, NULL, NULL) == KB_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(kb_last_error(), "kb_bench_run: opts->reference is 99, not a kb_bench_reference") != NULL);
  opts.reference = KB_BENCH_REFERENCE_NATIVE;

  opts.trials = 0;
  CHECK(kb_bench_run(ctx, &opts, NULL, NULL, NULL) == KB_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(kb_last_error(), "opts->trials") != NULL);
  opts.trials = 1;
  opts.shard_count = 2;
  opts.shard_index = 3;
  CHECK(kb_bench_run(ctx, &opts, NULL, NULL, NULL) == KB_ERROR_INVALID_ARGUMENT);
  opts.shard_count = 1;
  opts.shard_index = 1;
  opts.out_dir = NULL;
  CHECK(kb_bench_run(ctx, &opts, NULL, NULL, NULL) == KB_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(kb_last_error(), "opts->out_dir") != NULL);
  opts.out_dir = out;
  opts.baseline = "kb_cpu_rmsnorn";
  CHECK(kb_bench_run(ctx, &opts, NULL, NULL, NULL) == KB_ERROR_NOT_FOUND);
  CHECK(strstr(kb_last_error(), "opts->baseline: no solution \"kb_cpu_rmsnorn\" to time against; did you mean "
                                "kb_cpu_rmsnorm") != NULL);
  opts.baseline = NULL;
  opts.struct_size = offsetof(kb_bench_options, baseline) - 1;
  CHECK(kb_bench_run(ctx, &opts, NULL, NULL, NULL) == KB_ERROR_INVALID_ARGUMENT);
  opts.struct_size = sizeof opts;
  summary.struct_size = 1;
  CHECK(kb_bench_run(ctx, &opts, NULL, NULL, &summary) == KB_ERROR_INVALID_ARGUMENT);
  CHECK(kb_bench_run(NULL, &opts, NULL, NULL, NULL) == KB_ERROR_INVALID_ARGUMENT);
  CHECK(kb_bench_run(ctx, NULL, NULL, NULL, NULL) == KB_ERROR_INVALID_ARGUMENT);
  CHECK(count_lines(traces) == summary.evaluations);

  kb_context_destroy(ctx);
  remove_tree(out);
  if (g_failures) fprintf(stderr, "%d checks failed\n", g_failures);
  return g_failures ? 1 : 0;
}
