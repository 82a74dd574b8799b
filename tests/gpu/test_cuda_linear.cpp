// kb_cuda_gdn and kb_cuda_mamba_ssu against the CPU oracles.
//
// Most cases go through kb's harness (kb::evaluate on CUDA with the CPU
// oracle as the reference: poisoned outputs, guarded buffers, inputs checked
// unchanged, two trials of fresh inputs): shape ranges (q/k heads vs value
// heads in groups 1, 2, 3, 4 and q heads != k heads; K and V of 64 and 128
// and sizes that take the masked and scalar paths; batch 1 .. 33; mtp T 2 .. 17
// from a pool; prefill over several ragged sequences and one long one; no
// initial state), the FlashInfer definitions (KB_SHARED_DIR) with small var
// axes, and kb's bundled definitions with their bundled workloads
// (KB_SOURCE_DIR). Index structures the workload generator does not make
// (a prefill with a length-1 and an empty sequence; Mamba padding slots and
// slots named twice) are written into the materialized inputs and judged the
// same way by hand. Then supports() must refuse what the kernels do not do.
// One line per case. Exit 0 all passed, 1 a failure, 77 no CUDA device.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/device.hpp"
#include "device_buffer.hpp"
#include "gpu_test_support.hpp"
#include "harness/harness.hpp"
#include "harness/implementation.hpp"
#include "harness/judge.hpp"
#include "inputs/inputs.hpp"
#include "schema/io.hpp"

namespace kb::kernels {
void add_gdn_cuda(Registry& r);
void add_mamba_ssu_cuda(Registry& r);
}  // namespace kb::kernels

namespace fs = std::filesystem;

namespace {

using kb_gpu_test::env_or;
using kb_gpu_test::check_cuda;
using kb_gpu_test::load_definition;
using kb_gpu_test::set_const;

int g_failures = 0, g_cases = 0;

void set_dtype(kb::Definition& d, const std::string& tensor, kb::DType t) {
  for (auto* list : {&d.inputs, &d.outputs})
    for (auto& s : *list)
      if (s.name == tensor) s.dtype = t;
}

// `params` as "name=value" pairs for a label.
std::string axes_text(const std::vector<std::pair<std::string, std::int64_t>>& axes) {
  std::string s;
  for (const auto& [k, v] : axes) s += (s.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return s;
}

kb::Workload workload(const kb::Definition& d, std::vector<std::pair<std::string, std::int64_t>> axes, double scale,
                      bool with_state = true, bool with_buffer = false) {
  kb::Workload w;
  w.uuid = "cuda-linear-" + d.name;
  w.axes = std::move(axes);
  for (const auto& t : d.inputs) {
    if (t.optional && t.name == "intermediate_states_buffer" && !with_buffer) continue;
    if (t.optional && !with_state && t.name != "intermediate_states_buffer") continue;
    kb::InputSpec s;
    if (t.is_scalar()) {
      s.kind = kb::InputKind::scalar;
      s.value = scale;
    }
    w.inputs.emplace_back(t.name, s);
  }
  return w;
}

void report(bool ok, const std::string& label, double max_abs, double max_rel, const std::string& detail) {
  ++g_cases;
  if (!ok) ++g_failures;
  std::printf("%s %-92s max_abs=%-9.3g max_rel=%-9.3g%s%s\n", ok ? "PASSED" : "FAIL  ", label.c_str(), max_abs, max_rel,
              detail.empty() ? "" : "  ", detail.c_str());
  std::fflush(stdout);
}

// Through kb's harness: evaluate() on CUDA with the CPU oracle as the reference.
void judge(const kb::Implementation& impl, const kb::Definition& d, const kb::Workload& w, const std::string& label) {
  kb::BenchOptions opt;
  opt.trials = 2;
  opt.time = false;
  opt.cpu_oracle_only = true;
  auto r = kb::evaluate(d, w, impl, opt);
  if (!r) return report(false, label, 0, 0, "evaluate: " + r.error().message);
  const bool ok = r->evaluation.status == kb::EvalStatus::passed;
  double abs = 0, rel = 0;
  if (r->evaluation.correctness) {
    abs = r->evaluation.correctness->max_absolute_error;
    rel = r->evaluation.correctness->max_relative_error;
  }
  report(ok, label, abs, rel, ok ? "" : r->summary);
}

void store_index(kb::Tensor& t, const std::vector<std::int64_t>& v) {
  if (t.numel() != static_cast<std::int64_t>(v.size())) throw std::runtime_error("crafted index of the wrong length");
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t.dtype() == kb::DType::int64) t.data<std::int64_t>()[i] = v[i];
    else t.data<std::int32_t>()[i] = static_cast<std::int32_t>(v[i]);
  }
}

// By hand, for index inputs the generator does not make: materialize, write
// `index` into input `index_name`, run the CPU oracle and the CUDA solution
// on guarded device copies (outputs poisoned), check inputs unchanged and
// judge every output with kb's default tolerance.
void judge_crafted(const kb::Implementation& impl, const kb::Definition& d, const kb::Workload& w,
                   const std::string& index_name, const std::vector<std::int64_t>& index, const std::string& label) {
  auto fail = [&](const std::string& why) { report(false, label, 0, 0, why); };
  if (auto why = impl.supports(d); !why.empty()) return fail("supports() refused: " + why);
  auto m = kb::materialize(d, w, kb::MaterializeOptions{4321, std::nullopt});
  if (!m) return fail("materialize: " + m.error().message);
  auto ii = kb::input_index(d, index_name);
  if (!ii) return fail("no input " + index_name);
  store_index(m->tensors[*ii], index);
  kb::rebind_args(*m);
  auto expected = kb::allocate_outputs(d, m->axes);
  if (!expected) return fail("allocate_outputs: " + expected.error().message);
  auto oracle = kb::find_oracle(d);
  if (!oracle) return fail("oracle: " + oracle.error().message);
  if (auto st = (*oracle)->run(kb::OracleCall{d, m->axes, m->args, *expected, 4321}); !st)
    return fail("oracle run: " + st.error().message);

  kb_gpu_test::GuardedCall call(*m, *expected);
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  kb::Status st = impl.run_cuda(kb::CudaCall{d, m->axes, call.args, call.out, stream});
  cudaError_t sync = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  if (!st) return fail("run_cuda: " + st.error().message);
  check_cuda(sync, "kernel execution");
  if (std::string why = call.inputs_intact(*m, d); !why.empty()) return fail(why);
  double max_abs = 0, max_rel = 0;
  std::string problems;
  for (std::size_t i = 0; i < expected->size(); ++i) {
    const kb::Tensor& want = (*expected)[i];
    auto got = call.output(i, want, d);
    if (!got) return fail(got.error().message);
    kb::Comparison c = kb::compare(*got, want, kb::Tolerance{});
    max_abs = std::max(max_abs, c.max_abs);
    max_rel = std::max(max_rel, c.max_rel);
    if (c.verdict != kb::Comparison::Verdict::match)
      problems += d.outputs[i].name + ": " + std::to_string(c.mismatched) + " of " + std::to_string(c.total) +
                  " off: " + c.detail + "; ";
  }
  report(problems.empty(), label, max_abs, max_rel, problems);
}

// ---- gdn ----------------------------------------------------------------------

// A gdn definition with q heads hq, k heads hk, value heads hv, K = dk and
// V = dv: V gets its own axis when it differs from K (state [.., V, K]).
kb::Definition gdn_shape(const kb::Definition& base, std::int64_t hq, std::int64_t hk, std::int64_t hv,
                         std::int64_t dk, std::int64_t dv) {
  kb::Definition d = base;
  set_const(d, "num_q_heads", hq);
  set_const(d, "num_k_heads", hk);
  set_const(d, "num_v_heads", hv);
  set_const(d, "head_size", dk);
  if (hk != hq)  // the shipped definitions tie them; the kernel and the oracle need not
    std::erase(d.constraints, std::string("num_k_heads == num_q_heads"));
  if (dv != dk) {
    kb::Axis ax;
    ax.name = "head_size_v";
    ax.kind = kb::AxisKind::const_;
    ax.value = dv;
    d.axes.push_back(ax);
    auto retarget = [](kb::TensorSpec& t, std::size_t dim) {
      if (t.shape && t.shape->size() > dim) (*t.shape)[dim] = "head_size_v";
    };
    for (auto* list : {&d.inputs, &d.outputs})
      for (auto& t : *list) {
        const std::size_t r = t.rank();
        if (t.name == "v" || t.name == "output") retarget(t, r - 1);
        if (t.name == "state" || t.name == "initial_state" || t.name == "new_state" || t.name == "final_state")
          retarget(t, 2);
        if (t.name == "intermediate_states_buffer") retarget(t, 3);
      }
  }
  d.name = base.name + "_hq" + std::to_string(hq) + "_hk" + std::to_string(hk) + "_hv" + std::to_string(hv) + "_k" +
           std::to_string(dk) + "_v" + std::to_string(dv);
  return d;
}

struct GdnShape {
  std::int64_t hq, hk, hv, dk, dv;
};

std::string shape_text(const GdnShape& s) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "hq=%lld hk=%lld hv=%lld K=%lld V=%lld", static_cast<long long>(s.hq),
                static_cast<long long>(s.hk), static_cast<long long>(s.hv), static_cast<long long>(s.dk),
                static_cast<long long>(s.dv));
  return buf;
}

void test_gdn(const kb::Implementation& impl, const fs::path& shared_defs, const fs::path& source) {
  const kb::Definition decode = load_definition(shared_defs / "gdn" / "gdn_decode_qk4_v8_d128_k_last.json");
  const kb::Definition mtp = load_definition(shared_defs / "gdn" / "gdn_mtp_qk4_v8_d128_k_last.json");
  const kb::Definition prefill = load_definition(shared_defs / "gdn" / "gdn_prefill_qk8_v16_d128_k_last.json");

  // Groups 1, 2, 4, 3; K / V 64 and 128 and both mixed; q heads != k heads;
  // K 256 (16 elements a lane), 96 and 36 (masked runs), 30 (scalar path),
  // V 20 (a partial row slice).
  const GdnShape shapes[] = {{2, 2, 2, 128, 128}, {2, 2, 4, 64, 64}, {4, 4, 16, 128, 128}, {2, 2, 6, 128, 128},
                             {2, 2, 4, 64, 128},  {2, 2, 4, 128, 64}, {4, 2, 8, 128, 128},  {1, 1, 2, 256, 256},
                             {2, 2, 4, 96, 40},   {1, 1, 3, 36, 20},  {2, 2, 2, 30, 64}};
  const std::int64_t batches[] = {1, 5, 33};
  int n = 0;
  for (const GdnShape& s : shapes) {
    const kb::Definition d = gdn_shape(decode, s.hq, s.hk, s.hv, s.dk, s.dv);
    const std::int64_t b = batches[n++ % 3];
    judge(impl, d, workload(d, {{"batch_size", b}}, n % 2 ? 0.0 : 0.125),
          "gdn decode " + shape_text(s) + " batch=" + std::to_string(b));
  }
  {
    const kb::Definition d = gdn_shape(decode, 2, 2, 4, 128, 128);
    judge(impl, d, workload(d, {{"batch_size", 33}}, 0.0), "gdn decode " + shape_text({2, 2, 4, 128, 128}) + " batch=33");
    judge(impl, d, workload(d, {{"batch_size", 7}}, 0.0, false), "gdn decode " + shape_text({2, 2, 4, 128, 128}) + " batch=7, no state");
  }

  struct MtpCase {
    GdnShape s;
    std::int64_t batch, t, pool;
    bool buffer;
  };
  const MtpCase mtps[] = {{{2, 2, 4, 128, 128}, 1, 2, 1, false},  {{2, 2, 8, 128, 128}, 3, 4, 7, false},
                          {{2, 2, 6, 64, 64}, 17, 8, 20, false},   {{4, 4, 4, 64, 128}, 5, 3, 9, true},
                          {{2, 2, 4, 128, 128}, 2, 17, 3, false},  {{1, 1, 2, 256, 256}, 2, 5, 4, false}};
  for (const MtpCase& c : mtps) {
    const kb::Definition d = gdn_shape(mtp, c.s.hq, c.s.hk, c.s.hv, c.s.dk, c.s.dv);
    const std::vector<std::pair<std::string, std::int64_t>> axes = {
        {"batch_size", c.batch}, {"seq_len", c.t}, {"pool_size", c.pool}};
    judge(impl, d, workload(d, axes, 0.0, true, c.buffer),
          "gdn mtp " + shape_text(c.s) + " " + axes_text(axes) + (c.buffer ? " +intermediate buffer" : ""));
  }
  {  // pool rows read by three sequences, by one and by none (final_state copies them all)
    const GdnShape s{2, 2, 4, 128, 128};
    const kb::Definition d = gdn_shape(mtp, s.hq, s.hk, s.hv, s.dk, s.dv);
    judge_crafted(impl, d, workload(d, {{"batch_size", 5}, {"seq_len", 3}, {"pool_size", 7}}, 0.0),
                  "initial_state_indices", {4, 1, 4, 0, 4}, "gdn mtp " + shape_text(s) + " indices=[4,1,4,0,4] pool=7");
  }

  struct PrefillCase {
    GdnShape s;
    std::int64_t total, seqs;
    bool state;
  };
  // Sequences averaging under 64 tokens walk token by token; from 64 (K <=
  // 128, K and V multiples of 8) they run in 64-token chunks: several chunks
  // and a partial tail, K 48 / 64 / 96 / 128 (padded to 64 or 128), V 24, 40
  // and 256 (partial 32-column slices, a last odd 32), q heads != k heads, no
  // initial state; K 36 and K 256 stay token by token.
  const PrefillCase prefills[] = {{{2, 2, 4, 64, 64}, 40, 4, true},      {{4, 4, 8, 128, 128}, 100, 5, true},
                                  {{2, 2, 6, 128, 64}, 70, 3, true},     {{2, 2, 2, 128, 128}, 300, 1, true},
                                  {{2, 2, 4, 128, 128}, 50, 3, false},   {{4, 2, 8, 64, 128}, 33, 7, true},
                                  {{2, 2, 4, 128, 128}, 2100, 1, true},  {{4, 4, 8, 128, 128}, 1000, 3, true},
                                  {{2, 2, 4, 64, 64}, 777, 5, true},     {{4, 2, 8, 64, 128}, 640, 2, false},
                                  {{2, 2, 4, 96, 40}, 300, 2, true},     {{1, 1, 3, 36, 20}, 200, 1, true},
                                  {{2, 2, 6, 128, 64}, 129, 2, true},    {{1, 1, 2, 256, 256}, 200, 1, true},
                                  {{1, 1, 3, 48, 24}, 333, 2, true},     {{2, 2, 4, 128, 256}, 500, 2, true}};
  for (const PrefillCase& c : prefills) {
    const kb::Definition d = gdn_shape(prefill, c.s.hq, c.s.hk, c.s.hv, c.s.dk, c.s.dv);
    const std::vector<std::pair<std::string, std::int64_t>> axes = {
        {"total_seq_len", c.total}, {"num_seqs", c.seqs}, {"len_cu_seqlens", c.seqs + 1}};
    judge(impl, d, workload(d, axes, 0.0, c.state),
          "gdn prefill " + shape_text(c.s) + " " + axes_text(axes) + (c.state ? "" : " no state"));
  }
  {  // a length-1 sequence and an empty one (its new_state row stays zero)
    const GdnShape s{2, 2, 4, 128, 128};
    const kb::Definition d = gdn_shape(prefill, s.hq, s.hk, s.hv, s.dk, s.dv);
    const std::vector<std::int64_t> cu = {0, 1, 1, 6, 40, 41};
    judge_crafted(impl, d, workload(d, {{"total_seq_len", 41}, {"num_seqs", 5}, {"len_cu_seqlens", 6}}, 0.0),
                  "cu_seqlens", cu, "gdn prefill " + shape_text(s) + " cu_seqlens=[0,1,1,6,40,41]");
  }
  {  // in chunks: an empty sequence first, one of 130 tokens (a 2-token tail), a length-1 one, a long last one
    const GdnShape s{2, 2, 4, 128, 128};
    const kb::Definition d = gdn_shape(prefill, s.hq, s.hk, s.hv, s.dk, s.dv);
    const std::vector<std::int64_t> cu = {0, 0, 130, 131, 400};
    judge_crafted(impl, d, workload(d, {{"total_seq_len", 400}, {"num_seqs", 4}, {"len_cu_seqlens", 5}}, 0.0),
                  "cu_seqlens", cu, "gdn prefill " + shape_text(s) + " cu_seqlens=[0,0,130,131,400]");
  }

  // The FlashInfer definitions as they are, small var axes.
  for (const auto& e : fs::directory_iterator(shared_defs / "gdn")) {
    if (e.path().extension() != ".json") continue;
    const kb::Definition d = load_definition(e.path());
    std::vector<std::pair<std::string, std::int64_t>> axes;
    if (d.find_input("cu_seqlens")) axes = {{"total_seq_len", 20}, {"num_seqs", 3}, {"len_cu_seqlens", 4}};
    else if (d.find_input("initial_state_indices")) axes = {{"batch_size", 2}, {"seq_len", 3}, {"pool_size", 4}};
    else axes = {{"batch_size", 2}};
    judge(impl, d, workload(d, axes, 0.0), "shared " + d.name + " " + axes_text(axes));
  }
  // kb's bundled definitions with their bundled workloads.
  for (const auto& e : fs::directory_iterator(source / "kernels" / "gdn" / "definitions")) {
    const kb::Definition d = load_definition(e.path());
    std::ifstream f(source / "kernels" / "gdn" / "workloads" / (d.name + ".jsonl"));
    std::string line;
    for (int i = 1; std::getline(f, line); ++i) {
      if (line.empty()) continue;
      auto t = kb::read_trace(line, d.name + ".jsonl:" + std::to_string(i));
      if (!t) {
        report(false, "bundled " + d.name + " line " + std::to_string(i), 0, 0, t.error().message);
        continue;
      }
      judge(impl, d, t->workload, "bundled " + d.name + " " + axes_text(t->workload.axes));
    }
  }
}

// ---- mamba_ssu ------------------------------------------------------------------

struct MambaShape {
  std::int64_t heads, head_dim, dstate, groups;
  kb::DType state = kb::DType::bfloat16;
};

kb::Definition mamba_shape(const kb::Definition& base, const MambaShape& s) {
  kb::Definition d = base;
  set_const(d, "nheads", s.heads);
  set_const(d, "head_dim", s.head_dim);
  set_const(d, "dstate", s.dstate);
  set_const(d, "ngroups", s.groups);
  set_dtype(d, "state", s.state);
  set_dtype(d, "new_state", s.state);
  d.name = base.name + "_shape";
  return d;
}

std::string shape_text(const MambaShape& s) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "H=%lld P=%lld N=%lld G=%lld state=%s", static_cast<long long>(s.heads),
                static_cast<long long>(s.head_dim), static_cast<long long>(s.dstate), static_cast<long long>(s.groups),
                std::string(kb::dtype_name(s.state)).c_str());
  return buf;
}

void test_mamba(const kb::Implementation& impl, const fs::path& shared_defs, const fs::path& source) {
  const kb::Definition base = load_definition(shared_defs / "mamba_ssu" / "mamba_ssu_decode_h128_d64_s128_ng8.json");
  using kb::DType;
  // Vector paths: dstate <= 128 and <= 512 for 16-bit and fp32 states;
  // scalar path: dstate % 8 != 0 (bf16), % 4 != 0 (fp32); head_dim 1 and
  // odd; group ratios 1 .. 16.
  const MambaShape shapes[] = {{128, 64, 128, 8},
                               {8, 16, 32, 2},
                               {4, 64, 128, 1},
                               {6, 3, 256, 6},
                               {2, 8, 512, 2},
                               {12, 5, 7, 3},
                               {3, 1, 200, 3},
                               {2, 3, 130, 2},
                               {16, 64, 128, 4, DType::float32},
                               {4, 8, 64, 2, DType::float16},
                               {4, 8, 36, 2, DType::float32},
                               {2, 4, 300, 1, DType::float32}};
  const std::int64_t batches[] = {1, 7, 33};
  int n = 0;
  for (const MambaShape& s : shapes) {
    const kb::Definition d = mamba_shape(base, s);
    const std::int64_t b = s.heads * s.head_dim * s.dstate >= 1 << 20 ? std::int64_t{4} : batches[n % 3];
    const std::int64_t cache = b + n % 4;
    ++n;
    const std::vector<std::pair<std::string, std::int64_t>> axes = {{"batch_size", b}, {"state_cache_size", cache}};
    judge(impl, d, workload(d, axes, 0.0), "mamba_ssu " + shape_text(s) + " " + axes_text(axes));
  }
  {  // padding (-1) and slots named two and three times: applied in batch order
    const MambaShape s{8, 16, 32, 2};
    const kb::Definition d = mamba_shape(base, s);
    const std::vector<std::int64_t> slots = {3, -1, 0, 3, 5, -1, 3, 1, 0};
    judge_crafted(impl, d, workload(d, {{"batch_size", 9}, {"state_cache_size", 9}}, 0.0), "state_batch_indices", slots,
                  "mamba_ssu " + shape_text(s) + " slots=[3,-1,0,3,5,-1,3,1,0]");
    const MambaShape f{4, 8, 36, 2, DType::float32};
    const kb::Definition df = mamba_shape(base, f);
    judge_crafted(impl, df, workload(df, {{"batch_size", 5}, {"state_cache_size", 6}}, 0.0), "state_batch_indices",
                  {-1, 2, 2, -1, 4}, "mamba_ssu " + shape_text(f) + " slots=[-1,2,2,-1,4]");
  }
  judge(impl, base, workload(base, {{"batch_size", 2}, {"state_cache_size", 3}}, 0.0),
        "shared " + base.name + " batch_size=2 state_cache_size=3");
  for (const auto& e : fs::directory_iterator(source / "kernels" / "mamba_ssu" / "definitions")) {
    const kb::Definition d = load_definition(e.path());
    std::ifstream f(source / "kernels" / "mamba_ssu" / "workloads" / (d.name + ".jsonl"));
    std::string line;
    for (int i = 1; std::getline(f, line); ++i) {
      if (line.empty()) continue;
      auto t = kb::read_trace(line, d.name + ".jsonl:" + std::to_string(i));
      if (!t) {
        report(false, "bundled " + d.name + " line " + std::to_string(i), 0, 0, t.error().message);
        continue;
      }
      judge(impl, d, t->workload, "bundled " + d.name + " " + axes_text(t->workload.axes));
    }
  }
}

// supports() refuses what the kernels do not do, with a reason.
void test_refusals(const kb::Registry& reg, const fs::path& shared_defs) {
  std::vector<std::pair<const char*, kb::Definition>> cases;
  const kb::Definition decode = load_definition(shared_defs / "gdn" / "gdn_decode_qk4_v8_d128_k_last.json");
  {
    kb::Definition d = decode;
    set_dtype(d, "state", kb::DType::float16);
    set_dtype(d, "new_state", kb::DType::float16);
    d.name += "_fp16_state";
    cases.emplace_back("kb_cuda_gdn", d);
    kb::Definition k = gdn_shape(decode, 4, 4, 8, 1024, 128);
    cases.emplace_back("kb_cuda_gdn", k);
  }
  const kb::Definition mamba = load_definition(shared_defs / "mamba_ssu" / "mamba_ssu_decode_h128_d64_s128_ng8.json");
  {
    kb::Definition d = mamba;
    set_const(d, "dstate", 1024);
    d.name += "_s1024";
    cases.emplace_back("kb_cuda_mamba_ssu", d);
    kb::Definition t = mamba;
    set_dtype(t, "new_state", kb::DType::float32);
    t.name += "_fp32_new_state";
    cases.emplace_back("kb_cuda_mamba_ssu", t);
  }
  for (const auto& [impl, d] : cases) {
    const std::string why = reg.find(impl)->supports(d);
    report(!why.empty(), std::string(impl) + " refuses " + d.name, 0, 0, why.empty() ? "(accepted it)" : why);
  }
}

}  // namespace

int main() {
  auto n = kb::cuda::device_count();
  if (!n || *n == 0) {
    std::printf("skipped: no CUDA device (%s)\n", n ? "none found" : n.error().message.c_str());
    return 77;
  }
  const fs::path shared_defs = fs::path(env_or("KB_SHARED_DIR", "../shared")) / "flashinfer-trace" / "definitions";
  const fs::path source = env_or("KB_SOURCE_DIR", ".");
  kb::Registry reg;
  kb::kernels::add_gdn_cuda(reg);
  kb::kernels::add_mamba_ssu_cuda(reg);
  const auto start = std::chrono::steady_clock::now();
  try {
    test_gdn(*reg.find("kb_cuda_gdn"), shared_defs, source);
    test_mamba(*reg.find("kb_cuda_mamba_ssu"), shared_defs, source);
    test_refusals(reg, shared_defs);
  } catch (const std::exception& e) {
    std::printf("FAIL   %s\n", e.what());
    return 1;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d of %d cases passed in %.1f s\n", g_cases - g_failures, g_cases, s);
  return g_failures ? 1 : 0;
}
