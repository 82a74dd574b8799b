// Structure of FlashInfer Trace JSON: fields, kinds, enums, duplicates.
// Semantic rules run afterwards (validate.cpp).
#include <fmt/format.h>

#include <initializer_list>
#include <cmath>

#include "json/json.hpp"
#include "json/walker.hpp"
#include "schema/io.hpp"
#include "schema/validate.hpp"

namespace kb {
namespace {

using json::Element;
using json::Object;
using simdjson::dom::element_type;

using json::index_path;
using json::member_path;

// Walks one document, recording problems with their JSON paths, all under
// one origin.
class Walker : public json::Walker {
 public:
  Walker(std::string origin, Diagnostics& diags)
      : json::Walker([origin](const std::string&) { return origin; }, diags), origin_(std::move(origin)) {}

  const std::string& origin() const { return origin_; }

  // A string or null (null -> nullopt, no error).
  std::optional<std::string> nullable_string_field(Object o, std::string_view key, const std::string& path,
                                                   bool required, bool* bad = nullptr) {
    Element e;
    if (!lookup(o, key, e)) {
      if (required) {
        error(member_path(path, key), "required field is missing (use null for none)");
        if (bad) *bad = true;
      }
      return std::nullopt;
    }
    if (e.is_null()) return std::nullopt;
    auto s = string(e, member_path(path, key));
    if (!s && bad) *bad = true;
    return s;
  }

  // `what` follows "a non-negative integer" in messages.
  std::optional<std::int64_t> nonneg_int(Element e, const std::string& path, std::string_view what) {
    return integer(e, path, 0, fmt::format("a non-negative integer{}", what));
  }

  std::optional<double> number_field(Object o, std::string_view key, const std::string& path) {
    Element e;
    if (!lookup(o, key, e)) {
      error(member_path(path, key), "required field is missing");
      return std::nullopt;
    }
    return number(e, member_path(path, key));
  }

  std::vector<std::string> string_list(Element e, const std::string& path) {
    std::vector<std::string> out;
    json::Array a;
    if (e.get_array().get(a) != simdjson::SUCCESS) {
      error(path, fmt::format("expected a list of strings, got {}", json::describe(e)));
      return out;
    }
    std::size_t i = 0;
    for (Element x : a) {
      if (auto s = string(x, index_path(path, i))) out.push_back(std::move(*s));
      ++i;
    }
    return out;
  }

 private:
  std::string origin_;
};

// ---- Definition ----

std::optional<TensorSpec> read_tensor_spec(Walker& w, std::string name, Element e, const std::string& path,
                                           Dialect dialect) {
  Object o;
  if (!w.object(e, path, o)) return std::nullopt;
  w.check_keys(o, path, {"shape", "dtype", "description", "optional"});
  TensorSpec t;
  t.name = std::move(name);
  bool ok = true;
  Element shape;
  if (!Walker::lookup(o, "shape", shape)) {
    w.error(member_path(path, "shape"), "required field is missing (use null for a scalar)");
    ok = false;
  } else if (!shape.is_null()) {
    json::Array a;
    if (shape.get_array().get(a) != simdjson::SUCCESS) {
      w.error(member_path(path, "shape"),
              fmt::format("expected a list of axis names or null, got {}", json::describe(shape)));
      ok = false;
    } else {
      std::vector<std::string> dims;
      std::size_t i = 0;
      for (Element d : a) {
        std::string_view s;
        if (d.get_string().get(s) == simdjson::SUCCESS) {
          dims.emplace_back(s);
        } else {
          w.error(index_path(member_path(path, "shape"), i),
                  fmt::format("expected an axis name, got {}", json::describe(d)));
          ok = false;
        }
        ++i;
      }
      // seed-001 wrote scalars as `shape: []`; the current format uses null.
      if (!(dialect == Dialect::seed001 && dims.empty())) t.shape = std::move(dims);
    }
  }
  Element dt;
  if (Walker::lookup(o, "dtype", dt)) {
    if (auto s = w.string(dt, member_path(path, "dtype"))) {
      if (auto d = dtype_from_name(*s)) {
        t.dtype = *d;
      } else {
        w.error(member_path(path, "dtype"),
                fmt::format("unknown dtype \"{}\" (known: float32 float16 bfloat16 float8_e4m3fn "
                            "float8_e5m2 float4_e2m1 int64 int32 int16 int8 bool)",
                            *s));
        ok = false;
      }
    } else {
      ok = false;
    }
  } else if (dialect == Dialect::seed001) {
    t.dtype = DType::float16;  // seed-001 default
  } else {
    w.error(member_path(path, "dtype"), "required field is missing");
    ok = false;
  }
  t.description = w.string_field(o, "description", path, false);
  Element opt;
  if (Walker::lookup(o, "optional", opt) && opt.get_bool().get(t.optional) != simdjson::SUCCESS) {
    w.error(member_path(path, "optional"), fmt::format("expected a boolean, got {}", json::describe(opt)));
    ok = false;
  }
  if (!ok) return std::nullopt;
  return t;
}

// Reads an ordered name -> TensorSpec map.
bool read_tensor_map(Walker& w, Object parent, std::string_view key, const std::string& path, Dialect dialect,
                     std::vector<TensorSpec>& out) {
  Element e;
  std::string p = member_path(path, key);
  if (!Walker::lookup(parent, key, e)) {
    w.error(p, "required field is missing");
    return false;
  }
  Object o;
  if (!w.object(e, p, o)) return false;
  bool ok = true;
  ok &= w.each_member(o, p, "duplicate name", [&](std::string_view name, Element value, const std::string& fp) {
    if (name.empty()) {
      w.error(fp, "empty tensor name");
      ok = false;
    }
    if (auto t = read_tensor_spec(w, std::string(name), value, fp, dialect)) out.push_back(std::move(*t));
    else ok = false;
  });
  return ok;
}

std::optional<Definition> walk_definition(Walker& w, Element root, const std::string& path) {
  Object o;
  if (!w.object(root, path, o)) return std::nullopt;
  Definition d;
  Element probe;
  bool seed = Walker::lookup(o, "id", probe) || Walker::lookup(o, "reference_code", probe) ||
              Walker::lookup(o, "code", probe) || Walker::lookup(o, "assumptions", probe);
  d.dialect = seed ? Dialect::seed001 : Dialect::flashinfer_trace;
  w.check_keys(o, path,
               {"name", "op_type", "axes", "inputs", "outputs", "reference", "tags", "description",
                "constraints", "id", "reference_code", "code", "assumptions"});
  std::size_t errors_before = w.errors();

  // name (seed-001: id)
  auto name = w.string_field(o, "name", path, false);
  auto id = w.string_field(o, "id", path, false);
  if (name && id && *name != *id)
    w.error(member_path(path, "id"), fmt::format("\"{}\" differs from name \"{}\"", *id, *name));
  if (name) d.name = *name;
  else if (id) d.name = *id;
  else if (!Walker::lookup(o, "name", probe) && !Walker::lookup(o, "id", probe))
    w.error(member_path(path, "name"), "required field is missing");

  if (auto op = w.string_field(o, "op_type", path, !seed)) d.op_type = *op;

  // reference (seed-001: reference_code or code)
  int refs = 0;
  for (std::string_view k : {"reference", "reference_code", "code"}) {
    if (!Walker::lookup(o, k, probe)) continue;
    if (++refs > 1) {
      w.error(member_path(path, k), "more than one of reference / reference_code / code");
      continue;
    }
    if (auto s = w.string(probe, member_path(path, k))) d.reference = *s;
  }
  if (refs == 0) w.error(member_path(path, "reference"), "required field is missing");

  // axes: ordered name -> {type, value?, description?, parent?}
  Element axes;
  std::string ap = member_path(path, "axes");
  if (!Walker::lookup(o, "axes", axes)) {
    w.error(ap, "required field is missing");
  } else if (Object ao; w.object(axes, ap, ao)) {
    w.each_member(ao, ap, "duplicate axis", [&](std::string_view name, Element value, const std::string& fp) {
      Object ax;
      if (!w.object(value, fp, ax)) return;
      w.check_keys(ax, fp, {"type", "value", "description", "parent"});
      Axis a;
      a.name = std::string(name);
      auto type = w.string_field(ax, "type", fp, true);
      Element v;
      bool has_value = Walker::lookup(ax, "value", v);
      if (type && *type == "const") {
        a.kind = AxisKind::const_;
        if (!has_value) w.error(member_path(fp, "value"), "required field is missing for a const axis");
        else if (auto n = w.nonneg_int(v, member_path(fp, "value"), "")) a.value = *n;
      } else if (type && *type == "var") {
        a.kind = AxisKind::var;
        if (has_value) w.error(member_path(fp, "value"), "a var axis has no value (bound by each workload)");
      } else if (type) {
        w.error(member_path(fp, "type"), fmt::format("expected \"const\" or \"var\", got \"{}\"", *type));
      }
      a.description = w.string_field(ax, "description", fp, false);
      a.parent = w.string_field(ax, "parent", fp, false);
      d.axes.push_back(std::move(a));
    });
  }

  read_tensor_map(w, o, "inputs", path, d.dialect, d.inputs);
  read_tensor_map(w, o, "outputs", path, d.dialect, d.outputs);

  if (Walker::lookup(o, "tags", probe)) d.tags = w.string_list(probe, member_path(path, "tags"));
  d.description = w.string_field(o, "description", path, false);
  int cons = 0;
  for (std::string_view k : {"constraints", "assumptions"}) {
    if (!Walker::lookup(o, k, probe)) continue;
    if (++cons > 1) {
      w.error(member_path(path, k), "both constraints and assumptions given");
      continue;
    }
    d.constraints = w.string_list(probe, member_path(path, k));
    d.constraints_key = std::string(k);
  }
  if (w.errors() != errors_before) return std::nullopt;
  return d;
}

// ---- Workload ----

std::optional<Workload> walk_workload(Walker& w, Element root, const std::string& path) {
  Object o;
  if (!w.object(root, path, o)) return std::nullopt;
  w.check_keys(o, path, {"uuid", "axes", "inputs"});
  std::size_t errors_before = w.errors();
  Workload wl;
  if (auto u = w.string_field(o, "uuid", path, true)) wl.uuid = *u;

  Element e;
  std::string ap = member_path(path, "axes");
  if (!Walker::lookup(o, "axes", e)) {
    w.error(ap, "required field is missing");
  } else if (Object ao; w.object(e, ap, ao)) {
    w.each_member(ao, ap, "duplicate axis", [&](std::string_view name, Element value, const std::string& fp) {
      if (auto v = w.nonneg_int(value, fp, "")) wl.axes.emplace_back(std::string(name), *v);
    });
  }

  std::string ip = member_path(path, "inputs");
  if (!Walker::lookup(o, "inputs", e)) {
    w.error(ip, "required field is missing");
  } else if (Object io; w.object(e, ip, io)) {
    w.each_member(io, ip, "duplicate input", [&](std::string_view name, Element value, const std::string& fp) {
      Object in;
      if (!w.object(value, fp, in)) return;
      InputSpec spec;
      auto type = w.string_field(in, "type", fp, true);
      if (!type) return;
      if (*type == "random") {
        w.check_keys(in, fp, {"type"});
        spec.kind = InputKind::random;
      } else if (*type == "scalar") {
        w.check_keys(in, fp, {"type", "value"});
        spec.kind = InputKind::scalar;
        Element v;
        std::string vp = member_path(fp, "value");
        if (!Walker::lookup(in, "value", v)) {
          w.error(vp, "required field is missing for a scalar input");
          return;
        }
        std::int64_t i;
        double f;
        bool b;
        if (v.type() == element_type::INT64 && v.get_int64().get(i) == simdjson::SUCCESS) spec.value = i;
        else if (v.type() == element_type::DOUBLE && v.get_double().get(f) == simdjson::SUCCESS) spec.value = f;
        else if (v.get_bool().get(b) == simdjson::SUCCESS) spec.value = b;
        else {
          w.error(vp, fmt::format("expected an integer, float or boolean, got {}", json::describe(v)));
          return;
        }
      } else if (*type == "safetensors") {
        w.check_keys(in, fp, {"type", "path", "tensor_key"});
        spec.kind = InputKind::safetensors;
        auto p = w.string_field(in, "path", fp, true);
        auto k = w.string_field(in, "tensor_key", fp, true);
        if (!p || !k) return;
        spec.path = *p;
        spec.tensor_key = *k;
      } else {
        w.error(member_path(fp, "type"),
                fmt::format("expected \"random\", \"scalar\" or \"safetensors\", got \"{}\"", *type));
        return;
      }
      wl.inputs.emplace_back(std::string(name), std::move(spec));
    });
  }
  if (w.errors() != errors_before) return std::nullopt;
  return wl;
}

// ---- Evaluation ----

std::optional<Evaluation> walk_evaluation(Walker& w, Element root, const std::string& path) {
  Object o;
  if (!w.object(root, path, o)) return std::nullopt;
  w.check_keys(o, path, {"status", "environment", "timestamp", "log", "correctness", "performance"});
  std::size_t errors_before = w.errors();
  Evaluation ev;
  if (auto s = w.string_field(o, "status", path, true)) {
    if (auto st = eval_status_from_name(*s)) ev.status = *st;
    else
      w.error(member_path(path, "status"),
              fmt::format("unknown status \"{}\" (known: PASSED INCORRECT_SHAPE INCORRECT_DTYPE "
                          "INCORRECT_NUMERICAL RUNTIME_ERROR COMPILE_ERROR TIMEOUT)",
                          *s));
  }
  Element e;
  std::string envp = member_path(path, "environment");
  if (!Walker::lookup(o, "environment", e)) {
    w.error(envp, "required field is missing");
  } else if (Object env; w.object(e, envp, env)) {
    w.check_keys(env, envp, {"hardware", "libs"});
    if (auto h = w.string_field(env, "hardware", envp, true)) ev.environment.hardware = *h;
    Element libs;
    std::string lp = member_path(envp, "libs");
    if (Walker::lookup(env, "libs", libs)) {
      if (Object lo; w.object(libs, lp, lo)) {
        w.each_member(lo, lp, "duplicate key", [&](std::string_view name, Element value, const std::string& fp) {
          if (auto v = w.string(value, fp)) ev.environment.libs.emplace_back(std::string(name), *v);
        });
      }
    }
  }
  if (auto t = w.string_field(o, "timestamp", path, true)) ev.timestamp = *t;
  if (Walker::lookup(o, "log", e)) {
    if (!e.is_null())
      if (auto l = w.string(e, member_path(path, "log"))) ev.log = *l;
  }
  std::string cp = member_path(path, "correctness");
  if (Walker::lookup(o, "correctness", e) && !e.is_null()) {
    if (Object co; w.object(e, cp, co)) {
      w.check_keys(co, cp, {"max_relative_error", "max_absolute_error", "extra"});
      Correctness c;
      // Both default to 0 in FlashInfer-Bench; NaN is written as the string "NaN".
      for (auto [key, dest] : {std::pair{"max_relative_error", &c.max_relative_error},
                               std::pair{"max_absolute_error", &c.max_absolute_error}}) {
        Element x;
        std::string_view sv;
        if (!Walker::lookup(co, key, x)) continue;
        if (x.get_string().get(sv) == simdjson::SUCCESS && sv == "NaN") *dest = std::nan("");
        else if (auto v = w.number(x, member_path(cp, key))) *dest = *v;
      }
      Element x;
      if (Walker::lookup(co, "extra", x) && !x.is_null()) {
        if (Object xo; w.object(x, member_path(cp, "extra"), xo)) c.extra = json::minified(x);
      }
      ev.correctness = c;
    }
  }
  std::string pp = member_path(path, "performance");
  if (Walker::lookup(o, "performance", e) && !e.is_null()) {
    if (Object po; w.object(e, pp, po)) {
      w.check_keys(po, pp, {"latency_ms", "reference_latency_ms", "speedup_factor", "extra"});
      Performance p;
      if (auto v = w.number_field(po, "latency_ms", pp)) p.latency_ms = *v;
      if (auto v = w.number_field(po, "reference_latency_ms", pp)) p.reference_latency_ms = *v;
      if (auto v = w.number_field(po, "speedup_factor", pp)) p.speedup_factor = *v;
      Element x;
      if (Walker::lookup(po, "extra", x) && !x.is_null()) {
        if (Object xo; w.object(x, member_path(pp, "extra"), xo)) p.extra = json::minified(x);
      }
      ev.performance = p;
    }
  }
  if (w.errors() != errors_before) return std::nullopt;
  return ev;
}

// ---- Trace ----

std::optional<Trace> walk_trace(Walker& w, Element root, const std::string& path) {
  Object o;
  if (!w.object(root, path, o)) return std::nullopt;
  w.check_keys(o, path, {"definition", "workload", "solution", "evaluation"});
  std::size_t errors_before = w.errors();
  Trace t;
  if (auto d = w.string_field(o, "definition", path, true)) t.definition = *d;
  Element e;
  if (!Walker::lookup(o, "workload", e)) w.error(member_path(path, "workload"), "required field is missing");
  else if (auto wl = walk_workload(w, e, "workload")) t.workload = std::move(*wl);
  t.solution = w.nullable_string_field(o, "solution", path, false);
  if (Walker::lookup(o, "evaluation", e) && !e.is_null()) {
    if (auto ev = walk_evaluation(w, e, "evaluation")) t.evaluation = std::move(*ev);
  }
  if (w.errors() != errors_before) return std::nullopt;
  return t;
}

// ---- Solution ----

std::optional<Solution> walk_solution(Walker& w, Element root, const std::string& path) {
  Object o;
  if (!w.object(root, path, o)) return std::nullopt;
  w.check_keys(o, path, {"name", "definition", "author", "description", "spec", "sources"});
  std::size_t errors_before = w.errors();
  Solution s;
  if (auto v = w.string_field(o, "name", path, true)) s.name = *v;
  if (auto v = w.string_field(o, "definition", path, true)) s.definition = *v;
  if (auto v = w.string_field(o, "author", path, true)) s.author = *v;
  s.description = w.string_field(o, "description", path, false);
  Element e;
  std::string sp = member_path(path, "spec");
  if (!Walker::lookup(o, "spec", e)) {
    w.error(sp, "required field is missing");
  } else if (Object so; w.object(e, sp, so)) {
    w.check_keys(so, sp, {"language", "target_hardware", "entry_point", "dependencies",
                          "destination_passing_style", "binding"});
    if (auto v = w.string_field(so, "language", sp, true)) s.spec.language = *v;
    Element x;
    if (!Walker::lookup(so, "target_hardware", x))
      w.error(member_path(sp, "target_hardware"), "required field is missing");
    else
      s.spec.target_hardware = w.string_list(x, member_path(sp, "target_hardware"));
    if (auto v = w.string_field(so, "entry_point", sp, true)) s.spec.entry_point = *v;
    if (Walker::lookup(so, "dependencies", x)) s.spec.dependencies = w.string_list(x, member_path(sp, "dependencies"));
    if (Walker::lookup(so, "destination_passing_style", x)) {
      bool b;
      if (x.get_bool().get(b) == simdjson::SUCCESS) s.spec.destination_passing_style = b;
      else
        w.error(member_path(sp, "destination_passing_style"),
                fmt::format("expected a boolean, got {}", json::describe(x)));
    }
    s.spec.binding = w.nullable_string_field(so, "binding", sp, false);
  }
  std::string srcp = member_path(path, "sources");
  if (!Walker::lookup(o, "sources", e)) {
    w.error(srcp, "required field is missing");
  } else {
    json::Array a;
    if (e.get_array().get(a) != simdjson::SUCCESS) {
      w.error(srcp, fmt::format("expected a list of {{path, content}}, got {}", json::type_name(e)));
    } else {
      std::size_t i = 0;
      for (Element f : a) {
        std::string fp = index_path(srcp, i++);
        Object fo;
        if (!w.object(f, fp, fo)) continue;
        w.check_keys(fo, fp, {"path", "content"});
        auto p = w.string_field(fo, "path", fp, true);
        auto c = w.string_field(fo, "content", fp, true);
        if (p && c) s.sources.push_back({*p, *c});
      }
    }
  }
  if (w.errors() != errors_before) return std::nullopt;
  return s;
}

// Shared driver: parse, walk, validate, and turn diagnostics into a Result.
template <class T, class WalkFn, class ValidateFn>
Result<T> read_object(std::string_view text, std::string_view origin, Diagnostics* diags, const char* root_path,
                      WalkFn walk, ValidateFn validate) {
  Diagnostics local;
  Diagnostics& d = diags ? *diags : local;
  std::size_t before = d.error_count();
  auto doc = json::parse(text, origin);
  if (!doc) {
    d.error("", "", doc.error().message);
    return doc.error();
  }
  Walker w(std::string(origin), d);
  auto obj = walk(w, doc->root(), std::string(root_path));
  if (obj) {
    CheckContext ctx;
    ctx.origin = std::string(origin);
    ctx.path = root_path;
    validate(*obj, ctx, d);
  }
  std::size_t after = d.error_count();
  if (after != before) {
    std::string first = d.error_after(before);
    std::size_t more = after - before - 1;
    if (more) first += fmt::format(" (and {} more error{})", more, more == 1 ? "" : "s");
    return make_error(Code::invalid_data, first);
  }
  return std::move(*obj);
}

}  // namespace

Result<Definition> read_definition(std::string_view text, std::string_view origin, Diagnostics* diags,
                                   ConstraintTally* tally) {
  return read_object<Definition>(text, origin, diags, "definition", walk_definition,
                                 [tally](const Definition& x, const CheckContext& c, Diagnostics& d) {
                                   validate_definition(x, c, d, tally);
                                 });
}

Result<Workload> read_workload(std::string_view text, std::string_view origin, Diagnostics* diags) {
  return read_object<Workload>(text, origin, diags, "workload", walk_workload, validate_workload);
}

Result<Evaluation> read_evaluation(std::string_view text, std::string_view origin, Diagnostics* diags) {
  return read_object<Evaluation>(text, origin, diags, "evaluation", walk_evaluation, validate_evaluation);
}

Result<Trace> read_trace(std::string_view text, std::string_view origin, Diagnostics* diags) {
  return read_object<Trace>(text, origin, diags, "", walk_trace, validate_trace);
}

Result<Solution> read_solution(std::string_view text, std::string_view origin, Diagnostics* diags) {
  return read_object<Solution>(text, origin, diags, "solution", walk_solution, validate_solution);
}

Result<Definition> read_definition_file(const std::string& path, Diagnostics* diags, ConstraintTally* tally) {
  auto text = json::read_text_file(path);
  if (!text) {
    if (diags) diags->error("", "", text.error().message);
    return text.error();
  }
  return read_definition(*text, path, diags, tally);
}

Result<Solution> read_solution_file(const std::string& path, Diagnostics* diags) {
  auto text = json::read_text_file(path);
  if (!text) {
    if (diags) diags->error("", "", text.error().message);
    return text.error();
  }
  return read_solution(*text, path, diags);
}

}  // namespace kb
