// kb_cuda_dsa_sparse_attention and kb_cuda_dsa_topk_indexer (kernels/dsa_paged/cuda) judged against kb's CPU
// oracle, the indexer by its selection (lib/harness/dsa_judge.hpp: distinct reachable indices, sorted scores).
//
// Part 1, ranges: definitions derived from the bundled ones (kernels/dsa_paged/definitions) with their constants set
// per case (heads 3..128, head_dim_ckv 64..2048, top-k 64..2048, page sizes 1/16/64, batch 1..32), inputs from kb's
// materialize() and then reshaped where the case says: -1 scattered through the index rows (a row of only -1, a row
// with one index), repeated indices, sequences of length 0 and exactly top-k, weights 0 (all scores tie) or
// negative. Device tensors sit between guard bytes; inputs must come back unchanged.
// Part 2, through kb's harness (kb::evaluate on CUDA, the CPU oracle, two trials): every bundled definition's
// workloads and every shipped definition (KB_SHARED_DIR) on small var axes.
// One line per case: name, shape, PASSED/FAIL and the numbers. Exit 0 all passed, 1 a failure, 77 skipped (no
// usable CUDA device).
// usage: test_cuda_dsa [--dry-run]: with --dry-run, no device is touched and kb's CPU solution (kb_cpu_dsa_paged)
// stands in for the CUDA ones, judged the same way (checks the cases themselves and their cost on any machine).
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
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../kernels/dsa_paged/cuda/dsa_cuda.hpp"
#include "cuda/device.hpp"
#include "device_buffer.hpp"
#include "gpu_test_support.hpp"
#include "harness/dsa_judge.hpp"
#include "harness/harness.hpp"
#include "harness/implementation.hpp"
#include "inputs/inputs.hpp"
#include "schema/io.hpp"

namespace kb::kernels {
void add_dsa_paged_cuda(Registry& r);
}  // namespace kb::kernels

namespace fs = std::filesystem;
using kb_gpu_test::DeviceBuffer;

namespace {

using kb_gpu_test::check_cuda;
using kb_gpu_test::load_definition;
using kb_gpu_test::set_const;

int g_failures = 0;
bool g_dry = false;

using kb_gpu_test::SkipTest;

kb::Workload workload(const kb::Definition& d, std::vector<std::pair<std::string, std::int64_t>> axes, double scalar) {
  kb::Workload w;
  w.uuid = "gpu-test-dsa";
  w.axes = std::move(axes);
  for (const auto& t : d.inputs) {
    kb::InputSpec s;
    if (t.is_scalar()) {
      s.kind = kb::InputKind::scalar;
      s.value = scalar;
    }
    w.inputs.emplace_back(t.name, s);
  }
  return w;
}

kb::Tensor& input(kb::Materialized& m, const kb::Definition& d, const char* name) {
  auto i = kb::input_index(d, name);
  if (!i) throw std::runtime_error(d.name + ": no input " + name);
  return m.tensors[*i];
}

struct Outcome {
  bool ok = true;
  std::string detail;
  double max_abs = 0, max_rel = 0;
  int splits = 0;
};

// Materialize, let `shape_inputs` change the inputs, run the CPU oracle, run the CUDA solution on guarded device
// copies, judge every output with the harness's rule for this definition (judge_output).
Outcome run_case(const kb::Implementation& impl, const kb::Definition& d, const kb::Workload& w, std::uint64_t seed,
                 const std::function<void(kb::Materialized&)>& shape_inputs) {
  Outcome out;
  auto fail = [&](std::string why) {
    out.ok = false;
    if (out.detail.empty()) out.detail = std::move(why);
    return out;
  };
  if (auto why = impl.supports(d); !why.empty()) return fail("supports() refused: " + why);
  auto m = kb::materialize(d, w, kb::MaterializeOptions{seed, std::nullopt});
  if (!m) return fail("materialize: " + m.error().message);
  if (shape_inputs) shape_inputs(*m);
  kb::rebind_args(*m);
  auto expected = kb::allocate_outputs(d, m->axes);
  if (!expected) return fail("allocate_outputs: " + expected.error().message);
  auto oracle = kb::find_oracle(d);
  if (!oracle) return fail("oracle: " + oracle.error().message);
  if (auto st = (*oracle)->run(kb::OracleCall{d, m->axes, m->args, *expected, seed}); !st)
    return fail("oracle run: " + st.error().message);
  const kb::Tolerance tol = kb::TolerancePolicy().for_definition(d.op_type, d.name);

  if (g_dry) {
    const kb::Implementation* cpu = kb::builtin_registry().find("kb_cpu_dsa_paged");
    if (!cpu) return fail("kb_cpu_dsa_paged not registered");
    auto got = kb::allocate_outputs(d, m->axes);
    if (!got) return fail("allocate_outputs: " + got.error().message);
    if (auto st = cpu->run(kb::ImplementationCall{d, m->axes, m->args, *got, seed}); !st)
      return fail("kb_cpu_dsa_paged: " + st.error().message);
    for (std::size_t i = 0; i < expected->size(); ++i) {
      kb::Comparison c = kb::judge_output(d, m->args, i, (*got)[i], (*expected)[i], tol);
      out.max_abs = std::max(out.max_abs, c.max_abs);
      out.max_rel = std::max(out.max_rel, c.max_rel);
      if (c.verdict != kb::Comparison::Verdict::match)
        fail("output " + d.outputs[i].name + ": " + std::to_string(c.mismatched) + " of " + std::to_string(c.total) +
             " off: " + c.detail);
    }
    return out;
  }

  // Outputs poisoned: NaN, or index -1.
  kb_gpu_test::GuardedCall call(*m, *expected);
  if (kb::Status st = call.run(impl, d, m->axes); !st) return fail("run_cuda: " + st.error().message);
  if (std::string why = call.inputs_intact(*m, d); !why.empty()) return fail(why);
  for (std::size_t i = 0; i < expected->size(); ++i) {
    const kb::Tensor& want = (*expected)[i];
    auto got = call.output(i, want, d);
    if (!got) return fail(got.error().message);
    kb::Comparison c = kb::judge_output(d, m->args, i, *got, want, tol);
    out.max_abs = std::max(out.max_abs, c.max_abs);
    out.max_rel = std::max(out.max_rel, c.max_rel);
    if (c.verdict != kb::Comparison::Verdict::match)
      fail("output " + d.outputs[i].name + ": " + std::to_string(c.mismatched) + " of " + std::to_string(c.total) +
           " off: " + c.detail);
  }
  return out;
}

void report(const std::string& name, const std::string& shape, const Outcome& o, double seconds) {
  std::printf("%-44s %-66s %s max_abs %.3g max_rel %.3g (%.2f s)%s%s\n", name.c_str(), shape.c_str(),
              o.ok ? "PASSED" : "FAIL  ", o.max_abs, o.max_rel, seconds, o.ok ? "" : ": ", o.detail.c_str());
  std::fflush(stdout);
  if (!o.ok) ++g_failures;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- sparse attention --------------------------------------------------------------------------

enum class Pad { tail, scattered, empty_rows, repeated };

struct AttnCase {
  std::int64_t heads, ckv, kpe, topk, page_size, tokens, pages;
  Pad pad;
  kb::DType dtype = kb::DType::bfloat16;
};

const char* pad_name(Pad p) {
  switch (p) {
    case Pad::tail: return "kb's rows";
    case Pad::scattered: return "-1 scattered (~30%)";
    case Pad::empty_rows: return "rows of only -1 / one index";
    case Pad::repeated: return "repeated indices";
  }
  return "";
}

void attention_case(const kb::Implementation& impl, const kb::Definition& base, const AttnCase& c, std::uint64_t seed) {
  kb::Definition d = base;
  set_const(d, "num_qo_heads", c.heads);
  set_const(d, "head_dim_ckv", c.ckv);
  set_const(d, "head_dim_kpe", c.kpe);
  set_const(d, "topk", c.topk);
  set_const(d, "page_size", c.page_size);
  if (c.dtype != kb::DType::bfloat16)
    for (auto* list : {&d.inputs, &d.outputs})
      for (auto& t : *list)
        if (t.dtype == kb::DType::bfloat16) t.dtype = c.dtype;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.ckv / 4 + c.kpe));
  auto w = workload(d, {{"num_tokens", c.tokens}, {"num_pages", c.pages}}, scale);
  const std::int64_t rows = c.pages * c.page_size;
  auto shape_inputs = [&](kb::Materialized& m) {
    kb::Tensor& idx = input(m, d, "sparse_indices");
    auto* v = idx.data<std::int32_t>();
    std::mt19937_64 rng(seed);
    for (std::int64_t t = 0; t < c.tokens; ++t) {
      std::int32_t* row = v + t * c.topk;
      switch (c.pad) {
        case Pad::tail: break;
        case Pad::scattered:
          for (std::int64_t j = 0; j < c.topk; ++j)
            if (rng() % 10 < 3) row[j] = -1;
          break;
        case Pad::empty_rows:
          if (t % 3 == 0) std::fill(row, row + c.topk, -1);
          if (t % 3 == 1) {
            const std::int32_t keep = row[0];
            std::fill(row, row + c.topk, -1);
            row[c.topk / 2] = keep;
          }
          break;
        case Pad::repeated:
          for (std::int64_t j = 0; j < c.topk; ++j) row[j] = static_cast<std::int32_t>(rng() % std::min<std::int64_t>(rows, 5));
          break;
      }
    }
  };
  char shape[160];
  const bool mma = kb::kernels::dsa_sparse_attention_uses_mma(c.dtype, c.dtype, c.ckv, c.kpe);
  std::snprintf(shape, sizeof shape, "H%lld ckv%lld kpe%lld k%lld ps%lld T%lld rows%lld %s%s [%s]", (long long)c.heads,
                (long long)c.ckv, (long long)c.kpe, (long long)c.topk, (long long)c.page_size, (long long)c.tokens,
                (long long)rows, pad_name(c.pad), c.dtype == kb::DType::float16 ? " fp16" : "", mma ? "mma" : "fp32");
  const auto t0 = std::chrono::steady_clock::now();
  Outcome o = run_case(impl, d, w, seed, shape_inputs);
  report("dsa sparse attention", shape, o, since(t0));
}

// ---- top-k indexer -----------------------------------------------------------------------------

enum class Lens { kb, edges, ties, negative };

struct IndexCase {
  std::int64_t heads, dim, page_size, topk, batch, max_pages, pages;
  Lens lens;
};

void indexer_case(const kb::Implementation& impl, const kb::Definition& base, const IndexCase& c, std::uint64_t seed) {
  kb::Definition d = base;
  set_const(d, "num_index_heads", c.heads);
  set_const(d, "index_head_dim", c.dim);
  set_const(d, "page_size", c.page_size);
  set_const(d, "topk", c.topk);
  set_const(d, "head_dim_with_scale", c.dim + 4);
  auto w = workload(d, {{"batch_size", c.batch}, {"max_num_pages", c.max_pages}, {"num_pages", c.pages}}, 0.0);
  const char* what = "kb's seq_lens";
  auto shape_inputs = [&](kb::Materialized& m) {
    auto* lens = input(m, d, "seq_lens").data<std::int32_t>();
    auto* wts = input(m, d, "weights").data<float>();
    const std::int64_t cap = std::min(c.max_pages, c.pages) * c.page_size;
    switch (c.lens) {
      case Lens::kb: break;
      case Lens::edges: {
        // 0, exactly top-k, top-k + 1, 1, the whole table: the select's boundaries.
        const std::int64_t want[] = {0, c.topk, c.topk + 1, 1, cap};
        for (std::int64_t b = 0; b < c.batch; ++b) lens[b] = static_cast<std::int32_t>(std::min(cap, want[b % 5]));
        break;
      }
      case Lens::ties:  // sequence 0 and every third: all scores 0
        for (std::int64_t b = 0; b < c.batch; b += 3)
          for (std::int64_t h = 0; h < c.heads; ++h) wts[b * c.heads + h] = 0.0f;
        for (std::int64_t b = 0; b < c.batch; ++b) lens[b] = static_cast<std::int32_t>(cap);
        break;
      case Lens::negative:  // negative weights: negative and zero scores
        for (std::int64_t i = 0; i < c.batch * c.heads; ++i) wts[i] = -std::fabs(wts[i]);
        break;
    }
  };
  switch (c.lens) {
    case Lens::kb: break;
    case Lens::edges: what = "seq_lens 0, k, k+1, 1, all"; break;
    case Lens::ties: what = "weights 0 (ties) on every 3rd"; break;
    case Lens::negative: what = "negative weights"; break;
  }
  char shape[160];
  std::snprintf(shape, sizeof shape, "H%lld D%lld ps%lld k%lld B%lld max_pages%lld pages%lld %s", (long long)c.heads,
                (long long)c.dim, (long long)c.page_size, (long long)c.topk, (long long)c.batch,
                (long long)c.max_pages, (long long)c.pages, what);
  const auto t0 = std::chrono::steady_clock::now();
  Outcome o = run_case(impl, d, w, seed, shape_inputs);
  report("dsa top-k indexer", shape, o, since(t0));
}

// ---- through the harness -------------------------------------------------------------------------

void harness_case(const kb::Implementation& impl, const kb::Definition& d, const kb::Workload& w, const std::string& label) {
  kb::BenchOptions opt;
  opt.trials = 2;
  opt.time = false;
  opt.cpu_oracle_only = true;
  const auto t0 = std::chrono::steady_clock::now();
  const kb::Implementation* cpu = kb::builtin_registry().find("kb_cpu_dsa_paged");
  if (g_dry && !cpu) throw std::runtime_error("kb_cpu_dsa_paged not registered");
  if (g_dry && !impl.supports(d).empty()) throw std::runtime_error(d.name + ": " + impl.supports(d));
  auto r = kb::evaluate(d, w, g_dry ? *cpu : impl, opt);
  Outcome o;
  o.ok = r && r->evaluation.status == kb::EvalStatus::passed;
  if (!o.ok) o.detail = r ? r->summary : r.error().message;
  if (r && r->evaluation.correctness) {
    o.max_abs = r->evaluation.correctness->max_absolute_error;
    o.max_rel = r->evaluation.correctness->max_relative_error;
  }
  std::string axes;
  for (const auto& [k, v] : w.axes) axes += k + "=" + std::to_string(v) + " ";
  report(d.name, label + ": " + axes, o, since(t0));
}

std::vector<kb::Workload> bundled_workloads(const fs::path& file) {
  std::vector<kb::Workload> out;
  std::ifstream in(file);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    auto t = kb::read_trace(line, file.string() + ":" + std::to_string(n));
    if (!t) throw std::runtime_error(t.error().message);
    out.push_back(t->workload);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--dry-run") g_dry = true;
    else {
      std::printf("usage: test_cuda_dsa [--dry-run]\n");
      return 2;
    }
  }
  auto n = kb::cuda::device_count();
  if (!g_dry && (!n || *n == 0)) {
    std::printf("skipped: no CUDA device (%s)\n", n ? "none found" : n.error().message.c_str());
    return 77;
  }
  const char* shared_env = std::getenv("KB_SHARED_DIR");
  const char* source_env = std::getenv("KB_SOURCE_DIR");
  const fs::path shared = shared_env && *shared_env ? shared_env : "../shared";
  const fs::path source = source_env && *source_env ? source_env : ".";
  const fs::path bundled = source / "kernels" / "dsa_paged";
  kb::Registry reg;
  kb::kernels::add_dsa_paged_cuda(reg);
  const kb::Implementation* attn = reg.find("kb_cuda_dsa_sparse_attention");
  const kb::Implementation* index = reg.find("kb_cuda_dsa_topk_indexer");
  if (!attn || !index) {
    std::printf("FAIL: kb_cuda_dsa_sparse_attention / kb_cuda_dsa_topk_indexer not registered\n");
    return 1;
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    const kb::Definition attn_base = load_definition(bundled / "definitions" / "dsa_sparse_attention_h4_ckv64_kpe16_topk64_ps16.json");
    const kb::Definition index_base = load_definition(bundled / "definitions" / "dsa_topk_indexer_fp8_h8_d32_topk64_ps16.json");

    // Part 1: ranges.
    const AttnCase attn_cases[] = {
        {4, 64, 16, 64, 1, 1, 100, Pad::tail},
        {16, 512, 64, 2048, 64, 2, 64, Pad::tail},          // every index valid, split over many CTAs
        {16, 512, 64, 2048, 1, 3, 3000, Pad::scattered},
        {16, 512, 64, 2048, 64, 2, 11, Pad::tail},          // 704 rows: the rest of each row -1
        {128, 512, 64, 256, 16, 2, 40, Pad::scattered},     // 8 head groups
        {8, 512, 64, 512, 64, 32, 32, Pad::scattered},      // batch 32
        {12, 256, 32, 100, 16, 5, 20, Pad::empty_rows},     // heads not a multiple of 8, k not of 32
        {20, 1024, 64, 128, 16, 3, 16, Pad::scattered},     // two column pairs a thread
        {6, 2048, 64, 64, 1, 2, 300, Pad::tail},            // four column pairs a thread
        {3, 66, 10, 70, 1, 4, 200, Pad::scattered},         // dims not multiples of 8: 4-byte gathers
        {16, 512, 64, 1024, 16, 6, 100, Pad::empty_rows},
        {16, 512, 64, 512, 1, 2, 600, Pad::repeated},
        {16, 512, 64, 256, 16, 3, 30, Pad::scattered, kb::DType::float16},
        {64, 512, 64, 2048, 64, 1, 40, Pad::scattered},
        {16, 768, 64, 256, 16, 2, 30, Pad::scattered},      // fp32 kernel, 16 heads, two column pairs a thread
        {4, 128, 32, 64, 1, 3, 200, Pad::empty_rows},       // tensor cores with 12 of 16 head rows padding
    };
    std::uint64_t seed = 0x6b62;
    for (const AttnCase& c : attn_cases) attention_case(*attn, attn_base, c, seed++);

    const IndexCase index_cases[] = {
        {8, 32, 16, 64, 4, 10, 20, Lens::kb},
        {64, 128, 64, 2048, 3, 64, 80, Lens::kb},        // up to 4096 tokens
        {64, 128, 64, 2048, 5, 33, 40, Lens::edges},     // around top-k: 0, k, k+1, 1, 2112
        {4, 16, 1, 64, 32, 200, 256, Lens::kb},          // page size 1, batch 32
        {128, 64, 16, 512, 5, 100, 120, Lens::edges},    // two head passes
        {20, 36, 16, 100, 3, 30, 40, Lens::ties},        // dim 36: rows of 4 mod 8 floats
        {64, 128, 64, 2048, 4, 48, 60, Lens::negative},
        {64, 128, 64, 2048, 1, 512, 520, Lens::kb},      // up to 32768 tokens
        {16, 128, 16, 64, 7, 9, 12, Lens::ties},
    };
    for (const IndexCase& c : index_cases) indexer_case(*index, index_base, c, seed++);

    // Part 2: kb's harness on CUDA. The bundled definitions' workloads:
    for (const char* name : {"dsa_sparse_attention_h4_ckv64_kpe16_topk64_ps1", "dsa_sparse_attention_h4_ckv64_kpe16_topk64_ps16",
                             "dsa_topk_indexer_fp8_h8_d32_topk64_ps16"}) {
      const kb::Definition d = load_definition(bundled / "definitions" / (std::string(name) + ".json"));
      const kb::Implementation& impl = kb::input_index(d, "sparse_indices") ? *attn : *index;
      for (const kb::Workload& w : bundled_workloads(bundled / "workloads" / (std::string(name) + ".jsonl")))
        harness_case(impl, d, w, "bundled workload");
    }
    // The shipped definitions (no shipped workloads): small var axes.
    const fs::path defs = shared / "flashinfer-trace" / "definitions" / "dsa_paged";
    for (const auto& [name, ps] : {std::pair{"dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps1", 1},
                                   std::pair{"dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64", 64}}) {
      const kb::Definition d = load_definition(defs / (std::string(name) + ".json"));
      harness_case(*attn, d, workload(d, {{"num_tokens", 1}, {"num_pages", 4096 / ps}}, 0.0721), "full rows");
      harness_case(*attn, d, workload(d, {{"num_tokens", 4}, {"num_pages", 700 / ps + 1}}, 0.0721), "padded rows");
    }
    {
      const kb::Definition d = load_definition(defs / "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64.json");
      harness_case(*index, d, workload(d, {{"batch_size", 2}, {"max_num_pages", 32}, {"num_pages", 40}}, 0.0),
                   "at most top-k tokens");
      harness_case(*index, d, workload(d, {{"batch_size", 3}, {"max_num_pages", 64}, {"num_pages", 80}}, 0.0),
                   "up to 4096 tokens");
    }
  } catch (const SkipTest& s) {
    std::printf("skipped: %s\n", s.reason.c_str());
    return 77;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  std::printf("%d failure(s), %.1f s%s\n", g_failures, since(start), g_dry ? " (dry run: kb_cpu_dsa_paged, no device)" : "");
  return g_failures ? 1 : 0;
}
