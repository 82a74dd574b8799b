// kb_solution_run and kb_benchmark_run: kb's registry and harness behind the C ABI.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <span>

#include "capi.hpp"
#include "cuda/device.hpp"
#include "harness/harness.hpp"
#include "harness/per_definition.hpp"
#include "inputs/inputs.hpp"
#include "schema/io.hpp"
#include "schema/validate.hpp"

#if KB_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

using kb::capi::fail;

namespace {

const kb::Implementation* find_solution(const char* name, kb::Implementation& reference) {
  if (std::string_view(name) == "reference") {
    reference = kb::reference_implementation();
    return &reference;
  }
  return kb::builtin_registry().find(name);
}

bool is_host(const DLTensor* t) {
  const std::int64_t type = kb::capi::device_type_of(*t);
  return type == kDLCPU || type == kDLCUDAHost;
}

// A host tensor's bytes (contiguous, and data + byte_offset + its extent within the address space:
// kb_definition_check_tensors checked both).
const std::byte* host_bytes(const DLTensor* t) {
  return static_cast<const std::byte*>(t->data) + t->byte_offset;
}

std::vector<std::int64_t> shape_of(const DLTensor* t) { return std::vector<std::int64_t>(t->shape, t->shape + t->ndim); }

// A 0-D host tensor holding a Python scalar, as the spec's dtype says.
kb::ScalarValue scalar_of(const kb::TensorSpec& spec, const DLTensor* t) {
  const std::byte* p = host_bytes(t);
  auto read = [&](auto proto) {
    decltype(proto) v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  if (kb::dtype_is_float(spec.dtype)) {
    return t->dtype.bits == 64 ? read(double{}) : static_cast<double>(read(float{}));
  }
  if (spec.dtype == kb::DType::bool_) return read(std::uint8_t{}) != 0;
  switch (t->dtype.bits) {
    case 8: return static_cast<std::int64_t>(read(std::int8_t{}));
    case 16: return static_cast<std::int64_t>(read(std::int16_t{}));
    case 32: return static_cast<std::int64_t>(read(std::int32_t{}));
    default: return read(std::int64_t{});
  }
}

// Per-thread buffers of run_checked (see capi.hpp). A solution never calls back
// into kb_solution_run on its thread, so one set per thread suffices.
struct CallScratch {
  // The axis values of the last definitions called on this thread (an engine calls a handful), each
  // keeping its axis names allocated: a repeated call only writes the values.
  static constexpr std::size_t kDefinitions = 16;
  std::vector<std::pair<const kb::Definition*, kb::AxisValues>> axes;
  std::size_t next_replaced = 0;  // round robin once kDefinitions are kept
#if KB_HAVE_CUDA
  std::vector<kb::cuda::DeviceTensor> in_views, out_views;
  std::vector<kb::cuda::DeviceArg> args;
#endif
};

CallScratch& call_scratch() {
  thread_local CallScratch scratch;
  return scratch;
}

bool same_axes(const kb::AxisValues& a, const kb::Definition& d) {
  if (a.values.size() != d.axes.size()) return false;
  for (std::size_t i = 0; i < d.axes.size(); ++i)
    if (a.values[i].first != d.axes[i].name) return false;
  return true;
}

// `d`'s axis values for this call, in the scratch's entry for `d`.
const kb::AxisValues& bind_axes(CallScratch& s, const kb::Definition& d, std::span<const std::int64_t> values) {
  kb::AxisValues* slot = nullptr;
  for (auto& [def, axes] : s.axes)
    if (def == &d && same_axes(axes, d)) slot = &axes;
  if (!slot) {
    kb::AxisValues fresh;
    for (const auto& a : d.axes) fresh.values.emplace_back(a.name, 0);
    if (s.axes.size() < CallScratch::kDefinitions) {
      s.axes.emplace_back(&d, std::move(fresh));
      slot = &s.axes.back().second;
    } else {
      auto& replaced = s.axes[s.next_replaced++ % CallScratch::kDefinitions];
      replaced = {&d, std::move(fresh)};
      slot = &replaced.second;
    }
  }
  for (std::size_t i = 0; i < d.axes.size(); ++i) slot->values[i].second = values[i];
  return *slot;
}

// impl.supports(d), worked out once per solution and definition: a solution's
// supports() may read the reference (allocating) and this runs on every call.
std::string supports_memo(const kb::Implementation& impl, const kb::Definition& d) {
  return kb::per_definition_of<const kb::Implementation*, std::string>(&impl).get(
      d, [&](const kb::Definition& def) { return impl.supports(def); });
}

}  // namespace

namespace kb::capi {

kb_status read_benchmark_options(const char* function, const kb_benchmark_options* opts, BenchOptions& out) {
  kb_benchmark_options o = KB_BENCHMARK_OPTIONS_INIT;
  if (opts) {
    if (kb_status s = read_grown_struct(function, "opts", opts, kBenchmarkOptionsV1Size, "KB_BENCHMARK_OPTIONS_INIT", o);
        s != KB_OK)
      return s;
  }
  out.trials = o.trials > 0 ? o.trials : 1;
  out.seed = o.seed;
  out.time = o.time != 0;
  if (o.dataset_root) out.dataset_root = o.dataset_root;
  if (o.atol >= 0) out.tolerances.atol = o.atol;
  if (o.rtol >= 0) out.tolerances.rtol = o.rtol;
  if (o.required_matched_ratio >= 0) out.tolerances.required_matched_ratio = o.required_matched_ratio;
  out.cupti = o.cupti != 0;
  return KB_OK;
}

kb_status run_checked(const char* function, const kb::Definition& d, std::span<const std::int64_t> axis_values,
                      const kb::Implementation& implementation, const DLTensor* const* inputs, size_t n_inputs,
                      const DLTensor* const* outputs, size_t n_outputs, void* stream, std::uint64_t seed) {
  const kb::Implementation* impl = &implementation;
  CallScratch& scratch = call_scratch();
  const kb::AxisValues& axes = bind_axes(scratch, d, axis_values);
  if (impl->device == kb::Device::cpu) {
    std::vector<kb::Tensor> in_tensors(n_inputs);
    std::vector<kb::Arg> args(n_inputs);
    for (std::size_t i = 0; i < n_inputs; ++i) {
      const DLTensor* t = inputs[i];
      if (!t) continue;
      if (!is_host(t)) return fail(KB_ERROR_UNSUPPORTED, fmt::format("{}: {} runs on the CPU but input \"{}\" is not in host memory", function, impl->name, d.inputs[i].name));
      if (d.inputs[i].is_scalar()) {
        args[i].scalar = scalar_of(d.inputs[i], t);
        continue;
      }
      auto x = kb::Tensor::allocate(d.inputs[i].dtype, shape_of(t));
      if (!x) return fail(x.error());
      std::memcpy(x->bytes(), host_bytes(t), x->nbytes());
      in_tensors[i] = std::move(*x);
      args[i].tensor = &in_tensors[i];
    }
    std::vector<kb::Tensor> out_tensors;
    for (std::size_t i = 0; i < n_outputs; ++i) {
      if (!is_host(outputs[i])) return fail(KB_ERROR_UNSUPPORTED, fmt::format("{}: {} runs on the CPU but output \"{}\" is not in host memory", function, impl->name, d.outputs[i].name));
      auto x = kb::Tensor::allocate(d.outputs[i].dtype, shape_of(outputs[i]));
      if (!x) return fail(x.error());
      out_tensors.push_back(std::move(*x));
    }
    kb::Status st = impl->run(kb::ImplementationCall{d, axes, args, out_tensors, seed});
    if (!st.ok()) return fail(st.error());
    for (std::size_t i = 0; i < n_outputs; ++i) {
      const kb::Tensor& o = out_tensors[i];
      if (o.shape() != shape_of(outputs[i]) || o.dtype() != d.outputs[i].dtype)
        return fail(KB_ERROR_INVALID_DATA, fmt::format("{}: {} returned output \"{}\" of another shape or dtype", function, impl->name, d.outputs[i].name));
      std::memcpy(static_cast<std::byte*>(outputs[i]->data) + outputs[i]->byte_offset, o.bytes(), o.nbytes());
    }
    return KB_OK;
  }
#if KB_HAVE_CUDA
  std::vector<kb::cuda::DeviceTensor>& in_views = scratch.in_views;
  std::vector<kb::cuda::DeviceTensor>& out_views = scratch.out_views;
  std::vector<kb::cuda::DeviceArg>& args = scratch.args;
  // Grown, never shrunk: a view destroyed by a call with fewer tensors would make the next call
  // allocate its shape again. The call sees the first n.
  if (in_views.size() < n_inputs) in_views.resize(n_inputs);
  if (out_views.size() < n_outputs) out_views.resize(n_outputs);
  if (args.size() < n_inputs) args.resize(n_inputs);
  std::fill_n(args.begin(), n_inputs, kb::cuda::DeviceArg{});
  // Fills `v` in place: its shape vector keeps the capacity of earlier calls.
  auto view = [&](kb::cuda::DeviceTensor& v, const DLTensor* t, kb::DType dtype) {
    v.dtype = dtype;
    v.shape.assign(t->shape, t->shape + t->ndim);
    v.data = static_cast<char*>(t->data) + t->byte_offset;
    v.nbytes = static_cast<std::size_t>(kb::dtype_storage_bytes(dtype, v.numel()));
  };
  for (std::size_t i = 0; i < n_inputs; ++i) {
    const DLTensor* t = inputs[i];
    if (!t) continue;
    if (d.inputs[i].is_scalar()) {
      if (!is_host(t)) return fail(KB_ERROR_INVALID_ARGUMENT, fmt::format("{}: scalar input \"{}\" must be a host tensor", function, d.inputs[i].name));
      args[i].scalar = scalar_of(d.inputs[i], t);
      continue;
    }
    if (kb::capi::device_type_of(*t) != kDLCUDA) return fail(KB_ERROR_UNSUPPORTED, fmt::format("{}: {} runs on the GPU but input \"{}\" is not in device memory", function, impl->name, d.inputs[i].name));
    view(in_views[i], t, d.inputs[i].dtype);
    args[i].tensor = &in_views[i];
  }
  for (std::size_t i = 0; i < n_outputs; ++i) {
    if (kb::capi::device_type_of(*outputs[i]) != kDLCUDA) return fail(KB_ERROR_UNSUPPORTED, fmt::format("{}: {} runs on the GPU but output \"{}\" is not in device memory", function, impl->name, d.outputs[i].name));
    view(out_views[i], outputs[i], d.outputs[i].dtype);
  }
  // The solution runs on its tensors' device (DLPack device_id; check_tensors made them agree), as a
  // PyTorch op does; the caller's current device is restored afterwards. Only a call whose tensors are
  // on another device than the current one switches.
  int tensor_device = -1;
  for (std::size_t i = 0; i < n_outputs && tensor_device < 0; ++i) tensor_device = outputs[i]->device.device_id;
  auto current = kb::cuda::current_device();
  if (!current) return fail(current.error());
  struct Restore {
    int device = -1;
    ~Restore() {
      if (device >= 0) (void)kb::cuda::select_device(device);
    }
  } restore;
  if (tensor_device >= 0 && tensor_device != *current) {
    if (auto sel = kb::cuda::select_device(tensor_device); !sel)
      return fail(kb::Error{sel.error().code, fmt::format("{}: the tensors are on CUDA device {}: {}", function,
                                                          tensor_device, sel.error().message)});
    restore.device = *current;
  }
  kb::Status st = impl->run_cuda(kb::CudaCall{d, axes, std::span<const kb::cuda::DeviceArg>(args.data(), n_inputs),
                                               std::span<const kb::cuda::DeviceTensor>(out_views.data(), n_outputs),
                                               stream, seed});
  if (!st.ok()) return fail(st.error());
  return KB_OK;
#else
  return fail(KB_ERROR_UNSUPPORTED, fmt::format("{}: {} needs CUDA; kb was built without it", function, impl->name));
#endif
}

}  // namespace kb::capi

extern "C" {

namespace {

kb_status solution_run(const char* function, kb_context* ctx, const kb_definition* def, const char* solution,
                       const DLTensor* const* inputs, size_t n_inputs, const DLTensor* const* outputs,
                       size_t n_outputs, void* stream, std::uint64_t seed) {
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(def);
  KB_CAPI_REQUIRE(solution);
  return kb::capi::guarded(function, [&]() -> kb_status {
    const kb::capi::CallScope scope(ctx->call);  // the context's settings and log callback for this call
    const kb::Definition& d = def->def;
    kb::capi::CallAxes axes(d.axes.size());
    kb_check_result check = KB_CHECK_RESULT_INIT;
    check.axis_values = axes.span().data();
    check.axis_capacity = axes.span().size();
    if (kb_status st = kb_definition_check_tensors(def, inputs, n_inputs, outputs, n_outputs, &check); st != KB_OK)
      return st;  // message already recorded
    kb::Implementation reference;
    const kb::Implementation* impl = find_solution(solution, reference);
    if (!impl) return fail(KB_ERROR_NOT_FOUND, fmt::format("{}: no solution \"{}\" (see kb bench --list)", function, solution));
    if (auto why = impl == &reference ? impl->supports(d) : supports_memo(*impl, d); !why.empty())
      return fail(KB_ERROR_UNSUPPORTED, fmt::format("{}: {} does not handle {}: {}", function, impl->name, d.name, why));
    return kb::capi::run_checked(function, d, axes.span(), *impl, inputs, n_inputs, outputs, n_outputs, stream, seed);
  });
}

}  // namespace

KB_API kb_status kb_solution_run(kb_context* ctx, const kb_definition* def, const char* solution,
                                 const DLTensor* const* inputs, size_t n_inputs, const DLTensor* const* outputs,
                                 size_t n_outputs, void* stream) {
  return solution_run(__func__, ctx, def, solution, inputs, n_inputs, outputs, n_outputs, stream, 0);
}

KB_API kb_status kb_solution_run_seeded(kb_context* ctx, const kb_definition* def, const char* solution,
                                        const DLTensor* const* inputs, size_t n_inputs,
                                        const DLTensor* const* outputs, size_t n_outputs, void* stream,
                                        uint64_t seed) {
  return solution_run(__func__, ctx, def, solution, inputs, n_inputs, outputs, n_outputs, stream, seed);
}

KB_API kb_status kb_benchmark_run(kb_context* ctx, const kb_definition* def, const kb_workload* workload,
                                  const char* solution, const kb_benchmark_options* opts, kb_result** out) {
  KB_CAPI_REQUIRE(out);
  *out = nullptr;
  KB_CAPI_REQUIRE(ctx);
  KB_CAPI_REQUIRE(def);
  KB_CAPI_REQUIRE(workload);
  KB_CAPI_REQUIRE(solution);
  return kb::capi::guarded(__func__, [&]() -> kb_status {
    const kb::capi::CallScope scope(ctx->call);  // the context's settings and log callback for this call
    kb::BenchOptions bo;
    if (kb_status s = kb::capi::read_benchmark_options("kb_benchmark_run", opts, bo); s != KB_OK) return s;
    const kb::Definition& d = def->def;
    const kb::Workload& w = workload->workload;
    kb::Diagnostics diags;
    kb::CheckContext cc;
    cc.origin = "<workload>";
    cc.path = "workload";
    cc.dataset_root = bo.dataset_root;
    kb::validate_workload_against(w, d, cc, diags);
    if (diags.has_errors()) return fail(KB_ERROR_INVALID_ARGUMENT, "kb_benchmark_run: " + diags.first_error());
    kb::Implementation reference;
    const kb::Implementation* impl = find_solution(solution, reference);
    if (!impl) return fail(KB_ERROR_NOT_FOUND, fmt::format("kb_benchmark_run: no solution \"{}\" (see kb bench --list)", solution));
    auto r = kb::evaluate(d, w, *impl, bo);
    if (!r) return fail(r.error());
    auto h = std::make_unique<kb_result>();
    h->trace.definition = d.name;
    h->trace.workload = w;
    h->trace.solution = impl->name;
    h->trace.evaluation = r->evaluation;
    h->json = kb::to_json(h->trace, false);
    *out = h.release();
    return KB_OK;
  });
}

}  // extern "C"
