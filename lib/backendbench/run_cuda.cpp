// `kb backendbench run --device cuda` (see run.hpp): every line of the
// operators that have a CUDA kernel, judged against the fp64 CPU oracle with
// BackendBench's tolerances and timed like bench/torch_baseline.py.
//
// Per line: the CPU side (seeded materialization exactly as the CPU run,
// valid indices, the oracle's meta call for output specs and its real call
// for the expected outputs) runs on a pool of host threads a batch of lines
// ahead; the device side is sequential: each tensor's whole storage is copied
// to the device (strides, offsets, overlaps and gaps kept), outputs are
// allocated from the meta specs (in-place ops write `self`), the plan is made
// once (argument checks, scratch, cuBLASLt descriptors) and its launch run
// once to judge and then again to time.
//
// Timing (the same policy as torch_baseline.py, so the two are comparable):
// warm L2 (no flush), `warmup` untimed calls, then `reps` calls each between
// its own pair of CUDA events recorded on the stream, the stream synchronized
// after each; the median is the line's time. Each call thus includes the
// host's cost of issuing the operator (PyTorch's dispatcher there, kb's
// prepared launch here) as far as the GPU waits for it.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <set>
#include <thread>

#include "../../kernels/aten/common/args.hpp"
#include "../../kernels/aten/common/cuda_engine.hpp"
#include "../../kernels/aten/cuda_families.hpp"
#include "backendbench/device_judge.hpp"
#include "backendbench/device_materialize.hpp"
#include "backendbench/materialize.hpp"
#include "backendbench/run.hpp"
#include "common/parallel.hpp"

namespace kb::backendbench {

namespace {

using aten::DView;

Error cuda_err(const char* what, cudaError_t e) {
  return make_error(Code::cuda_error, fmt::format("{}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e)));
}

// Storage elements over which a tensor of a line judged by the GPU reference is generated on the device.
constexpr std::int64_t kDeferAbove = std::int64_t{1} << 16;

struct HostSide {
  std::optional<Call> call;          // inputs as materialized (what the device gets)
  std::optional<Call> oracle_call;   // the oracle's own copy (in-place ops mutate it)
  std::vector<HostTensor> meta;
  std::vector<HostTensor> expected;
  std::string problem;
  bool reference = false;  // no oracle run: judge against the GPU fp64 reference
};

void deep_copy_call(Call& c) {
  auto fix = [](CallArg& a) {
    if (a.tensor) *a.tensor = deep_copy(*a.tensor);
    for (HostTensor& t : a.tensors) t = deep_copy(t);
  };
  for (CallArg& a : c.positional) fix(a);
  for (auto& kv : c.kwargs) fix(kv.second);
}

HostSide host_side(const OpInfo& info, const ArgLine& line, std::size_t index, std::uint64_t seed, bool oracle) {
  HostSide h;
  auto meta_call = materialize_call(info.name, line.args, seed, index, true);
  if (!meta_call) {
    h.problem = "materialize: " + meta_call.error().message;
    return h;
  }
  // An output whose shape depends on the input's values (nonzero) has no meta
  // answer; on lines the oracle judges, its outputs give the specs instead.
  auto meta = run_cpu(info, *meta_call);
  const bool specs_from_oracle = !meta && oracle;
  const std::string meta_problem = meta ? std::string() : "meta: " + meta.error().message;
  if (meta) {
    h.meta = std::move(*meta);
  } else if (!oracle) {
    h.problem = meta_problem;
    return h;
  }
  // Lines for the GPU reference leave their large floating inputs to the device (device_materialize.hpp).
  auto call = materialize_prepared(info, line.args, seed, index, oracle ? 0 : kDeferAbove);
  if (!call) {
    h.problem = call.error().message;
    return h;
  }
  if (!oracle) {
    h.reference = true;
    h.call = std::move(*call);
    return h;
  }
  h.oracle_call = *call;
  deep_copy_call(*h.oracle_call);
  auto outs = run_cpu(info, *h.oracle_call);
  if (!outs) {
    h.problem = specs_from_oracle ? meta_problem : "oracle: " + outs.error().message;
    return h;
  }
  h.expected = std::move(*outs);
  if (specs_from_oracle) h.meta = h.expected;
  h.oracle_call.reset();
  h.call = std::move(*call);
  return h;
}

// Every tensor of a call (pointers stay valid while the call lives).
std::vector<HostTensor*> call_tensors(Call& c) {
  std::vector<HostTensor*> out;
  auto add = [&](CallArg& a) {
    if (a.tensor) out.push_back(&*a.tensor);
    for (HostTensor& t : a.tensors) out.push_back(&t);
  };
  for (CallArg& a : c.positional) add(a);
  for (auto& kv : c.kwargs) add(kv.second);
  return out;
}

Result<HostTensor> download(const DView& v) {
  HostTensor h;
  if (v.undefined) {
    h.undefined = true;
    return h;
  }
  h.dtype = v.dtype;
  h.shape = v.shape;
  h.strides = v.strides;
  h.offset = 0;
  const std::int64_t span = h.span();
  for (auto s : v.strides)
    if (s < 0) return make_error(Code::internal, "negative output strides are not supported");
  const std::size_t es = dtype_size(v.dtype);
  h.storage = std::make_shared<std::vector<std::byte>>(static_cast<std::size_t>(span) * es);
  if (span > 0) {
    const char* src = static_cast<const char*>(v.base) + v.offset * static_cast<std::int64_t>(es);
    if (cudaError_t e = cudaMemcpy(h.storage->data(), src, h.storage->size(), cudaMemcpyDeviceToHost); e != cudaSuccess)
      return cuda_err("copying an output to the host", e);
  }
  return h;
}

// Bytes of a tensor's whole storage (on the host, or to be generated on the device).
std::size_t storage_bytes(const HostTensor& t) {
  if (t.device_fill) return static_cast<std::size_t>(t.offset + t.span()) * dtype_size(t.dtype);
  return t.storage ? t.storage->size() : 0;
}

// Copies every tensor's whole storage to fresh device memory (views keep their strides and offsets);
// tensors left to the device (HostTensor::device_fill) are generated there instead.
Status upload_call(Call& call, aten::DeviceArgs& dev, std::vector<std::shared_ptr<void>>& memory) {
  for (HostTensor* t : call_tensors(call)) {
    const std::size_t bytes = storage_bytes(*t);
    auto mem = aten::cuda::device_alloc(bytes);  // throws bad_alloc
    if (bytes && t->device_fill) {
      const auto elements = static_cast<std::int64_t>(bytes / dtype_size(t->dtype));
      if (auto st = device_fill(mem.get(), t->dtype, elements, *t->device_fill, nullptr); !st) return st;
    } else if (bytes) {
      if (cudaError_t e = cudaMemcpy(mem.get(), t->storage->data(), bytes, cudaMemcpyHostToDevice); e != cudaSuccess)
        return cuda_err("copying an input to the device", e);
    }
    dev.set(t, mem.get());
    memory.push_back(std::move(mem));
  }
  // cudaMemcpy from pageable memory may return before its DMA lands, and the kernels run on a non-blocking
  // stream that does not wait for the legacy stream: without this, a kernel read the tail of a 1 MiB input
  // before it arrived (H100, aten.mul.Scalar, zeros in the last ~15% of the output, one run in three).
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) return cuda_err("copying inputs to the device", e);
  return ok_status();
}

// Outputs as the runner gives them to a plan: the meta call's specs, contiguous; `self` for in-place ops.
std::vector<DView> make_outputs(const OpInfo& info, const Call& call, const aten::DeviceArgs& dev,
                                const std::vector<HostTensor>& meta) {
  std::vector<DView> outs;
  for (std::size_t k = 0; k < meta.size(); ++k) {
    const HostTensor& m = meta[k];
    if (m.undefined) {
      DView u;
      u.undefined = true;
      outs.push_back(u);
    } else if (k == 0 && info.inplace()) {
      outs.push_back(dev.view(aten::tensor_arg(call, 0, "self")));
    } else {
      outs.push_back(aten::cuda::device_empty(m.dtype, m.shape));
    }
  }
  return outs;
}

struct ReferenceMode {
  ReferenceMode() { aten::cuda::set_reference_mode(true); }
  ~ReferenceMode() { aten::cuda::set_reference_mode(false); }
};

// The GPU fp64 reference's outputs for a line, left on the device. It runs on
// a device-to-device copy of the candidate's inputs (uploaded once), so
// in-place operators start from the same values as the candidate; `memory`
// keeps that copy (which outputs may view) alive until the judgment.
Result<std::vector<DView>> reference_on_device(const OpInfo& info, aten::CudaPlanFn plan_fn, Call& call,
                                               const aten::DeviceArgs& inputs, const std::vector<HostTensor>& meta,
                                               cudaStream_t stream, std::vector<std::shared_ptr<void>>& memory) {
  aten::DeviceArgs dev;
  for (HostTensor* t : call_tensors(call)) {
    const std::size_t bytes = storage_bytes(*t);
    auto mem = aten::cuda::device_alloc(bytes);  // throws bad_alloc
    if (bytes)
      if (cudaError_t e = cudaMemcpyAsync(mem.get(), inputs.base(*t), bytes, cudaMemcpyDeviceToDevice, stream);
          e != cudaSuccess)
        return cuda_err("copying the reference's inputs", e);
    dev.set(t, mem.get());
    memory.push_back(std::move(mem));
  }
  std::vector<DView> outs = make_outputs(info, call, dev, meta);
  aten::Launch launch;
  {
    ReferenceMode on;
    launch = plan_fn(call, dev, outs);
  }
  if (auto st = launch(stream); !st) return st.error();
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return cuda_err("running the reference", e);
  return outs;
}

Result<std::vector<HostTensor>> download_all(const std::vector<DView>& views) {
  std::vector<HostTensor> out;
  for (const DView& o : views) {
    auto h = download(o);
    if (!h) return h.error();
    out.push_back(std::move(*h));
  }
  return out;
}

// judge() with large contiguous outputs split across threads (the serial
// judge reads ~3e7 elements/s, which would dominate a run of big lines).
Judgment parallel_judge(const std::vector<HostTensor>& expected, const std::vector<HostTensor>& actual, unsigned threads) {
  bool split = expected.size() == actual.size();
  for (std::size_t k = 0; split && k < expected.size(); ++k)
    split = expected[k].undefined == actual[k].undefined && expected[k].dtype == actual[k].dtype &&
            expected[k].shape == actual[k].shape;
  if (!split || threads <= 1) return judge(expected, actual);
  Judgment total;
  for (std::size_t k = 0; k < expected.size(); ++k) {
    const HostTensor& e = expected[k];
    const HostTensor& a = actual[k];
    if (e.undefined) continue;
    const std::int64_t n = e.numel();
    std::vector<std::pair<std::int64_t, Judgment>> parts;
    if (n < (std::int64_t{1} << 20) || !e.is_contiguous() || !a.is_contiguous()) {
      parts.emplace_back(0, judge({e}, {a}));
    } else {
      const std::int64_t chunk = (n + threads - 1) / threads;
      for (std::int64_t at = 0; at < n; at += chunk) parts.emplace_back(at, Judgment{});
      parallel_for(static_cast<std::int64_t>(parts.size()), threads, [&](std::int64_t i) {
        const std::int64_t at = parts[static_cast<std::size_t>(i)].first;
        auto piece = [&](const HostTensor& t) {
          HostTensor v = t;
          v.shape = {std::min(chunk, n - at)};
          v.strides = {1};
          v.offset = t.offset + at;
          return v;
        };
        parts[static_cast<std::size_t>(i)].second = judge({piece(e)}, {piece(a)});
      });
    }
    for (auto& [at, j] : parts) {
      total.max_abs_error = std::max(total.max_abs_error, j.max_abs_error);
      total.max_rel_error = std::max(total.max_rel_error, j.max_rel_error);
      if (j.verdict != Verdict::passed && total.verdict == Verdict::passed) {
        total.verdict = j.verdict;
        total.detail = fmt::format("output {}: {} (element index counted from {})", k, j.detail, at);
      }
    }
  }
  return total;
}

struct DeviceLine {
  bool passed = false;
  std::string problem;
  double ms = 0;
  bool fatal = false;  // the context is unusable: stop the run
  bool by_reference = false;
  std::optional<double> max_abs_error, max_rel_error;  // set once the outputs were judged
  DevicePhases phases;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

DeviceLine device_side(const OpInfo& info, aten::CudaPlanFn plan_fn, HostSide& h, cudaStream_t stream,
                       const CudaRunOptions& copt) {
  DeviceLine d;
  Call& call = *h.call;
  aten::DeviceArgs dev;
  std::vector<std::shared_ptr<void>> memory;
  try {
    auto t0 = std::chrono::steady_clock::now();
    if (auto st = upload_call(call, dev, memory); !st) {
      d.problem = st.error().message;
      d.fatal = true;
      return d;
    }
    d.phases.upload_s = seconds_since(t0);
    std::vector<DView> expected_on_device;
    std::vector<std::shared_ptr<void>> reference_memory;
    if (h.reference) {
      d.by_reference = true;
      t0 = std::chrono::steady_clock::now();
      auto ref = reference_on_device(info, plan_fn, call, dev, h.meta, stream, reference_memory);
      d.phases.reference_s = seconds_since(t0);
      if (!ref) {
        d.problem = "GPU reference: " + ref.error().message;
        (void)cudaGetLastError();
        d.fatal = cudaStreamSynchronize(stream) != cudaSuccess;
        return d;
      }
      expected_on_device = std::move(*ref);
    }
    t0 = std::chrono::steady_clock::now();
    std::vector<DView> outs = make_outputs(info, call, dev, h.meta);
    aten::Launch launch = plan_fn(call, dev, outs);
    if (auto st = launch(stream); !st) {
      // A refused launch (bad configuration, cuBLASLt NOT_SUPPORTED) fails the line;
      // only an error that survives into the stream (sticky) stops the run.
      d.problem = st.error().message;
      (void)cudaGetLastError();
      d.fatal = cudaStreamSynchronize(stream) != cudaSuccess;
      return d;
    }
    if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
      d.problem = cuda_err("running the kernel", e).message;
      d.fatal = true;
      return d;
    }
    d.phases.candidate_s = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const unsigned jt = copt.judge_threads ? copt.judge_threads : std::max(1u, std::thread::hardware_concurrency());
    Judgment j;
    std::optional<Judgment> on_device;
    if (h.reference) {
      auto dj = device_judge(expected_on_device, outs, stream);
      if (dj) {
        on_device = std::move(*dj);
      } else if (dj.error().code != Code::unsupported) {
        d.problem = dj.error().message;
        d.fatal = cudaStreamSynchronize(stream) != cudaSuccess;
        return d;
      } else {  // complex outputs: judged on the host
        auto ref = download_all(expected_on_device);
        if (!ref) {
          d.problem = ref.error().message;
          return d;
        }
        h.expected = std::move(*ref);
      }
      expected_on_device.clear();
      reference_memory.clear();
    }
    if (on_device) {
      j = std::move(*on_device);
    } else {
      auto actual = download_all(outs);
      if (!actual) {
        d.problem = actual.error().message;
        return d;
      }
      j = parallel_judge(h.expected, *actual, std::min(jt, 64u));
    }
    d.phases.judge_s = seconds_since(t0);
    d.max_abs_error = j.max_abs_error;
    d.max_rel_error = j.max_rel_error;
    if (j.verdict != Verdict::passed) {
      d.problem = fmt::format("{}: {} (max abs error {:.3g}, max rel error {:.3g})", verdict_name(j.verdict), j.detail,
                              j.max_abs_error, j.max_rel_error);
      return d;
    }
    d.passed = true;
    // Timing, the policy of torch_baseline.py (see the top of this file).
    t0 = std::chrono::steady_clock::now();
    cudaEvent_t start = nullptr, stop = nullptr;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    std::vector<float> times;
    for (int r = 0; r < copt.warmup + copt.reps; ++r) {
      if (r >= copt.warmup) cudaEventRecord(start, stream);
      if (auto st = launch(stream); !st) {
        d.problem = st.error().message;
        d.passed = false;
        break;
      }
      if (r >= copt.warmup) {
        cudaEventRecord(stop, stream);
        cudaEventSynchronize(stop);
        float ms = 0;
        cudaEventElapsedTime(&ms, start, stop);
        times.push_back(ms);
      } else {
        cudaStreamSynchronize(stream);
      }
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
      d.problem = cuda_err("timing the kernel", e).message;
      d.passed = false;
      d.fatal = true;
      return d;
    }
    d.phases.timing_s = seconds_since(t0);
    if (!times.empty()) {
      std::sort(times.begin(), times.end());
      std::size_t n = times.size();
      d.ms = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    }
  } catch (const aten::OpError& e) {
    d.problem = fmt::format("{}: {}", info.name, e.what());
  } catch (const std::bad_alloc&) {
    (void)cudaGetLastError();
    d.problem = fmt::format("{}: out of device or host memory", info.name);
  } catch (const std::exception& e) {
    d.problem = fmt::format("{}: {}", info.name, e.what());
  }
  return d;
}

std::int64_t value_elements(const Value& v) {
  if (v.kind == Kind::tensor) return v.numel();
  std::int64_t n = 0;
  for (const Value& c : v.children) n += value_elements(c);
  return n;
}

void tensor_shapes(const Value& v, std::vector<std::vector<std::int64_t>>& out) {
  if (v.kind == Kind::tensor) {
    out.push_back(v.shape);
    return;
  }
  for (const Value& c : v.children) tensor_shapes(c, out);
}

// Why the CPU oracle would take too long for this line, or "".
std::string over_budget(std::string_view op, const ArgLine& l, const CudaRunOptions& copt) {
  std::int64_t n = 0;
  for (const Value& v : l.args.positional) n += value_elements(v);
  for (const Kwarg& k : l.args.kwargs) n += value_elements(k.value);
  if (copt.oracle_elements > 0 && n > copt.oracle_elements)
    return fmt::format("not judged: {} input elements exceed the CPU oracle budget of {} (--oracle-limit)", n,
                       copt.oracle_elements);
  // convolution and its backward: 2 * N * weight elements * positions of the
  // non-transposed convolution's output side, per computed gradient.
  if (copt.oracle_flops > 0 && (op == "aten.convolution.default" || op == "aten.convolution_backward.default")) {
    const bool backward = op == "aten.convolution_backward.default";
    const auto& a = l.args.positional;
    const std::size_t tr_at = backward ? 7 : 6;
    if (a.size() > tr_at && a[0].kind == Kind::tensor && a[1].kind == Kind::tensor && a[backward ? 2 : 1].kind == Kind::tensor &&
        a[0].shape.size() >= 3) {
      const bool transposed = a[tr_at].kind == Kind::boolean && a[tr_at].text == "True";
      // The tensor on the non-transposed output side: grad_output (or, transposed, input) of the
      // backward; the forward's input, whose positions become the output's by
      // stride, padding and dilation unless transposed.
      const Value& side = backward ? (transposed ? a[1] : a[0]) : a[0];
      double flops = 2.0 * static_cast<double>(a[backward ? 2 : 1].numel()) * static_cast<double>(side.shape[0]);
      // A non-transposed forward's output positions from its stride, padding and
      // dilation (lists at 3, 4, 5; one entry stands for every spatial dim).
      auto list_at = [&](std::size_t i, std::size_t d, std::int64_t fallback) {
        if (i >= a.size() || a[i].children.empty()) return fallback;
        const Value& v = a[i].children[std::min(d, a[i].children.size() - 1)];
        return v.int_value ? *v.int_value : fallback;
      };
      const Value& weight = a[1];
      const bool forward_output = !backward && !transposed && weight.shape.size() == side.shape.size();
      for (std::size_t d = 2; d < side.shape.size(); ++d) {
        std::int64_t positions = side.shape[d];
        if (forward_output) {
          const std::int64_t k = weight.shape[d], st = std::max<std::int64_t>(list_at(3, d - 2, 1), 1);
          const std::int64_t span = positions + 2 * list_at(4, d - 2, 0) - list_at(5, d - 2, 1) * (k - 1) - 1;
          positions = span < 0 ? 0 : span / st + 1;
        }
        flops *= static_cast<double>(positions);
      }
      if (backward) flops *= 2;
      if (flops > copt.oracle_flops)
        return fmt::format("not judged: {:.3g} convolution FLOPs exceed the CPU oracle budget of {:.3g} (--oracle-flops)",
                           flops, copt.oracle_flops);
    }
  }
  if (copt.oracle_flops > 0 && (op == "aten.mm.default" || op == "aten.bmm.default" || op == "aten.addmm.default")) {
    std::vector<std::vector<std::int64_t>> shapes;
    for (const Value& v : l.args.positional) tensor_shapes(v, shapes);
    std::vector<std::vector<std::int64_t>> mats;
    for (auto& s : shapes)
      if (s.size() >= 2) mats.push_back(s);
    if (mats.size() >= 2) {
      double flops = 2.0 * static_cast<double>(mats[mats.size() - 1].back());
      for (auto d : mats[mats.size() - 2]) flops *= static_cast<double>(d);
      if (flops > copt.oracle_flops)
        return fmt::format("not judged: {:.3g} matmul FLOPs exceed the CPU oracle budget of {:.3g} (--oracle-flops)",
                           flops, copt.oracle_flops);
    }
  }
  return {};
}

}  // namespace

bool cuda_runs_available() { return true; }

bool has_cuda_kernel(std::string_view op) { return aten::find_cuda_op(op) != nullptr; }

Result<RunReport> run_cuda_trace(const TraceFile& trace, const RunOptions& options, const CudaRunOptions& copt) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0)
    return make_error(Code::no_cuda_device, fmt::format("no CUDA device: {}", e == cudaSuccess ? "none found" : cudaGetErrorString(e)));
  cudaStream_t stream = nullptr;
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess)
    return cuda_err("cudaStreamCreate", e);
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } guard{stream};

  RunReport r;
  const std::uint64_t seed = options.seed ? options.seed : default_seed;
  std::set<std::string> wanted(options.ops.begin(), options.ops.end());
  std::set<std::string> seen;
  std::map<std::string, CoverageRow> impl, unimpl;
  const unsigned threads = std::max(1u, std::min(copt.host_threads ? copt.host_threads : std::thread::hardware_concurrency(), 64u));
  bool stop_all = false;
  const auto started = std::chrono::steady_clock::now();
  auto out_of_time = [&] {
    return copt.time_limit_s > 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() > copt.time_limit_s;
  };
  for (const Operator& op : merge_operators(trace)) {
    std::uint64_t cnt = 0;
    for (const ArgLine& l : op.lines) cnt += l.count;
    r.total_lines += op.lines.size();
    r.total_count += cnt;
    const OpInfo* info = find_aten_op(op.name);
    const aten::CudaOpInfo* cinfo = aten::find_cuda_op(op.name);
    auto& row = (info && cinfo ? impl : unimpl)[op.name];
    row.op = op.name;
    row.lines += op.lines.size();
    row.count += cnt;
    row.cpu_oracle = info != nullptr && cinfo == nullptr;
    if (!info || !cinfo || (!wanted.empty() && !wanted.count(op.name))) continue;
    seen.insert(op.name);
    std::vector<LineScore> scores;
    // Lines saved by an earlier call (--resume) are taken as they are; the rest run.
    std::vector<std::size_t> idx;
    for (std::size_t i : sample_lines(op, options.limit_per_op)) {
      auto saved = copt.resume.find({op.name, i});
      if (saved == copt.resume.end()) {
        idx.push_back(i);
        continue;
      }
      const LineOutcome& o = saved->second;
      LineScore s;
      s.passed = o.passed;
      if (o.passed && o.baseline_ms && o.kb_ms > 0) s.speedup = *o.baseline_ms / o.kb_ms;
      scores.push_back(s);
      r.lines.push_back(o);
      ++r.resumed_lines;
    }
    // The host side of a batch of lines, on `threads` threads; the next batch is
    // prepared while the device works through the current one.
    auto prepare_batch = [&, info](std::size_t at) {
      const std::size_t n = std::min<std::size_t>(threads, idx.size() - at);
      std::vector<HostSide> hs(n);
      parallel_for(static_cast<std::int64_t>(n), threads, [&](std::int64_t i) {
        const auto k = static_cast<std::size_t>(i);
        const ArgLine& l = op.lines[idx[at + k]];
        std::string why = over_budget(op.name, l, copt);
        if (out_of_time()) hs[k].problem = "not run: --time-limit reached";
        else if (!why.empty() && !copt.gpu_reference) hs[k].problem = std::move(why);
        else hs[k] = host_side(*info, l, idx[at + k], seed, why.empty());
      });
      return hs;
    };
    std::future<std::vector<HostSide>> pending;
    if (!idx.empty()) pending = std::async(std::launch::async, prepare_batch, std::size_t{0});
    for (std::size_t at = 0; at < idx.size() && !stop_all; at += threads) {
      const auto wait_from = std::chrono::steady_clock::now();
      std::vector<HostSide> hs = pending.get();
      r.phases.host_wait_s += seconds_since(wait_from);
      const std::size_t n = hs.size();
      if (at + threads < idx.size()) pending = std::async(std::launch::async, prepare_batch, at + threads);
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = idx[at + k];
        LineOutcome o;
        o.op = op.name;
        o.index = i;
        o.source_line = op.lines[i].line;
        if (!hs[k].problem.empty()) {
          o.problem = hs[k].problem;
        } else if (out_of_time()) {
          o.problem = "not run: --time-limit reached";
        } else {
          DeviceLine d = device_side(*info, cinfo->plan, hs[k], stream, copt);
          o.passed = d.passed;
          o.problem = d.problem;
          o.kb_ms = d.ms;
          o.by_reference = d.by_reference;
          o.max_abs_error = d.max_abs_error;
          o.max_rel_error = d.max_rel_error;
          r.phases.add(d.phases);
          if (d.fatal) {
            stop_all = true;
            r.fatal = fmt::format("{} line {}: {}", op.name, o.source_line, d.problem);
          }
        }
        hs[k] = HostSide{};
        LineScore s;
        s.passed = o.passed;
        if (auto b = options.baseline.find(op.name); b != options.baseline.end())
          if (auto t = b->second.find(i); t != b->second.end()) {
            o.baseline_ms = t->second;
            if (o.passed && o.kb_ms > 0) s.speedup = t->second / o.kb_ms;
          }
        scores.push_back(s);
        r.lines.push_back(std::move(o));
        if (stop_all) break;
      }
    }
    if (pending.valid()) pending.wait();
    r.ops.push_back(score_op(op.name, scores));
    if (stop_all) break;
  }
  for (const std::string& w : wanted)
    if (!seen.count(w)) r.unknown_ops.push_back(w);
  for (auto& [k, v] : impl) r.implemented.push_back(v);
  for (auto& [k, v] : unimpl) r.unimplemented.push_back(v);
  std::stable_sort(r.unimplemented.begin(), r.unimplemented.end(),
                   [](const CoverageRow& a, const CoverageRow& b) { return a.lines > b.lines; });
  r.summary = summarize(r.ops);
  return r;
}

}  // namespace kb::backendbench
