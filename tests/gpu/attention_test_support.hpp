// What the GPU attention tests share (test_cuda_attention.cpp: paged decode;
// test_cuda_prefill.cpp: causal prefill; test_cuda_attention_shapes.cpp:
// generated shapes): command-line state, sharding across processes, shipped
// workloads, the index tensors of a batch built from its sequence lengths
// (BatchLayout), the call and its oracle outputs (OracleCase), and one shipped
// workload through kb::evaluate_cuda. The device side of a case is
// gpu_test_support.hpp's GuardedCall; each test's own checks stay in its file.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_test_support.hpp"
#include "harness/gpu_eval.hpp"
#include "harness/implementation.hpp"
#include "inputs/inputs.hpp"
#include "oracle/gpu_oracle.hpp"
#include "oracle/oracle.hpp"
#include "schema/io.hpp"
#include "tensor/tensor.hpp"

namespace kb_gpu_test {

namespace fs = std::filesystem;

inline int g_failures = 0;
inline int g_passes = 0;
inline bool g_dry = false;              // --dry-run: no GPU, oracle only
inline std::string g_filter;            // --filter SUBSTRING
inline long g_max_workloads = -1;       // --max-workloads N
inline long g_shard = 0, g_shards = 1;  // --shard K/N: this process runs items K, K + N, ...
inline bool g_gpu_oracle = false;       // --gpu-oracle: judge kb's attention GPU oracle, not the solutions
inline long g_item = -1;                // running index over edge cases and shipped workloads

// True when the next item belongs to this shard.
inline bool mine() {
  ++g_item;
  return g_item % g_shards == g_shard;
}

// kb's attention GPU oracle (kernels/attention/gpu_oracle.cpp) as
// an Implementation, so that --gpu-oracle judges it on every case.
inline const kb::Implementation& gpu_oracle_impl(const kb::Definition& d) {
  static std::map<std::string, kb::Implementation> impls;
  auto [it, fresh] = impls.try_emplace(d.op_type);
  if (fresh) {
    kb::GpuOracleFn fn = kb::find_gpu_oracle(d);
    if (!fn) throw std::runtime_error("no GPU oracle for " + d.op_type);
    kb::Implementation& impl = it->second;
    impl.name = "gpu_oracle_" + d.op_type;
    impl.author = "kb";
    impl.device = kb::Device::cuda;
    impl.supports = [](const kb::Definition&) { return std::string(); };
    impl.run_cuda = [fn](const kb::CudaCall& call) {
      return fn(kb::GpuOracleCall{call.definition, call.axes, call.inputs, call.outputs, call.stream});
    };
  }
  return it->second;
}

inline bool selected(const std::string& label) { return g_filter.empty() || label.find(g_filter) != std::string::npos; }

inline std::vector<kb::Workload> shipped_workloads(const fs::path& file) {
  std::vector<kb::Workload> out;
  std::ifstream in(file);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto t = kb::read_trace(line, file.string() + ":" + std::to_string(n));
    if (!t) throw std::runtime_error("cannot read workload: " + t.error().message);
    out.push_back(t->workload);
  }
  return out;
}

inline void store_int32(kb::Tensor& t, const std::vector<std::int64_t>& v) {
  if (t.dtype() != kb::DType::int32 || t.numel() != static_cast<std::int64_t>(v.size()))
    throw std::runtime_error("index tensor shape/dtype mismatch");
  for (std::size_t i = 0; i < v.size(); ++i) t.data<std::int32_t>()[i] = static_cast<std::int32_t>(v[i]);
}

inline std::vector<std::int64_t> random_lengths(std::size_t n, std::int64_t lo, std::int64_t hi, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> u(lo, hi);
  std::vector<std::int64_t> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// The index tensors of one batch, from its sequences' lengths: q[b] queries
// (prefill; empty for decode, one query a sequence) and keys[b] keys. Paged:
// pages of ps rows, the last one partial (kv_last_page_len), a sequence named
// in `empty_last_page` given one more page holding no key (kv_last_page_len
// 0); the pages taken from num_pages = used + spare_pages in `order`. Ragged:
// each sequence's rows back to back.
enum class PageOrder { random, reverse, sequential };

struct BatchLayout {
  std::int64_t batch = 0, total_q = 0;
  std::int64_t units = 0;      // pages (paged) or key rows (ragged) in use
  std::int64_t num_pages = 0;  // paged: units + spare_pages
  std::vector<std::int64_t> qo{0}, kv{0}, last, indices;
};

inline BatchLayout batch_layout(const std::string& label, const std::vector<std::int64_t>& q,
                                const std::vector<std::int64_t>& keys, bool paged, std::int64_t ps, bool has_last,
                                std::int64_t spare_pages, std::uint64_t seed, PageOrder order = PageOrder::random,
                                const std::vector<std::size_t>& empty_last_page = {}) {
  if (!q.empty() && q.size() != keys.size()) throw std::runtime_error(label + ": q and keys differ in length");
  BatchLayout l;
  l.batch = static_cast<std::int64_t>(keys.size());
  l.last.assign(keys.size(), 0);
  for (std::size_t b = 0; b < keys.size(); ++b) {
    if (!q.empty()) l.qo.push_back(l.qo.back() + q[b]);
    const std::int64_t k = keys[b];
    if (!paged) {
      l.kv.push_back(l.kv.back() + k);
      continue;
    }
    std::int64_t pages = (k + ps - 1) / ps;
    std::int64_t last = pages ? k - (pages - 1) * ps : 0;
    if (std::find(empty_last_page.begin(), empty_last_page.end(), b) != empty_last_page.end()) {
      if (!has_last) throw std::runtime_error(label + ": kv_last_page_len 0 needs a definition with that input");
      if (k % ps != 0) throw std::runtime_error(label + ": an empty last page needs keys % page_size == 0");
      pages = k / ps + 1;
      last = 0;
    }
    if (!has_last && pages && last != ps)
      throw std::runtime_error(label + ": without kv_last_page_len every page is full");
    l.kv.push_back(l.kv.back() + pages);
    l.last[b] = last;
  }
  l.total_q = q.empty() ? l.batch : l.qo.back();
  l.units = l.kv.back();
  if (paged) {
    l.num_pages = l.units + spare_pages;
    std::vector<std::int64_t> perm(static_cast<std::size_t>(l.num_pages));
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937_64 rng(seed);
    if (order == PageOrder::random) std::shuffle(perm.begin(), perm.end(), rng);
    if (order == PageOrder::reverse) std::reverse(perm.begin(), perm.end());
    l.indices.assign(perm.begin(), perm.begin() + l.units);
  }
  return l;
}

// The workload of a layout, with the shipped definitions' var axes (paged:
// batch_size, num_pages, len_indptr, num_kv_indices and, in prefill, total_q;
// ragged: len_indptr, total_q, total_kv) and sm_scale given.
inline kb::Workload layout_workload(const kb::Definition& d, const BatchLayout& l, bool paged, bool prefill,
                                    const std::string& uuid, double sm_scale) {
  kb::Workload w;
  w.uuid = uuid;
  if (paged) {
    w.axes = {{"batch_size", l.batch}, {"num_pages", l.num_pages}, {"len_indptr", l.batch + 1},
              {"num_kv_indices", l.units}};
    if (prefill) w.axes.emplace_back("total_q", l.total_q);
  } else {
    w.axes = {{"len_indptr", l.batch + 1}, {"total_q", l.total_q}, {"total_kv", l.units}};
  }
  for (const auto& t : d.inputs) {
    kb::InputSpec s;
    if (t.name == "sm_scale") {
      s.kind = kb::InputKind::scalar;
      s.value = sm_scale;
    }
    w.inputs.emplace_back(t.name, s);
  }
  return w;
}

// A call with the layout's index tensors in place of the generated ones, and
// the CPU oracle's outputs for it. Stays where it was made (m's args point
// into its tensors).
struct OracleCase {
  std::optional<kb::Materialized> m;
  std::vector<kb::Tensor> expected;
  double oracle_s = 0;  // the oracle's run
};

// Fills `c`; empty, or what failed ("materialize: ...", "oracle run: ...").
inline std::string prepare_case(const kb::Definition& d, const kb::Workload& w, const BatchLayout& l,
                                std::uint64_t seed, OracleCase& c) {
  auto m = kb::materialize(d, w, kb::MaterializeOptions{seed, std::nullopt});
  if (!m) return "materialize: " + m.error().message;
  c.m.emplace(std::move(*m));
  kb::rebind_args(*c.m);
  for (std::size_t i = 0; i < d.inputs.size(); ++i) {
    const std::string& n = d.inputs[i].name;
    if (n == "qo_indptr") store_int32(c.m->tensors[i], l.qo);
    if (n == "kv_indptr") store_int32(c.m->tensors[i], l.kv);
    if (n == "kv_indices") store_int32(c.m->tensors[i], l.indices);
    if (n == "kv_last_page_len") store_int32(c.m->tensors[i], l.last);
  }
  auto expected = kb::allocate_outputs(d, c.m->axes);
  if (!expected) return "allocate_outputs: " + expected.error().message;
  c.expected = std::move(*expected);
  auto oracle = kb::find_oracle(d);
  if (!oracle) return "oracle: " + oracle.error().message;
  const auto t0 = std::chrono::steady_clock::now();
  if (auto st = (*oracle)->run(kb::OracleCall{d, c.m->axes, c.m->args, c.expected, seed}); !st)
    return "oracle run: " + st.error().message;
  c.oracle_s = seconds_since(t0);
  return {};
}

// A shipped workload's oracle alone (--dry-run): its run time in seconds;
// throws naming the definition when it cannot run.
inline double dry_run_oracle(const kb::Definition& d, const kb::Workload& w, const kb::MaterializeOptions& mopt) {
  auto m = kb::materialize(d, w, mopt);
  if (!m) throw std::runtime_error(d.name + ": materialize: " + m.error().message);
  kb::rebind_args(*m);
  auto expected = kb::allocate_outputs(d, m->axes);
  auto oracle = kb::find_oracle(d);
  if (!expected || !oracle) throw std::runtime_error(d.name + ": outputs/oracle");
  const auto t0 = std::chrono::steady_clock::now();
  if (auto st = (*oracle)->run(kb::OracleCall{d, m->axes, m->args, *expected, 0}); !st)
    throw std::runtime_error(d.name + ": oracle: " + st.error().message);
  return seconds_since(t0);
}

// The shipped definition files of an op type whose name holds `part`, sorted
// (none where the folder is absent).
inline std::vector<fs::path> definition_files(const fs::path& defs, const char* op, const char* part) {
  std::vector<fs::path> files;
  if (!fs::exists(defs / op)) return files;
  for (const auto& e : fs::directory_iterator(defs / op))
    if (e.path().extension() == ".json" && e.path().filename().string().find(part) != std::string::npos)
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// A workload's axes as the lines print them (" name=value" each).
inline std::string axes_text(const kb::Workload& w) {
  std::string axes;
  for (const auto& [k, v] : w.axes) axes += " " + k + "=" + std::to_string(v);
  return axes;
}

// Workload i of a definition through kb::evaluate_cuda, judged by the CPU
// oracle (--gpu-oracle: kb's GPU oracle is the solution judged). A FAIL line
// names a workload that is not evaluable or not PASSED; a PASSED one raises
// worst_abs / worst_rel to its errors. `axes`: the workload's axes as printed.
inline bool evaluate_shipped(const kb::Definition& d, const kb::Workload& w, std::size_t i, const std::string& axes,
                             const kb::Implementation& impl, const fs::path& shared, double& worst_abs,
                             double& worst_rel) {
  kb::BenchOptions opt;
  opt.trials = 1;
  opt.time = false;
  opt.dataset_root = (shared / "flashinfer-trace").string();
  opt.cpu_oracle_only = g_gpu_oracle;  // the GPU oracle is what is judged here, not the judge
  auto r = kb::evaluate_cuda(d, w, impl, opt);
  if (!r) {
    std::printf("FAIL %s workload %zu (%s):%s: not evaluable: %s\n", d.name.c_str(), i, w.uuid.c_str(), axes.c_str(),
                r.error().message.c_str());
    return false;
  }
  const kb::Evaluation& ev = r->evaluation;
  const double ma = ev.correctness ? ev.correctness->max_absolute_error : NAN;
  const double mr = ev.correctness ? ev.correctness->max_relative_error : NAN;
  if (ev.status != kb::EvalStatus::passed) {
    std::printf("FAIL %s workload %zu (%s):%s: %s: %s (max abs %.3g rel %.3g)\n", d.name.c_str(), i, w.uuid.c_str(),
                axes.c_str(), std::string(kb::eval_status_name(ev.status)).c_str(), r->summary.c_str(), ma, mr);
    return false;
  }
  worst_abs = std::max(worst_abs, ma);
  worst_rel = std::max(worst_rel, mr);
  return true;
}

}  // namespace kb_gpu_test
