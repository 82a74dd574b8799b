/* inspect: print the call signature of a FlashInfer Trace definition.
 *
 *   $ kb_example_inspect definitions/gqa_paged/gqa_paged_decode_h16_kv2_d128_ps64.json
 *   gqa_paged_decode_h16_kv2_d128_ps64 (op_type gqa_paged)
 *   axes:
 *     batch_size      var
 *     num_qo_heads    const 16
 *     ...
 *   run(q: bfloat16[batch_size, num_qo_heads, head_dim], ..., sm_scale: float32 scalar)
 *     -> (output: bfloat16[batch_size, num_qo_heads, head_dim], lse: float32[batch_size, num_qo_heads])
 *
 * Shows the usual shape of a kb call site: create a context against KB_ABI_VERSION, check every
 * kb_status, read kb_last_error() on failure, destroy what you created. Exit status 0 on success,
 * 1 when the definition cannot be loaded, 2 on bad usage.
 */
#include <stdio.h>

#include <kb/kb.h>

static int fail(const char* what, kb_status s) {
  fprintf(stderr, "kb_example_inspect: %s: %s: %s\n", what, kb_status_string(s), kb_last_error());
  return 1;
}

static void print_tensor(const kb_tensor_info* t) {
  int32_t d;
  printf("%s: %s", t->name, kb_dtype_name(t->dtype));
  if (t->rank < 0) {
    printf(" scalar");
  } else {
    printf("[");
    for (d = 0; d < t->rank; ++d) printf("%s%s", d ? ", " : "", t->shape[d]);
    printf("]");
  }
  if (t->optional) printf(" (optional)");
}

/* Prints inputs or outputs as a comma-separated list; returns 0 or a kb_status. */
static kb_status print_tensors(const kb_definition* def, int outputs) {
  size_t i, n = outputs ? kb_definition_output_count(def) : kb_definition_input_count(def);
  for (i = 0; i < n; ++i) {
    kb_tensor_info t = KB_TENSOR_INFO_INIT;
    kb_status s = outputs ? kb_definition_output(def, i, &t) : kb_definition_input(def, i, &t);
    if (s != KB_OK) return s;
    printf("%s", i ? ", " : "");
    print_tensor(&t);
  }
  return KB_OK;
}

int main(int argc, char** argv) {
  kb_context* ctx = NULL;
  kb_definition* def = NULL;
  kb_status s;
  size_t i, n;
  int rc = 0;

  if (argc != 2) {
    fprintf(stderr, "usage: %s DEFINITION.json\n", argv[0]);
    return 2;
  }
  s = kb_context_create(NULL, KB_ABI_VERSION, &ctx);
  if (s != KB_OK) return fail("kb_context_create", s);
  s = kb_definition_load_file(ctx, argv[1], &def);
  if (s != KB_OK) {
    rc = fail("cannot load the definition", s);
    goto done;
  }

  printf("%s (op_type %s)\n", kb_definition_name(def), kb_definition_op_type(def));
  if (kb_definition_description(def)) printf("  %s\n", kb_definition_description(def));

  printf("axes:\n");
  n = kb_definition_axis_count(def);
  for (i = 0; i < n; ++i) {
    kb_axis_info a = KB_AXIS_INFO_INIT;
    if ((s = kb_definition_axis(def, i, &a)) != KB_OK) {
      rc = fail("kb_definition_axis", s);
      goto done;
    }
    if (a.kind == KB_AXIS_CONST) printf("  %-16s const %lld\n", a.name, (long long)a.value);
    else printf("  %-16s var\n", a.name);
  }

  printf("run(");
  if ((s = print_tensors(def, 0)) != KB_OK) {
    rc = fail("kb_definition_input", s);
    goto done;
  }
  printf(")\n  -> (");
  if ((s = print_tensors(def, 1)) != KB_OK) {
    rc = fail("kb_definition_output", s);
    goto done;
  }
  printf(")\n");

  n = kb_definition_constraint_count(def);
  if (n) printf("constraints:\n");
  for (i = 0; i < n; ++i) printf("  %s\n", kb_definition_constraint(def, i));
  n = kb_definition_tag_count(def);
  if (n) printf("tags:");
  for (i = 0; i < n; ++i) printf(" %s", kb_definition_tag(def, i));
  if (n) printf("\n");

done:
  kb_definition_destroy(def);
  kb_context_destroy(ctx);
  return rc;
}
