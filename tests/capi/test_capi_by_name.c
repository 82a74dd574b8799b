/* kb_definition_load_by_name in C99 against kb.h and libkb only: a definition found by name in a
 * FlashInfer-Bench dataset, in kb's bundled tree and in a folder written here (a file named
 * otherwise, an invalid file named after its definition), and the errors for a missing name, a
 * missing directory and NULL arguments.
 *
 * Usage: test_capi_by_name SHARED_DIR BUNDLED_DIR SCRATCH_DIR
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
static int contains(const char* s, const char* part) { return s && strstr(s, part) != NULL; }

static kb_context* g_ctx = NULL;

/* A definition of `name` with `hidden` as its const axis; "" for `reference` writes an invalid one
 * (no `def run`). */
static int write_definition(const char* path, const char* name, int hidden, const char* reference) {
  FILE* f = fopen(path, "w");
  if (!f) return 0;
  fprintf(f,
          "{\"name\": \"%s\", \"op_type\": \"rmsnorm\",\n"
          " \"axes\": {\"batch_size\": {\"type\": \"var\"}, \"hidden_size\": {\"type\": \"const\", \"value\": %d}},\n"
          " \"inputs\": {\"x\": {\"shape\": [\"batch_size\", \"hidden_size\"], \"dtype\": \"float32\"}},\n"
          " \"outputs\": {\"y\": {\"shape\": [\"batch_size\", \"hidden_size\"], \"dtype\": \"float32\"}},\n"
          " \"reference\": \"%s\"}\n",
          name, hidden, reference);
  return fclose(f) == 0;
}

static void test_dataset(const char* shared_dir) {
  char dir[4096];
  kb_definition* def = (kb_definition*)1;
  kb_axis_info axis = KB_AXIS_INFO_INIT;
  snprintf(dir, sizeof dir, "%s/flashinfer-trace", shared_dir);
  CHECK(kb_definition_load_by_name(g_ctx, dir, "rmsnorm_h4096", &def) == KB_OK);
  CHECK(str_eq(kb_definition_name(def), "rmsnorm_h4096"));
  CHECK(str_eq(kb_definition_op_type(def), "rmsnorm"));
  CHECK(kb_definition_axis_count(def) == 2);
  CHECK(kb_definition_axis(def, 1, &axis) == KB_OK && str_eq(axis.name, "hidden_size") && axis.value == 4096);
  kb_definition_destroy(def);

  /* Every definition of another op type, too: names of several shapes. */
  def = NULL;
  CHECK(kb_definition_load_by_name(g_ctx, dir, "gemm_n128_k2048", &def) == KB_OK);
  CHECK(str_eq(kb_definition_name(def), "gemm_n128_k2048"));
  kb_definition_destroy(def);

  /* A typo: not found, the message names the directory and the near match. */
  def = (kb_definition*)1;
  CHECK(kb_definition_load_by_name(g_ctx, dir, "rmsnorm_h4069", &def) == KB_ERROR_NOT_FOUND);
  CHECK(def == NULL);
  CHECK(contains(kb_last_error(), "no definition \"rmsnorm_h4069\" in "));
  CHECK(contains(kb_last_error(), dir));
  CHECK(contains(kb_last_error(), "did you mean rmsnorm_h4096"));
}

static void test_bundled(const char* bundled_dir) {
  kb_definition* def = NULL;
  CHECK(kb_definition_load_by_name(g_ctx, bundled_dir, "rmsnorm_h4096", &def) == KB_OK);
  CHECK(str_eq(kb_definition_name(def), "rmsnorm_h4096"));
  kb_definition_destroy(def);
}

static void test_folder(const char* scratch) {
  char path[4096];
  kb_definition* def = NULL;
  kb_axis_info axis = KB_AXIS_INFO_INIT;
  mkdir(scratch, 0755);
  snprintf(path, sizeof path, "%s/sub", scratch);
  mkdir(path, 0755);
  /* Named otherwise than its file, one folder down. */
  snprintf(path, sizeof path, "%s/sub/renamed.json", scratch);
  CHECK(write_definition(path, "norm_h24", 24, "def run(x):\\n    return x\\n"));
  snprintf(path, sizeof path, "%s/norm_h40.json", scratch);
  CHECK(write_definition(path, "norm_h40", 40, "def run(x):\\n    return x\\n"));
  /* An invalid file named after its definition: its own error, not "not found". */
  snprintf(path, sizeof path, "%s/broken_h8.json", scratch);
  CHECK(write_definition(path, "broken_h8", 8, "x = 1"));
  /* Not JSON at all: passed over while searching. */
  snprintf(path, sizeof path, "%s/notes.json", scratch);
  {
    FILE* f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
      fputs("not json", f);
      fclose(f);
    }
  }

  CHECK(kb_definition_load_by_name(g_ctx, scratch, "norm_h24", &def) == KB_OK);
  CHECK(str_eq(kb_definition_name(def), "norm_h24"));
  CHECK(kb_definition_axis(def, 1, &axis) == KB_OK && axis.value == 24);
  kb_definition_destroy(def);
  def = NULL;
  CHECK(kb_definition_load_by_name(g_ctx, scratch, "norm_h40", &def) == KB_OK);
  CHECK(kb_definition_axis(def, 1, &axis) == KB_OK && axis.value == 40);
  kb_definition_destroy(def);

  def = (kb_definition*)1;
  CHECK(kb_definition_load_by_name(g_ctx, scratch, "broken_h8", &def) == KB_ERROR_INVALID_DATA);
  CHECK(def == NULL);
  CHECK(contains(kb_last_error(), "broken_h8.json: definition.reference: has no top-level `def run(...)`"));

  CHECK(kb_definition_load_by_name(g_ctx, scratch, "norm_h4", &def) == KB_ERROR_NOT_FOUND);
  CHECK(contains(kb_last_error(), "(2 definitions)"));
  CHECK(contains(kb_last_error(), "did you mean norm_h40, norm_h24?") ||
        contains(kb_last_error(), "did you mean norm_h24, norm_h40?"));

  snprintf(path, sizeof path, "%s/no_such_dir", scratch);
  CHECK(kb_definition_load_by_name(g_ctx, path, "norm_h24", &def) == KB_ERROR_IO);
  CHECK(contains(kb_last_error(), "no_such_dir: not a directory"));

  CHECK(kb_definition_load_by_name(g_ctx, scratch, "", &def) == KB_ERROR_INVALID_ARGUMENT);
  CHECK(kb_definition_load_by_name(g_ctx, NULL, "norm_h24", &def) == KB_ERROR_INVALID_ARGUMENT);
  CHECK(str_eq(kb_last_error(), "kb_definition_load_by_name: argument `dir` is NULL"));
  CHECK(kb_definition_load_by_name(g_ctx, scratch, NULL, &def) == KB_ERROR_INVALID_ARGUMENT);
  CHECK(kb_definition_load_by_name(NULL, scratch, "norm_h24", &def) == KB_ERROR_INVALID_ARGUMENT);
  CHECK(kb_definition_load_by_name(g_ctx, scratch, "norm_h24", NULL) == KB_ERROR_INVALID_ARGUMENT);
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s SHARED_DIR BUNDLED_DIR SCRATCH_DIR\n", argv[0]);
    return 2;
  }
  if (kb_context_create(NULL, KB_ABI_VERSION, &g_ctx) != KB_OK) {
    fprintf(stderr, "kb_context_create: %s\n", kb_last_error());
    return 1;
  }
  test_dataset(argv[1]);
  test_bundled(argv[2]);
  test_folder(argv[3]);
  kb_context_destroy(g_ctx);
  printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
