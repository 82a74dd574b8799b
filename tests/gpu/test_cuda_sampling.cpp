// kb_cuda_sampling judged by kb's own sampling judge on the GPU.
//
//  1. Synthetic definitions (the shipped top_k / top_p / top_k_top_p
//     definitions with vocab_size set) over vocabularies 1, 7, 1000, 1001
//     (no multiple of 4 or 8), 32000, 128256, 151936 and 262208, batches 1, 3
//     and 64 (launch_sampling's choice of kernel: the cluster kernel here),
//     through kb::evaluate_cuda (the harness's CUDA path: per-draw seeds, the
//     distribution judge, guard and stream checks). Per-row top_k cycles
//     through {1, 2, 50, vocab, 0} and top_p through {0.05, 0.5, 0.9, 1.0,
//     0.0} (0: the argmax; 0 for top_k and >= 1 for top_p: no filtering), so
//     a 64-row batch holds every pair. Probabilities: kb's random rows
//     (exp(3 N(0,1)), normalised), flat rows (every token tied: the index
//     tie-break decides top-k and top-p), rows of five levels (tied groups
//     across the boundaries) and sparse rows (most tokens 0). The inputs a
//     case fixes are written as a safetensors blob the workload names.
//     bfloat16 / float16 probs, float16 top_p, int64 top_k and int32 samples
//     on a few cases.
//  2. Each kernel forced (launch_sampling_with), launched directly and
//     judged the same way: the exact search the kernels fall back to,
//     reached at once (rejection_rounds 0 and 1) on the cluster kernel and
//     the streaming kernel; the cluster kernel at every cluster size 1..8
//     over float32 / float16 / bfloat16 rows whose vocabulary is no
//     multiple of the vector width nor of the cluster size (slices with a
//     head and a tail, misaligned rows, empty slices), and large rows; the
//     streaming kernel with 16-byte and scalar loads; misaligned probs.
//  3. Determinism: the same seed gives the same samples, another seed other
//     samples; a row without positive mass gets -1.
//  4. Every shipped sampling definition on its smallest shipped workload, or
//     on 4 rows of kb's inputs where none is shipped, through evaluate_cuda.
// On a failure the case is run again directly and the first bad row is
// printed: its top_k / top_p, the reference's support, the samples outside
// it, and the most likely tokens with reference probability and frequency.
//
// --dry-run: no device; parts 1 and 4 judge kb_cpu_sampling (the CPU
// harness) on the same cases instead, which checks the cases themselves.
//
// Exit codes: 0 all passed, 1 a failure, 77 skipped (no usable CUDA device).
// Needs KB_SHARED_DIR (FlashInfer-Bench's definitions).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "../../kernels/sampling/cuda/sampling_cuda.hpp"
#include "../../kernels/sampling/sampling_oracle.hpp"
#include "cuda/device.hpp"
#include "device_buffer.hpp"
#include "gpu_test_support.hpp"
#include "harness/gpu_eval.hpp"
#include "harness/implementation.hpp"
#include "harness/sampling_judge.hpp"
#include "inputs/inputs.hpp"
#include "safetensors/safetensors.hpp"
#include "schema/io.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {
void add_sampling_cuda(Registry& r);
void add_sampling_cpu(Registry& r);
}  // namespace kb::kernels

namespace fs = std::filesystem;
using kb_gpu_test::DeviceBuffer;

namespace {

using kb_gpu_test::load_definition;
using kb_gpu_test::set_const;

int g_failures = 0, g_passes = 0;
bool g_dry = false;  // judge kb_cpu_sampling through kb::evaluate instead (no device)
fs::path g_blobs;  // dataset root of the synthetic cases' blobs
const std::uint64_t kSeed = 0x6b62;  // BenchOptions' default seed: trial 0 materializes with it

struct SkipTest {
  std::string reason;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice)
      throw SkipTest{std::string(what) + ": " + cudaGetErrorName(e)};
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  }
}

kb::TensorSpec& spec(kb::Definition& d, const std::string& name) {
  for (auto* list : {&d.inputs, &d.outputs})
    for (auto& t : *list)
      if (t.name == name) return t;
  throw std::runtime_error(d.name + ": no tensor " + name);
}

bool has_input(const kb::Definition& d, const std::string& name) { return kb::input_index(d, name).has_value(); }

// ---- Cases ------------------------------------------------------------------------

enum class Pattern { random, flat, levels, sparse, zero_row };

const char* pattern_name(Pattern p) {
  switch (p) {
    case Pattern::random: return "random";
    case Pattern::flat: return "flat";
    case Pattern::levels: return "levels";
    case Pattern::sparse: return "sparse";
    case Pattern::zero_row: return "zero-row";
  }
  return "?";
}

struct Case {
  std::string label;
  kb::Definition d;
  std::int64_t batch = 1;
  std::int64_t vocab = 1;
  Pattern pattern = Pattern::random;
  int offset = 0;  // rotates the per-row top_k / top_p choices
  int draws = 1000;
};

std::int64_t row_k(const Case& c, std::int64_t r) {
  const std::int64_t ks[] = {1, 2, 50, c.vocab, 0};
  return ks[(r + c.offset) % 5];
}
double row_p(const Case& c, std::int64_t r) {
  const double ps[] = {0.05, 0.5, 0.9, 1.0, 0.0};
  const std::int64_t q = r + c.offset;
  return ps[(q / 5 + q) % 5];
}

std::vector<float> pattern_row(Pattern p, std::int64_t vocab, std::int64_t r) {
  std::vector<float> v(static_cast<std::size_t>(vocab));
  for (std::int64_t j = 0; j < vocab; ++j) {
    double x = 1;
    if (p == Pattern::levels) x = 1 + static_cast<double>((j * 7 + r) % 5);
    if (p == Pattern::sparse) x = (j % 13 == r % 13) ? 1 + static_cast<double>((j * 31) % 17) : 0;
    if (p == Pattern::zero_row) x = r == 1 ? 0 : 1 + static_cast<double>((j * 11 + r) % 23);
    v[static_cast<std::size_t>(j)] = static_cast<float>(x);
  }
  if (p == Pattern::sparse && std::all_of(v.begin(), v.end(), [](float x) { return x == 0; })) v[0] = 1;
  double sum = 0;
  for (float x : v) sum += x;
  if (sum > 0)
    for (float& x : v) x = static_cast<float>(x / sum);
  return v;
}

// The workload of a case: probs random (kb's generator) or from the blob,
// top_k / top_p always from the blob.
kb::Workload workload_for(const Case& c) {
  const std::string file = c.label + ".safetensors";
  std::vector<kb::Tensor> tensors;
  std::vector<std::string> names;
  std::vector<std::vector<std::int64_t>> shapes;
  for (const auto& t : c.d.inputs) {
    if (t.name == "probs" && c.pattern == Pattern::random) continue;
    std::vector<std::int64_t> shape = t.name == "probs" ? std::vector<std::int64_t>{c.batch, c.vocab}
                                                        : std::vector<std::int64_t>{c.batch};
    auto x = kb::Tensor::allocate(t.dtype, shape);
    if (!x) throw std::runtime_error(x.error().message);
    if (t.name == "probs") {
      std::vector<float> all;
      for (std::int64_t r = 0; r < c.batch; ++r) {
        auto row = pattern_row(c.pattern, c.vocab, r);
        all.insert(all.end(), row.begin(), row.end());
      }
      if (auto s = kb::store_float(all, *x); !s) throw std::runtime_error(s.error().message);
    } else if (t.name == "top_k") {
      for (std::int64_t r = 0; r < c.batch; ++r) {
        if (t.dtype == kb::DType::int64) x->data<std::int64_t>()[r] = row_k(c, r);
        else x->data<std::int32_t>()[r] = static_cast<std::int32_t>(row_k(c, r));
      }
    } else if (t.name == "top_p") {
      std::vector<float> p;
      for (std::int64_t r = 0; r < c.batch; ++r) p.push_back(static_cast<float>(row_p(c, r)));
      if (auto s = kb::store_float(p, *x); !s) throw std::runtime_error(s.error().message);
    }
    names.push_back(t.name);
    shapes.push_back(shape);
    tensors.push_back(std::move(*x));
  }
  std::vector<kb::safetensors::TensorView> views;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    views.push_back({names[i], tensors[i].dtype(), shapes[i],
                     std::span<const std::byte>(tensors[i].bytes(), tensors[i].nbytes())});
  if (auto s = kb::safetensors::write_file((g_blobs / file).string(), views); !s)
    throw std::runtime_error("writing " + file + ": " + s.error().message);
  kb::Workload w;
  w.uuid = c.label;
  w.axes = {{"batch_size", c.batch}};
  for (const auto& t : c.d.inputs) {
    kb::InputSpec s;
    if (!(t.name == "probs" && c.pattern == Pattern::random)) {
      s.kind = kb::InputKind::safetensors;
      s.path = file;
      s.tensor_key = t.name;
    }
    w.inputs.emplace_back(t.name, s);
  }
  return w;
}

// ---- Direct runs (launch_sampling on device copies of kb's inputs) ------------

struct Prepared {
  kb::Materialized m;
  std::vector<std::unique_ptr<DeviceBuffer>> in;
  std::unique_ptr<DeviceBuffer> out;
  kb::kernels::SamplingArgs args;
};

std::unique_ptr<Prepared> prepare(const kb::Definition& d, const kb::Workload& w, const std::string& root,
                                  std::size_t probs_shift = 0) {
  auto p = std::make_unique<Prepared>();
  auto m = kb::materialize(d, w, kb::MaterializeOptions{kSeed, root});
  if (!m) throw std::runtime_error(d.name + ": materialize: " + m.error().message);
  p->m = std::move(*m);
  kb::rebind_args(p->m);
  const std::int64_t batch = p->m.tensors[*kb::input_index(d, "probs")].dim(0);
  for (std::size_t i = 0; i < d.inputs.size(); ++i) {
    const kb::Tensor& t = p->m.tensors[i];
    const bool is_probs = d.inputs[i].name == "probs";
    p->in.push_back(std::make_unique<DeviceBuffer>(t.nbytes(), is_probs ? probs_shift : 0));
    check_cuda(cudaMemcpy(p->in.back()->data(), t.bytes(), t.nbytes(), cudaMemcpyHostToDevice), "cudaMemcpy (input)");
    if (is_probs) {
      p->args.probs = p->in.back()->data();
      p->args.probs_dtype = t.dtype();
      p->args.batch = t.dim(0);
      p->args.vocab = t.dim(1);
    } else if (d.inputs[i].name == "top_k") {
      p->args.top_k = p->in.back()->data();
      p->args.top_k_dtype = t.dtype();
    } else if (d.inputs[i].name == "top_p") {
      p->args.top_p = p->in.back()->data();
      p->args.top_p_dtype = t.dtype();
    }
  }
  p->args.samples_dtype = d.outputs[0].dtype;
  p->out = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(batch) * (kb::dtype_bits(d.outputs[0].dtype) / 8));
  p->args.samples = p->out->data();
  return p;
}

// Which kernel a direct run takes: kAuto (launch_sampling's rule), kStreaming, or a cluster size 1..8.
constexpr int kAuto = -1, kStreaming = 0;

std::string path_name(int force) {
  return force == kAuto ? "auto" : force == kStreaming ? "streaming" : "cluster " + std::to_string(force);
}

kb::kernels::SamplingConfig forced_config(const kb::kernels::SamplingArgs& a, int force) {
  const int bytes = a.probs_dtype == kb::DType::float32 ? 4 : 2;
  if (force == kStreaming)
    return kb::kernels::sampling_stream_config(a.vocab, bytes, reinterpret_cast<std::uintptr_t>(a.probs) % 16 == 0);
  return kb::kernels::sampling_cluster_config(a.vocab, bytes, force);
}

std::vector<std::int64_t> draw(Prepared& p, std::uint64_t seed, int rounds, int force = kAuto) {
  kb::kernels::SamplingArgs a = p.args;
  a.seed = seed;
  a.rejection_rounds = rounds;
  check_cuda(cudaMemset(p.out->data(), 0xFF, p.out->nbytes()), "cudaMemset (poison)");
  auto s = force == kAuto ? kb::kernels::launch_sampling(a, nullptr)
                          : kb::kernels::launch_sampling_with(a, forced_config(a, force), nullptr);
  if (!s) throw std::runtime_error(s.error().message);
  check_cuda(cudaGetLastError(), "after the launch");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::vector<std::int64_t> out(static_cast<std::size_t>(a.batch));
  if (a.samples_dtype == kb::DType::int64) {
    check_cuda(cudaMemcpy(out.data(), p.out->data(), p.out->nbytes(), cudaMemcpyDeviceToHost), "cudaMemcpy (samples)");
  } else {
    std::vector<std::int32_t> o32(out.size());
    check_cuda(cudaMemcpy(o32.data(), p.out->data(), p.out->nbytes(), cudaMemcpyDeviceToHost), "cudaMemcpy (samples)");
    std::copy(o32.begin(), o32.end(), out.begin());
  }
  if (!p.out->guards_intact()) throw std::runtime_error("the kernel wrote outside samples");
  return out;
}

kb::Tensor as_tensor(const std::vector<std::int64_t>& s, kb::DType dtype) {
  auto t = kb::Tensor::allocate(dtype, {static_cast<std::int64_t>(s.size())});
  if (!t) throw std::runtime_error(t.error().message);
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (dtype == kb::DType::int64) t->data<std::int64_t>()[i] = s[i];
    else t->data<std::int32_t>()[i] = static_cast<std::int32_t>(s[i]);
  }
  return std::move(*t);
}

// The first bad row of `draws` direct draws (seeded as evaluate_cuda seeds
// them), printed: a sample outside the reference's support, else the row
// with the largest token-level distance.
void diagnose(const kb::Definition& d, const kb::Workload& w, const std::string& root, int draws, int rounds,
              int force = kAuto, std::size_t probs_shift = 0) {
  auto p = prepare(d, w, root, probs_shift);
  const std::int64_t B = p->args.batch, V = p->args.vocab;
  std::vector<kb::Tensor> scratch;
  auto dist = kb::sampling_distribution(kb::OracleCall{d, p->m.axes, p->m.args, std::span<kb::Tensor>(scratch), 0});
  if (!dist) {
    std::printf("    diagnose: sampling_distribution: %s\n", dist.error().message.c_str());
    return;
  }
  std::vector<std::map<std::int64_t, int>> counts(static_cast<std::size_t>(B));
  for (int i = 0; i < draws; ++i) {
    auto s = draw(*p, kb::SamplingJudge::draw_seed(kSeed, i), rounds, force);
    for (std::int64_t r = 0; r < B; ++r) ++counts[static_cast<std::size_t>(r)][s[static_cast<std::size_t>(r)]];
  }
  std::int64_t worst = -1;
  double worst_tvd = -1;
  std::int64_t outside_row = -1;
  for (std::int64_t r = 0; r < B && outside_row < 0; ++r) {
    const auto& q = (*dist)[static_cast<std::size_t>(r)];
    double tvd = 0, seen = 0;
    for (auto [tok, n] : counts[static_cast<std::size_t>(r)]) {
      const double f = static_cast<double>(n) / draws;
      const double ref = tok >= 0 && tok < V ? q[static_cast<std::size_t>(tok)] : 0.0;
      if (ref == 0) outside_row = r;
      tvd += std::fabs(f - ref);
      seen += ref;
    }
    tvd = 0.5 * (tvd + (1 - seen));
    if (tvd > worst_tvd) worst_tvd = tvd, worst = r;
  }
  const std::int64_t r = outside_row >= 0 ? outside_row : worst;
  const auto& q = (*dist)[static_cast<std::size_t>(r)];
  const auto& cr = counts[static_cast<std::size_t>(r)];
  std::string k = "-", pp = "-";
  if (auto i = kb::input_index(d, "top_k")) k = std::to_string(static_cast<long long>(kb::element_as_double(*p->m.args[*i].tensor, r)));
  if (auto i = kb::input_index(d, "top_p")) pp = std::to_string(kb::element_as_double(*p->m.args[*i].tensor, r));
  std::int64_t support = 0;
  for (double x : q) support += x > 0;
  int outside = 0;
  for (auto [tok, n] : cr)
    if (tok < 0 || tok >= V || q[static_cast<std::size_t>(tok)] == 0) outside += n;
  std::printf("    diagnose (rounds %d, %s): row %lld: top_k %s top_p %s: support %lld of %lld tokens; %d of %d samples "
              "outside it; token-level TVD %.4f\n",
              rounds, path_name(force).c_str(), static_cast<long long>(r), k.c_str(), pp.c_str(), static_cast<long long>(support),
              static_cast<long long>(V), outside, draws, worst_tvd);
  std::vector<std::int64_t> order;
  for (std::int64_t t = 0; t < V; ++t)
    if (q[static_cast<std::size_t>(t)] > 0) order.push_back(t);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return q[static_cast<std::size_t>(a)] > q[static_cast<std::size_t>(b)]; });
  std::string line = "    reference's most likely (token: p, frequency):";
  for (std::size_t i = 0; i < order.size() && i < 6; ++i) {
    auto it = cr.find(order[i]);
    const int n = it == cr.end() ? 0 : it->second;
    char buf[96];
    std::snprintf(buf, sizeof buf, " %lld: %.4f, %.4f;", static_cast<long long>(order[i]), q[static_cast<std::size_t>(order[i])],
                  static_cast<double>(n) / draws);
    line += buf;
  }
  std::printf("%s\n", line.c_str());
  std::vector<std::pair<int, std::int64_t>> seen;
  for (auto [tok, n] : cr) seen.emplace_back(n, tok);
  std::sort(seen.rbegin(), seen.rend());
  line = "    most drawn (token: frequency, p):";
  for (std::size_t i = 0; i < seen.size() && i < 6; ++i) {
    const std::int64_t tok = seen[i].second;
    char buf[96];
    std::snprintf(buf, sizeof buf, " %lld: %.4f, %.4f;", static_cast<long long>(tok), static_cast<double>(seen[i].first) / draws,
                  tok >= 0 && tok < V ? q[static_cast<std::size_t>(tok)] : -1.0);
    line += buf;
  }
  std::printf("%s\n", line.c_str());
}

// ---- Part 1 and 4: through evaluate_cuda ------------------------------------------

void evaluate_case(const kb::Implementation& impl, const std::string& label, const kb::Definition& d,
                   const kb::Workload& w, const std::string& root, int draws) {
  const auto t0 = std::chrono::steady_clock::now();
  kb::BenchOptions opt;
  opt.trials = 1;
  opt.time = false;
  opt.seed = kSeed;
  opt.dataset_root = root;
  opt.sampling.draws = draws;
  std::string axes;
  for (const auto& [k, v] : w.axes) axes += " " + k + "=" + std::to_string(v);
  if (std::string why = impl.supports(d); !why.empty()) {
    std::printf("FAIL %s:%s: supports() refuses: %s\n", label.c_str(), axes.c_str(), why.c_str());
    ++g_failures;
    return;
  }
  auto r = g_dry ? kb::evaluate(d, w, impl, opt) : kb::evaluate_cuda(d, w, impl, opt);
  if (!r) {
    std::printf("FAIL %s:%s: not evaluable: %s\n", label.c_str(), axes.c_str(), r.error().message.c_str());
    ++g_failures;
    return;
  }
  const kb::Evaluation& ev = r->evaluation;
  const std::string extra = ev.correctness && ev.correctness->extra ? *ev.correctness->extra : "{}";
  const bool ok = ev.status == kb::EvalStatus::passed;
  std::printf("%s %s:%s draws=%d: %s %s (%.2f s)\n", ok ? "PASSED" : "FAIL", label.c_str(), axes.c_str(), draws,
              std::string(kb::eval_status_name(ev.status)).c_str(), ok ? extra.c_str() : r->summary.c_str(),
              seconds_since(t0));
  std::fflush(stdout);
  if (ok) {
    ++g_passes;
    return;
  }
  ++g_failures;
  if (g_dry) return;
  try {
    diagnose(d, w, root, draws, 32);
  } catch (const std::exception& e) {
    std::printf("    diagnose failed: %s\n", e.what());
  }
}

kb::Definition synthetic(const kb::Definition& base, const std::string& kind, std::int64_t vocab) {
  kb::Definition d = base;
  set_const(d, "vocab_size", vocab);
  d.name = "test_" + kind + "_v" + std::to_string(vocab);
  return d;
}

struct Templates {
  std::map<std::string, kb::Definition> by_kind;  // "top_k", "top_p", "top_k_top_p"
};

Templates load_templates(const fs::path& defs) {
  Templates t;
  t.by_kind["top_k"] = load_definition(defs / "top_k_sampling_from_probs_v128256.json");
  t.by_kind["top_p"] = load_definition(defs / "top_p_sampling_from_probs_v128256.json");
  t.by_kind["top_k_top_p"] = load_definition(defs / "top_k_top_p_sampling_from_probs_v128256.json");
  return t;
}

std::vector<Case> synthetic_cases(const Templates& t) {
  std::vector<Case> cases;
  int n = 0;
  auto add = [&](const std::string& kind, std::int64_t vocab, std::int64_t batch, Pattern pat, int draws = 1000) {
    Case c;
    c.d = synthetic(t.by_kind.at(kind), kind, vocab);
    c.vocab = vocab;
    c.batch = batch;
    c.pattern = pat;
    c.offset = n % 5;
    c.draws = draws;
    c.label = "case" + std::to_string(n++) + "_" + kind + "_v" + std::to_string(vocab) + "_b" + std::to_string(batch) +
              "_" + pattern_name(pat);
    cases.push_back(std::move(c));
    return &cases.back();
  };
  const char* kinds[] = {"top_k", "top_p", "top_k_top_p"};
  // Small vocabularies: every pattern on 64 rows (every top_k / top_p pair), a few rows, one row.
  for (const char* k : kinds) add(k, 1, 3, Pattern::random);
  for (const char* k : kinds) {
    add(k, 7, 64, Pattern::sparse);
    add(k, 7, 3, Pattern::flat);
  }
  for (const char* k : kinds) {
    for (Pattern p : {Pattern::random, Pattern::flat, Pattern::levels, Pattern::sparse}) add(k, 1000, 64, p);
    add(k, 1000, 1, Pattern::random);
  }
  // A vocabulary that is no multiple of 4 or 8: scalar loads in the streaming kernel, slice tails in the cluster
  // kernel, several tiles.
  for (const char* k : kinds) add(k, 1001, 64, Pattern::levels);
  for (const char* k : kinds) add(k, 32003, 3, Pattern::random);
  for (const char* k : kinds) {
    add(k, 32000, 64, Pattern::random);
    add(k, 32000, 1, Pattern::flat);
  }
  // The shipped vocabularies: a few rows each; one full 64-row batch.
  for (std::int64_t v : {128256, 151936, 262208})
    for (const char* k : kinds) {
      add(k, v, 3, Pattern::random);
      if (v == 262208 && std::string(k) == "top_p") add(k, v, 3, Pattern::flat);
      if (v == 151936 && std::string(k) == "top_k_top_p") add(k, v, 3, Pattern::levels);
    }
  add("top_k_top_p", 128256, 64, Pattern::random);
  add("top_k", 262208, 1, Pattern::sparse);
  // Other dtypes: bf16 / fp16 probs (16-byte loads of 8), fp16 top_p, int64 top_k, int32 samples.
  for (kb::DType dt : {kb::DType::bfloat16, kb::DType::float16})
    for (std::int64_t v : {1000, 1001, 32000}) {
      Case* c = add("top_k_top_p", v, 64, v == 1001 ? Pattern::levels : Pattern::random);
      spec(c->d, "probs").dtype = dt;
      c->label += dt == kb::DType::bfloat16 ? "_bf16" : "_fp16";
      c->d.name += dt == kb::DType::bfloat16 ? "_bf16" : "_fp16";
    }
  {
    Case* c = add("top_k_top_p", 1000, 64, Pattern::flat);
    spec(c->d, "top_p").dtype = kb::DType::float16;
    spec(c->d, "top_k").dtype = kb::DType::int64;
    spec(c->d, "samples").dtype = kb::DType::int32;
    c->label += "_fp16p_i64k_i32out";
    c->d.name += "_fp16p_i64k_i32out";
  }
  return cases;
}

// ---- Part 2: each kernel forced: the exact search, every cluster size, misaligned rows ----

void judge_direct(const Case& c, int rounds, std::size_t probs_shift, int force) {
  const auto t0 = std::chrono::steady_clock::now();
  const kb::Workload w = workload_for(c);
  auto p = prepare(c.d, w, g_blobs.string(), probs_shift);
  kb::SamplingOptions so;
  so.draws = c.draws;
  auto judge = kb::SamplingJudge::create(c.d, p->m.axes, p->m.args, so);
  if (!judge) throw std::runtime_error(c.label + ": judge: " + judge.error().message);
  std::optional<kb::SamplingVerdict> bad;
  int i = 0;
  for (; i < c.draws && !bad; ++i) {
    kb::Tensor t = as_tensor(draw(*p, kb::SamplingJudge::draw_seed(kSeed, i), rounds, force), c.d.outputs[0].dtype);
    bad = judge->add(std::span<const kb::Tensor>(&t, 1));
  }
  kb::SamplingVerdict v = bad ? *bad : judge->finish();
  const bool ok = v.status == kb::EvalStatus::passed;
  std::printf("%s %s %s rounds=%d shift=%zu: %s%s (%.2f s)\n", ok ? "PASSED" : "FAIL", c.label.c_str(),
              path_name(force).c_str(), rounds, probs_shift, bad ? ("call " + std::to_string(i - 1) + ": ").c_str() : "", v.detail.c_str(),
              seconds_since(t0));
  std::fflush(stdout);
  if (ok) {
    ++g_passes;
    return;
  }
  ++g_failures;
  diagnose(c.d, w, g_blobs.string(), c.draws, rounds, force, probs_shift);
}

const char* dtype_suffix(kb::DType t) {
  return t == kb::DType::bfloat16 ? "_bf16" : t == kb::DType::float16 ? "_fp16" : "";
}

Case direct_case(const Templates& t, const std::string& kind, std::int64_t vocab, std::int64_t batch, Pattern pat,
                 kb::DType dtype, const std::string& tag) {
  Case c;
  c.d = synthetic(t.by_kind.at(kind), kind, vocab);
  spec(c.d, "probs").dtype = dtype;
  c.d.name += dtype_suffix(dtype);
  c.vocab = vocab;
  c.batch = batch;
  c.pattern = pat;
  c.offset = static_cast<int>(vocab % 5);
  c.label = tag + "_" + kind + "_v" + std::to_string(vocab) + "_b" + std::to_string(batch) + "_" + pattern_name(pat) +
            dtype_suffix(dtype);
  return c;
}

void paths(const Templates& t) {
  const char* kinds[] = {"top_k", "top_p", "top_k_top_p"};
  const kb::DType f32 = kb::DType::float32, f16 = kb::DType::float16, bf16 = kb::DType::bfloat16;
  // The exact search on its own (rounds 0, launch_sampling's choice: the cluster kernel for these rows) and after
  // one rejection round (rounds 1, the streaming kernel), alternating over the kinds so each shape gets both.
  for (int k = 0; k < 3; ++k) {
    int shape = 0;
    for (auto [v, b, pat] : {std::tuple{std::int64_t{1000}, std::int64_t{64}, Pattern::levels},
                             std::tuple{std::int64_t{1000}, std::int64_t{64}, Pattern::flat},
                             std::tuple{std::int64_t{1001}, std::int64_t{64}, Pattern::sparse},
                             std::tuple{std::int64_t{128256}, std::int64_t{3}, Pattern::random}}) {
      const Case c = direct_case(t, kinds[k], v, b, pat, f32, "exact");
      if ((k + shape++) % 2 == 0) judge_direct(c, 0, 0, kAuto);
      else judge_direct(c, 1, 0, kStreaming);
    }
  }
  // Rows off their 16-byte alignment: the streaming kernel's scalar loads, the cluster kernel's slice heads.
  judge_direct(direct_case(t, "top_k", 128256, 3, Pattern::random, f32, "misaligned"), 32, 4, kStreaming);
  judge_direct(direct_case(t, "top_p", 128256, 3, Pattern::random, f32, "misaligned"), 32, 4, kAuto);
  // The cluster kernel at every size: 32003 elements (no multiple of 4, 8 or of any cluster size 2..8; rows after
  // the first misaligned), 25 rows (every top_k / top_p pair), each dtype, tied rows through the exact search
  // (ties across the slices: the cluster-wide nth_equal), the rejection rounds on the others.
  struct Sized {
    int cluster;
    const char* kind;
    kb::DType dtype;
    Pattern pat;
    int rounds;
    std::size_t shift;
  };
  const Sized sized[] = {
      {1, "top_k_top_p", f32, Pattern::levels, 0, 0}, {2, "top_p", bf16, Pattern::flat, 0, 0},
      {3, "top_k", f16, Pattern::levels, 1, 0},       {4, "top_k_top_p", f32, Pattern::flat, 0, 4},
      {5, "top_p", f16, Pattern::random, 32, 0},      {6, "top_k", bf16, Pattern::flat, 0, 2},
      {7, "top_k_top_p", bf16, Pattern::levels, 1, 0}, {8, "top_k_top_p", f32, Pattern::sparse, 0, 0},
  };
  for (const Sized& z : sized) {
    const Case c = direct_case(t, z.kind, 32003, 25, z.pat, z.dtype, "cluster" + std::to_string(z.cluster));
    judge_direct(c, z.rounds, z.shift, z.cluster);
  }
  // Fewer elements than CTAs (empty slices), and large rows over many CTAs.
  for (int rounds : {0, 32})
    judge_direct(direct_case(t, "top_k_top_p", 7, 25, Pattern::flat, f32, "cluster8_r" + std::to_string(rounds)),
                 rounds, 0, 8);
  judge_direct(direct_case(t, "top_k_top_p", 262208, 3, Pattern::levels, f32, "cluster5"), 0, 0, 5);
  judge_direct(direct_case(t, "top_k_top_p", 262208, 3, Pattern::random, bf16, "cluster8"), 32, 0, 8);
  // The streaming kernel: scalar loads (32003, 1001) and 16-byte loads of 8 (32000 bfloat16).
  judge_direct(direct_case(t, "top_k_top_p", 32003, 25, Pattern::levels, f32, "streaming"), 32, 0, kStreaming);
  judge_direct(direct_case(t, "top_p", 32000, 25, Pattern::random, bf16, "streaming"), 0, 0, kStreaming);
  judge_direct(direct_case(t, "top_k", 1001, 25, Pattern::flat, f16, "streaming"), 1, 0, kStreaming);
  // A configuration that does not fit the arguments is refused, not launched.
  const Case c = direct_case(t, "top_k", 1001, 3, Pattern::random, f32, "refused");
  auto p = prepare(c.d, workload_for(c), g_blobs.string());
  kb::kernels::SamplingConfig bad = kb::kernels::sampling_cluster_config(1001, 4, 2);
  bad.slice -= 4;  // the slices no longer cover the row
  kb::kernels::SamplingConfig nine = kb::kernels::sampling_cluster_config(1001, 4, 9);
  kb::kernels::SamplingConfig vec = kb::kernels::sampling_stream_config(1004, 4, true);  // 16-byte loads on 1001
  bool refused = true;
  for (const auto& cfg : {bad, nine, vec}) {
    auto st = kb::kernels::launch_sampling_with(p->args, cfg, nullptr);
    refused = refused && !st && st.error().code == kb::Code::invalid_argument;
  }
  std::printf("%s refused configurations: a short slice, a cluster of 9, 16-byte loads on 1001 elements\n",
              refused ? "PASSED" : "FAIL");
  refused ? ++g_passes : ++g_failures;
}

// ---- Part 3: determinism and a row without mass ----------------------------------------

void determinism(const Templates& t) {
  Case c;
  c.d = synthetic(t.by_kind.at("top_k_top_p"), "top_k_top_p", 1000);
  c.vocab = 1000;
  c.batch = 64;
  c.pattern = Pattern::flat;
  c.label = "determinism_top_k_top_p_v1000_b64_flat";
  const kb::Workload w = workload_for(c);
  for (int rounds : {32, 0}) {
    auto p = prepare(c.d, w, g_blobs.string());
    const auto a = draw(*p, 12345, rounds), b = draw(*p, 12345, rounds), x = draw(*p, 12346, rounds);
    std::int64_t same = 0, differ = 0, unfiltered_rows = 0;
    for (std::size_t r = 0; r < a.size(); ++r) {
      same += a[r] == b[r];
      differ += a[r] != x[r];
      // Rows where more than 50 tokens are kept (their samples can differ between seeds).
      unfiltered_rows += row_k(c, static_cast<std::int64_t>(r)) != 1 && row_k(c, static_cast<std::int64_t>(r)) != 2 &&
                         row_p(c, static_cast<std::int64_t>(r)) > 0.1;
    }
    const bool ok = same == static_cast<std::int64_t>(a.size()) && differ > 0;
    std::printf("%s %s rounds=%d: seed 12345 twice: %lld of %zu rows equal; seed 12346: %lld rows differ (of %lld "
                "rows keeping > 2 tokens)\n",
                ok ? "PASSED" : "FAIL", c.label.c_str(), rounds, static_cast<long long>(same), a.size(),
                static_cast<long long>(differ), static_cast<long long>(unfiltered_rows));
    ok ? ++g_passes : ++g_failures;
  }
  // A row of zeros: sample -1; the other rows sample inside the vocabulary.
  for (const char* kind : {"top_k", "top_p", "top_k_top_p"}) {
    Case z;
    z.d = synthetic(t.by_kind.at(kind), kind, 4096);
    z.vocab = 4096;
    z.batch = 8;
    z.pattern = Pattern::zero_row;
    z.offset = 0;
    z.label = std::string("zero_row_") + kind + "_v4096_b8";
    const kb::Workload zw = workload_for(z);
    for (int rounds : {32, 0}) {
      auto p = prepare(z.d, zw, g_blobs.string());
      const auto s = draw(*p, 7, rounds);
      bool ok = true;
      std::string got;
      for (std::size_t r = 0; r < s.size(); ++r) {
        const bool argmax_row = has_input(z.d, "top_p") && row_p(z, static_cast<std::int64_t>(r)) <= 0;
        // Row 1 has no mass; with top_p 0 the reference takes the argmax (index 0 of a zero row).
        const std::int64_t want_lo = r == 1 ? (argmax_row ? 0 : -1) : 0;
        const std::int64_t want_hi = r == 1 ? want_lo : z.vocab - 1;
        ok = ok && s[r] >= want_lo && s[r] <= want_hi;
        got += " " + std::to_string(s[r]);
      }
      std::printf("%s %s rounds=%d: samples%s (row 1 has no mass: -1, or 0 where top_p <= 0 asks for the argmax)\n",
                  ok ? "PASSED" : "FAIL", z.label.c_str(), rounds, got.c_str());
      ok ? ++g_passes : ++g_failures;
    }
  }
}

// ---- Part 4: the shipped definitions ---------------------------------------------------

void shipped(const kb::Implementation& impl, const fs::path& shared) {
  const fs::path defs = shared / "flashinfer-trace" / "definitions" / "sampling";
  const fs::path wls = shared / "flashinfer-trace" / "workloads" / "sampling";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(defs))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw std::runtime_error("no sampling definitions under " + defs.string());
  for (const auto& f : files) {
    const kb::Definition d = load_definition(f);
    kb::Workload w;
    std::string from = "4 rows of kb's inputs (no workload shipped)";
    const fs::path wfile = wls / (d.name + ".jsonl");
    bool found = false;
    if (fs::exists(wfile)) {
      std::ifstream in(wfile);
      std::string line;
      std::int64_t best = -1;
      int n = 0;
      while (std::getline(in, line)) {
        ++n;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        auto t = kb::read_trace(line, wfile.string() + ":" + std::to_string(n));
        if (!t) throw std::runtime_error("cannot read workload: " + t.error().message);
        std::int64_t b = 0;
        for (const auto& [k, v] : t->workload.axes)
          if (k == "batch_size") b = v;
        if (best < 0 || b < best) best = b, w = t->workload, found = true;
      }
      from = "its smallest shipped workload";
    }
    if (!found) {
      w.uuid = "kb-4-rows";
      w.axes = {{"batch_size", 4}};
      for (const auto& t : d.inputs) w.inputs.emplace_back(t.name, kb::InputSpec{});
    }
    evaluate_case(impl, d.name + " (" + from + ")", d, w, (shared / "flashinfer-trace").string(), 1000);
  }
}

// No device: the cases of parts 1 and 4 judged with kb_cpu_sampling on the CPU.
int dry_run() {
  const char* env = std::getenv("KB_SHARED_DIR");
  const fs::path shared = fs::path(env && *env ? env : "../shared");
  kb::Registry reg;
  kb::kernels::add_sampling_cpu(reg);
  const kb::Implementation* impl = reg.find("kb_cpu_sampling");
  char tmpl[] = "/tmp/kb_test_cuda_sampling_XXXXXX";
  if (!impl || !mkdtemp(tmpl)) return 1;
  g_blobs = tmpl;
  const auto t0 = std::chrono::steady_clock::now();
  int rc = 0;
  try {
    const Templates t = load_templates(shared / "flashinfer-trace" / "definitions" / "sampling");
    for (const Case& c : synthetic_cases(t))
      evaluate_case(*impl, c.label, c.d, workload_for(c), g_blobs.string(), c.draws);
    shipped(*impl, shared);
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    rc = 1;
  }
  std::error_code ec;
  fs::remove_all(g_blobs, ec);
  if (rc) return rc;
  std::printf("dry run (kb_cpu_sampling): %d passed, %d failed (%.1f s)\n", g_passes, g_failures, seconds_since(t0));
  return g_failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--dry-run") {
      g_dry = true;
    } else {
      std::printf("usage: %s [--dry-run]\n", argv[0]);
      return 2;
    }
  }
  if (g_dry) return dry_run();
  if (int rc = kb_gpu_test::require_device()) return rc;
  const char* env = std::getenv("KB_SHARED_DIR");
  const fs::path shared = fs::path(env && *env ? env : "../shared");
  kb::Registry reg;
  kb::kernels::add_sampling_cuda(reg);
  const kb::Implementation* impl = reg.find("kb_cuda_sampling");
  if (!impl) {
    std::printf("FAIL: kb_cuda_sampling is not registered\n");
    return 1;
  }
  char tmpl[] = "/tmp/kb_test_cuda_sampling_XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::printf("FAIL: mkdtemp\n");
    return 1;
  }
  g_blobs = tmpl;
  const auto t0 = std::chrono::steady_clock::now();
  int rc = 0;
  try {
    const Templates t = load_templates(shared / "flashinfer-trace" / "definitions" / "sampling");
    determinism(t);  // first: small, and a kernel-image mismatch skips here
    std::printf("-- determinism done (%.1f s)\n", seconds_since(t0));
    paths(t);
    std::printf("-- forced kernels done (%.1f s)\n", seconds_since(t0));
    for (const Case& c : synthetic_cases(t))
      evaluate_case(*impl, c.label, c.d, workload_for(c), g_blobs.string(), c.draws);
    std::printf("-- synthetic definitions done (%.1f s)\n", seconds_since(t0));
    shipped(*impl, shared);
    std::printf("-- shipped definitions done (%.1f s)\n", seconds_since(t0));
    check_cuda(cudaDeviceSynchronize(), "final cudaDeviceSynchronize");
  } catch (const SkipTest& s) {
    std::printf("skipped: no usable CUDA device (%s)\n", s.reason.c_str());
    rc = 77;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    rc = 1;
  }
  std::error_code ec;
  fs::remove_all(g_blobs, ec);
  if (rc) return rc;
  std::printf("%s: %d passed, %d failed (%.1f s)\n", g_failures ? "FAILED" : "all passed", g_passes, g_failures,
              seconds_since(t0));
  return g_failures ? 1 : 0;
}
