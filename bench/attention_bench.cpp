// Benchmark driver for kb's paged decode and causal prefill kernels, run by
// bench/bench_attention.py on the GPU machine (bash bench/run.sh attention).
// Built as build*/tests/gpu/kb_attention_bench; without --kind it prints its
// usage and exits 2.
//
// For every (batch, keys per sequence, page size) it builds a paged cache on
// the device (bf16 values from a random normal pool, page ids a random
// permutation of all pages, every sequence `keys` long), then times the
// launcher with kb's timer (kb::cuda::time_gpu: CUDA events, L2 flushed before
// each sample, samples captured in CUDA graphs, median). Output: one JSON
// object per line; the first gives the device's measured copy bandwidth.
//
// usage: kb_attention_bench --kind gqa|mla [--hq 32] [--hkv 8] [--dim 128]
//          [--batches 1,16,...] [--keys 512,...] [--page-sizes 1,64]
//          [--max-kv-gib 9] [--max-time 0.4] [--page-order random|sequential]
//        kb_attention_bench --kind prefill-gqa|prefill-gqa-ragged|prefill-mla [--hq 32] [--hkv 8]
//          [--batches 1] [--keys 512,...,16384 (total query tokens; q_len = kv_len = tokens / batch)]
//          [--page-sizes 1,64] [--max-time 0.4] [--page-order random|sequential]
//        kb_attention_bench --kind gqa --shapes B:L:PS:HQ:HKV:D,... [--max-kv-gib 9] [--max-time 0.4]
//   --shapes: GQA decode at exactly these shapes (batch, keys per sequence,
//   page size, query heads, kv heads, head_dim), in place of the product of
//   --batches x --keys x --page-sizes at one --hq / --hkv / --dim
//   (bench/bench_attention.py --grid decode generates them).
//   --page-order sequential: page ids in order (each sequence's pages
//   contiguous in the cache) instead of a random permutation, to tell the
//   cost of scattered pages from the cost of the page lookup.
//   causal prefill (kernels/attention/prefill.cuh): the plan is made once
//   (PrefillMode::plan_only) and timed apart ("plan_ms"); "ms" times the
//   attention kernel alone (run_only), as an engine replaying one layout would.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../../kernels/attention/launch.hpp"
#include "cuda/device.hpp"
#include "cuda/timing.hpp"

namespace {

std::vector<std::int64_t> parse_list(const std::string& s) {
  std::vector<std::int64_t> v;
  std::size_t p = 0;
  while (p < s.size()) {
    std::size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    v.push_back(std::strtoll(s.substr(p, q - p).c_str(), nullptr, 10));
    p = q + 1;
  }
  return v;
}

// One GQA / MLA decode shape.
struct DecodeShape {
  std::int64_t batch, keys, page_size, hq, hkv, dim;
};

// --shapes B:L:PS:HQ:HKV:D,...; empty on a malformed entry.
std::vector<DecodeShape> parse_shapes(const std::string& s) {
  std::vector<DecodeShape> out;
  std::size_t p = 0;
  while (p < s.size()) {
    std::size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    DecodeShape d{};
    long long v[6];
    if (std::sscanf(s.substr(p, q - p).c_str(), "%lld:%lld:%lld:%lld:%lld:%lld", &v[0], &v[1], &v[2], &v[3], &v[4],
                    &v[5]) != 6)
      return {};
    d.batch = v[0], d.keys = v[1], d.page_size = v[2], d.hq = v[3], d.hkv = v[4], d.dim = v[5];
    if (d.batch < 1 || d.keys < 1 || d.page_size < 1 || d.hq < 1 || d.hkv < 1 || d.dim < 1) return {};
    out.push_back(d);
    p = q + 1;
  }
  return out;
}

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::printf("{\"error\": \"%s: %s\"}\n", what, cudaGetErrorString(e));
  return false;
}

std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<std::uint16_t>(u >> 16);
}

// --page-order: a random permutation of all pages (the default) or page ids in order.
bool g_random_pages = true;

// Fills `bytes` of device memory with bf16 values from a random normal pool.
bool fill_random(void* dst, std::size_t bytes, const void* pool, std::size_t pool_bytes, cudaStream_t s) {
  for (std::size_t off = 0; off < bytes; off += pool_bytes) {
    const std::size_t n = std::min(pool_bytes, bytes - off);
    if (!ok(cudaMemcpyAsync(static_cast<char*>(dst) + off, pool, n, cudaMemcpyDeviceToDevice, s), "fill")) return false;
  }
  return true;
}


// Causal prefill rows (see the usage above). Returns the number of failures.
int run_prefill(const std::string& kind, std::int64_t hq, std::int64_t hkv, const std::vector<std::int64_t>& batches,
                const std::vector<std::int64_t>& tokens_list, std::vector<std::int64_t> page_sizes, double max_time,
                void* pool, std::size_t pool_bytes, cudaStream_t stream) {
  const bool mla = kind == "prefill-mla", ragged = kind == "prefill-gqa-ragged";
  if (ragged) page_sizes = {1};
  if (mla) hkv = 1;
  const std::int64_t dqk = mla ? 576 : 128, dv = mla ? 512 : 128;
  int failures = 0;
  for (std::int64_t ps : page_sizes)
    for (std::int64_t batch : batches)
      for (std::int64_t tokens : tokens_list) {
        const std::int64_t L = tokens / batch;  // q_len == kv_len per sequence
        if (L < 1) continue;
        const std::int64_t total = L * batch;
        const std::int64_t pages_per_seq = (L + ps - 1) / ps, pages = batch * pages_per_seq;
        const std::int64_t last = L - (pages_per_seq - 1) * ps;
        const std::int64_t rows = ragged ? total : pages * ps;  // K / V rows
        const std::size_t q_bytes = static_cast<std::size_t>(total * hq * dqk * 2);
        const std::size_t out_bytes = static_cast<std::size_t>(total * hq * dv * 2);
        const std::size_t k_bytes = static_cast<std::size_t>(rows * hkv * (mla ? 512 : dqk) * 2);
        const std::size_t v_bytes = static_cast<std::size_t>(rows * hkv * (mla ? 64 : dv) * 2);
        void *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr, *lse = nullptr, *idx = nullptr;
        bool good = ok(cudaMalloc(&q, q_bytes), "q") && ok(cudaMalloc(&k, k_bytes), "k") && ok(cudaMalloc(&v, v_bytes), "v") &&
                    ok(cudaMalloc(&out, out_bytes), "out") && ok(cudaMalloc(&lse, total * hq * 4), "lse") &&
                    ok(cudaMalloc(&idx, static_cast<std::size_t>(pages + 3 * batch + 2) * 4), "index");
        if (good) good = fill_random(q, q_bytes, pool, pool_bytes, stream) && fill_random(k, k_bytes, pool, pool_bytes, stream) &&
                         fill_random(v, v_bytes, pool, pool_bytes, stream);
        std::vector<std::int32_t> h(static_cast<std::size_t>(pages + 3 * batch + 2));
        std::int32_t* qo = h.data();
        std::int32_t* kvp = qo + batch + 1;
        std::int32_t* indices = kvp + batch + 1;
        std::int32_t* lastlen = indices + pages;
        for (std::int64_t b = 0; b <= batch; ++b) {
          qo[b] = static_cast<std::int32_t>(b * L);
          kvp[b] = static_cast<std::int32_t>(ragged ? b * L : b * pages_per_seq);
        }
        std::iota(indices, indices + pages, 0);
        if (g_random_pages) std::shuffle(indices, indices + pages, std::mt19937_64(7));
        for (std::int64_t b = 0; b < batch; ++b) lastlen[b] = static_cast<std::int32_t>(last);
        if (good) good = ok(cudaMemcpyAsync(idx, h.data(), h.size() * 4, cudaMemcpyHostToDevice, stream), "index upload") &&
                         ok(cudaStreamSynchronize(stream), "setup");
        const auto* d_qo = static_cast<const std::int32_t*>(idx);
        const auto* d_kvp = d_qo + batch + 1;
        const auto* d_indices = d_kvp + batch + 1;
        const auto* d_last = d_indices + pages;
        std::function<kb::Status(kb::kernels::PrefillMode, void*)> call;
        if (!mla) {
          kb::kernels::GqaPrefillArgs a;
          a.q = q, a.k = k, a.v = v, a.qo_indptr = d_qo, a.kv_indptr = d_kvp;
          a.kv_indices = ragged ? nullptr : d_indices, a.kv_last_page_len = ragged ? nullptr : d_last;
          a.output = out, a.lse = static_cast<float*>(lse);
          a.batch = batch, a.total_q = total, a.num_qo_heads = hq, a.num_kv_heads = hkv, a.head_dim_qk = dqk,
          a.head_dim_vo = dv, a.paged = !ragged, a.page_size = ps, a.num_kv_indices = ragged ? 0 : pages;
          a.kv_rows = ragged ? rows : pages, a.sm_scale = 1.0 / std::sqrt(static_cast<double>(dqk));
          call = [a](kb::kernels::PrefillMode m, void* s) { return kb::kernels::launch_gqa_prefill(a, s, m); };
        } else {
          kb::kernels::MlaPagedPrefillArgs a;
          a.q_nope = q, a.q_pe = static_cast<char*>(q) + static_cast<std::size_t>(total * hq * 512 * 2);
          a.ckv_cache = k, a.kpe_cache = v, a.qo_indptr = d_qo, a.kv_indptr = d_kvp, a.kv_indices = d_indices;
          a.kv_last_page_len = d_last, a.output = out, a.lse = static_cast<float*>(lse);
          a.batch = batch, a.total_q = total, a.num_qo_heads = hq, a.head_dim_ckv = 512, a.head_dim_kpe = 64;
          a.page_size = ps, a.num_pages = pages, a.num_kv_indices = pages, a.sm_scale = 1.0 / std::sqrt(192.0);
          call = [a](kb::kernels::PrefillMode m, void* s) { return kb::kernels::launch_mla_paged_prefill(a, s, m); };
        }
        if (good) {
          // Plan once (the layout never changes), then time plan and kernel apart.
          kb::Status st = call(kb::kernels::PrefillMode::plan_only, stream);
          if (!st || !ok(cudaStreamSynchronize(stream), "plan")) {
            std::printf("{\"error\": \"plan: %s\"}\n", st ? "sync" : st.error().message.c_str());
            good = false;
          }
        }
        if (good) {
          kb::cuda::TimingOptions o;
          o.max_time_s = max_time;
          auto t = kb::cuda::time_gpu([&](int, void* s) { return call(kb::kernels::PrefillMode::run_only, s); }, stream, o);
          kb::cuda::TimingOptions op;
          op.max_time_s = 0.1;
          // The plan rewrites the same items: timing it leaves a valid plan behind.
          auto tp = kb::cuda::time_gpu([&](int, void* s) { return call(kb::kernels::PrefillMode::plan_only, s); }, stream, op);
          if (!t) {
            std::printf("{\"error\": \"%s\"}\n", t.error().message.c_str());
            ++failures;
          } else {
            // Causal FLOPs: every sequence L(L+1)/2 visible (query, key) pairs, qk and vo dims, 2 per multiply-add.
            const double flops = 2.0 * static_cast<double>(batch) * static_cast<double>(hq) *
                                 (static_cast<double>(L) * static_cast<double>(L + 1) / 2) * static_cast<double>(dqk + dv);
            std::printf(
                "{\"kind\": \"%s\", \"batch\": %lld, \"tokens\": %lld, \"seq_len\": %lld, \"page_size\": %lld, "
                "\"hq\": %lld, \"hkv\": %lld, \"dqk\": %lld, \"dv\": %lld, \"ms\": %.6f, \"min_ms\": %.6f, "
                "\"rel_noise\": %.4f, \"samples\": %zu, \"graph\": %s, \"plan_ms\": %.6f, \"flops\": %.0f, "
                "\"tflops\": %.2f, \"throttled\": %s}\n",
                kind.c_str(), static_cast<long long>(batch), static_cast<long long>(total), static_cast<long long>(L),
                static_cast<long long>(ragged ? 0 : ps), static_cast<long long>(hq), static_cast<long long>(hkv),
                static_cast<long long>(dqk), static_cast<long long>(dv), t->median_ms, t->min_ms, t->rel_noise,
                t->samples, t->graph ? "true" : "false", tp ? tp->median_ms : -1.0, flops,
                flops / (t->median_ms * 1e-3) / 1e12, t->throttled ? "true" : "false");
          }
        } else {
          ++failures;
        }
        std::fflush(stdout);
        cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(out), cudaFree(lse), cudaFree(idx);
      }
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  std::string kind;
  std::int64_t hq = 32, hkv = 8, dim = 128;
  std::vector<std::int64_t> batches{1, 16, 64}, keys{512, 8192}, page_sizes{1, 64};
  double max_kv_gib = 9, max_time = 0.4;
  std::vector<DecodeShape> shapes;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--kind") kind = v;
    else if (a == "--shapes") {
      shapes = parse_shapes(v);
      if (shapes.empty()) {
        std::printf("--shapes: expected B:L:PS:HQ:HKV:D,... with every value >= 1, got %s\n", v.c_str());
        return 2;
      }
    }
    else if (a == "--hq") hq = std::atoll(v.c_str());
    else if (a == "--hkv") hkv = std::atoll(v.c_str());
    else if (a == "--dim") dim = std::atoll(v.c_str());
    else if (a == "--batches") batches = parse_list(v);
    else if (a == "--keys") keys = parse_list(v);
    else if (a == "--page-sizes") page_sizes = parse_list(v);
    else if (a == "--max-kv-gib") max_kv_gib = std::atof(v.c_str());
    else if (a == "--max-time") max_time = std::atof(v.c_str());
    else if (a == "--page-order" && (v == "random" || v == "sequential")) g_random_pages = v == "random";
    else {
      std::printf("unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const bool prefill = kind == "prefill-gqa" || kind == "prefill-gqa-ragged" || kind == "prefill-mla";
  if (kind != "gqa" && kind != "mla" && !prefill) {
    std::printf("usage: kb_attention_bench --kind gqa|mla|prefill-gqa|prefill-gqa-ragged|prefill-mla [options]; "
                "run through bench/bench_attention.py\n");
    return 2;
  }
  auto n = kb::cuda::device_count();
  if (!n || cudaFree(nullptr) != cudaSuccess) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  const bool mla = kind == "mla";
  if (mla) dim = 512;
  cudaStream_t stream = nullptr;
  if (!ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream")) return 1;

  auto ceilings = kb::cuda::measure_ceilings(stream);
  std::printf("{\"copy_gbs\": %.1f}\n", ceilings ? ceilings->copy_bandwidth_gbs : 0.0);
  std::fflush(stdout);

  // A 64 MiB pool of bf16 N(0, 1) values, copied over every buffer.
  const std::size_t pool_elems = std::size_t{32} << 20;
  void* pool = nullptr;
  {
    std::vector<std::uint16_t> h(pool_elems);
    std::mt19937_64 rng(42);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& x : h) x = to_bf16(nd(rng));
    if (!ok(cudaMalloc(&pool, pool_elems * 2), "pool")) return 1;
    if (!ok(cudaMemcpy(pool, h.data(), pool_elems * 2, cudaMemcpyHostToDevice), "pool upload")) return 1;
    if (!ok(cudaDeviceSynchronize(), "pool upload landing")) return 1;
  }

  if (prefill) {
    const int f = run_prefill(kind, hq, hkv, batches, keys, page_sizes, max_time, pool, pool_elems * 2, stream);
    cudaFree(pool);
    cudaStreamDestroy(stream);
    return f ? 1 : 0;
  }

  if (!shapes.empty() && mla) {
    std::printf("--shapes: GQA decode only\n");
    return 2;
  }
  if (shapes.empty())
    for (std::int64_t ps : page_sizes)
      for (std::int64_t batch : batches)
        for (std::int64_t L : keys) shapes.push_back({batch, L, ps, hq, mla ? 1 : hkv, dim});
  // MLA: ckv + kpe; GQA: K + V.
  auto kv_bytes_per_token = [mla](const DecodeShape& c) { return mla ? 576 * 2 : 2 * c.hkv * c.dim * 2; };
  int failures = 0;
  // One KV pool for every case, allocated once, as an engine allocates its
  // cache at start: a cache allocated per case lands wherever the earlier
  // cases' allocations left room, and one case (GQA batch 256 x 512 keys, page
  // size 64) ran 206 us in a fresh process but 237 us after the sweep's
  // earlier cases (H100, 2026-11-24).
  std::size_t pool_cache_bytes = 0;
  for (const DecodeShape& c : shapes) {
    if (static_cast<double>(c.batch) * c.keys * kv_bytes_per_token(c) > max_kv_gib * (1ull << 30)) continue;
    const std::int64_t pages = c.batch * ((c.keys + c.page_size - 1) / c.page_size);
    pool_cache_bytes = std::max(pool_cache_bytes, static_cast<std::size_t>(pages * c.page_size) *
                                                      static_cast<std::size_t>(kv_bytes_per_token(c)));
  }
  void* kv_pool = nullptr;
  if (pool_cache_bytes > 0 && !ok(cudaMalloc(&kv_pool, pool_cache_bytes), "KV pool")) return 1;
  for (const DecodeShape& c : shapes) {
    const std::int64_t ps = c.page_size, batch = c.batch, L = c.keys;
    hq = c.hq, hkv = c.hkv, dim = c.dim;
    const std::int64_t qk_dim = mla ? 576 : dim;
    const double kv_bytes = static_cast<double>(batch) * L * kv_bytes_per_token(c);
    if (kv_bytes > max_kv_gib * (1ull << 30)) continue;
    const std::int64_t pages_per_seq = (L + ps - 1) / ps;
    const std::int64_t pages = batch * pages_per_seq;
    const std::int64_t last = L - (pages_per_seq - 1) * ps;
    // Device buffers.
    const std::size_t q_bytes = static_cast<std::size_t>(batch * hq * qk_dim * 2);
    const std::size_t out_bytes = static_cast<std::size_t>(batch * hq * dim * 2);
    const std::size_t cache_bytes = static_cast<std::size_t>(pages * ps) * static_cast<std::size_t>(kv_bytes_per_token(c));
    void *q = nullptr, *cache = kv_pool, *out = nullptr, *lse = nullptr, *idx = nullptr;
    bool good = ok(cudaMalloc(&q, q_bytes), "q") && ok(cudaMalloc(&out, out_bytes), "out") &&
                ok(cudaMalloc(&lse, batch * hq * 4), "lse") &&
                ok(cudaMalloc(&idx, static_cast<std::size_t>(pages + 2 * batch + 1) * 4), "index");
    if (good) good = fill_random(q, q_bytes, pool, pool_elems * 2, stream) &&
                     fill_random(cache, cache_bytes, pool, pool_elems * 2, stream);
    // Page table: a random permutation of all pages, sequences in order.
    std::vector<std::int32_t> h(static_cast<std::size_t>(pages + 2 * batch + 1));
    std::int32_t* indptr = h.data();
    std::int32_t* indices = indptr + batch + 1;
    std::int32_t* lastlen = indices + pages;
    for (std::int64_t b = 0; b <= batch; ++b) indptr[b] = static_cast<std::int32_t>(b * pages_per_seq);
    std::iota(indices, indices + pages, 0);
    if (g_random_pages) std::shuffle(indices, indices + pages, std::mt19937_64(7));
    for (std::int64_t b = 0; b < batch; ++b) lastlen[b] = static_cast<std::int32_t>(last);
    if (good) good = ok(cudaMemcpyAsync(idx, h.data(), h.size() * 4, cudaMemcpyHostToDevice, stream), "index upload") &&
                     ok(cudaStreamSynchronize(stream), "setup");
    const auto* d_indptr = static_cast<const std::int32_t*>(idx);
    const auto* d_indices = d_indptr + batch + 1;
    const auto* d_last = d_indices + pages;
    int splits = 0;
    std::function<kb::Status(int, void*)> launch;
    if (!mla) {
      kb::kernels::GqaPagedDecodeArgs a;
      a.q = q;
      a.k_cache = cache;
      a.v_cache = static_cast<char*>(cache) + cache_bytes / 2;
      a.kv_indptr = d_indptr, a.kv_indices = d_indices, a.kv_last_page_len = ps > 1 ? d_last : nullptr;
      a.output = out, a.lse = static_cast<float*>(lse);
      a.batch = batch, a.num_qo_heads = hq, a.num_kv_heads = hkv, a.head_dim = dim, a.page_size = ps;
      a.num_pages = pages, a.num_kv_indices = pages, a.sm_scale = 1.0 / std::sqrt(static_cast<double>(dim));
      launch = [a, &splits](int, void* s) { return kb::kernels::launch_gqa_paged_decode(a, s, &splits); };
    } else {
      kb::kernels::MlaPagedDecodeArgs a;
      a.q_nope = q;
      a.q_pe = static_cast<char*>(q) + static_cast<std::size_t>(batch * hq * 512 * 2);
      a.ckv_cache = cache;
      a.kpe_cache = static_cast<char*>(cache) + static_cast<std::size_t>(pages * ps) * 512 * 2;
      a.kv_indptr = d_indptr, a.kv_indices = d_indices, a.kv_last_page_len = ps > 1 ? d_last : nullptr;
      a.output = out, a.lse = static_cast<float*>(lse);
      a.batch = batch, a.num_qo_heads = hq, a.head_dim_ckv = 512, a.head_dim_kpe = 64, a.page_size = ps;
      a.num_pages = pages, a.num_kv_indices = pages, a.sm_scale = 1.0 / std::sqrt(192.0);
      launch = [a, &splits](int, void* s) { return kb::kernels::launch_mla_paged_decode(a, s, &splits); };
    }
    if (good) {
      kb::cuda::TimingOptions o;
      o.max_time_s = max_time;
      auto t = kb::cuda::time_gpu(launch, stream, o);
      if (!t) {
        std::printf("{\"error\": \"%s\"}\n", t.error().message.c_str());
        ++failures;
      } else {
        // Bytes: the KV each sequence reads, q, output, lse, page table; each once.
        const double bytes = kv_bytes + q_bytes + out_bytes + batch * hq * 4.0 + (pages + batch + 1) * 4.0;
        std::printf(
            "{\"kind\": \"%s\", \"batch\": %lld, \"keys\": %lld, \"page_size\": %lld, \"hq\": %lld, \"hkv\": %lld, "
            "\"dim\": %lld, \"ms\": %.6f, \"min_ms\": %.6f, \"rel_noise\": %.4f, \"samples\": %zu, \"graph\": %s, "
            "\"splits\": %d, \"bytes\": %.0f, \"gbs\": %.1f, \"throttled\": %s}\n",
            kind.c_str(), static_cast<long long>(batch), static_cast<long long>(L), static_cast<long long>(ps),
            static_cast<long long>(hq), static_cast<long long>(mla ? 1 : hkv), static_cast<long long>(dim),
            t->median_ms, t->min_ms, t->rel_noise, t->samples, t->graph ? "true" : "false", splits, bytes,
            bytes / (t->median_ms * 1e-3) / 1e9, t->throttled ? "true" : "false");
      }
    } else {
      ++failures;
    }
    std::fflush(stdout);
    cudaFree(q), cudaFree(out), cudaFree(lse), cudaFree(idx);
  }
  cudaFree(kv_pool);
  cudaFree(pool);
  cudaStreamDestroy(stream);
  return failures ? 1 : 0;
}
