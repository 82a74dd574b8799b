// kb_definition: loading (through schema/io.hpp) and read-only accessors.
#include <memory>

#include "capi.hpp"
#include "dataset/dataset.hpp"
#include "schema/io.hpp"

using kb::capi::fail;

namespace {

// Builds the handle and everything its accessors and check_tensors need.
std::unique_ptr<kb_definition> make_handle(kb::Definition&& d) {
  auto h = std::make_unique<kb_definition>();
  h->def = std::move(d);
  h->json = kb::to_json(h->def, true);
  auto add_tensor = [&](const kb::TensorSpec& t) {
    std::vector<const char*> ptrs;
    std::vector<int> axes;
    if (t.shape) {
      for (const auto& name : *t.shape) {
        ptrs.push_back(name.c_str());
        int index = -1;
        for (std::size_t a = 0; a < h->def.axes.size(); ++a)
          if (h->def.axes[a].name == name) index = static_cast<int>(a);
        axes.push_back(index);
      }
    }
    h->shape_ptrs.push_back(std::move(ptrs));
    h->dim_axis.push_back(std::move(axes));
  };
  for (const auto& t : h->def.inputs) add_tensor(t);
  for (const auto& t : h->def.outputs) add_tensor(t);
  kb::expr::MapEnvironment const_axes;
  for (const auto& a : h->def.axes)
    if (a.kind == kb::AxisKind::const_) const_axes.set_scalar(a.name, kb::expr::Value::integer(a.value));
  for (const auto& c : h->def.constraints) {
    auto parsed = kb::expr::parse(c);
    bool every_call = false;
    if (parsed && !parsed->needs_tensors()) {
      every_call = true;
      for (const auto& name : parsed->scalar_names()) {
        const kb::Axis* axis = h->def.find_axis(name);
        if (!axis || axis->kind != kb::AxisKind::const_) every_call = false;
      }
      every_call = every_call && kb::expr::evaluate(*parsed, const_axes).verdict == kb::expr::Verdict::holds;
    }
    h->holds_for_every_call.push_back(every_call);
    if (parsed) h->constraints.emplace_back(std::move(*parsed));
    else h->constraints.emplace_back(std::nullopt);
  }
  return h;
}

kb_status finish_load(kb::Result<kb::Definition>&& r, kb_definition** out) {
  if (!r) return fail(r.error());
  *out = make_handle(std::move(r).value()).release();
  return KB_OK;
}

kb_status describe_tensor(const kb_definition* h, std::size_t global_index, const kb::TensorSpec& t,
                          kb_tensor_info* out) {
  out->name = t.name.c_str();
  out->dtype = static_cast<kb_dtype>(t.dtype);
  out->rank = t.shape ? static_cast<std::int32_t>(t.shape->size()) : -1;
  const auto& ptrs = h->shape_ptrs[global_index];
  out->shape = ptrs.empty() ? nullptr : ptrs.data();
  out->description = t.description ? t.description->c_str() : nullptr;
  out->optional = t.optional ? 1 : 0;
  return KB_OK;
}

}  // namespace

extern "C" {

KB_API kb_status kb_definition_load(kb_context* ctx, const char* json, size_t len, kb_definition** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(json);
  return kb::capi::guarded(__func__, [&] {
    return finish_load(kb::read_definition(std::string_view(json, len), kb::capi::memory_origin), out);
  });
}

KB_API kb_status kb_definition_load_file(kb_context* ctx, const char* path, kb_definition** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(path);
  return kb::capi::guarded(__func__, [&] { return finish_load(kb::read_definition_file(path), out); });
}

KB_API kb_status kb_definition_load_by_name(kb_context* ctx, const char* dir, const char* name, kb_definition** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(dir);
  KB_CAPI_REQUIRE(name);
  return kb::capi::guarded(__func__, [&]() -> kb_status {
    auto found = kb::find_definition_by_name(dir, name);
    if (!found) return fail(found.error());
    *out = make_handle(std::move(found->definition)).release();
    return KB_OK;
  });
}

KB_API void kb_definition_destroy(kb_definition* def) { delete def; }

KB_API const char* kb_definition_name(const kb_definition* def) {
  KB_CAPI_REQUIRE_OR(def, nullptr);
  return def->def.name.c_str();
}

KB_API const char* kb_definition_op_type(const kb_definition* def) {
  KB_CAPI_REQUIRE_OR(def, nullptr);
  return def->def.op_type.c_str();
}

KB_API const char* kb_definition_description(const kb_definition* def) {
  KB_CAPI_REQUIRE_OR(def, nullptr);
  return def->def.description ? def->def.description->c_str() : nullptr;
}

KB_API const char* kb_definition_reference(const kb_definition* def) {
  KB_CAPI_REQUIRE_OR(def, nullptr);
  return def->def.reference.c_str();
}

KB_API const char* kb_definition_json(const kb_definition* def) {
  KB_CAPI_REQUIRE_OR(def, nullptr);
  return def->json.c_str();
}

KB_API size_t kb_definition_axis_count(const kb_definition* def) {
  KB_CAPI_REQUIRE_OR(def, 0);
  return def->def.axes.size();
}

KB_API kb_status kb_definition_axis(const kb_definition* def, size_t index, kb_axis_info* out) {
  KB_CAPI_REQUIRE(def);
  KB_CAPI_REQUIRE(out);
  KB_CAPI_REQUIRE_STRUCT(out, kb_axis_info, "KB_AXIS_INFO_INIT");
  if (index >= def->def.axes.size()) return kb::capi::bad_index(__func__, "axis", index, def->def.axes.size());
  const kb::Axis& a = def->def.axes[index];
  out->name = a.name.c_str();
  out->kind = static_cast<kb_axis_kind>(a.kind);
  out->value = a.kind == kb::AxisKind::const_ ? a.value : 0;
  out->description = a.description ? a.description->c_str() : nullptr;
  return KB_OK;
}

KB_API size_t kb_definition_input_count(const kb_definition* def) {
  KB_CAPI_REQUIRE_OR(def, 0);
  return def->def.inputs.size();
}

KB_API size_t kb_definition_output_count(const kb_definition* def) {
  KB_CAPI_REQUIRE_OR(def, 0);
  return def->def.outputs.size();
}

KB_API kb_status kb_definition_input(const kb_definition* def, size_t index, kb_tensor_info* out) {
  KB_CAPI_REQUIRE(def);
  KB_CAPI_REQUIRE(out);
  KB_CAPI_REQUIRE_STRUCT(out, kb_tensor_info, "KB_TENSOR_INFO_INIT");
  if (index >= def->def.inputs.size()) return kb::capi::bad_index(__func__, "input", index, def->def.inputs.size());
  return describe_tensor(def, index, def->def.inputs[index], out);
}

KB_API kb_status kb_definition_output(const kb_definition* def, size_t index, kb_tensor_info* out) {
  KB_CAPI_REQUIRE(def);
  KB_CAPI_REQUIRE(out);
  KB_CAPI_REQUIRE_STRUCT(out, kb_tensor_info, "KB_TENSOR_INFO_INIT");
  if (index >= def->def.outputs.size())
    return kb::capi::bad_index(__func__, "output", index, def->def.outputs.size());
  return describe_tensor(def, def->def.inputs.size() + index, def->def.outputs[index], out);
}

KB_API size_t kb_definition_constraint_count(const kb_definition* def) {
  KB_CAPI_REQUIRE_OR(def, 0);
  return def->def.constraints.size();
}

KB_API const char* kb_definition_constraint(const kb_definition* def, size_t index) {
  KB_CAPI_REQUIRE_OR(def, nullptr);
  if (index >= def->def.constraints.size()) {
    kb::capi::bad_index(__func__, "constraint", index, def->def.constraints.size());
    return nullptr;
  }
  return def->def.constraints[index].c_str();
}

KB_API size_t kb_definition_tag_count(const kb_definition* def) {
  KB_CAPI_REQUIRE_OR(def, 0);
  return def->def.tags.size();
}

KB_API const char* kb_definition_tag(const kb_definition* def, size_t index) {
  KB_CAPI_REQUIRE_OR(def, nullptr);
  if (index >= def->def.tags.size()) {
    kb::capi::bad_index(__func__, "tag", index, def->def.tags.size());
    return nullptr;
  }
  return def->def.tags[index].c_str();
}

}  // extern "C"
