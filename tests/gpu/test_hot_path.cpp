// An engine's hot path through the C ABI: once a shape has run, repeated
// kb_dispatch_run / kb_solution_run calls on the GPU allocate nothing on the
// host (every operator new in the process is counted, libkb's included) and
// give the same bits as each other. Covers kb_cuda_rmsnorm, kb_cuda_silu_and_mul,
// the gemm at M = 16 (kb's gemv) and M = 64 (cuBLASLt), each chosen by a
// dispatch built from trace lines this test writes, and the same solutions by
// name (kb_cuda_gemm by name at M = 16 too: its cached gemv-or-cuBLASLt race
// answer, gemv_or_cublaslt.hpp, after the warm-up call raced);
// kb_cuda_rmsnorm's fused add + RMSNorm form by name; with
// $KB_SHARED_DIR, on shipped definitions, kb_cuda_gqa_paged_decode (4
// sequences of 64 keys, page size 1), kb_cuda_rope, and the prefill and MLA
// solutions (kb_cuda_gqa_ragged_prefill, kb_cuda_gqa_paged_prefill,
// kb_cuda_mla_paged_decode, kb_cuda_mla_paged_prefill,
// kb_cuda_mla_ragged_prefill) by name, and kb_cuda_gemm's long-K forms on
// 5376 x 21504 (raced, and the static rule's form through a context with
// the tuning gemm_race=0). Exit 77 (skip)
// without a CUDA device.
//
// usage: test_hot_path [KERNELS_DIR]  (default: kernels, kb's bundled definitions from the repository root)
#include <cuda_runtime.h>
#include <dlpack/dlpack.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "capi_gpu_test.hpp"
#include "kb/kb.h"

// ---- every allocation of the process, counted while `counting` is set ----
namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
// These replace the global deletes, so free() is the right release for what
// the operator new above returned; GCC, once it inlines both into a caller,
// takes the pair for a mismatch (-Wmismatched-new-delete, a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {

using kb_gpu_test::check;
using kb_gpu_test::failures;

// A device tensor of DLPack type (code, bits): 16-bit floats filled with values of magnitude in
// [1/8, 1/4), either sign (bfloat16 or float16 bit patterns); other types zeroed.
struct DeviceTensor {
  std::vector<int64_t> shape;
  void* data = nullptr;
  size_t bytes = 0;
  DLTensor view{};
  DeviceTensor(std::vector<int64_t> s, uint8_t code, uint8_t bits = 16) : shape(std::move(s)) {
    bytes = bits / 8;
    for (int64_t d : shape) bytes *= static_cast<size_t>(d);
    CU(cudaMalloc(&data, bytes));
    CU(cudaMemset(data, 0, bytes));
    if (bits == 16 && (code == kDLBfloat || code == kDLFloat)) {
      std::vector<uint16_t> h(bytes / 2);
      uint32_t seed = static_cast<uint32_t>(bytes);
      for (auto& v : h) {
        seed = seed * 1664525u + 1013904223u;
        v = static_cast<uint16_t>(((seed & 1u) << 15) | (code == kDLBfloat ? 0x3e00u | ((seed >> 16) & 0x7fu)
                                                                            : 0x3000u | ((seed >> 16) & 0x3ffu)));
      }
      CU(cudaMemcpy(data, h.data(), bytes, cudaMemcpyHostToDevice));
    }
    view.data = data;
    view.device = DLDevice{kDLCUDA, 0};
    view.ndim = static_cast<int32_t>(shape.size());
    view.dtype = DLDataType{code, bits, 1};
    view.shape = shape.data();
  }
  ~DeviceTensor() { cudaFree(data); }
  std::vector<uint8_t> read() const {
    std::vector<uint8_t> h(bytes);
    CU(cudaMemcpy(h.data(), data, bytes, cudaMemcpyDeviceToHost));
    return h;
  }
};

// A PASSED trace record of `solution` on `definition` at var axis `axis` = `value`.
std::string record(const char* definition, const char* axis, int value, const char* solution) {
  return std::string("{\"definition\":\"") + definition + "\",\"workload\":{\"uuid\":\"" + solution + "-" +
         std::to_string(value) + "\",\"axes\":{\"" + axis + "\":" + std::to_string(value) +
         "},\"inputs\":{}},\"solution\":\"" + solution +
         "\",\"evaluation\":{\"status\":\"PASSED\",\"environment\":{\"hardware\":\"any\",\"libs\":{}},"
         "\"timestamp\":\"2026-11-28T00:00:00.000Z\",\"log\":\"\",\"correctness\":{\"max_relative_error\":0.0,"
         "\"max_absolute_error\":0.0},\"performance\":{\"latency_ms\":0.01,\"reference_latency_ms\":0.01,"
         "\"speedup_factor\":1.0}}}";
}

struct Call {
  std::string name;
  const kb_definition* def;
  const kb_dispatch* dispatch;  // nullptr: by name
  const char* solution;
  std::vector<const DLTensor*> in, out;
  kb_context* context = nullptr;  // the context to run with (nullptr: the test's default one)
};

kb_status run(kb_context* ctx, const Call& c, cudaStream_t stream) {
  if (c.dispatch) return kb_dispatch_run(c.dispatch, c.in.data(), c.in.size(), c.out.data(), c.out.size(), stream);
  return kb_solution_run(c.context ? c.context : ctx, c.def, c.solution, c.in.data(), c.in.size(), c.out.data(),
                         c.out.size(), stream);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2) {
    std::fprintf(stderr, "usage: %s [KERNELS_DIR]\n", argv[0]);
    return 2;
  }
  const std::string kernels = argc == 2 ? argv[1] : "kernels";
  const std::string norm_path = kernels + "/rmsnorm/definitions/rmsnorm_h4096.json";
  const std::string gemm_path = kernels + "/gemm/definitions/gemm_n4096_k4096.json";
  const std::string silu_path = kernels + "/silu_and_mul/definitions/silu_and_mul_i14336.json";
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  CU(cudaSetDevice(0));
  kb_context* ctx = nullptr;
  kb_context* no_race = nullptr;  // gemm_race=0 (below)
  kb_definition *norm_def = nullptr, *gemm_def = nullptr, *silu_def = nullptr;
  if (kb_context_create(nullptr, KB_ABI_VERSION, &ctx) != KB_OK ||
      kb_definition_load_file(ctx, norm_path.c_str(), &norm_def) != KB_OK ||
      kb_definition_load_file(ctx, gemm_path.c_str(), &gemm_def) != KB_OK ||
      kb_definition_load_file(ctx, silu_path.c_str(), &silu_def) != KB_OK) {
    std::fprintf(stderr, "test_hot_path: %s\n", kb_last_error());
    return 1;
  }
  // Traces: the rmsnorm at batch 16, the gemv at M = 16 and cuBLASLt at M = 64 fastest.
  const std::string traces = (std::filesystem::temp_directory_path() / "kb_test_hot_path.jsonl").string();
  {
    std::ofstream f(traces);
    f << record("rmsnorm_h4096", "batch_size", 16, "kb_cuda_rmsnorm") << "\n"
      << record("gemm_n4096_k4096", "M", 16, "kb_cuda_gemv") << "\n"
      << record("gemm_n4096_k4096", "M", 64, "kb_cublaslt_gemm") << "\n"
      << record("silu_and_mul_i14336", "num_tokens", 16, "kb_cuda_silu_and_mul") << "\n";
  }
  kb_dispatch *norm_dispatch = nullptr, *gemm_dispatch = nullptr, *silu_dispatch = nullptr;
  if (kb_dispatch_create(ctx, norm_def, traces.c_str(), nullptr, &norm_dispatch) != KB_OK ||
      kb_dispatch_create(ctx, gemm_def, traces.c_str(), nullptr, &gemm_dispatch) != KB_OK ||
      kb_dispatch_create(ctx, silu_def, traces.c_str(), nullptr, &silu_dispatch) != KB_OK) {
    std::fprintf(stderr, "test_hot_path: %s\n", kb_last_error());
    return 1;
  }
  std::filesystem::remove(traces);

  DeviceTensor x({16, 4096}, kDLBfloat), w({4096}, kDLBfloat), y({16, 4096}, kDLBfloat);
  DeviceTensor b({4096, 4096}, kDLFloat);
  DeviceTensor a16({16, 4096}, kDLFloat), c16({16, 4096}, kDLFloat);
  DeviceTensor a64({64, 4096}, kDLFloat), c64({64, 4096}, kDLFloat);
  DeviceTensor gate_up({16, 2 * 14336}, kDLBfloat), act({16, 14336}, kDLBfloat);
  std::vector<Call> calls = {
      {"dispatched rmsnorm, batch 16", norm_def, norm_dispatch, nullptr, {&x.view, &w.view}, {&y.view}},
      {"kb_cuda_rmsnorm by name", norm_def, nullptr, "kb_cuda_rmsnorm", {&x.view, &w.view}, {&y.view}},
      {"dispatched gemm, M = 16", gemm_def, gemm_dispatch, nullptr, {&a16.view, &b.view}, {&c16.view}},
      {"kb_cuda_gemv by name, M = 16", gemm_def, nullptr, "kb_cuda_gemv", {&a16.view, &b.view}, {&c16.view}},
      {"dispatched gemm, M = 64", gemm_def, gemm_dispatch, nullptr, {&a64.view, &b.view}, {&c64.view}},
      {"kb_cublaslt_gemm by name, M = 64", gemm_def, nullptr, "kb_cublaslt_gemm", {&a64.view, &b.view}, {&c64.view}},
      {"kb_cuda_gemm by name, M = 64", gemm_def, nullptr, "kb_cuda_gemm", {&a64.view, &b.view}, {&c64.view}},
      {"dispatched silu_and_mul, 16 tokens", silu_def, silu_dispatch, nullptr, {&gate_up.view}, {&act.view}},
      {"kb_cuda_silu_and_mul by name", silu_def, nullptr, "kb_cuda_silu_and_mul", {&gate_up.view}, {&act.view}},
      // last: the indices above (dispatched call i, by name i + 1) stay as they are
      {"kb_cuda_gemm by name, M = 16 (raced)", gemm_def, nullptr, "kb_cuda_gemm", {&a16.view, &b.view}, {&c16.view}},
  };
  // Paged decode attention on a shipped definition, when the shared data is there.
  kb_definition* decode_def = nullptr;
  const char* shared = std::getenv("KB_SHARED_DIR");
  const std::string decode_path =
      std::string(shared ? shared : "") + "/flashinfer-trace/definitions/gqa_paged/gqa_paged_decode_h32_kv8_d128_ps1.json";
  constexpr int kSeqs = 4, kKeys = 64, kPages = kSeqs * kKeys;
  DeviceTensor q({kSeqs, 32, 128}, kDLBfloat), k_cache({kPages, 1, 8, 128}, kDLBfloat),
      v_cache({kPages, 1, 8, 128}, kDLBfloat), attn_out({kSeqs, 32, 128}, kDLBfloat);
  DeviceTensor lse({kSeqs, 32}, kDLFloat, 32), indptr({kSeqs + 1}, kDLInt, 32), indices({kPages}, kDLInt, 32);
  {
    std::vector<int32_t> ptr(kSeqs + 1), idx(kPages);
    for (int s = 0; s <= kSeqs; ++s) ptr[s] = s * kKeys;
    for (int p = 0; p < kPages; ++p) idx[p] = (p * 37) % kPages;  // a permutation: pages scattered
    CU(cudaMemcpy(indptr.data, ptr.data(), ptr.size() * 4, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(indices.data, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
  }
  float scale_value = 0.08838834764831845f;  // 1 / sqrt(128)
  DLTensor scale{};
  scale.data = &scale_value;
  scale.device = DLDevice{kDLCPU, 0};
  scale.dtype = DLDataType{kDLFloat, 32, 1};
  if (shared && std::filesystem::exists(decode_path)) {
    if (kb_definition_load_file(ctx, decode_path.c_str(), &decode_def) != KB_OK) {
      std::fprintf(stderr, "test_hot_path: %s\n", kb_last_error());
      return 1;
    }
    calls.push_back({"kb_cuda_gqa_paged_decode by name, 4 x 64 keys", decode_def, nullptr, "kb_cuda_gqa_paged_decode",
                     {&q.view, &k_cache.view, &v_cache.view, &indptr.view, &indices.view, &scale},
                     {&attn_out.view, &lse.view}});
  } else {
    std::printf("skipped: kb_cuda_gqa_paged_decode (no %s)\n", shared ? decode_path.c_str() : "KB_SHARED_DIR");
  }

  // kb's other CUDA solutions by name, on small shapes: two sequences of 32 tokens for the prefills, four of 64
  // keys for MLA decode (pages scattered by a permutation). The definitions are kb's bundled fused add + RMSNorm
  // and, with $KB_SHARED_DIR, shipped ones.
  std::vector<std::unique_ptr<DeviceTensor>> more;  // the tensors of these calls
  std::vector<kb_definition*> more_defs;
  auto tensor = [&](std::vector<int64_t> shape, uint8_t code, uint8_t bits = 16) -> const DLTensor* {
    more.push_back(std::make_unique<DeviceTensor>(std::move(shape), code, bits));
    return &more.back()->view;
  };
  auto ints = [&](const std::vector<int32_t>& v) -> const DLTensor* {
    const DLTensor* t = tensor({static_cast<int64_t>(v.size())}, kDLInt, 32);
    CU(cudaMemcpy(more.back()->data, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    return t;
  };
  auto permutation = [](int n) {
    std::vector<int32_t> idx(n);
    for (int p = 0; p < n; ++p) idx[p] = (p * 37) % n;  // 37 is prime to 64 and 256
    return idx;
  };
  auto load = [&](const std::string& path) -> const kb_definition* {
    kb_definition* d = nullptr;
    if (kb_definition_load_file(ctx, path.c_str(), &d) != KB_OK) {
      std::fprintf(stderr, "test_hot_path: %s\n", kb_last_error());
      std::exit(1);
    }
    more_defs.push_back(d);
    return d;
  };
  {
    const kb_definition* d = load(kernels + "/rmsnorm/definitions/fused_add_rmsnorm_h4096.json");
    calls.push_back({"kb_cuda_rmsnorm (fused add) by name, batch 16", d, nullptr, "kb_cuda_rmsnorm",
                     {tensor({16, 4096}, kDLBfloat), tensor({16, 4096}, kDLBfloat), tensor({4096}, kDLBfloat)},
                     {tensor({16, 4096}, kDLBfloat)}});
  }
  const std::string defs = std::string(shared ? shared : "") + "/flashinfer-trace/definitions/";
  if (shared && std::filesystem::exists(defs + "mla_ragged/mla_ragged_prefill_causal_h16_qk192_vo128.json")) {
    const std::vector<int32_t> two_by_32 = {0, 32, 64}, four_by_64 = {0, 64, 128, 192, 256};
    const kb_definition* rope = load(defs + "rope/rope_with_cos_sin_cache_neox_style_d128_rd64.json");
    calls.push_back({"kb_cuda_rope by name, 16 tokens", rope, nullptr, "kb_cuda_rope",
                     {tensor({16, 32, 128}, kDLBfloat), tensor({16, 8, 128}, kDLBfloat),
                      tensor({4096, 64}, kDLFloat, 32), tensor({16}, kDLInt, 64)},
                     {tensor({16, 32, 128}, kDLBfloat), tensor({16, 8, 128}, kDLBfloat)}});
    const kb_definition* gqa_ragged = load(defs + "gqa_ragged/gqa_ragged_prefill_causal_h32_kv8_d128.json");
    calls.push_back({"kb_cuda_gqa_ragged_prefill by name, 2 x 32 tokens", gqa_ragged, nullptr,
                     "kb_cuda_gqa_ragged_prefill",
                     {tensor({64, 32, 128}, kDLBfloat), tensor({64, 8, 128}, kDLBfloat), tensor({64, 8, 128}, kDLBfloat),
                      ints(two_by_32), ints(two_by_32), &scale},
                     {tensor({64, 32, 128}, kDLBfloat), tensor({64, 32}, kDLFloat, 32)}});
    const kb_definition* gqa_paged = load(defs + "gqa_paged/gqa_paged_prefill_causal_h32_kv8_d128_ps1.json");
    calls.push_back({"kb_cuda_gqa_paged_prefill by name, 2 x 32 tokens", gqa_paged, nullptr,
                     "kb_cuda_gqa_paged_prefill",
                     {tensor({64, 32, 128}, kDLBfloat), tensor({64, 1, 8, 128}, kDLBfloat),
                      tensor({64, 1, 8, 128}, kDLBfloat), ints(two_by_32), ints(two_by_32), ints(permutation(64)),
                      &scale},
                     {tensor({64, 32, 128}, kDLBfloat), tensor({64, 32}, kDLFloat, 32)}});
    const kb_definition* mla_decode = load(defs + "mla_paged/mla_paged_decode_h16_ckv512_kpe64_ps1.json");
    calls.push_back({"kb_cuda_mla_paged_decode by name, 4 x 64 keys", mla_decode, nullptr, "kb_cuda_mla_paged_decode",
                     {tensor({4, 16, 512}, kDLBfloat), tensor({4, 16, 64}, kDLBfloat), tensor({256, 1, 512}, kDLBfloat),
                      tensor({256, 1, 64}, kDLBfloat), ints(four_by_64), ints(permutation(256)), &scale},
                     {tensor({4, 16, 512}, kDLBfloat), tensor({4, 16}, kDLFloat, 32)}});
    const kb_definition* mla_prefill = load(defs + "mla_paged/mla_paged_prefill_causal_h16_ckv512_kpe64_ps1.json");
    calls.push_back({"kb_cuda_mla_paged_prefill by name, 2 x 32 tokens", mla_prefill, nullptr,
                     "kb_cuda_mla_paged_prefill",
                     {tensor({64, 16, 512}, kDLBfloat), tensor({64, 16, 64}, kDLBfloat), tensor({64, 1, 512}, kDLBfloat),
                      tensor({64, 1, 64}, kDLBfloat), ints(two_by_32), ints(two_by_32), ints(permutation(64)), &scale},
                     {tensor({64, 16, 512}, kDLBfloat), tensor({64, 16}, kDLFloat, 32)}});
    const kb_definition* mla_ragged = load(defs + "mla_ragged/mla_ragged_prefill_causal_h16_qk192_vo128.json");
    calls.push_back({"kb_cuda_mla_ragged_prefill by name, 2 x 32 tokens", mla_ragged, nullptr,
                     "kb_cuda_mla_ragged_prefill",
                     {tensor({64, 16, 192}, kDLBfloat), tensor({64, 16, 192}, kDLBfloat), tensor({64, 16, 128}, kDLBfloat),
                      ints(two_by_32), ints(two_by_32), &scale},
                     {tensor({64, 16, 128}, kDLBfloat), tensor({64, 16}, kDLFloat, 32)}});
  } else {
    std::printf("skipped: rope, the prefills and MLA (no shipped definitions under KB_SHARED_DIR)\n");
  }
  // kb_cuda_gemm's long-K forms (kernels/gemm/cuda/long_k_race.hpp) on a shipped long-K weight: at M = 64 the
  // form its race cached, at M = 32 through a context with gemm_race=0 the static rule's (the batched chunks).
  kb_context_options no_race_options = KB_CONTEXT_OPTIONS_INIT;
  no_race_options.tuning = "gemm_race=0";
  if (kb_context_create(&no_race_options, KB_ABI_VERSION, &no_race) != KB_OK) {
    std::printf("FAIL kb_context_create with gemm_race=0: %s\n", kb_last_error());
    return 1;
  }
  if (shared && std::filesystem::exists(defs + "gemm/gemm_n5376_k21504.json")) {
    const kb_definition* long_k = load(defs + "gemm/gemm_n5376_k21504.json");
    const DLTensor* w = tensor({5376, 21504}, kDLFloat);
    calls.push_back({"kb_cuda_gemm by name, 5376 x 21504 at M = 64 (long K, raced)", long_k, nullptr, "kb_cuda_gemm",
                     {tensor({64, 21504}, kDLFloat), w}, {tensor({64, 5376}, kDLFloat)}});
    calls.push_back({"kb_cuda_gemm by name, 5376 x 21504 at M = 32 (long K, gemm_race=0: the static rule)", long_k,
                     nullptr, "kb_cuda_gemm", {tensor({32, 21504}, kDLFloat), w}, {tensor({32, 5376}, kDLFloat)},
                     no_race});
  } else {
    std::printf("skipped: kb_cuda_gemm's long-K forms (no shipped gemm_n5376_k21504 under KB_SHARED_DIR)\n");
  }

  // The dispatch picks what the traces say.
  for (std::size_t i : {0u, 2u, 4u, 7u}) {
    kb_dispatch_choice ch = KB_DISPATCH_CHOICE_INIT;
    const Call& c = calls[i];
    const kb_status s = kb_dispatch_choose(c.dispatch, c.in.data(), c.in.size(), c.out.data(), c.out.size(), &ch);
    check(s == KB_OK && ch.exact == 1, c.name + " chooses " + (s == KB_OK ? ch.solution : kb_last_error()));
  }

  cudaStream_t stream = nullptr;
  CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Warm-up: first calls set up plans, workspaces and the per-thread buffers.
  for (int r = 0; r < 3; ++r)
    for (const Call& c : calls)
      if (run(ctx, c, stream) != KB_OK) {
        std::fprintf(stderr, "test_hot_path: %s: %s\n", c.name.c_str(), kb_last_error());
        return 1;
      }
  CU(cudaStreamSynchronize(stream));

  // Each call 200 times in a row, counted, then all of them interleaved.
  constexpr int kRepeats = 200;
  for (const Call& c : calls) {
    allocations = 0;
    counting = true;
    int bad = 0;
    for (int r = 0; r < kRepeats; ++r) bad += run(ctx, c, stream) != KB_OK;
    counting = false;
    CU(cudaStreamSynchronize(stream));
    check(bad == 0 && allocations == 0, c.name + ": " + std::to_string(kRepeats) + " calls, " +
                                            std::to_string(allocations.load()) + " host allocations, " +
                                            std::to_string(bad) + " errors");
  }
  allocations = 0;
  counting = true;
  for (int r = 0; r < 50; ++r)
    for (const Call& c : calls) (void)run(ctx, c, stream);
  counting = false;
  CU(cudaStreamSynchronize(stream));
  check(allocations == 0, "all of them interleaved, 50 rounds: " + std::to_string(allocations.load()) +
                              " host allocations");

  // Dispatched and named calls give the same bits.
  for (std::size_t i : {0u, 2u, 4u, 7u}) {
    const DeviceTensor& out = i == 0 ? y : i == 2 ? c16 : i == 4 ? c64 : act;
    CU(cudaMemset(out.data, 0xff, out.bytes));
    check(run(ctx, calls[i], stream) == KB_OK, calls[i].name + " runs");
    CU(cudaStreamSynchronize(stream));
    const auto dispatched = out.read();
    CU(cudaMemset(out.data, 0xff, out.bytes));
    check(run(ctx, calls[i + 1], stream) == KB_OK, calls[i + 1].name + " runs");
    CU(cudaStreamSynchronize(stream));
    check(out.read() == dispatched, calls[i].name + " equals " + calls[i + 1].name + " bit for bit");
  }

  CU(cudaStreamDestroy(stream));
  kb_dispatch_destroy(norm_dispatch);
  kb_dispatch_destroy(gemm_dispatch);
  kb_dispatch_destroy(silu_dispatch);
  kb_definition_destroy(silu_def);
  kb_definition_destroy(decode_def);
  for (kb_definition* d : more_defs) kb_definition_destroy(d);
  kb_definition_destroy(norm_def);
  kb_definition_destroy(gemm_def);
  kb_context_destroy(no_race);
  kb_context_destroy(ctx);
  std::printf("%d failures\n", failures);
  return failures ? 1 : 0;
}
