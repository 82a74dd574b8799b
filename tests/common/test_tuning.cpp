// lib/common/tuning.hpp: the table, from_environment, scopes and the log sink.
#include "common/tuning.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <cctype>
#include <set>
#include <string>
#include <vector>

using kb::tuning::LogLevel;
using kb::tuning::Settings;

TEST_CASE("every entry parses its default, and the defaults are Settings{}") {
  Settings s;
  std::set<std::string> names;
  for (const auto& e : kb::tuning::entries()) {
    CAPTURE(e.name);
    CHECK(names.insert(e.name).second);
    CHECK(std::string(e.env) == "KB_" + [&] {
      std::string up = e.name;
      for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      return up;
    }());
    CHECK(std::string(e.doc).size() > 20);
    CHECK(kb::tuning::set(s, e.name, e.default_value).ok());
    CHECK(kb::tuning::get(Settings{}, e.name) == e.default_value);
  }
  CHECK(s == Settings{});
  const std::string table = kb::tuning::table();
  for (const auto& e : kb::tuning::entries()) CHECK(table.find(e.env) != std::string::npos);
}

TEST_CASE("bad values and unknown names are refused with a message naming the variable") {
  Settings s;
  for (auto item : std::vector<std::pair<const char*, const char*>>{{"gemm_race", "yes"},
                                                                        {"cublaslt_autotune", "2"},
                                                                        {"l2_flush", "dirty"},
                                                                        {"throttle_threshold", "1.5"},
                                                                        {"throttle_threshold", "0.5x"},
                                                                        {"log", "debug"},
                                                                        {"python", ""}}) {
    const std::string name = item.first, value = item.second;  // CAPTURE needs a variable, not a binding
    CAPTURE(name);
    auto r = kb::tuning::set(s, name, value);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == kb::Code::invalid_argument);
    CHECK(r.error().message.find(name) != std::string::npos);
    CHECK(r.error().message.find("KB_") != std::string::npos);
  }
  CHECK(s == Settings{});
  auto unknown = kb::tuning::set(s, "gemv_rows", "16");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message.find("gemv_rows") != std::string::npos);
}

TEST_CASE("apply reads name=value lists") {
  Settings s;
  REQUIRE(kb::tuning::apply(s, " gemm_race = 0, l2_flush=write,,log=info ").ok());
  CHECK_FALSE(s.gemm_race);
  CHECK(s.l2_flush == kb::tuning::L2Flush::write);
  CHECK(s.log == LogLevel::info);
  CHECK(kb::tuning::apply(s, "").ok());
  auto bad = kb::tuning::apply(s, "gemm_race=0,nonsense");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("nonsense") != std::string::npos);
}

TEST_CASE("from_environment reads overrides; a bad one names its variable") {
  setenv("KB_GEMM_RACE", "0", 1);
  setenv("KB_THROTTLE_THRESHOLD", "0.9", 1);
  setenv("KB_GEMM_RACE_FILE", "/tmp/races.jsonl", 1);
  auto s = kb::tuning::from_environment();
  REQUIRE(s.ok());
  CHECK_FALSE(s->gemm_race);
  CHECK(s->throttle_threshold == doctest::Approx(0.9));
  CHECK(s->gemm_race_file == "/tmp/races.jsonl");
  CHECK(s->cublaslt_autotune);
  setenv("KB_L2_FLUSH", "sometimes", 1);
  auto bad = kb::tuning::from_environment();
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("KB_L2_FLUSH") != std::string::npos);
  for (const char* v : {"KB_GEMM_RACE", "KB_THROTTLE_THRESHOLD", "KB_GEMM_RACE_FILE", "KB_L2_FLUSH"}) unsetenv(v);
}

TEST_CASE("two Settings differ; a scope overrides the process default on its thread only while it lasts") {
  Settings a, b;
  REQUIRE(kb::tuning::apply(b, "gemm_race=0,cublaslt_autotune=0").ok());
  CHECK_FALSE(a == b);
  Settings base;
  kb::tuning::set_process_default(base);
  CHECK(kb::tuning::current() == base);
  {
    kb::tuning::Scope outer(&b, nullptr, nullptr);
    CHECK(&kb::tuning::current() == &b);
    {
      kb::tuning::Scope inner(&a, nullptr, nullptr);
      CHECK(&kb::tuning::current() == &a);
      kb::tuning::Scope keep(nullptr, nullptr, nullptr);  // no settings: the enclosing scope's stay
      CHECK(&kb::tuning::current() == &a);
    }
    CHECK(&kb::tuning::current() == &b);
  }
  CHECK(kb::tuning::current() == base);
  Settings changed = base;
  changed.gemm_race_file = "/tmp/x.jsonl";
  kb::tuning::set_process_default(changed);
  CHECK(kb::tuning::current().gemm_race_file == "/tmp/x.jsonl");
  CHECK(kb::tuning::process_default() == changed);
  kb::tuning::set_process_default(Settings{});
}

namespace {
struct Seen {
  std::vector<std::pair<LogLevel, std::string>> messages;
};
void record(LogLevel level, const char* message, void* user) {
  static_cast<Seen*>(user)->messages.emplace_back(level, message);
}
}  // namespace

TEST_CASE("log: nothing is delivered without a sink; the scope's sink, then the process sink; levels filter") {
  kb::tuning::set_process_default(Settings{});  // log=warn
  kb::log::emit(LogLevel::warn, "nobody listens");  // no sink: dropped
  CHECK_FALSE(kb::log::enabled(LogLevel::warn));
  Seen process, scoped;
  kb::log::set_process_sink(record, &process);
  kb::log::emit(LogLevel::warn, "to the process");
  kb::log::emit(LogLevel::info, "below warn");
  Settings verbose;
  verbose.log = LogLevel::info;
  {
    kb::tuning::Scope scope(&verbose, record, &scoped);
    CHECK(kb::log::enabled(LogLevel::info));
    kb::log::emit(LogLevel::info, "to the scope");
  }
  kb::log::set_process_sink(nullptr, nullptr);
  kb::log::emit(LogLevel::error, "dropped again");
  REQUIRE(process.messages.size() == 1);
  CHECK(process.messages[0].second == "to the process");
  REQUIRE(scoped.messages.size() == 1);
  CHECK(scoped.messages[0].first == LogLevel::info);
  CHECK(scoped.messages[0].second == "to the scope");
}
