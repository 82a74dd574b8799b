// lib/common's name helpers: path components (common/path_component.hpp) and
// near matches for typos (common/near_match.hpp).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common/near_match.hpp"
#include "common/path_component.hpp"

TEST_CASE("a path component is one name that cannot leave its directory") {
  CHECK(kb::path_component_problem("rmsnorm_h4096") == "");
  CHECK(kb::path_component_problem("a.b-c") == "");
  CHECK(kb::path_component_problem(std::string(255, 'a')) == "");
  CHECK(kb::path_component_problem("") == "is empty");
  CHECK(kb::path_component_problem(".") == "is \".\", which names a directory");
  CHECK(kb::path_component_problem("..") == "is \"..\", which names a directory");
  CHECK(kb::path_component_problem("/tmp/x") == "contains '/'");
  CHECK(kb::path_component_problem("..\\x") == "contains '\\'");
  CHECK(kb::path_component_problem(std::string("a\0b", 3)) == "contains control character 0x00");
  CHECK(kb::path_component_problem("a\x7f") == "contains control character 0x7f");
  CHECK(kb::path_component_problem(std::string(256, 'a')) == "is 256 bytes long (at most 255)");
  CHECK(kb::quote_name("a\x1b[31m\"") == "\"a\\x1b[31m\\\"\"");
  CHECK(kb::quote_name(std::string(100, 'x')) == "\"" + std::string(64, 'x') + "\"...");
}

TEST_CASE("near matches: a shared prefix or at most 3 edits, closest first") {
  const std::vector<std::string> known = {"kb_cpu_gemm", "kb_cpu_rmsnorm", "kb_cpu_rope", "gemm_n128_k2048"};
  CHECK(kb::near_matches("kb_cpu_gem", known) == std::vector<std::string>{"kb_cpu_gemm"});
  CHECK(kb::near_matches("kb_cpu_rop", known) == std::vector<std::string>{"kb_cpu_rope"});
  CHECK(kb::near_matches("kb_cpu", known) == std::vector<std::string>{"kb_cpu_gemm", "kb_cpu_rope", "kb_cpu_rmsnorm"});
  CHECK(kb::near_matches("kb_cpu_gemm", known).empty());  // the name itself is no suggestion
  CHECK(kb::near_matches("nope", known).empty());
  CHECK(kb::near_matches(std::string(1 << 20, 'k'), known).empty());
  CHECK(kb::suggestion_text("kb_cpu_gem", known) == "; did you mean kb_cpu_gemm?");
  CHECK(kb::suggestion_text("nope", known) == "; known: kb_cpu_gemm, kb_cpu_rmsnorm, kb_cpu_rope, gemm_n128_k2048");
  std::vector<std::string> many;
  for (int i = 0; i < 22; ++i) many.push_back("name" + std::to_string(i));
  const std::string cut = kb::suggestion_text("zzz", many);
  CHECK(cut.rfind("; known: name0, name1, ", 0) == 0);
  CHECK(cut.find("name19, and 2 more") != std::string::npos);
  CHECK(cut.find("name20") == std::string::npos);
}
