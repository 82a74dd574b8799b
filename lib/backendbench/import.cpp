// BackendBench trace -> FlashInfer Trace dataset (see import.hpp).
#include "backendbench/import.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "backendbench/materialize.hpp"
#include "backendbench/ops.hpp"
#include "backendbench/run.hpp"
#include "json/json.hpp"
#include "schema/io.hpp"

namespace kb::backendbench {

namespace fs = std::filesystem;

std::string op_identifier(std::string_view op) {
  std::string s;
  for (char ch : op) s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
  return s;
}

namespace {

std::uint64_t fnv1a(std::string_view s, std::uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

std::optional<DType> fib_dtype(Dtype d) {
  switch (d) {
    case Dtype::f16: return DType::float16;
    case Dtype::bf16: return DType::bfloat16;
    case Dtype::f32: return DType::float32;
    case Dtype::i64: return DType::int64;
    case Dtype::i32: return DType::int32;
    case Dtype::i16: return DType::int16;
    case Dtype::i8: return DType::int8;
    case Dtype::b8: return DType::bool_;
    default: return std::nullopt;  // f64, u8, complex: not in the FlashInfer Trace format
  }
}

const char* torch_dtype(Dtype d) {
  switch (d) {
    case Dtype::bf16: return "torch.bfloat16";
    case Dtype::f64: return "torch.float64";
    case Dtype::f32: return "torch.float32";
    case Dtype::f16: return "torch.float16";
    case Dtype::c32: return "torch.complex32";
    case Dtype::c64: return "torch.complex64";
    case Dtype::c128: return "torch.complex128";
    case Dtype::i8: return "torch.int8";
    case Dtype::i16: return "torch.int16";
    case Dtype::i32: return "torch.int32";
    case Dtype::i64: return "torch.int64";
    case Dtype::b8: return "torch.bool";
    case Dtype::u8: return "torch.uint8";
  }
  return "?";
}

// Python text of a constant (non-tensor) value.
std::string python_constant(const Value& v) {
  switch (v.kind) {
    case Kind::floating:
      if (std::isnan(v.float_value)) return "float('nan')";
      if (std::isinf(v.float_value)) return v.float_value > 0 ? "float('inf')" : "float('-inf')";
      return v.text;
    case Kind::dtype: return torch_dtype(v.dtype);
    case Kind::list:
    case Kind::tuple: {
      std::vector<std::string> parts;
      for (const Value& e : v.children) parts.push_back(python_constant(e));
      if (v.kind == Kind::tuple) return fmt::format("({}{})", fmt::join(parts, ", "), parts.size() == 1 ? "," : "");
      return fmt::format("[{}]", fmt::join(parts, ", "));
    }
    case Kind::device: {
      std::vector<std::string> parts;
      for (const Value& e : v.children) parts.push_back(python_constant(e));
      return fmt::format("torch.device({})", fmt::join(parts, ", "));
    }
    default: return v.text;  // ints, True/False/None, strings with their quotes, torch.* names
  }
}

bool is_int_list(const Value& v) {
  if ((v.kind != Kind::list && v.kind != Kind::tuple) || v.children.empty()) return false;
  for (const Value& e : v.children)
    if (e.kind != Kind::integer || !e.int_value) return false;
  return true;
}

struct Builder {
  // Signature-defining parts.
  std::string signature;
  std::vector<Axis> axes;
  std::vector<TensorSpec> inputs, outputs;
  std::vector<std::string> call_args;  // Python argument texts for the reference
  // Line-specific bindings.
  std::vector<std::pair<std::string, std::int64_t>> bound;
  std::vector<std::pair<std::string, InputSpec>> values;
  std::optional<std::string> skip;

  void var_axis(const std::string& name, std::int64_t value, std::string description) {
    axes.push_back(Axis{name, AxisKind::var, 0, std::move(description), std::nullopt});
    bound.emplace_back(name, value);
  }

  // A tensor input; returns its parameter name.
  std::string tensor(const std::string& name, const Value& v) {
    auto dt = fib_dtype(v.dtype);
    if (!dt) {
      skip = fmt::format("{} has dtype {}, which the FlashInfer Trace format lacks", name, dtype_abbrev(v.dtype));
      return name;
    }
    TensorSpec t;
    t.name = name;
    t.dtype = *dt;
    t.shape = std::vector<std::string>{};
    for (std::size_t k = 0; k < v.shape.size(); ++k) {
      std::string ax = fmt::format("{}_d{}", name, k);
      t.shape->push_back(ax);
      var_axis(ax, v.shape[k], fmt::format("dim {} of {}", k, name));
    }
    if (v.has_strides()) {
      for (std::size_t k = 0; k < v.strides.size(); ++k)
        var_axis(fmt::format("{}_s{}", name, k), v.strides[k], fmt::format("stride {} of {} (elements)", k, name));
      t.description = "strides as traced: axes " + name + "_s*";
    }
    signature += fmt::format("T({},{}{})", v.shape.size(), dtype_abbrev(v.dtype), v.has_strides() ? ",s" : "");
    inputs.push_back(std::move(t));
    return name;
  }

  void scalar(const std::string& name, DType dt, ScalarValue value) {
    TensorSpec t;
    t.name = name;
    t.dtype = dt;
    t.shape = std::nullopt;
    inputs.push_back(std::move(t));
    InputSpec in;
    in.kind = InputKind::scalar;
    in.value = value;
    values.emplace_back(name, in);
  }

  // Adds one argument; returns the Python text passing it.
  std::string arg(const std::string& name, const Value& v) {
    switch (v.kind) {
      case Kind::tensor: return tensor(name, v);
      case Kind::integer:
        if (v.int_value) {
          signature += "int";
          scalar(name, DType::int64, *v.int_value);
          return name;
        }
        break;
      case Kind::floating:
        if (std::isfinite(v.float_value) && std::fabs(v.float_value) <= 3.4028234663852886e38) {
          signature += "float";
          scalar(name, DType::float32, v.float_value);
          return name;
        }
        break;
      case Kind::boolean:
        signature += "bool";
        scalar(name, DType::bool_, v.text == "True");
        return name;
      case Kind::list:
      case Kind::tuple: {
        bool has_tensor = false;
        for (const Value& e : v.children) has_tensor |= e.kind == Kind::tensor;
        if (has_tensor || is_int_list(v)) {
          signature += v.kind == Kind::list ? "[" : "(";
          std::vector<std::string> parts;
          for (std::size_t j = 0; j < v.children.size(); ++j) {
            if (j) signature += ",";
            parts.push_back(arg(fmt::format("{}_{}", name, j), v.children[j]));
          }
          signature += v.kind == Kind::list ? "]" : ")";
          if (v.kind == Kind::tuple)
            return fmt::format("({}{})", fmt::join(parts, ", "), parts.size() == 1 ? "," : "");
          return fmt::format("[{}]", fmt::join(parts, ", "));
        }
        break;
      }
      default: break;
    }
    std::string c = python_constant(v);
    signature += "=" + c;
    return c;
  }
};

std::string kwarg_name(const std::string& key) {
  std::string s = "kw_";
  for (char ch : key) s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
  return s;
}

std::string make_uuid(std::string_view op, std::size_t index, const std::string& text) {
  std::uint64_t a = fnv1a(text, fnv1a(op) ^ index), b = fnv1a(op, a ^ 0x5bd1e995u);
  return fmt::format("{:08x}-{:04x}-8{:03x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff, a & 0xfff,
                     0x8000 | ((b >> 48) & 0x3fff), b & 0xffffffffffffull);
}

}  // namespace

ImportResult import_trace(const TraceFile& trace) {
  ImportResult r;
  std::map<std::string, std::size_t> def_index;  // name -> definitions index
  for (const Operator& op : merge_operators(trace)) {
    const OpInfo* info = find_aten_op(op.name);
    for (std::size_t li = 0; li < op.lines.size(); ++li) {
      const ArgLine& line = op.lines[li];
      Builder b;
      std::vector<std::string> call;
      for (std::size_t i = 0; i < line.args.positional.size(); ++i)
        call.push_back(b.arg(fmt::format("a{}", i), line.args.positional[i])), b.signature += ";";
      for (const Kwarg& kw : line.args.kwargs) {
        b.signature += kw.key.str_value + ":";
        call.push_back(kw.key.str_value + "=" + b.arg(kwarg_name(kw.key.str_value), kw.value));
        b.signature += ";";
      }
      if (b.skip) {
        r.skipped.push_back({op.name, line.line, *b.skip});
        continue;
      }
      // Outputs from the operator's meta call, when kb implements it.
      bool have_outputs = false;
      if (info) {
        auto c = materialize_call(op.name, line.args, default_seed, li, /*meta=*/true);
        if (c) {
          auto outs = run_cpu(*info, *c);
          if (outs && !outs->empty()) {
            have_outputs = true;
            b.signature += "->";
            for (std::size_t k = 0; k < outs->size() && have_outputs; ++k) {
              const HostTensor& o = (*outs)[k];
              if (o.undefined) {  // None (output_mask False): no output tensor
                b.signature += "None";
                continue;
              }
              auto dt = fib_dtype(o.dtype);
              if (!dt) {
                have_outputs = false;
                break;
              }
              TensorSpec t;
              t.name = fmt::format("out{}", k);
              t.dtype = *dt;
              t.shape = std::vector<std::string>{};
              for (std::size_t j = 0; j < o.shape.size(); ++j) {
                std::string ax = fmt::format("out{}_d{}", k, j);
                t.shape->push_back(ax);
                b.var_axis(ax, o.shape[j], fmt::format("dim {} of output {}", j, k));
              }
              b.signature += fmt::format("T({},{})", o.shape.size(), dtype_abbrev(o.dtype));
              b.outputs.push_back(std::move(t));
            }
          }
        }
      }
      if (!have_outputs) {
        // Drop any output axes added before a failure.
        std::erase_if(b.axes, [](const Axis& a) { return a.name.rfind("out", 0) == 0; });
        std::erase_if(b.bound, [](const auto& p) { return p.first.rfind("out", 0) == 0; });
        b.outputs.clear();
        TensorSpec t;
        t.name = "out";
        t.dtype = DType::float32;
        for (const TensorSpec& in : b.inputs)
          if (!in.is_scalar()) {
            t.dtype = in.dtype;
            break;
          }
        t.shape = std::nullopt;
        t.description = "result of the operator; its structure is not inferred (kb does not implement it)";
        b.outputs.push_back(std::move(t));
        b.signature += "->?";
      }
      b.var_axis("count", static_cast<std::int64_t>(line.count), "the trace's cnt: how often the traced models made this call");

      std::string name = fmt::format("{}_{:08x}", op_identifier(op.name), fnv1a(b.signature) & 0xffffffffu);
      auto it = def_index.find(name);
      if (it == def_index.end()) {
        Definition d;
        d.name = name;
        d.op_type = "aten";
        d.axes = b.axes;
        d.inputs = b.inputs;
        d.outputs = b.outputs;
        d.tags = {"backendbench", "aten:" + op.name, info ? std::string("kb:") + info->family : "kb:unimplemented"};
        d.description = fmt::format(
            "BackendBench operator {} with argument signature {}. Axes <input>_d<k> are dims, <input>_s<k> the traced "
            "strides in elements (kb materializes inputs with that exact layout; the reference takes the tensors as given), count is the trace's cnt.",
            op.name, b.signature);
        std::vector<std::string> params;
        for (const TensorSpec& t : d.inputs) params.push_back(t.name);
        d.reference = fmt::format("import torch\n\n\ndef run({}):\n    return torch.ops.{}({})\n", fmt::join(params, ", "),
                                  op.name, fmt::join(call, ", "));
        def_index.emplace(name, r.definitions.size());
        r.definitions.push_back(std::move(d));
      }
      ImportedLine il;
      il.op = op.name;
      il.source_line = line.line;
      il.index = li;
      il.count = line.count;
      il.text = print_line(line);
      il.definition = name;
      il.workload.uuid = make_uuid(op.name, li, il.text);
      il.workload.axes = b.bound;
      for (const TensorSpec& t : b.inputs) {
        if (t.is_scalar()) continue;
        il.workload.inputs.emplace_back(t.name, InputSpec{});
      }
      for (auto& v : b.values) il.workload.inputs.push_back(v);
      // Keep the definition's input order.
      std::vector<std::pair<std::string, InputSpec>> ordered;
      for (const TensorSpec& t : b.inputs)
        for (auto& p : il.workload.inputs)
          if (p.first == t.name) ordered.push_back(p);
      il.workload.inputs = std::move(ordered);
      r.lines.push_back(std::move(il));
    }
  }
  return r;
}

namespace {
Status write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return make_error(Code::io_error, fmt::format("{}: cannot write", p.string()));
  return ok_status();
}
}  // namespace

Status write_dataset(const ImportResult& r, const std::string& dir) {
  std::error_code ec;
  fs::path root(dir);
  for (const char* sub : {"definitions/aten", "workloads/aten", "backendbench"}) {
    fs::create_directories(root / sub, ec);
    if (ec) return make_error(Code::io_error, fmt::format("{}: cannot create: {}", (root / sub).string(), ec.message()));
  }
  for (const Definition& d : r.definitions)
    KB_TRY(write_file(root / "definitions" / "aten" / (d.name + ".json"), to_json(d, true) + "\n"));
  std::map<std::string, std::string> workloads;
  std::string lines;
  for (const ImportedLine& l : r.lines) {
    Trace t;
    t.definition = l.definition;
    t.workload = l.workload;
    workloads[l.definition] += to_json(t, false) + "\n";
    json::Writer w(false);
    w.begin_object();
    w.key("uuid").string(l.workload.uuid);
    w.key("definition").string(l.definition);
    w.key("operator").string(l.op);
    w.key("index").integer(static_cast<std::int64_t>(l.index));
    w.key("line").integer(static_cast<std::int64_t>(l.source_line));
    w.key("count").integer(static_cast<std::int64_t>(l.count));
    w.key("text").string(l.text);
    w.end_object();
    lines += w.take() + "\n";
  }
  for (const auto& [name, text] : workloads) KB_TRY(write_file(root / "workloads" / "aten" / (name + ".jsonl"), text));
  KB_TRY(write_file(root / "backendbench" / "lines.jsonl", lines));
  std::string skipped;
  for (const SkippedLine& s : r.skipped) skipped += fmt::format("{}\t{}\t{}\n", s.source_line, s.op, s.reason);
  KB_TRY(write_file(root / "backendbench" / "skipped.tsv", skipped));
  return ok_status();
}

}  // namespace kb::backendbench
