/*
 * Plugins kb must refuse at load, one per BAD_TABLE value (tests/plugin/meson.build builds each):
 *   1 ABI version 99          2 entry returns NULL       3 NULL run function
 *   4 duplicate names         5 device 7                 6 zero solutions
 *   7 a name with a space     8 struct_size too small    9 segfault in the entry point
 *  10 hang in the entry point 0 no entry symbol at all
 *  11 device -1               12 device KB_PLUGIN_DEVICE_FORCE_32BIT
 */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <unistd.h>

#include <kb/kb.h>

#ifndef BAD_TABLE
#error define BAD_TABLE
#endif

static kb_plugin_status run(const kb_plugin_call* call) {
  (void)call;
  return KB_PLUGIN_OK;
}

#if BAD_TABLE != 0
static const kb_plugin_solution solutions[2] = {
    {sizeof(kb_plugin_solution), "rmsnorm_h64", BAD_TABLE == 7 ? "bad name" : "bad_a", "kb-tests", NULL,
     BAD_TABLE == 5    ? (kb_plugin_device)7
     : BAD_TABLE == 11 ? (kb_plugin_device)-1
     : BAD_TABLE == 12 ? KB_PLUGIN_DEVICE_FORCE_32BIT
                       : KB_PLUGIN_DEVICE_CPU,
     BAD_TABLE == 3 ? NULL : run, NULL},
    {sizeof(kb_plugin_solution), "rmsnorm_h64", BAD_TABLE == 4 ? "bad_a" : "bad_b", "kb-tests", NULL,
     KB_PLUGIN_DEVICE_CPU, run, NULL},
};

static const kb_plugin_table table = {BAD_TABLE == 8 ? 4 : sizeof(kb_plugin_table),
                                      BAD_TABLE == 1 ? 99u : (uint32_t)KB_PLUGIN_ABI_VERSION,
                                      BAD_TABLE == 6 ? 0u : 2u, solutions};

static volatile int* volatile nothing = NULL;

KB_PLUGIN_EXPORT const kb_plugin_table* kb_plugin_entry_v1(uint32_t kb_plugin_abi) {
  (void)kb_plugin_abi;
  if (BAD_TABLE == 2) return NULL;
  if (BAD_TABLE == 9) *nothing = 1;
  if (BAD_TABLE == 10)
    for (;;) pause();
  return &table;
}
#else
/* A library with a run function but no kb_plugin_entry_v1. */
KB_PLUGIN_EXPORT int not_the_entry_point(void) { return run(NULL); }
#endif
