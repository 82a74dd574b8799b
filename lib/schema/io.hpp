// Reading (simdjson) and writing (fmt) FlashInfer Trace objects.
//
// Readers check structure (required fields, JSON kinds, enum values, duplicate
// keys) and then the semantic rules of validate.hpp, appending every problem
// to `diags` with its JSON path; the Result carries the first error. Writers
// produce JSON that reads back to an equal object and that FlashInfer-Bench's
// own models accept.
#pragma once

#include <string>
#include <string_view>

#include "common/result.hpp"
#include "json/diagnostics.hpp"
#include "schema/model.hpp"

namespace kb {

struct ConstraintTally;  // schema/validate.hpp

// `origin` names the text in messages: a path, or "path:line" for JSONL. A definition's constraints
// over const axes are evaluated as it is read; `tally`, when given, counts their verdicts (a violated
// one too, although the definition is then refused).
Result<Definition> read_definition(std::string_view text, std::string_view origin, Diagnostics* diags = nullptr,
                                   ConstraintTally* tally = nullptr);
Result<Definition> read_definition_file(const std::string& path, Diagnostics* diags = nullptr,
                                        ConstraintTally* tally = nullptr);
// A bare Workload object ({"uuid", "axes", "inputs"}).
Result<Workload> read_workload(std::string_view text, std::string_view origin, Diagnostics* diags = nullptr);
// One Trace line (workload-only lines have null solution and evaluation).
Result<Trace> read_trace(std::string_view text, std::string_view origin, Diagnostics* diags = nullptr);
Result<Evaluation> read_evaluation(std::string_view text, std::string_view origin, Diagnostics* diags = nullptr);
Result<Solution> read_solution(std::string_view text, std::string_view origin, Diagnostics* diags = nullptr);
Result<Solution> read_solution_file(const std::string& path, Diagnostics* diags = nullptr);

// Pretty (2-space indent) for the one-object files, one line for JSONL.
std::string to_json(const Definition& d, bool pretty = true);
std::string to_json(const Workload& w, bool pretty = false);
std::string to_json(const Evaluation& e, bool pretty = false);
std::string to_json(const Trace& t, bool pretty = false);
std::string to_json(const Solution& s, bool pretty = true);

}  // namespace kb
