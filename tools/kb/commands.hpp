// The kb command's subcommands that live outside main.cpp.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#ifndef KB_BUNDLED_DATASET
#define KB_BUNDLED_DATASET "kernels"
#endif

inline bool is_help(std::string_view a) { return a == "-h" || a == "--help"; }

// kb bench ARGS: exit status 0 when every evaluation passed, 1 when any did not, 2 on bad usage.
int cmd_bench(const std::vector<std::string>& args);

// kb backendbench CMD ...: see backendbench_command.cpp.
int cmd_backendbench(const std::vector<std::string>& args, std::FILE* out, std::FILE* err);

// kb estimate RECORD TRACES...: see estimate_command.cpp.
int cmd_estimate(const std::vector<std::string>& args);

// kb export / compare / report: see report_command.cpp.
int cmd_export(const std::vector<std::string>& args);
int cmd_compare(const std::vector<std::string>& args);
int cmd_report(const std::vector<std::string>& args);
