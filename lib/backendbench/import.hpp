// BackendBench trace -> FlashInfer Trace dataset.
//
// Each operator overload and argument signature becomes a Definition
// (op_type "aten"), each trace line a Workload of it:
//  - a tensor argument is an input `a<i>` (`a<i>_<j>` inside a list, `kw_<name>`
//    for a kwarg) whose dims are var axes `<input>_d<k>`; strides written in
//    the trace are var axes `<input>_s<k>` (in elements), so every layout
//    (0-strides, permuted, gapped) is kept;
//  - an int, finite float or bool argument is a scalar input (a list of ints
//    one scalar input `<name>_<j>` per element);
//  - anything else (None, dtypes, strings, devices, other lists) is part of
//    the signature and written into the reference as a Python constant;
//  - the trace's cnt is the var axis `count`;
//  - for operators kb implements, the outputs' ranks and dtypes come from the
//    operator's meta call and are part of the signature, their dims are var
//    axes `out<k>_d<j>`; other operators get one output `out` with shape null.
// The reference calls torch.ops.aten.<op>.<overload>. Lines with dtypes the
// FlashInfer Trace format lacks (f64, u8, complex) are skipped, with a reason.
// Beside definitions/ and workloads/, backendbench/lines.jsonl maps every
// workload uuid to its operator, source line, count and original text.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "backendbench/trace.hpp"
#include "common/result.hpp"
#include "schema/model.hpp"

namespace kb::backendbench {

struct ImportedLine {
  std::string op;
  std::size_t source_line = 0;
  std::size_t index = 0;  // within the operator
  std::uint64_t count = 0;
  std::string text;       // "cnt: N, ((...), {...})"
  std::string definition;
  Workload workload;
};

struct SkippedLine {
  std::string op;
  std::size_t source_line = 0;
  std::string reason;
};

struct ImportResult {
  std::vector<Definition> definitions;
  std::vector<ImportedLine> lines;
  std::vector<SkippedLine> skipped;
};

ImportResult import_trace(const TraceFile& trace);

// Writes definitions/aten/*.json, workloads/aten/*.jsonl and
// backendbench/lines.jsonl under `dir` (created; existing files overwritten).
Status write_dataset(const ImportResult& r, const std::string& dir);

// "aten.add.Tensor" -> "aten_add_Tensor"
std::string op_identifier(std::string_view op);

}  // namespace kb::backendbench
