// kb's CUDA solutions (kb_cuda_rmsnorm, kb_cuda_silu_and_mul, kb_cuda_rope)
// against the CPU oracles, on small awkward shapes: rows 1, 3, 17, 97 (and a
// few larger counts that reach the grid-stride and token-pairing paths), every
// hidden size the definitions use plus sizes that take the other code paths
// (sub-warp rows, long rows, hidden % 8 != 0, unaligned pointers), bf16 and
// fp16. Inputs come from kb's own materialize() (seeded random), the oracle
// runs on the same host tensors, and outputs are judged with kb's rule
// (atol = rtol = 1e-2); the max errors and the count of elements that are not
// bit-identical to the oracle's are printed. Device outputs are poisoned
// (NaN) before each call and surrounded by guard bytes that must survive;
// device inputs must come back unchanged.
//
// Exit codes: 0 all passed, 1 a failure, 77 skipped (no usable CUDA device:
// meson reports SKIP). Needs KB_SHARED_DIR (FlashInfer-Bench's definitions)
// and KB_SOURCE_DIR (kb's checkout, for the bundled silu_and_mul definition).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../kernels/rmsnorm/cuda/rmsnorm_cuda.hpp"
#include "../../kernels/rope/cuda/rope_cuda.hpp"
#include "../../kernels/silu_and_mul/cuda/silu_and_mul_cuda.hpp"
#include "cuda/device.hpp"
#include "device_buffer.hpp"
#include "gpu_test_support.hpp"
#include "harness/implementation.hpp"
#include "harness/judge.hpp"
#include "inputs/inputs.hpp"
#include "schema/io.hpp"
#include "tensor/convert.hpp"

namespace kb::kernels {
void add_rmsnorm_cuda(Registry& r);
void add_silu_and_mul_cuda(Registry& r);
void add_rope_cuda(Registry& r);
}  // namespace kb::kernels

namespace fs = std::filesystem;

namespace {

using kb_gpu_test::env_or;
using kb_gpu_test::check_cuda;
using kb_gpu_test::load_definition;
using kb_gpu_test::set_const;

int g_failures = 0;

using kb_gpu_test::SkipTest;

void set_float_dtypes(kb::Definition& d, kb::DType from, kb::DType to) {
  for (auto* list : {&d.inputs, &d.outputs})
    for (auto& t : *list)
      if (t.dtype == from) t.dtype = to;
}

void replace_all(std::string& s, const std::string& a, const std::string& b) {
  for (std::size_t p = s.find(a); p != std::string::npos; p = s.find(a, p + b.size())) s.replace(p, a.size(), b);
}

// Inputs and outputs live in guarded buffers; `misalign` shifts the data by
// one element so 16-byte accesses are impossible.
using kb_gpu_test::DeviceBuffer;

struct Outcome {
  bool ok = true;
  double max_abs = 0, max_rel = 0;
  std::int64_t inexact = 0, total = 0;
  std::string detail;
};

// Counts elements whose bits differ from the oracle's.
std::int64_t count_inexact(const kb::Tensor& got, const kb::Tensor& want) {
  const std::size_t es = static_cast<std::size_t>(kb::dtype_bits(got.dtype()) / 8);
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i)
    if (std::memcmp(got.bytes() + i * es, want.bytes() + i * es, es) != 0) ++n;
  return n;
}

// One call: materialize, run the oracle, run the CUDA implementation on device
// copies, judge every output.
Outcome run_case(const kb::Implementation& impl, const kb::Definition& d, const kb::Workload& w, std::uint64_t seed,
                 bool misalign) {
  Outcome out;
  auto fail = [&](std::string why) {
    out.ok = false;
    if (out.detail.empty()) out.detail = std::move(why);
    return out;
  };
  if (auto why = impl.supports(d); !why.empty()) return fail("supports() refused: " + why);
  auto m = kb::materialize(d, w, kb::MaterializeOptions{seed, std::nullopt});
  if (!m) return fail("materialize: " + m.error().message);
  kb::rebind_args(*m);
  auto expected = kb::allocate_outputs(d, m->axes);
  if (!expected) return fail("allocate_outputs: " + expected.error().message);
  auto oracle = kb::find_oracle(d);
  if (!oracle) return fail("oracle: " + oracle.error().message);
  if (auto st = (*oracle)->run(kb::OracleCall{d, m->axes, m->args, *expected, seed}); !st)
    return fail("oracle run: " + st.error().message);

  kb_gpu_test::GuardedCall call(*m, *expected, 0, misalign);
  if (kb::Status st = call.run(impl, d, m->axes); !st) return fail("run_cuda: " + st.error().message);
  if (std::string why = call.inputs_intact(*m, d); !why.empty()) return fail(why);
  const kb::Tolerance tol{1e-2, 1e-2, 1.0};
  for (std::size_t i = 0; i < expected->size(); ++i) {
    const kb::Tensor& want = (*expected)[i];
    auto got = call.output(i, want, d);
    if (!got) return fail(got.error().message);
    kb::Comparison c = kb::compare(*got, want, tol);
    out.max_abs = std::max(out.max_abs, c.max_abs);
    out.max_rel = std::max(out.max_rel, c.max_rel);
    out.inexact += count_inexact(*got, want);
    out.total += want.numel();
    if (c.verdict != kb::Comparison::Verdict::match)
      fail("output " + d.outputs[i].name + ": " + std::to_string(c.mismatched) + " of " + std::to_string(c.total) +
           " elements off: " + c.detail);
  }
  return out;
}

kb::Workload workload(std::vector<std::pair<std::string, std::int64_t>> axes, const kb::Definition& d) {
  kb::Workload w;
  w.uuid = "gpu-test";
  w.axes = std::move(axes);
  for (const auto& t : d.inputs) w.inputs.emplace_back(t.name, kb::InputSpec{});
  return w;
}

const std::int64_t kRows[] = {1, 3, 17, 97};

// Runs every row count for one configuration and prints one line.
void run_group(const kb::Implementation& impl, const kb::Definition& d, const std::string& label,
               const std::function<kb::Workload(std::int64_t)>& make_workload, bool misalign = false,
               std::vector<std::int64_t> row_counts = {std::begin(kRows), std::end(kRows)}) {
  Outcome all;
  std::string failures;
  std::uint64_t seed = 1234;
  for (std::int64_t rows : row_counts) {
    Outcome o = run_case(impl, d, make_workload(rows), seed++, misalign);
    all.max_abs = std::max(all.max_abs, o.max_abs);
    all.max_rel = std::max(all.max_rel, o.max_rel);
    all.inexact += o.inexact;
    all.total += o.total;
    if (!o.ok) {
      all.ok = false;
      failures += "\n      rows=" + std::to_string(rows) + ": " + o.detail;
    }
  }
  if (!all.ok) ++g_failures;
  std::printf("%s %-58s max_abs=%-9.3g max_rel=%-9.3g not bit-exact %lld/%lld%s\n", all.ok ? "PASS" : "FAIL",
              label.c_str(), all.max_abs, all.max_rel, static_cast<long long>(all.inexact),
              static_cast<long long>(all.total), failures.c_str());
  std::fflush(stdout);
}

std::string rmsnorm_shape(std::int64_t hidden) {
  auto c = kb::kernels::rmsnorm_launch_config(hidden, 97, true);
  using P = kb::kernels::RmsnormConfig::Path;
  char buf[96];
  if (c.path == P::warp)
    std::snprintf(buf, sizeof buf, "warp %dx%d", c.threads_per_row, c.vecs_per_thread);
  else if (c.path == P::block)
    std::snprintf(buf, sizeof buf, "block %dx%d", c.block_threads, c.vecs_per_thread);
  else
    std::snprintf(buf, sizeof buf, "loop V=%d x%d", c.vector_width, c.block_threads);
  return buf;
}

void test_rmsnorm(const kb::Implementation& impl, const fs::path& defs) {
  const std::int64_t hiddens[] = {128, 512, 1536, 2048, 3072, 4096, 5120, 5376, 7168,  // the definitions
                                  8, 24, 1000, 8192, 12288, 40000,                      // other paths
                                  7, 1023, 4100};                                       // hidden % 8 != 0
  for (const char* name : {"rmsnorm_h4096", "fused_add_rmsnorm_h4096"}) {
    const kb::Definition base = load_definition(defs / "rmsnorm" / (std::string(name) + ".json"));
    for (kb::DType dt : {kb::DType::bfloat16, kb::DType::float16}) {
      for (std::int64_t h : hiddens) {
        kb::Definition d = base;
        set_const(d, "hidden_size", h);
        set_float_dtypes(d, kb::DType::bfloat16, dt);
        auto wl = [&](std::int64_t rows) { return workload({{"batch_size", rows}}, d); };
        const std::string label = std::string(name[0] == 'f' ? "fused_add_rmsnorm " : "rmsnorm ") +
                                  std::string(kb::dtype_name(dt)) + " hidden=" + std::to_string(h) + " [" +
                                  (h % 8 == 0 ? rmsnorm_shape(h) : std::string("loop V=1")) + "]";
        run_group(impl, d, label, wl);
      }
      kb::Definition d = base;
      set_float_dtypes(d, kb::DType::bfloat16, dt);
      run_group(impl, d, std::string(name) + " " + std::string(kb::dtype_name(dt)) + " unaligned [loop V=1]",
                [&](std::int64_t rows) { return workload({{"batch_size", rows}}, d); }, true);
    }
  }
}

void test_silu_and_mul(const kb::Implementation& impl, const fs::path& defs) {
  const kb::Definition base = load_definition(defs / "silu_and_mul_i12288.json");
  const std::int64_t ds[] = {12288, 14336, 18432, 8, 24, 1000, 7, 4095};
  for (kb::DType dt : {kb::DType::bfloat16, kb::DType::float16}) {
    for (std::int64_t dim : ds) {
      kb::Definition d = base;
      set_const(d, "intermediate_size", dim);
      set_const(d, "two_intermediate_size", 2 * dim);
      set_float_dtypes(d, kb::DType::bfloat16, dt);
      auto c = kb::kernels::silu_and_mul_launch_config(97, dim, true);
      const std::string label = "silu_and_mul " + std::string(kb::dtype_name(dt)) + " d=" + std::to_string(dim) +
                                " [V=" + std::to_string(c.vector_width) + " x" + std::to_string(c.block_threads) +
                                " grid " + std::to_string(c.grid_x) + "x(rows/" +
                                std::to_string(c.rows_per_thread) + ")]";
      run_group(impl, d, label, [&](std::int64_t rows) { return workload({{"num_tokens", rows}}, d); });
    }
    kb::Definition d = base;
    set_float_dtypes(d, kb::DType::bfloat16, dt);
    run_group(impl, d, "silu_and_mul " + std::string(kb::dtype_name(dt)) + " d=12288 unaligned [V=1]",
              [&](std::int64_t rows) { return workload({{"num_tokens", rows}}, d); }, true);
    kb::Definition small = base;  // more row pairs than grid.y's 65535: the kernel's row stride; odd: a lone last row
    set_const(small, "intermediate_size", 8);
    set_const(small, "two_intermediate_size", 16);
    set_float_dtypes(small, kb::DType::bfloat16, dt);
    run_group(impl, small, "silu_and_mul " + std::string(kb::dtype_name(dt)) + " d=8 rows=140001 (grid.y stride)",
              [&](std::int64_t rows) { return workload({{"num_tokens", rows}}, small); }, false, {140001});
  }
}

struct RopeVariant {
  std::int64_t head_size, rotary_dim, qo_heads, kv_heads;
  kb::DType dtype;
  kb::DType positions;
  bool upcast;
  bool misalign;
  std::vector<std::int64_t> rows = {std::begin(kRows), std::end(kRows)};
};

void test_rope(const kb::Implementation& impl, const fs::path& defs) {
  const kb::Definition base = load_definition(defs / "rope" / "rope_with_cos_sin_cache_neox_style_d128_rd64.json");
  using kb::DType;
  const RopeVariant variants[] = {
      {128, 64, 1, 1, DType::bfloat16, DType::int64, true, false},   // the shipped definition
      {128, 64, 8, 1, DType::bfloat16, DType::int64, true, false},
      {128, 64, 48, 8, DType::bfloat16, DType::int64, true, false},
      {128, 64, 32, 4, DType::float16, DType::int64, true, false},
      {128, 64, 8, 2, DType::bfloat16, DType::int32, true, false},
      {128, 128, 8, 2, DType::bfloat16, DType::int64, true, false},  // full rotation
      {256, 64, 4, 1, DType::bfloat16, DType::int64, true, false},
      {64, 16, 5, 3, DType::bfloat16, DType::int64, true, false},
      {80, 40, 3, 2, DType::bfloat16, DType::int64, true, false},    // rotary_dim / 2 % 8 != 0: scalar
      {128, 64, 8, 2, DType::bfloat16, DType::int64, false, false},  // math in bf16 (no upcast)
      {128, 64, 8, 2, DType::bfloat16, DType::int64, true, true},    // unaligned: scalar
      // token counts that pair tokens per thread (>= 4096 blocks), the second
      // beyond grid.y's 65535
      {128, 64, 48, 8, DType::bfloat16, DType::int64, true, false, {777}},
      {128, 64, 1, 1, DType::bfloat16, DType::int64, true, false, {140001}},
  };
  for (const RopeVariant& v : variants) {
    kb::Definition d = base;
    set_const(d, "head_size", v.head_size);
    set_const(d, "rotary_dim", v.rotary_dim);
    replace_all(d.reference, "head_size = 128", "head_size = " + std::to_string(v.head_size));
    replace_all(d.reference, "rotary_dim = 64", "rotary_dim = " + std::to_string(v.rotary_dim));
    if (!v.upcast) {
      replace_all(d.reference, "q.to(torch.float32)", "q");
      replace_all(d.reference, "k.to(torch.float32)", "k");
    }
    set_float_dtypes(d, DType::bfloat16, v.dtype);
    for (auto& t : d.inputs)
      if (t.name == "positions") t.dtype = v.positions;
    auto c = kb::kernels::rope_launch_config(v.rows.back(), v.qo_heads, v.kv_heads, v.head_size, v.rotary_dim,
                                             !v.misalign);
    char label[240];
    std::snprintf(label, sizeof label, "rope %s d=%lld rd=%lld heads=%lld/%lld pos=%s%s%s [V=%d x%d grid %ux%u]",
                  std::string(kb::dtype_name(v.dtype)).c_str(), static_cast<long long>(v.head_size),
                  static_cast<long long>(v.rotary_dim), static_cast<long long>(v.qo_heads),
                  static_cast<long long>(v.kv_heads), std::string(kb::dtype_name(v.positions)).c_str(),
                  v.upcast ? "" : " bf16-math", v.misalign ? " unaligned" : "", c.vector_width, c.block_threads,
                  c.grid_x, c.grid_y);
    run_group(impl, d, label, [&](std::int64_t rows) {
      return workload({{"num_tokens", rows}, {"num_qo_heads", v.qo_heads}, {"num_kv_heads", v.kv_heads},
                       {"max_seq_len", 4096}},
                      d);
    }, v.misalign, v.rows);
  }
}

// supports() must refuse what the kernels cannot do, with a reason.
void test_refusals(const kb::Registry& reg, const fs::path& shared_defs, const fs::path& silu_defs) {
  struct Case {
    const char* impl;
    kb::Definition def;
  };
  std::vector<Case> cases;
  {
    kb::Definition d = load_definition(shared_defs / "rmsnorm" / "rmsnorm_h4096.json");
    set_float_dtypes(d, kb::DType::bfloat16, kb::DType::float32);
    cases.push_back({"kb_cuda_rmsnorm", d});
    kb::Definition g = load_definition(shared_defs / "rmsnorm" / "rmsnorm_h4096.json");
    replace_all(g.reference, "* weight", "* (1.0 + weight");  // Gemma-style scaling
    cases.push_back({"kb_cuda_rmsnorm", g});
  }
  {
    kb::Definition d = load_definition(silu_defs / "silu_and_mul_i12288.json");
    set_float_dtypes(d, kb::DType::bfloat16, kb::DType::float32);
    cases.push_back({"kb_cuda_silu_and_mul", d});
  }
  {
    kb::Definition d = load_definition(shared_defs / "rope" / "rope_with_cos_sin_cache_neox_style_d128_rd64.json");
    for (auto& t : d.inputs)
      if (t.name == "cos_sin_cache") t.dtype = kb::DType::bfloat16;
    cases.push_back({"kb_cuda_rope", d});
    kb::Definition g = load_definition(shared_defs / "rope" / "rope_with_cos_sin_cache_neox_style_d128_rd64.json");
    replace_all(g.reference, "neox", "gptj");
    replace_all(g.reference, "NeoX", "GPT-J");
    cases.push_back({"kb_cuda_rope", g});
  }
  for (const Case& c : cases) {
    const std::string why = reg.find(c.impl)->supports(c.def);
    std::printf("%s %s refuses a changed %s: %s\n", why.empty() ? "FAIL" : "PASS", c.impl, c.def.name.c_str(),
                why.empty() ? "(accepted it)" : why.c_str());
    if (why.empty()) ++g_failures;
  }
}

}  // namespace

int main() {
  if (int rc = kb_gpu_test::require_device()) return rc;

  const fs::path shared_defs = fs::path(env_or("KB_SHARED_DIR", "../shared")) / "flashinfer-trace" / "definitions";
  const fs::path silu_defs = fs::path(env_or("KB_SOURCE_DIR", ".")) / "kernels" / "silu_and_mul" / "definitions";

  kb::Registry reg;
  kb::kernels::add_rmsnorm_cuda(reg);
  kb::kernels::add_silu_and_mul_cuda(reg);
  kb::kernels::add_rope_cuda(reg);
  try {
    test_silu_and_mul(*reg.find("kb_cuda_silu_and_mul"), silu_defs);  // first: a kernel-image mismatch skips here
    test_rmsnorm(*reg.find("kb_cuda_rmsnorm"), shared_defs);
    test_rope(*reg.find("kb_cuda_rope"), shared_defs);
    test_refusals(reg, shared_defs, silu_defs);
    check_cuda(cudaDeviceSynchronize(), "final cudaDeviceSynchronize");
  } catch (const SkipTest& s) {
    std::printf("skipped: no usable CUDA device (%s)\n", s.reason.c_str());
    return 77;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  std::printf("%s: %d failing group(s)\n", g_failures ? "FAILED" : "all passed", g_failures);
  return g_failures ? 1 : 0;
}
