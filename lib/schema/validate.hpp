// Semantic rules of FlashInfer Trace objects, beyond FlashInfer-Bench's own:
// shape axes declared, names disjoint, `def run` present, constraints parsed
// and (where only axes are involved) evaluated, workloads bound exactly to
// their definition, evaluation status/field rules, solution source rules.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "json/diagnostics.hpp"
#include "schema/model.hpp"

namespace kb {

// Where an object came from, for messages, and how strict to be.
struct CheckContext {
  std::string origin;                      // "file" or "file:line"
  std::string path = "definition";         // JSON path prefix of the object
  std::optional<std::string> dataset_root; // resolves safetensors paths; none = not checked
  bool strict = false;                     // missing blobs are errors, not warnings
  bool report_unchecked = false;           // a note per constraint kb could not evaluate
};

// Counts of constraint evaluations, so callers can report what was not checked.
struct ConstraintTally {
  std::size_t held = 0;
  std::size_t violated = 0;
  std::size_t unchecked = 0;
};

void validate_definition(const Definition& d, const CheckContext& ctx, Diagnostics& diags,
                         ConstraintTally* tally = nullptr);
// Rules of a workload on its own (uuid, non-negative axes, input kinds).
void validate_workload(const Workload& w, const CheckContext& ctx, Diagnostics& diags);
// A workload against the definition it names: axes bind exactly the var axes,
// inputs name exactly the definition's inputs, scalar kinds, tensor sizes,
// safetensors blobs (if ctx.dataset_root), constraints under the bound axes.
void validate_workload_against(const Workload& w, const Definition& d, const CheckContext& ctx,
                               Diagnostics& diags, ConstraintTally* tally = nullptr);
void validate_evaluation(const Evaluation& e, const CheckContext& ctx, Diagnostics& diags);
void validate_trace(const Trace& t, const CheckContext& ctx, Diagnostics& diags);
void validate_solution(const Solution& s, const CheckContext& ctx, Diagnostics& diags);

// Does `source` define a top-level (unindented) `def run(`?
bool has_top_level_run(std::string_view source);
// Is this an ISO 8601 date-time ("2025-01-02T03:04:05", optional fraction and zone)?
bool is_iso8601(std::string_view s);
// Elements of a tensor of `spec` under bound axis values; nullopt when an axis
// is unbound, negative, or the count overflows int64.
std::optional<std::int64_t> element_count(const TensorSpec& spec, const Definition& d,
                                          const Workload* w);

}  // namespace kb
