#include "harness/gpu_eval.hpp"

#include <algorithm>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <random>

#include "cuda/anti_gaming.hpp"
#include "cuda/per_device.hpp"
#include "cuda/plausible.hpp"
#include "cuda/runtime.hpp"
#include "cuda/timing.hpp"
#include "harness/cost.hpp"
#include "harness/dsa_judge.hpp"
#include "harness/cupti_report.hpp"
#include "harness/measurement.hpp"
#include "harness/sampling_judge.hpp"
#include "harness/timing_report.hpp"
#include "harness/torch_reference.hpp"
#include "inputs/device_fill.hpp"
#include "inputs/inputs.hpp"
#include "oracle/gpu_oracle.hpp"

namespace kb {

namespace {

struct DeviceInputs {
  std::vector<cuda::DeviceCopy> copies;  // one per input (empty for scalars)
  std::vector<cuda::DeviceArg> args;
  // Per input: the recipe it was generated from on the device; unset for
  // uploaded inputs (index structures, integers, blobs), checked against
  // their host copies.
  std::vector<std::optional<RandomRecipe>> generated;
};

// Every input of a trial on the device: random floating-point inputs
// generated there (the bytes the host generator gives them, never copied
// over), the rest uploaded from the host.
Result<DeviceInputs> device_inputs(const Materialized& m, const std::vector<std::optional<RandomRecipe>>& recipes,
                                   void* stream) {
  DeviceInputs di;
  di.copies.resize(m.args.size());
  di.args.resize(m.args.size());
  di.generated.resize(m.args.size());
  for (std::size_t i = 0; i < m.args.size(); ++i) {
    if (const Tensor* t = m.args[i].tensor) {
      if (i < recipes.size() && recipes[i]) {
        auto c = cuda::allocate_like(t->dtype(), t->shape());
        if (!c) return c.error();
        if (Status st = device_fill(c->view.data, *recipes[i], stream); !st.ok()) {
          KB_TRY(cuda::check(cudaGetLastError(), "device_fill"));  // marks a sticky error as one
          return st.error();
        }
        di.copies[i] = std::move(*c);
        di.generated[i] = recipes[i];
      } else {
        auto c = cuda::upload(*t, stream);
        if (!c) return c.error();
        di.copies[i] = std::move(*c);
      }
    }
    di.args[i].scalar = m.args[i].scalar;
  }
  for (std::size_t i = 0; i < m.args.size(); ++i)
    if (m.args[i].tensor) di.args[i].tensor = &di.copies[i].view;
  return di;
}

// Every output's guards checked, then its values downloaded into `got`: ""
// when all is well, else what was written outside which output.
Result<std::string> download_checked(const Definition& d, const std::vector<cuda::DeviceCopy>& outputs,
                                     std::vector<Tensor>& got, void* stream) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    auto g = outputs[i].buffer.guards_intact();
    if (!g) return g.error();
    if (!*g) return fmt::format("wrote outside output \"{}\" (guard bytes changed)", d.outputs[i].name);
    KB_TRY(cuda::download(outputs[i].view, got[i], stream));
  }
  return std::string();
}

// What is wrong with input i on the device after a call ("" if nothing): its
// guards, then its values: a generated input regenerated and compared on the
// device, an uploaded one downloaded and compared with its host copy.
Result<std::string> input_problem(const Definition& d, const DeviceInputs& di, const Materialized& host, std::size_t i,
                                  void* stream) {
  auto g = di.copies[i].buffer.guards_intact();
  if (!g) return g.error();
  if (!*g) return fmt::format("wrote outside input \"{}\" (guard bytes changed)", d.inputs[i].name);
  if (di.generated[i]) {
    auto changed = device_count_changed(di.copies[i].view.data, *di.generated[i], stream);
    if (!changed) {
      KB_TRY(cuda::check(cudaGetLastError(), "device_count_changed"));
      return changed.error();
    }
    if (*changed == 0) return std::string();
    return fmt::format("modified input \"{}\" ({} of {} {} changed)", d.inputs[i].name, *changed,
                       random::units(di.generated[i]->dtype, di.generated[i]->numel),
                       di.generated[i]->dtype == DType::float4_e2m1 ? "bytes" : "elements");
  }
  const Tensor& t = host.tensors[i];
  Tensor back = t.clone();
  KB_TRY(cuda::download(di.copies[i].view, back, stream));
  if (std::memcmp(back.bytes(), t.bytes(), back.nbytes()) != 0)
    return fmt::format("modified input \"{}\"", d.inputs[i].name);
  return std::string();
}

// Copy bandwidth and launch floor of the current device, measured once per
// device per process (the first evaluation on a device pays for it).
cuda::Ceilings device_ceilings(int device, void* stream) {
  static cuda::PerDevice<cuda::Ceilings> measured;
  return measured.get(device, [&] {
    auto m = cuda::measure_ceilings(stream);
    return m ? *m : cuda::Ceilings{};
  });
}

struct Problem {
  EvalStatus status;
  std::string what;
};

// What judged a trial's outputs.
enum class Reference { gpu_oracle, torch, cpu_oracle };

// After timing: every rotation's guards, inputs and (unless judged by
// distribution) outputs again. The samples wrote each rotation's outputs last;
// a solution that returned a result remembered from an earlier call (or did
// no work in timed calls) fails here though it passed its checked calls.
Result<std::optional<Problem>> check_rotations(const Definition& d, const Tolerance& tol,
                                               const std::vector<DeviceInputs>& input_sets,
                                               const std::vector<std::vector<cuda::DeviceCopy>>& output_sets,
                                               const std::vector<std::vector<Tensor>>& expected_sets,
                                               const std::vector<Materialized>& host_inputs, void* stream) {
  for (std::size_t k = 0; k < output_sets.size(); ++k) {
    for (std::size_t i = 0; i < input_sets[k].copies.size(); ++i) {
      if (!input_sets[k].args[i].tensor) continue;
      auto problem = input_problem(d, input_sets[k], host_inputs[k], i, stream);
      if (!problem) return problem.error();
      if (!problem->empty())
        return std::optional<Problem>(
            Problem{EvalStatus::runtime_error, fmt::format("while timing (rotation {}): {}", k, *problem)});
    }
    for (std::size_t i = 0; i < output_sets[k].size(); ++i) {
      auto g = output_sets[k][i].buffer.guards_intact();
      if (!g) return g.error();
      if (!*g)
        return std::optional<Problem>(Problem{
            EvalStatus::runtime_error, fmt::format("while timing (rotation {}): wrote outside output \"{}\" (guard "
                                                   "bytes changed)", k, d.outputs[i].name)});
      if (expected_sets[k].empty()) continue;
      Tensor got = expected_sets[k][i].clone();
      KB_TRY(cuda::download(output_sets[k][i].view, got, stream));
      Comparison c = judge_output(d, host_inputs[k].args, i, got, expected_sets[k][i], tol);
      if (c.verdict != Comparison::Verdict::match)
        return std::optional<Problem>(Problem{
            EvalStatus::incorrect_numerical,
            fmt::format("after timing, rotation {} (trial {}'s inputs): output \"{}\": {} (results reused across "
                        "calls, or work skipped in timed calls)", k, k, d.outputs[i].name, c.detail)});
    }
  }
  return std::optional<Problem>();
}

// After timing an untrusted solution on fresh inputs (evaluate_cuda): every
// set's guards and inputs (a generated input must hold the draw of the last
// call on its set), every output's guards, then the kept calls: each one's
// inputs drawn again from its serial, on the device and, where the host holds
// them, on the host, the trial's reference run on them, the kept outputs
// judged. A cache that answered a timed call from an earlier one, or a call
// that skipped its work, fails here.
Result<std::optional<Problem>> check_fresh_calls(const Definition& d, const Tolerance& tol,
                                                 const cuda::TimedCallSample& sample, std::uint64_t salt,
                                                 std::vector<DeviceInputs>& input_sets,
                                                 const std::vector<std::vector<cuda::DeviceCopy>>& output_sets,
                                                 std::vector<Materialized>& host_inputs,
                                                 const std::vector<Reference>& references,
                                                 const std::vector<std::uint64_t>& trial_seeds, const BenchOptions& opt,
                                                 void* stream, std::size_t& judged) {
  auto last = sample.last_serials(stream);
  if (!last) return last.error();
  for (std::size_t k = 0; k < input_sets.size(); ++k) {
    DeviceInputs& di = input_sets[k];
    std::vector<std::optional<RandomRecipe>> original = di.generated;
    for (auto& g : di.generated)
      if (g && (*last)[k] > 0) g = fresh_recipe(*g, salt, (*last)[k]);
    for (std::size_t i = 0; i < di.copies.size(); ++i) {
      if (!di.args[i].tensor) continue;
      auto problem = input_problem(d, di, host_inputs[k], i, stream);
      if (!problem) return problem.error();
      if (!problem->empty())
        return std::optional<Problem>(
            Problem{EvalStatus::runtime_error, fmt::format("while timing (input set {}): {}", k, *problem)});
    }
    di.generated = std::move(original);
    for (std::size_t i = 0; i < output_sets[k].size(); ++i) {
      auto g = output_sets[k][i].buffer.guards_intact();
      if (!g) return g.error();
      if (!*g)
        return std::optional<Problem>(Problem{
            EvalStatus::runtime_error, fmt::format("while timing (input set {}): wrote outside output \"{}\" (guard "
                                                   "bytes changed)", k, d.outputs[i].name)});
    }
  }
  auto kept = sample.kept(stream);
  if (!kept) return kept.error();
  Implementation oracle = reference_implementation();
  GpuOracleFn gpu_oracle = find_gpu_oracle(d);
  for (std::size_t j = 0; j < kept->size(); ++j) {
    const auto [serial, set] = (*kept)[j];
    if (serial == 0) continue;
    const auto k = static_cast<std::size_t>(set);
    DeviceInputs& di = input_sets[k];
    Materialized& m = host_inputs[k];
    for (std::size_t i = 0; i < di.generated.size(); ++i) {
      if (!di.generated[i]) continue;
      const RandomRecipe r = fresh_recipe(*di.generated[i], salt, serial);
      if (Status st = device_fill(di.copies[i].view.data, r, stream); !st.ok()) return st.error();
      if (!m.tensors[i].empty_storage()) fill_random(m.tensors[i], r.key);
    }
    auto expected = allocate_outputs(d, m.axes);
    if (!expected) return expected.error();
    switch (references[k]) {
      case Reference::gpu_oracle: {
        if (!gpu_oracle) return make_error(Code::internal, "the GPU oracle vanished");
        std::vector<cuda::DeviceCopy> ref;
        std::vector<cuda::DeviceTensor> ref_views;
        for (const auto& t : d.outputs) {
          auto c = cuda::allocate_like(t.dtype, bound_shape(t, m.axes));
          if (!c) return c.error();
          ref_views.push_back(c->view);
          ref.push_back(std::move(*c));
        }
        KB_TRY(gpu_oracle(GpuOracleCall{d, m.axes, di.args, ref_views, stream}));
        for (std::size_t i = 0; i < ref.size(); ++i) KB_TRY(cuda::download(ref[i].view, (*expected)[i], stream));
        break;
      }
      case Reference::torch: {
        TorchReferenceOptions on_device = opt.torch;
        int dev = 0;
        KB_TRY(cuda::check(cudaGetDevice(&dev), "cudaGetDevice"));
        on_device.device = fmt::format("cuda:{}", dev);
        auto tr = run_torch_reference(d, m.args, *expected, on_device);
        if (!tr) return tr.error();
        break;
      }
      case Reference::cpu_oracle:
        KB_TRY(oracle.run(ImplementationCall{d, m.axes, m.args, *expected, trial_seeds[k]}));
        break;
    }
    ++judged;
    for (std::size_t i = 0; i < d.outputs.size(); ++i) {
      Tensor got = (*expected)[i].clone();
      KB_TRY(cuda::check(cudaMemcpyAsync(got.bytes(), sample.slot_output(j, i), got.nbytes(), cudaMemcpyDeviceToHost,
                                         static_cast<cudaStream_t>(stream)),
                         "downloading a kept timed call's outputs"));
      KB_TRY(cuda::check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "downloading a kept timed call's outputs"));
      Comparison c = judge_output(d, m.args, i, got, (*expected)[i], tol);
      if (c.verdict != Comparison::Verdict::match)
        return std::optional<Problem>(Problem{
            EvalStatus::incorrect_numerical,
            fmt::format("a timed call's output was wrong: call {} of the timing (input set {}, its floating-point "
                        "inputs drawn fresh for that call), output \"{}\": {} (results reused across calls, or work "
                        "skipped in timed calls)", serial, k, d.outputs[i].name, c.detail)});
    }
  }
  return std::optional<Problem>();
}

EvaluationResult done(Evaluation ev, std::string log, std::string summary) {
  ev.log = std::move(log);
  EvaluationResult r;
  r.evaluation = std::move(ev);
  r.summary = std::move(summary);
  return r;
}

}  // namespace

Result<EvaluationResult> evaluate_cuda(const Definition& d, const Workload& w, const Implementation& impl,
                                       const BenchOptions& opt) {
  if (!impl.run_cuda) return make_error(Code::internal, fmt::format("{} has no CUDA entry point", impl.name));
  const auto started = std::chrono::steady_clock::now();
  auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  if (cuda::context_is_broken())
    return make_error(Code::cuda_error, "the CUDA context is unusable after an earlier sticky error");
  Implementation oracle = reference_implementation();
  Tolerance tol = opt.tolerances.for_definition(d);
  auto stream_r = cuda::Stream::create();
  if (!stream_r) return stream_r.error();
  cuda::Stream stream = std::move(*stream_r);

  std::string log;
  Evaluation ev = begin_evaluation(Device::cuda, opt, tol, log);
  double max_abs = 0, max_rel = 0;
  std::int64_t mismatched = 0, total = 0;
  double lowest_matched = 1.0;
  const bool sampling = judged_by_distribution(d);
  double max_tvd = 0, tvd_threshold = 0;  // sampling: the largest distance over trials, and its threshold
  int max_bins = 0;
  // Kept for the stream check and timing, one per trial: timed samples rotate
  // through them, and each rotation's outputs are judged again afterwards.
  std::vector<DeviceInputs> input_sets;
  std::vector<std::vector<cuda::DeviceCopy>> output_sets;
  std::vector<std::vector<Tensor>> expected_sets;  // empty for sampling
  // Each trial's host side: index structures and other uploaded inputs (to
  // check the device copies after timing), generated inputs only where the
  // host reads them (shape and size otherwise).
  std::vector<Materialized> host_inputs;
  std::vector<CallCost> costs;                     // each trial's ideal cost, for the timed rotation
  // Each trial's reference (the same judges the kept timed calls later) and seed.
  std::vector<Reference> references;
  std::vector<std::uint64_t> trial_seeds;
  AxisValues axes;

  for (int trial = 0; trial < std::max(1, opt.trials); ++trial) {
    MaterializeOptions mo{opt.seed + static_cast<std::uint64_t>(trial), opt.dataset_root};
    mo.defer_random_floats = true;  // generated on the device; on the host only where the host reads them
    auto m = materialize(d, w, mo);
    if (!m) return m.error();
    KB_TRY(ready_trial(d, *m, trial == 0 ? &log : nullptr));
    axes = m->axes;
    auto expected = allocate_outputs(d, m->axes);
    if (!expected) return expected.error();
    const std::vector<std::optional<RandomRecipe>> recipes = m->deferred;
    KB_TRY(fill_cost_inputs(d, *m));  // the device still generates them: the same bytes
    // Large workloads are judged against the GPU oracle (plain fp32 CUDA
    // kernels, cross-checked with the CPU oracle in tests/gpu); the rest
    // against the CPU oracle. The line is where the CPU oracle stops being
    // quick: it runs on one thread in fp32, a few GFLOP/s at best (a causal
    // prefill of 86 GFLOP took it minutes), and streams every byte through
    // dtype conversions, so 2 GFLOP or 64 MB already costs it a second or
    // more per trial, against milliseconds on the GPU; below the line the
    // GPU oracle's launch and download would gain little. The FLOPs are the
    // cost model's on this trial's index values, attention included: a
    // causal prefill counts the pairs its mask keeps, a paged decode the
    // pages its sequences read.
    auto trial_cost = ideal_cost(d, m->axes, m->args);  // index values, routing values and sizes
    if (!trial_cost) return trial_cost.error();
    const CallCost& cost = *trial_cost;
    costs.push_back(cost);
    GpuOracleFn gpu_oracle = find_gpu_oracle(d);
    const bool use_torch = opt.reference == ReferenceSource::torch && !judged_by_distribution(d);
    // The host generator makes every deferred input before a CPU oracle can
    // run, at well under 1 GB/s on one thread: a MoE call that touches 15 MB
    // of its 2 GB of expert weights would spend half a minute there, so the
    // bytes to generate count as well as the bytes the call touches.
    std::size_t host_generated_bytes = 0;
    for (std::size_t i = 0; i < m->deferred.size() && i < m->tensors.size(); ++i)
      if (m->deferred[i]) host_generated_bytes += m->tensors[i].nbytes();
    bool use_gpu_oracle = !use_torch && !opt.cpu_oracle_only && gpu_oracle &&
                          (cost.flops > 2e9 || cost.bytes > 64e6 || host_generated_bytes > 64e6);
    // The host reads every input's values for a CPU oracle or PyTorch, and
    // some for the judges that look at inputs (DSA's scores, sampling's
    // probabilities); a GPU oracle reads the device's.
    if (!use_gpu_oracle || judged_by_topk_scores(d) || judged_by_distribution(d)) KB_TRY(fill_deferred(*m));
    auto di = device_inputs(*m, recipes, stream.get());
    if (!di) return di.error();
    references.push_back(use_gpu_oracle ? Reference::gpu_oracle : use_torch ? Reference::torch : Reference::cpu_oracle);
    trial_seeds.push_back(mo.seed);
    if (use_gpu_oracle) {
      std::vector<cuda::DeviceCopy> ref;
      std::vector<cuda::DeviceTensor> ref_views;
      for (const auto& t : d.outputs) {
        auto c = cuda::allocate_like(t.dtype, bound_shape(t, m->axes));
        if (!c) return c.error();
        ref_views.push_back(c->view);
        ref.push_back(std::move(*c));
      }
      KB_TRY(gpu_oracle(GpuOracleCall{d, m->axes, di->args, ref_views, stream.get()}));
      for (std::size_t i = 0; i < ref.size(); ++i) KB_TRY(cuda::download(ref[i].view, (*expected)[i], stream.get()));
      if (trial == 0) log += "reference: kb GPU oracle (CUDA cores)\n";
    } else if (use_torch) {
      TorchReferenceOptions on_device = opt.torch;
      int dev = 0;
      KB_TRY(cuda::check(cudaGetDevice(&dev), "cudaGetDevice"));
      on_device.device = fmt::format("cuda:{}", dev);
      auto tr = run_torch_reference(d, m->args, *expected, on_device);
      if (!tr) return tr.error();
      if (trial == 0) {
        log += fmt::format("reference: the definition's PyTorch reference (torch {}, {})\n", tr->torch_version,
                           tr->device);
        for (const auto& n : tr->notes) log += "note: " + n + "\n";
      }
    } else {
      // Sampling is judged by the oracle's distributions (SamplingJudge), never
      // by the oracle's own draw: it is not made.
      if (!sampling) KB_TRY(oracle.run(ImplementationCall{d, m->axes, m->args, *expected, mo.seed}));
      if (trial == 0) log += "reference: kb CPU oracle\n";
    }
    std::vector<cuda::DeviceCopy> outputs;
    std::vector<cuda::DeviceTensor> views;
    for (const auto& t : d.outputs) {
      auto c = cuda::allocate_like(t.dtype, bound_shape(t, m->axes));
      if (!c) return c.error();
      KB_TRY(cuda::memset_async(c->view, 0xFF, stream.get()));  // poison: NaN in every float dtype
      views.push_back(c->view);
      outputs.push_back(std::move(*c));
    }
    KB_TRY(stream.synchronize());

    Status st = ok_status();
    (void)cudaGetLastError();  // start clean: an earlier non-sticky error is not this solution's
    // Sampling: this call is the trial's draw 0, seeded as the CPU path seeds it.
    const std::uint64_t first_seed = sampling ? SamplingJudge::draw_seed(mo.seed, 0) : mo.seed;
    try {
      st = impl.run_cuda(CudaCall{d, m->axes, di->args, views, stream.get(), first_seed});
    } catch (const std::exception& e) {
      st = make_error(Code::internal, fmt::format("{} threw: {}", impl.name, e.what()));
    }
    if (!st.ok() && st.error().code == Code::unsupported) return st.error();  // declined: not recorded
    if (st.ok()) st = cuda::check(cudaGetLastError(), "after the launch");
    if (st.ok()) st = stream.synchronize();
    if (!st.ok()) {
      ev.status = EvalStatus::runtime_error;
      return done(std::move(ev), log + fmt::format("trial {}: {}", trial, st.error().message), st.error().message);
    }
    // Guards and inputs, then outputs.
    for (std::size_t i = 0; i < di->copies.size(); ++i) {
      if (!m->args[i].tensor) continue;
      auto problem = input_problem(d, *di, *m, i, stream.get());
      if (!problem) return problem.error();
      if (!problem->empty()) {
        ev.status = EvalStatus::runtime_error;
        return done(std::move(ev), log + fmt::format("trial {}: {}", trial, *problem), *problem);
      }
    }
    auto got = allocate_outputs(d, m->axes);
    if (!got) return got.error();
    if (sampling) {
      // Sampling: by distribution over opt.sampling.draws calls on these
      // inputs, call `draw` seeded with SamplingJudge::draw_seed(trial seed,
      // draw), the seeds the CPU path passes (harness.cpp).
      auto judge = SamplingJudge::create(d, m->axes, m->args, opt.sampling);
      if (!judge) return judge.error();
      if (trial == 0) log += judge->describe() + "\n";
      std::optional<SamplingVerdict> bad;
      for (int draw = 0; draw < opt.sampling.draws && !bad; ++draw) {
        if (draw > 0) {
          for (auto& o : outputs) KB_TRY(cuda::memset_async(o.view, 0xFF, stream.get()));
          Status s =
              impl.run_cuda(CudaCall{d, m->axes, di->args, views, stream.get(), SamplingJudge::draw_seed(mo.seed, draw)});
          if (s.ok()) s = cuda::check(cudaGetLastError(), "after the launch");
          if (s.ok()) s = stream.synchronize();
          if (!s.ok()) {
            ev.status = EvalStatus::runtime_error;
            return done(std::move(ev), log + fmt::format("trial {}, call {}: {}", trial, draw, s.error().message),
                        s.error().message);
          }
        }
        auto guard = download_checked(d, outputs, *got, stream.get());
        if (!guard) return guard.error();
        if (!guard->empty()) {
          ev.status = EvalStatus::runtime_error;
          return done(std::move(ev), log + *guard, *guard);
        }
        bad = judge->add(*got);
      }
      SamplingVerdict v = bad ? *bad : judge->finish();
      max_abs = std::max(max_abs, v.max_abs);
      max_rel = std::max(max_rel, v.max_rel);
      if (!bad && v.max_tvd >= max_tvd) {
        max_tvd = v.max_tvd;
        tvd_threshold = v.tvd_threshold;
      }
      max_bins = std::max(max_bins, v.max_bins);
      if (v.status != EvalStatus::passed) {
        ev.status = v.status;
        if (v.status == EvalStatus::incorrect_numerical) {
          JudgeCounts counts;
          counts.tvd = v.max_tvd;
          counts.tvd_threshold = v.tvd_threshold;
          counts.draws = opt.sampling.draws;
          counts.out_of_support = bad.has_value();
          counts.trials_run = trial + 1;
          ev.correctness = Correctness{bad ? 1e8 : max_rel, bad ? 1.0 : max_abs, write_judge_counts(counts)};
        }
        std::string where = fmt::format("trial {}: {}", trial, v.detail);
        return done(std::move(ev), log + where, where);
      }
      input_sets.push_back(std::move(*di));
      output_sets.push_back(std::move(outputs));
      expected_sets.emplace_back();
      host_inputs.push_back(std::move(*m));
      rebind_args(host_inputs.back());
      continue;
    }
    auto guard = download_checked(d, outputs, *got, stream.get());
    if (!guard) return guard.error();
    if (!guard->empty()) {
      ev.status = EvalStatus::runtime_error;
      return done(std::move(ev), log + *guard, *guard);
    }
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      Comparison c = judge_output(d, m->args, i, (*got)[i], (*expected)[i], tol);
      max_abs = std::max(max_abs, c.max_abs);
      max_rel = std::max(max_rel, c.max_rel);
      mismatched += c.mismatched;
      lowest_matched = std::min(lowest_matched, c.matched_ratio());
      total += c.total;
      if (c.verdict != Comparison::Verdict::match) {
        ev.status = EvalStatus::incorrect_numerical;
        ev.correctness = Correctness{max_rel, max_abs,
            write_judge_counts(JudgeCounts::elementwise(mismatched, total, trial + 1, recorded_matched_ratio(tol, lowest_matched)))};
        std::string where = fmt::format("trial {}: output \"{}\": {}", trial, d.outputs[i].name, c.detail);
        return done(std::move(ev), log + where, where);
      }
    }
    input_sets.push_back(std::move(*di));
    output_sets.push_back(std::move(outputs));
    expected_sets.push_back(std::move(*expected));
    host_inputs.push_back(std::move(*m));
    rebind_args(host_inputs.back());
  }

  // Other-stream check: one more call on trial 0's inputs, on a stream held
  // shut by a gate kernel, its outputs poisoned again.
  StreamCheck stream_check = StreamCheck::same_stream;
  {
    auto& outs = output_sets[0];
    std::vector<cuda::DeviceTensor> views;
    std::vector<std::pair<void*, std::size_t>> probe;
    for (auto& o : outs) {
      KB_TRY(cuda::memset_async(o.view, 0xFF, stream.get()));
      views.push_back(o.view);
      probe.emplace_back(o.view.data, o.view.nbytes);
    }
    KB_TRY(stream.synchronize());
    auto sc = cuda::check_stream_discipline(
        [&](void* s) {
          Status st = impl.run_cuda(CudaCall{d, axes, input_sets[0].args, views, s, opt.seed});
          if (st.ok()) st = cuda::check(cudaGetLastError(), "after the launch");
          return st;
        },
        probe, stream.get());
    if (!sc) {
      ev.status = EvalStatus::runtime_error;
      return done(std::move(ev), log + "stream check: " + sc.error().message, sc.error().message);
    }
    log += sc->detail + "\n";
    stream_check =
        sc->verdict == cuda::StreamVerdict::inconclusive ? StreamCheck::inconclusive : StreamCheck::same_stream;
    if (sc->verdict == cuda::StreamVerdict::other_stream) {
      ev.status = EvalStatus::runtime_error;
      return done(std::move(ev), log, sc->detail);
    }
  }

  ev.status = EvalStatus::passed;
  if (sampling) {
    JudgeCounts counts;
    counts.tvd = max_tvd;
    counts.tvd_threshold = tvd_threshold;
    counts.bins = max_bins;
    counts.draws = opt.sampling.draws;
    counts.trials_run = std::max(1, opt.trials);
    ev.correctness = Correctness{max_rel, max_abs, write_judge_counts(counts)};
  } else {
    ev.correctness = Correctness{max_rel, max_abs,
        write_judge_counts(JudgeCounts::elementwise(mismatched, total, std::max(1, opt.trials),
                                                    recorded_matched_ratio(tol, lowest_matched)))};
  }
  Performance perf;
  // Untrusted solutions are timed on fresh inputs: before every call the
  // timer makes (outside its events, ahead of the L2 flush), the random
  // floating-point inputs of the set it uses are drawn again on the device
  // (the same distributions, a new serial per call: a cache keyed by any
  // fingerprint of the inputs never hits) and its outputs poisoned; the
  // outputs of a few calls drawn on the device are kept and judged after
  // timing on exactly those inputs. Index structures, integers and blobs stay
  // as they were: they define the call's shape and work and must stay valid.
  // kb's own solutions (Implementation::trusted) cannot cheat and are timed
  // on the rotating sets alone, their outputs judged again afterwards.
  const bool fresh = !impl.trusted && !sampling;
  constexpr std::size_t kKeptCalls = 4;
  std::optional<cuda::TimedCallSample> timed_sample;
  std::uint64_t fresh_salt = 0;
  if (opt.time && fresh) {
    std::random_device rd;
    fresh_salt = (std::uint64_t{rd()} << 32) ^ rd();
    const std::uint64_t secret = (std::uint64_t{rd()} << 32) ^ rd();
    std::vector<std::size_t> bytes;
    for (const auto& o : output_sets[0]) bytes.push_back(o.view.nbytes);
    auto ts = cuda::TimedCallSample::create(kKeptCalls, bytes, input_sets.size(), secret);
    if (!ts) return ts.error();
    timed_sample = std::move(*ts);
  }
  if (opt.time) {
    // Rotate the trials' input and output sets: consecutive samples see
    // different inputs and write different buffers, poisoned again first, so
    // a result remembered from an earlier call lands in the wrong rotation.
    std::vector<std::vector<cuda::DeviceTensor>> view_sets;
    for (auto& outs : output_sets) {
      view_sets.emplace_back();
      for (auto& o : outs) {
        KB_TRY(cuda::memset_async(o.view, 0xFF, stream.get()));
        view_sets.back().push_back(o.view);
      }
    }
    KB_TRY(stream.synchronize());
    // One timed call: sample i runs on rotation i % rotations, seeded with
    // that rotation's trial seed.
    auto run_rotated = [&](int sample, void* s) {
      std::size_t k = static_cast<std::size_t>(sample) % input_sets.size();
      return impl.run_cuda(CudaCall{d, axes, input_sets[k].args, view_sets[k], s, opt.seed + k});
    };
    const double judge_s = seconds_since(started);
    const auto timing_started = std::chrono::steady_clock::now();
    cuda::TimingOptions topt;
    if (opt.gpu_warmup > 0) topt.warmup = opt.gpu_warmup;
    if (opt.gpu_min_samples > 0) topt.min_samples = opt.gpu_min_samples;
    topt.max_samples = std::max(topt.max_samples, topt.min_samples);
    std::size_t refilled = 0;  // generated inputs per set, drawn again before every call
    for (const auto& g : input_sets[0].generated) refilled += g ? 1 : 0;
    if (timed_sample) {
      topt.before = [&](int sample, void* s) -> Status {
        const std::size_t k = static_cast<std::size_t>(sample) % input_sets.size();
        KB_TRY(timed_sample->begin(k, s));
        for (std::size_t i = 0; i < input_sets[k].generated.size(); ++i)
          if (const auto& g = input_sets[k].generated[i])
            KB_TRY(device_fill_fresh(input_sets[k].copies[i].view.data, *g, fresh_salt, timed_sample->serial(), s));
        for (const auto& v : view_sets[k]) KB_TRY(cuda::memset_async(v, 0xFF, s));
        return ok_status();
      };
      topt.after = [&](int sample, void* s) -> Status {
        const std::size_t k = static_cast<std::size_t>(sample) % input_sets.size();
        std::vector<const void*> outs;
        for (const auto& v : view_sets[k]) outs.push_back(v.data);
        return timed_sample->keep(k, outs, s);
      };
    }
    auto t = cuda::time_gpu(run_rotated, stream.get(), topt);
    if (!t) {
      ev.status = EvalStatus::runtime_error;
      ev.correctness.reset();
      return done(std::move(ev), log + "while timing: " + t.error().message, t.error().message);
    }
    std::size_t kept_judged = 0;
    auto bad = timed_sample ? check_fresh_calls(d, tol, *timed_sample, fresh_salt, input_sets, output_sets, host_inputs,
                                                references, trial_seeds, opt, stream.get(), kept_judged)
                            : check_rotations(d, tol, input_sets, output_sets, expected_sets, host_inputs, stream.get());
    if (!bad) return bad.error();
    if (*bad) {
      ev.status = (*bad)->status;
      if (ev.status != EvalStatus::incorrect_numerical) ev.correctness.reset();
      return done(std::move(ev), log + (*bad)->what, (*bad)->what);
    }
    const double timing_s = seconds_since(timing_started);
    const CallCost cost = mean_cost(costs);  // samples rotate evenly through the trials
    // The device it ran on, named by PCI bus id too (ordinals depend on CUDA_VISIBLE_DEVICES).
    int device = 0;
    KB_TRY(cuda::check(cudaGetDevice(&device), "cudaGetDevice"));
    char pci_bus_id[32] = {};
    (void)cudaDeviceGetPCIBusId(pci_bus_id, sizeof pci_bus_id, device);  // "" if it fails; only recorded
    const cuda::Ceilings ceilings = device_ceilings(device, stream.get());
    const double mma = cuda::measured_mma_tflops(stream.get());
    std::string implausible =
        cuda::implausible_speed(cost.bytes, cost.flops, t->median_ms, ceilings.copy_bandwidth_gbs, mma);
    Measurement meas;
    meas.cuda_device = device;
    meas.pci_bus_id = pci_bus_id;
    meas.input_sets = input_sets.size();
    meas.rotations_checked = timed_sample ? kept_judged : output_sets.size();
    meas.stream_check = stream_check;
    meas.judge_s = judge_s;
    meas.timing_s = timing_s;
    record_gpu_timer(meas, *t);
    record_cost(meas, cost);
    record_ceilings(meas, ceilings, mma, implausible);
    // CUPTI's kernel time beside the events (--cupti): the kernels alone.
    if (opt.cupti)
      log += record_cupti(meas, cuda::time_kernels_cupti(run_rotated, stream.get(), 20, true, cuda::default_l2_flush(),
                                                         topt.before));
    record(meas, perf);
    log += "timing: " + t->method() + "\n";
    if (timed_sample)
      log += fmt::format("anti-gaming: every timed call on fresh inputs ({} random floating-point input{} per set drawn "
                         "again before each call), {} timed calls drawn at random judged after timing\n",
                         refilled, refilled == 1 ? "" : "s", kept_judged);
    else
      log += fmt::format("anti-gaming: {} rotations re-checked after timing\n", output_sets.size());
    if (!implausible.empty()) {
      log += "IMPLAUSIBLE speed: " + implausible + "\n";
      ev.performance = perf;
      return done(std::move(ev), log, "ok, but IMPLAUSIBLE: " + implausible);
    }
  }
  ev.performance = perf;
  return done(std::move(ev), log, "ok");
}

}  // namespace kb
