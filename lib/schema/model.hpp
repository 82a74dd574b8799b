// The FlashInfer Trace objects (shared/notes/formats.md), field for field:
// Definition, Workload, Solution, Trace, Evaluation. Plain data: reading,
// writing and validating live in io.hpp and validate.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "schema/dtype.hpp"

namespace kb {

// ---- Definition -------------------------------------------------------------

enum class AxisKind { const_, var };

struct Axis {
  std::string name;
  AxisKind kind = AxisKind::var;
  std::int64_t value = 0;                  // const axes only
  std::optional<std::string> description;
  std::optional<std::string> parent;       // seed-001 dialect: nesting parent axis
  bool operator==(const Axis&) const = default;
};

struct TensorSpec {
  std::string name;
  // Axis names; std::nullopt = Python scalar (`shape: null`); empty = 0-D tensor.
  std::optional<std::vector<std::string>> shape;
  DType dtype = DType::float32;
  std::optional<std::string> description;
  // The caller may pass None (seen on gdn `state` inputs); not in formats.md
  // but in FlashInfer-Bench's data, so kept and written back when true.
  bool optional = false;

  bool is_scalar() const { return !shape.has_value(); }
  std::size_t rank() const { return shape ? shape->size() : 0; }
  bool operator==(const TensorSpec&) const = default;
};

// Which spelling a document used; kb always writes the current one.
enum class Dialect { flashinfer_trace, seed001 };

struct Definition {
  std::string name;
  std::string op_type;
  std::vector<Axis> axes;            // in document order
  std::vector<TensorSpec> inputs;    // in document order: the call signature
  std::vector<TensorSpec> outputs;
  std::string reference;             // Python source with a top-level `def run`
  std::vector<std::string> tags;
  std::optional<std::string> description;
  std::vector<std::string> constraints;
  Dialect dialect = Dialect::flashinfer_trace;
  // The document's key for `constraints` (seed-001 writes "assumptions"), so that a message about
  // constraint i names the place the author wrote it: assumptions[i].
  std::string constraints_key = "constraints";

  const Axis* find_axis(std::string_view n) const;
  const TensorSpec* find_input(std::string_view n) const;
  const TensorSpec* find_output(std::string_view n) const;
  const TensorSpec* find_tensor(std::string_view n) const;  // input or output

  // Equality ignores `dialect` and `constraints_key` (how it was spelled, not what it says).
  bool operator==(const Definition& o) const;
};

// ---- Workload ---------------------------------------------------------------

// int, float or bool, keeping the JSON kind ("1" vs "1.0").
using ScalarValue = std::variant<std::int64_t, double, bool>;

enum class InputKind { random, scalar, safetensors };

struct InputSpec {
  InputKind kind = InputKind::random;
  ScalarValue value = std::int64_t{0};  // scalar only
  std::string path;                     // safetensors only: relative to the dataset root
  std::string tensor_key;               // safetensors only
  bool operator==(const InputSpec&) const = default;
};

struct Workload {
  std::string uuid;
  std::vector<std::pair<std::string, std::int64_t>> axes;    // var axes, in document order
  std::vector<std::pair<std::string, InputSpec>> inputs;     // in document order

  const std::int64_t* find_axis(std::string_view n) const;
  const InputSpec* find_input(std::string_view n) const;
  bool operator==(const Workload&) const = default;
};

// ---- Evaluation and Trace ---------------------------------------------------

enum class EvalStatus {
  passed,
  incorrect_shape,
  incorrect_dtype,
  incorrect_numerical,
  runtime_error,
  compile_error,
  timeout,
};
std::string_view eval_status_name(EvalStatus s) noexcept;  // "PASSED", ...
std::optional<EvalStatus> eval_status_from_name(std::string_view s) noexcept;

struct EvalEnvironment {
  std::string hardware;
  std::vector<std::pair<std::string, std::string>> libs;
  bool operator==(const EvalEnvironment&) const = default;
};

struct Correctness {
  double max_relative_error = 0;
  double max_absolute_error = 0;
  std::optional<std::string> extra;  // any JSON object, kept as minified text
  bool operator==(const Correctness&) const = default;
};

struct Performance {
  double latency_ms = 0;
  double reference_latency_ms = 0;
  double speedup_factor = 0;
  // kb's additions (FlashInfer-Bench ignores unknown fields here): achieved
  // bytes/s and FLOP/s, fractions of measured ceilings, timing method.
  // Any JSON object, kept as minified text.
  std::optional<std::string> extra;
  bool operator==(const Performance&) const = default;
};

struct Evaluation {
  EvalStatus status = EvalStatus::passed;
  EvalEnvironment environment;
  std::string timestamp;  // ISO 8601
  std::string log;
  std::optional<Correctness> correctness;  // PASSED and INCORRECT_NUMERICAL only
  std::optional<Performance> performance;  // PASSED only
  bool operator==(const Evaluation&) const = default;
};

struct Trace {
  std::string definition;
  Workload workload;
  std::optional<std::string> solution;      // null for workload-only lines
  std::optional<Evaluation> evaluation;
  bool operator==(const Trace&) const = default;
};

// ---- Solution ---------------------------------------------------------------

struct SourceFile {
  std::string path;
  std::string content;
  bool operator==(const SourceFile&) const = default;
};

struct BuildSpec {
  std::string language;  // python | triton | cpp | cuda | tilelang
  std::vector<std::string> target_hardware;
  std::string entry_point;  // "file::symbol"
  std::vector<std::string> dependencies;
  bool destination_passing_style = true;
  std::optional<std::string> binding;
  bool operator==(const BuildSpec&) const = default;
};

struct Solution {
  std::string name;
  std::string definition;
  std::string author;
  std::optional<std::string> description;
  BuildSpec spec;
  std::vector<SourceFile> sources;
  bool operator==(const Solution&) const = default;
};

}  // namespace kb
