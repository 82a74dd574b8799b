#include "dataset/dataset.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <fcntl.h>
#include <unistd.h>

#include "common/limits.hpp"
#include "common/near_match.hpp"
#include "common/path_component.hpp"
#include "common/regular_file.hpp"
#include "inputs/inputs.hpp"
#include "json/json.hpp"
#include "safetensors/safetensors.hpp"
#include "schema/validate.hpp"
#include "schema/io.hpp"

namespace kb {
namespace fs = std::filesystem;

namespace {

// Why a folder below the one walked is not entered, or "" to enter it:
// hidden folders (.git, caches) and build trees (meson, ninja, CMake), whose
// test data and copies are not part of the dataset.
std::string skip_reason(const fs::path& dir) {
  const std::string name = dir.filename().string();
  if (name.size() > 1 && name[0] == '.') return "a hidden folder";
  std::error_code ec;
  for (const char* marker : {"build.ninja", "meson-private", "CMakeCache.txt"})
    if (fs::exists(dir / marker, ec)) return fmt::format("a build tree (it holds {})", marker);
  return {};
}

// Everything but directories under dir with the extension, sorted for stable
// output. A FIFO, device, socket or dangling link is listed too, so that
// reading it reports it (json::read_text_file refuses it without opening it)
// instead of the dataset silently lacking it. Folders skip_reason() names are
// not entered; they go into *skipped (folder, reason) when given.
std::vector<std::string> files_under(const fs::path& dir, std::string_view ext,
                                     std::map<std::string, std::string>* skipped = nullptr) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code kind_ec;
    if (it->is_directory(kind_ec)) {
      if (std::string why = skip_reason(it->path()); !why.empty()) {
        it.disable_recursion_pending();
        if (skipped) skipped->emplace(it->path().string(), std::move(why));
      }
      continue;
    }
    if (it->path().extension() == ext) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The values of one integer tensor of a safetensors file, reading only its
// bytes; nullopt when the file or tensor cannot be read (the blob checks of
// validate_workload_against report why) or the tensor is not integer.
std::optional<IndexValues> read_index_blob(const std::string& file, std::string_view key) {
  auto header = safetensors::read_header(file);
  if (!header) return std::nullopt;
  const auto* info = header->find(key);
  if (!info || !dtype_is_integer(info->dtype)) return std::nullopt;
  auto fd = open_regular_file(file);
  if (!fd) return std::nullopt;
  std::vector<std::byte> bytes(info->byte_size());
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::pread(*fd, bytes.data() + got, bytes.size() - got,
                        static_cast<off_t>(header->data_offset + info->begin + got));
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(*fd);
  if (got != bytes.size()) return std::nullopt;
  return index_values(info->dtype, info->shape, bytes);
}

// Does the JSON object look like a Solution (rather than a Definition)?
bool looks_like_solution(std::string_view text) {
  auto doc = json::parse(text, "");
  if (!doc) return false;
  json::Object o;
  if (doc->root().get_object().get(o) != simdjson::SUCCESS) return false;
  json::Element e;
  return o.at_key("spec").get(e) == simdjson::SUCCESS || o.at_key("sources").get(e) == simdjson::SUCCESS;
}

class Loader {
 public:
  Loader(const LoadOptions& opt, Diagnostics& diags, LoadReport& report)
      : opt_(opt), diags_(diags), report_(report) {}

  Dataset ds;

  void load_definition(const std::string& file) {
    ++report_.definitions;
    // The reader evaluates the constraints over const axes and counts them here, a violated one
    // included (it makes the definition invalid, so nothing later sees it).
    auto d = read_definition_file(file, &diags_, &report_.constraints);
    if (!d) {
      // Remember the name it claims, so its workloads are not also reported
      // as naming a missing definition.
      if (auto name = claimed_name(file)) invalid_.insert(*name);
      return;
    }
    std::error_code ec;
    for (auto [it, end] = files_by_name_.equal_range(d->name); it != end; ++it) {
      if (fs::equivalent(it->second, file, ec)) continue;
      diags_.error(file, "definition.name", fmt::format("duplicate definition \"{}\" (also in {})", d->name, it->second));
    }
    files_by_name_.emplace(d->name, file);
    if (fs::path(file).stem() != d->name)
      diags_.warning(file, "definition.name",
                     fmt::format("{} differs from the file name", json::quote(d->name)));
    if (const auto* prev = ds.find_definition(d->name); prev && fs::equivalent(prev->file, file, ec)) return;
    if (index_.count(d->name)) return;  // a duplicate: reported above, the first one stays
    index_[d->name] = ds.definitions.size();
    ds.definitions.push_back({std::move(*d), file});
  }

  // The "name" (or seed "id") a definition file claims, even if invalid.
  static std::optional<std::string> claimed_name(const std::string& file) {
    auto text = json::read_text_file(file);
    if (!text) return std::nullopt;
    auto doc = json::parse(*text, file);
    if (!doc) return std::nullopt;
    json::Object o;
    if (doc->root().get_object().get(o) != simdjson::SUCCESS) return std::nullopt;
    for (const char* key : {"name", "id"}) {
      std::string_view v;
      if (o.at_key(key).get_string().get(v) == simdjson::SUCCESS) return std::string(v);
    }
    return std::nullopt;
  }

  void load_solution(const std::string& file) {
    ++report_.solutions;
    auto s = read_solution_file(file, &diags_);
    if (!s) return;
    std::error_code ec;
    for (const auto& prev : ds.solutions)
      if (prev.solution.name == s->name) {
        if (fs::equivalent(prev.file, file, ec)) return;  // known from the context already
        diags_.error(file, "solution.name", fmt::format("duplicate solution \"{}\" (also in {})", s->name, prev.file));
        return;
      }
    if (!ds.root.empty() && !ds.find_definition(s->definition))
      diags_.error(file, "solution.definition", fmt::format("no definition \"{}\" in this dataset", s->definition));
    ds.solutions.push_back({std::move(*s), file});
  }

  // kind: "workload" (workloads/), "trace" (traces/), or "" (decide per line).
  void load_jsonl(const std::string& file, std::string_view kind) {
    auto text = json::read_text_file(file);
    if (!text) {
      diags_.error("", "", text.error().message);
      return;
    }
    std::map<std::pair<std::string, std::string>, std::size_t> uuids;  // (definition, uuid) -> line
    std::string_view all = *text;
    std::size_t pos = 0, line = 0;
    while (pos < all.size()) {
      std::size_t end = all.find('\n', pos);
      if (end == std::string_view::npos) end = all.size();
      std::string_view l = all.substr(pos, end - pos);
      pos = end + 1;
      ++line;
      if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      std::string origin = fmt::format("{}:{}", file, line);
      bool is_workload_line = kind == "workload";
      auto t = read_trace(l, origin, &diags_);
      if (kind.empty()) is_workload_line = t && !t->evaluation;
      if (is_workload_line) ++report_.workloads;
      else ++report_.traces;
      if (!t) continue;
      std::size_t errors_before = diags_.error_count();
      if (kind == "workload" && (t->evaluation || t->solution))
        diags_.error(origin, t->evaluation ? "evaluation" : "solution", "a workloads/ line has no solution or evaluation (use null)");
      check_against_definition(*t, origin);
      if (is_workload_line) {
        auto [it, fresh] = uuids.emplace(std::pair{t->definition, t->workload.uuid}, line);
        if (!fresh)
          diags_.error(origin, "workload.uuid",
                       fmt::format("duplicate uuid \"{}\" (also on line {})", t->workload.uuid, it->second));
        ds.workloads.push_back({std::move(*t), file, line, diags_.error_count() == errors_before});
      } else {
        ds.traces.push_back({std::move(*t), file, line, diags_.error_count() == errors_before});
      }
    }
  }

  void check_against_definition(const Trace& t, const std::string& origin) {
    auto it = index_.find(t.definition);
    if (it == index_.end()) {
      if (invalid_.count(t.definition))
        diags_.note(origin, "definition",
                    fmt::format("definition \"{}\" is invalid, so this line is not checked against it", t.definition));
      else if (have_definitions_)
        diags_.error(origin, "definition", fmt::format("no definition \"{}\" in this dataset", t.definition));
      return;
    }
    const Definition& d = ds.definitions[it->second].definition;
    CheckContext ctx{origin, "workload", ds.root.empty() ? std::nullopt : std::optional(ds.root), opt_.strict,
                     opt_.report_unchecked};
    const std::size_t errors_before = diags_.error_count();
    validate_workload_against(t.workload, d, ctx, diags_, &report_.constraints);
    if (ctx.dataset_root && diags_.error_count() == errors_before) check_index_blobs(t.workload, d, origin, ctx);
    if (t.solution && have_solutions_ && !ds.find_solution(*t.solution))
      diags_.error(origin, "solution", fmt::format("no solution \"{}\" in this dataset", *t.solution));
  }

  // Index inputs given as blobs, by the rule kb bench applies before a run
  // (check_index_inputs). The blobs' dtypes and shapes were checked already.
  void check_index_blobs(const Workload& w, const Definition& d, const std::string& origin, const CheckContext& ctx) {
    auto axes = bind_axes(d, w);
    if (!axes) return;
    std::vector<std::optional<IndexValues>> given(d.inputs.size());
    std::vector<const InputSpec*> specs(d.inputs.size(), nullptr);
    for (std::size_t i = 0; i < d.inputs.size(); ++i) {
      const InputSpec* in = w.find_input(d.inputs[i].name);
      if (!in || in->kind != InputKind::safetensors || !is_index_input(d, i)) continue;
      specs[i] = in;
      given[i] = read_index_blob((fs::path(*ctx.dataset_root) / in->path).string(), in->tensor_key);
    }
    auto problems = check_index_inputs(d, *axes, [&](std::size_t i) { return given[i] ? &*given[i] : nullptr; });
    for (const auto& p : problems) {
      const InputSpec* in = specs[p.input];
      diags_.error(origin, json::member_path(json::member_path(ctx.path, "inputs"), d.inputs[p.input].name),
                   fmt::format("workload {}: blob {} tensor {}: {}", w.uuid, in->path, json::quote(in->tensor_key),
                               p.message));
    }
  }

  void load_root(const std::string& root) {
    ds.root = root;
    fs::path r(root);
    auto defs = files_under(r / "definitions", ".json", &skipped_);
    have_definitions_ = fs::is_directory(r / "definitions");
    for (const auto& f : defs) load_definition(f);
    have_solutions_ = fs::is_directory(r / "solutions");
    for (const auto& f : files_under(r / "solutions", ".json", &skipped_)) load_solution(f);
    for (const auto& f : files_under(r / "workloads", ".jsonl", &skipped_)) load_jsonl(f, "workload");
    for (const auto& f : files_under(r / "traces", ".jsonl", &skipped_)) load_jsonl(f, "trace");
    report_skipped();
  }

  // A file or directory that is not itself a dataset root.
  void load_loose(const std::string& path) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      for (const auto& f : files_under(path, ".json", &skipped_)) load_loose_file(f);
      for (const auto& f : files_under(path, ".jsonl", &skipped_)) load_loose_file(f);
      report_skipped();
      return;
    }
    load_loose_file(path);
  }

  // One warning a folder the walk did not enter, so a dataset that lives
  // under one is not silently missing.
  void report_skipped() {
    for (const auto& [dir, why] : skipped_) diags_.warning(dir, "", fmt::format("not read: {}", why));
    skipped_.clear();
  }

  void load_loose_file(const std::string& file) {
    std::error_code ec;
    if (!fs::exists(file, ec)) {
      diags_.error(file, "", "no such file or directory");
      return;
    }
    auto ext = fs::path(file).extension();
    std::string rel = relative_to_root(file);
    if (ext == ".jsonl") {
      std::string_view kind = rel.rfind("workloads/", 0) == 0 ? "workload" : rel.rfind("traces/", 0) == 0 ? "trace" : "";
      load_jsonl(file, kind);
    } else if (ext == ".json") {
      bool solution = rel.rfind("solutions/", 0) == 0;
      if (rel.rfind("definitions/", 0) != 0 && !solution) {
        auto text = json::read_text_file(file);
        if (text) {
          if (model::Kind kind = model::sniff(*text); kind != model::Kind::none) {
            load_model_object(file, *text, kind);
            return;
          }
        }
        solution = text && looks_like_solution(*text);
      }
      if (solution) load_solution(file);
      else load_definition(file);
    } else {
      diags_.error(file, "", "not a .json or .jsonl file");
    }
  }

  // A calling record, benchmark result or agent trace (see model/records.hpp).
  void load_model_object(const std::string& file, const std::string& text, model::Kind kind) {
    switch (kind) {
      case model::Kind::calling_record:
        ++report_.calling_records;
        if (auto r = model::read_calling_record(text, file, &diags_))
          ds.calling_records.push_back({std::move(*r), file, model::Locator(text, file)});
        return;
      case model::Kind::benchmark_result:
        ++report_.benchmark_results;
        if (auto r = model::read_benchmark_result(text, file, &diags_)) ds.benchmark_results.push_back({std::move(*r), file});
        return;
      case model::Kind::agent_trace:
        ++report_.agent_traces;
        if (auto r = model::read_agent_trace(text, file, &diags_)) ds.agent_traces.push_back({std::move(*r), file});
        return;
      case model::Kind::none:
        return;
    }
  }

  // Definitions and solutions of the dataset a loose file lives in, for
  // cross-checks. Problems there are reported only when those files are
  // themselves validated.
  void load_context(const std::string& root) {
    ds.root = root;
    have_definitions_ = true;
    Diagnostics ignored;
    for (const auto& f : files_under(fs::path(root) / "definitions", ".json")) {
      auto d = read_definition_file(f, &ignored);
      if (!d) {
        if (auto name = claimed_name(f)) invalid_.insert(*name);
        continue;
      }
      files_by_name_.emplace(d->name, f);
      if (!index_.count(d->name)) {
        index_[d->name] = ds.definitions.size();
        ds.definitions.push_back({std::move(*d), f});
      }
    }
    have_solutions_ = fs::is_directory(fs::path(root) / "solutions");
    for (const auto& f : files_under(fs::path(root) / "solutions", ".json"))
      if (auto s = read_solution_file(f, &ignored)) ds.solutions.push_back({std::move(*s), f});
  }

  std::string relative_to_root(const std::string& file) const {
    if (ds.root.empty()) return {};
    std::error_code ec;
    auto rel = fs::relative(file, ds.root, ec);
    return ec ? std::string() : rel.generic_string();
  }

 private:
  const LoadOptions& opt_;
  Diagnostics& diags_;
  LoadReport& report_;
  std::map<std::string, std::size_t, std::less<>> index_;
  bool have_definitions_ = false;
  bool have_solutions_ = false;
  std::map<std::string, std::string> skipped_;  // folders the walk did not enter, and why
  std::multimap<std::string, std::string> files_by_name_;  // every definition file, by the name it holds
  std::set<std::string> invalid_;                          // names claimed by invalid definition files
};

// Every calling record's kernel ids against the definitions of every path loaded.
void check_calling_records(const std::vector<Dataset>& sets, Diagnostics& diags) {
  std::map<std::string, const Definition*, std::less<>> defs;
  for (const auto& ds : sets)
    for (const auto& d : ds.definitions) defs.emplace(d.definition.name, &d.definition);
  std::vector<std::string> known;
  for (const auto& [name, d] : defs) known.push_back(name);
  auto find = [&](std::string_view name) -> const Definition* {
    auto it = defs.find(name);
    return it == defs.end() ? nullptr : it->second;
  };
  for (const auto& ds : sets)
    for (const auto& r : ds.calling_records) {
      if (defs.empty()) {
        diags.warning(r.file, "kernels",
                   "kernel ids not checked: no definitions were loaded (name a dataset too: kb validate DATASET RECORD)");
        continue;
      }
      model::check_calling_record(r.record, find, known, r.where, diags);
    }
}

}  // namespace

const DefinitionEntry* Dataset::find_definition(std::string_view name) const {
  for (const auto& d : definitions)
    if (d.definition.name == name) return &d;
  return nullptr;
}

const SolutionEntry* Dataset::find_solution(std::string_view name) const {
  for (const auto& s : solutions)
    if (s.solution.name == name) return &s;
  return nullptr;
}

bool is_dataset_root(const std::string& dir) {
  std::error_code ec;
  fs::path d(dir);
  for (const char* sub : {"definitions", "workloads", "solutions", "traces"})
    if (fs::is_directory(d / sub, ec)) return true;
  return false;
}

std::string find_dataset_root(const std::string& path) {
  // Walk up the path as given, so messages keep the user's relative paths.
  std::error_code ec;
  fs::path p = fs::path(path).lexically_normal();
  if (!fs::is_directory(p, ec)) p = p.parent_path();
  while (true) {
    fs::path here = p.empty() ? fs::path(".") : p;
    if (fs::is_directory(here / "definitions", ec)) return here.string();
    if (p.empty() || p == p.root_path() || p.filename() == "..") break;
    p = p.parent_path();
  }
  // Above the path as given (e.g. a path inside the working directory).
  p = fs::absolute(path, ec).parent_path();
  for (fs::path here = fs::current_path(ec); !ec && here != here.root_path(); here = here.parent_path())
    if (p.string().rfind(here.string(), 0) == 0 && fs::is_directory(here / "definitions", ec)) return here.string();
  return {};
}

Result<DefinitionEntry> find_definition_by_name(const std::string& dir, std::string_view name) {
  if (name.empty()) return make_error(Code::invalid_argument, "the definition name is empty");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return make_error(Code::io_error, fmt::format("{}: not a directory (a dataset or a folder of definitions)", dir));
  const fs::path where = is_dataset_root(dir) ? fs::path(dir) / "definitions" : fs::path(dir);
  const std::vector<std::string> files = files_under(where, ".json");
  // The file named after the definition first: the usual layout, and its errors are the ones to report.
  std::vector<std::string> rest;
  for (const auto& f : files) {
    if (fs::path(f).stem() != name) {
      rest.push_back(f);
      continue;
    }
    auto d = read_definition_file(f);
    if (!d) return std::move(d).error();
    if (d->name == name) return DefinitionEntry{std::move(*d), f};
  }
  // Then every definition, for one whose file is named otherwise; their names feed the near matches.
  std::vector<std::string> known;
  for (const auto& f : rest) {
    Diagnostics scratch;  // files that are not definitions (or not valid ones) are passed over
    auto d = read_definition_file(f, &scratch);
    if (!d) continue;
    if (d->name == name) return DefinitionEntry{std::move(*d), f};
    known.push_back(d->name);
  }
  std::sort(known.begin(), known.end());
  known.erase(std::unique(known.begin(), known.end()), known.end());
  return make_error(Code::not_found, fmt::format("no definition {} in {} ({} definition{}){}", quote_name(name), dir, known.size(),
                                                 known.size() == 1 ? "" : "s", suggestion_text(name, known)));
}

Dataset load_dataset(const std::string& root, const LoadOptions& options, Diagnostics& diags, LoadReport* report) {
  LoadReport local;
  Loader loader(options, diags, report ? *report : local);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    diags.error(root, "", "not a directory");
    return {};
  }
  loader.load_root(root);
  return std::move(loader.ds);
}

std::vector<Dataset> load_paths(const std::vector<std::string>& paths, const LoadOptions& options, Diagnostics& diags,
                                LoadReport* report) {
  LoadReport local;
  LoadReport& r = report ? *report : local;
  std::vector<Dataset> out;
  for (const auto& path : paths) {
    std::error_code ec;
    Loader loader(options, diags, r);
    if (fs::is_directory(path, ec) && is_dataset_root(path)) {
      loader.load_root(path);
    } else {
      std::string root = find_dataset_root(path);
      if (!root.empty()) loader.load_context(root);
      loader.load_loose(path);
    }
    out.push_back(std::move(loader.ds));
  }
  check_calling_records(out, diags);
  return out;
}

LoadReport validate_paths(const std::vector<std::string>& paths, const LoadOptions& options, Diagnostics& diags) {
  LoadReport report;
  load_paths(paths, options, diags, &report);
  return report;
}

}  // namespace kb
