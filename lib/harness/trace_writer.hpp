// Appending evaluations to traces/<author>/<op_type>/<definition>.jsonl so no
// fault loses a result already measured: each line is written with one
// write(2) on an O_APPEND descriptor and fsync'ed before the next evaluation.
#pragma once

#include <set>
#include <string>
#include <tuple>

#include "common/result.hpp"
#include "schema/model.hpp"

namespace kb {

class TraceWriter {
 public:
  explicit TraceWriter(std::string out_dir) : out_dir_(std::move(out_dir)) {}

  // traces/<author>/<op_type>/<definition>.jsonl under the output directory.
  std::string path_for(const std::string& author, const Definition& d) const;
  // Appends `t` to path_for(author, d). Refused (Code::invalid_argument) when
  // the author, op_type or definition name is not a single path component, or
  // when the file, after resolving links, does not lie under the output
  // directory; nothing is written then.
  Status append(const std::string& author, const Definition& d, const Trace& t);

  // Keys (definition, workload uuid, solution) already recorded under the
  // output directory, for --resume. A torn last line (a run killed mid-write)
  // is ignored.
  Result<std::set<std::tuple<std::string, std::string, std::string>>> recorded() const;

 private:
  std::string out_dir_;
};

}  // namespace kb
