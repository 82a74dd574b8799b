// The launch rules kb's CUDA kernels take from shapes alone, checked on the
// CPU: which gemv block size fills its waves (kernels/gemm/cuda/gemv.hpp),
// which L2 policy a read-once stream gets (kernels/common/l2_stream_policy.cuh),
// how many CTAs an SM needs to stream pages (kernels/common/stream_ctas.hpp),
// how the paged decode cuts sequences into chunks (kernels/attention/decode_plan.hpp)
// and how many CTAs of a cluster hold a sampling row (kernels/sampling/cuda/sampling_launch.hpp).
// The expected answers are the ones measurements on an H100 and an H200
// chose; a rule change that flips them must be measured again.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <map>
#include <mutex>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <algorithm>
#include <queue>
#include <random>
#include <vector>

#include "attention/decode_plan.hpp"
#include "common/l2_stream_policy.cuh"
#include "common/tuning.hpp"
#include "common/stream_ctas.hpp"
#include "gemm/cuda/cublaslt_tiles.hpp"
#include "gemm/cuda/gemv.hpp"
#include "gemm/cuda/gemv_or_cublaslt.hpp"
#include "gemm/cuda/long_k.hpp"
#include "gemm/cuda/race.hpp"
#include "gemm/cuda/race_file.hpp"
#include "sampling/cuda/sampling_launch.hpp"

using kb::kernels::gemm_cuda::GemvBalance;
using kb::kernels::gemm_cuda::GemvPlan;
using kb::kernels::gemm_cuda::gemv_plan_fill;
using kb::kernels::gemm_cuda::gemv_small_m_rows;
using kb::kernels::gemm_cuda::gemv_balanced_blocks;
using kb::kernels::gemm_cuda::gemv_bulk_rows;
using kb::kernels::gemm_cuda::gemv_rows_per_block;
using kb::kernels::gemm_cuda::gemv_wave_fill;

TEST_CASE("gemv wave fill: blocks over whole waves of resident slots") {
  // 448 blocks of 16 rows on 132 SMs x 4: one wave of 528 slots.
  CHECK(gemv_wave_fill(7168, 16, 132, 4) == doctest::Approx(448.0 / 528.0));
  // 640 blocks on 528 slots: two waves, the second short.
  CHECK(gemv_wave_fill(10240, 16, 132, 4) == doctest::Approx(640.0 / 1056.0));
  // A partial block counts as a block; a zero occupancy is taken as one slot an SM.
  CHECK(gemv_wave_fill(33, 32, 132, 3) == doctest::Approx(2.0 / 396.0));
  CHECK(gemv_wave_fill(32, 32, 1, 0) == doctest::Approx(1.0));
}

TEST_CASE("gemv rows per block follow the H100 measurements") {
  // H100: 132 SMs; resident blocks from the occupancy of the committed kernels:
  // M <= 8: 4 of 16 rows, 3 of 32; M = 16: 3 of 16 rows, 2 of 32.
  // M = 1: 16384 x 3072 ran 41.8 us with 16 rows against 43.8 with 32;
  // 10240 x 8192 69.1 with 32 against 72.4 with 16.
  CHECK(gemv_rows_per_block(16384, 132, 4, 3) == 16);
  CHECK(gemv_rows_per_block(10240, 132, 4, 3) == 32);
  CHECK(gemv_rows_per_block(4096, 132, 4, 3) == 16);
  // M = 16: 8192 x 8192 ran 56.8 us with 32 rows against 60.5 with 16;
  // 4096 x 14336 51.4 with 16 against 52.6; 10240 x 8192 68.7 with 16
  // (cuBLASLt 71.6 took the 32-row plan's short last wave).
  CHECK(gemv_rows_per_block(8192, 132, 3, 2) == 32);
  CHECK(gemv_rows_per_block(4096, 132, 3, 2) == 16);
  CHECK(gemv_rows_per_block(10240, 132, 3, 2) == 16);
  // A tie (21504 rows at M = 1: 28/33 either way) goes to 16.
  CHECK(gemv_wave_fill(21504, 16, 132, 4) == gemv_wave_fill(21504, 32, 132, 3));
  CHECK(gemv_rows_per_block(21504, 132, 4, 3) == 16);
}

namespace {
// A finished plan as gemv_plan makes it on 132 SMs (an H100's or H200's).
GemvPlan plan_of(int rows, int row_blocks, int splits, int k_iterations, int blocks_per_sm, int warps = 8) {
  GemvPlan p;
  p.rows_per_block = rows;
  p.row_blocks = row_blocks;
  p.splits = splits;
  p.warps = warps;
  p.k_iterations = k_iterations;
  p.blocks_per_sm = blocks_per_sm;
  p.sm_count = 132;
  p.dram_gbps = 4915;  // an H200's
  return p;
}
}  // namespace

TEST_CASE("gemv rows per block at 2 <= M <= 8 follow the H200 measurements") {
  // M = 2, 4, 8; 4 blocks of 16 rows an SM, 3 of 32.
  // 5376 x 21504: 336 x 1 of 16 rows against 168 x 2 of 32, the same fill: 32 ran 68.6 us against 76.0.
  const GemvPlan p16 = plan_of(16, 336, 1, 336, 4), p32 = plan_of(32, 168, 2, 336, 3);
  CHECK(gemv_plan_fill(p16) == doctest::Approx(336.0 / 528.0));
  CHECK(gemv_plan_fill(p32) == doctest::Approx(336.0 / 396.0));
  CHECK(gemv_small_m_rows(p16, p32) == 32);
  // 7168 x 5120: one wave either way, 32 fills worse (224 / 396) and still ran 25.1 us against 25.9.
  CHECK(gemv_small_m_rows(plan_of(16, 448, 1, 80, 4), plan_of(32, 224, 1, 80, 3)) == 32);
  // 28672 x 4096: several waves, 32 fills a little worse (0.75 against 0.85) and ran 68.7 us against 71.8.
  CHECK(gemv_small_m_rows(plan_of(16, 1792, 1, 64, 4), plan_of(32, 896, 1, 64, 3)) == 32);
  // 16384 x 3072: 512 blocks of 32 on 396 slots (fill 0.65) against 1024 of 16 on 528 (0.97): 35.2 us
  // against 32.9, so 16.
  CHECK(gemv_small_m_rows(plan_of(16, 1024, 1, 48, 4), plan_of(32, 512, 1, 48, 3)) == 16);
  // 5120 x 2048: 32 rows split in two leave each warp 2 K steps (13.3 us against 12.3): no preference.
  CHECK(gemv_small_m_rows(plan_of(16, 320, 1, 32, 4), plan_of(32, 160, 2, 32, 3)) == 0);
  // Fewer warps per block fit proportionally more blocks on an SM.
  CHECK(gemv_plan_fill(plan_of(32, 8, 14, 112, 3, 4)) == doctest::Approx(112.0 / 792.0));
}

TEST_CASE("gemv bulk kernel where the H200 measurements chose it") {
  // Plans on 132 SMs as gemv_plan
  // makes them. M = 1: 16-row blocks unsplit, at most two an SM: 4096 x 14336 (256 blocks) 0.948 of the plain
  // kernel's time.
  CHECK(gemv_bulk_rows(1, 4096, 14336, plan_of(16, 256, 1, 224, 4)) == 16);
  CHECK(gemv_bulk_rows(1, 2048, 4096, plan_of(16, 128, 1, 64, 4)) == 16);
  // ... not 5120 x 5120 (320 blocks: 1.018), 7168 x 5120 (448: 1.057), nor a split plan (128 x 2048: 1.061), all
  // measured.
  CHECK(gemv_bulk_rows(1, 5120, 5120, plan_of(16, 320, 1, 80, 4)) == 0);
  CHECK(gemv_bulk_rows(1, 7168, 5120, plan_of(16, 448, 1, 80, 4)) == 0);
  CHECK(gemv_bulk_rows(1, 128, 2048, plan_of(16, 8, 16, 32, 4)) == 0);
  // 2 <= M <= 8: 16-row blocks 2-3 an SM and K >= 3072 (5376 x 4096 at M = 4: 0.944), whatever the plain rows.
  CHECK(gemv_bulk_rows(4, 5376, 4096, plan_of(32, 168, 2, 64, 3)) == 16);
  CHECK(gemv_bulk_rows(8, 6144, 4096, plan_of(32, 192, 2, 64, 3)) == 16);
  // ... and 1-2 an SM, unsplit (4096 x 14336 at M = 2 0.917, 3584 x 3584 at M = 8 0.956);
  // not K = 2048 (5120 x 2048: 1.05-1.07), not 7168 x 5120 (448 blocks: 1.04), not fewer
  // blocks than SMs (2048 x 4096: 128 blocks, up to 1.07).
  CHECK(gemv_bulk_rows(2, 4096, 14336, plan_of(32, 128, 3, 224, 3)) == 16);
  CHECK(gemv_bulk_rows(8, 3584, 3584, plan_of(16, 224, 2, 56, 4)) == 16);
  CHECK(gemv_bulk_rows(4, 5120, 2048, plan_of(16, 320, 1, 32, 4)) == 0);
  CHECK(gemv_bulk_rows(8, 7168, 5120, plan_of(32, 224, 1, 80, 3)) == 0);
  CHECK(gemv_bulk_rows(8, 2048, 4096, plan_of(16, 128, 4, 64, 4)) == 0);
  // M >= 10: where the plain plan has 32-row blocks (8192 x 8192 at M = 16: 0.957), not 16 (10240 x 8192: 1.03);
  // not M = 9 (16384 x 3072: 1.038).
  CHECK(gemv_bulk_rows(16, 8192, 8192, plan_of(32, 256, 1, 128, 2)) == 32);
  CHECK(gemv_bulk_rows(10, 7168, 5120, plan_of(32, 224, 1, 80, 2)) == 32);
  CHECK(gemv_bulk_rows(16, 10240, 8192, plan_of(16, 640, 1, 128, 3)) == 0);
  CHECK(gemv_bulk_rows(9, 16384, 3072, plan_of(32, 512, 1, 48, 2)) == 0);
  // Only where measured: not on an H100's 3.35 TB/s, nor when the rate is unknown.
  GemvPlan h100 = plan_of(16, 256, 1, 224, 4);
  h100.dram_gbps = 3352;
  CHECK(gemv_bulk_rows(1, 4096, 14336, h100) == 0);
  h100.dram_gbps = 0;
  CHECK(gemv_bulk_rows(1, 4096, 14336, h100) == 0);
  // Never over a balanced plan (the bulk kernel keeps whole tiles).
  GemvPlan balanced = plan_of(32, 264, 1, 128, 2);
  balanced.balanced = true;
  CHECK(gemv_bulk_rows(16, 8192, 8192, balanced) == 0);
}

TEST_CASE("gemv balance: rows spread over a multiple of the SMs or of the slots") {
  // 7168 rows in 448 tiles of 16 on 132 SMs x 4 slots: four blocks of 13-14 rows on every SM.
  CHECK(gemv_balanced_blocks(448, 132, 528, GemvBalance::off) == 448);
  CHECK(gemv_balanced_blocks(448, 132, 528, GemvBalance::sm) == 528);
  CHECK(gemv_balanced_blocks(448, 132, 528, GemvBalance::wave) == 528);
  // Several waves: 1792 tiles (28672 rows) -> 14 blocks an SM, or 4 full waves.
  CHECK(gemv_balanced_blocks(1792, 132, 528, GemvBalance::sm) == 1848);
  CHECK(gemv_balanced_blocks(1792, 132, 528, GemvBalance::wave) == 2112);
  // A multiple already, and fewer tiles than SMs (split-K's case): unchanged.
  CHECK(gemv_balanced_blocks(264, 132, 528, GemvBalance::sm) == 264);
  CHECK(gemv_balanced_blocks(8, 132, 528, GemvBalance::sm) == 8);
  CHECK(gemv_balanced_blocks(131, 132, 528, GemvBalance::wave) == 131);
  // Never fewer blocks than tiles, so no block holds more than one tile's rows.
  for (std::int64_t tiles = 1; tiles < 5000; tiles += 7)
    for (GemvBalance b : {GemvBalance::off, GemvBalance::sm, GemvBalance::wave}) {
      const std::int64_t blocks = gemv_balanced_blocks(tiles, 132, 396, b);
      CHECK(blocks >= tiles);
      CHECK(blocks < tiles + 396);
    }
}

TEST_CASE("read-once streams: evict_first up to 6 x the L2 size") {
  const std::int64_t l2 = std::int64_t{50} << 20;  // an H100's
  CHECK(kb::kernels::stream_evict_first(6 * l2, l2));
  CHECK_FALSE(kb::kernels::stream_evict_first(6 * l2 + 1, l2));
  // Decode KV of GQA 32/8 d128, batch 4 x 8192 keys (134 MB): evict_first was
  // 7% faster; batch 4 x 32768 (537 MB): 4% slower.
  CHECK(kb::kernels::stream_evict_first(std::int64_t{4} * 8192 * 8 * 128 * 2 * 2, l2));
  CHECK_FALSE(kb::kernels::stream_evict_first(std::int64_t{4} * 32768 * 8 * 128 * 2 * 2, l2));
  CHECK(kb::kernels::evict_first_fraction(true) == 1.0f);
  CHECK(kb::kernels::evict_first_fraction(false) == 0.0f);
}

TEST_CASE("paged decode: CTAs an SM needs to stream whole pages") {
  using kb::kernels::stream_ctas_per_sm;
  // H100 SXM (2619 MHz x 5120 bits, 132 SMs): one, as measured (one split beat two).
  CHECK(stream_ctas_per_sm(2.619e9 * 2 * 5120 / 8, 132) == 1);
  // H200 (3201 MHz x 6144 bits): two (two splits 546 us against one 675).
  CHECK(stream_ctas_per_sm(3.201e9 * 2 * 6144 / 8, 132) == 2);
  // An unknown rate or SM count: one.
  CHECK(stream_ctas_per_sm(0, 132) == 1);
  CHECK(stream_ctas_per_sm(3e12, 0) == 1);
}

// The paged decode's work plan (kernels/attention/decode_plan.hpp) over batches, head blocks, average lengths, tile
// sizes and slot counts (132 SMs with one or two resident CTAs). Lengths are cut from the page table's keys at random,
// as kb's input generator cuts them, or all in one sequence.
namespace {
namespace pd = kb::kernels::paged_decode;

struct DecodeCase {
  std::int64_t batch, head_blocks, avg_keys, slots;
  int tile_keys;
  pd::Plan plan;
  std::int64_t entry_bytes;
};

template <typename F>
void for_each_decode_case(F&& f) {
  for (std::int64_t batch : {1, 2, 3, 8, 16, 33, 64, 128, 256, 700})
    for (std::int64_t head_blocks : {1, 2, 4, 8})
      for (std::int64_t avg_keys : {100, 512, 1000, 4096, 16384})
        for (std::int64_t slots : {132, 264})
          for (int tile_keys : {32, 64}) {
            const std::int64_t entry_bytes = 16 * head_blocks * (128 + 1) * 4;
            const std::int64_t max_by_workspace =
                std::max<std::int64_t>(1, static_cast<std::int64_t>(pd::kWorkspaceCap) / (batch * entry_bytes));
            const int min_tiles = 128 / tile_keys;
            const pd::Plan plan = pd::plan_chunks(batch, head_blocks, entry_bytes, avg_keys * batch, tile_keys, slots,
                                                  min_tiles, max_by_workspace);
            f(DecodeCase{batch, head_blocks, avg_keys, slots, tile_keys, plan, entry_bytes});
          }
}

// The decode kernel's chunking of these lengths: each work item's tiles (head block major, as find_work numbers
// them), the partial slots, and whether the even split applied.
struct DecodeWork {
  std::vector<int> item_tiles;
  std::int64_t slots_used = 0;
  bool all_within = true;
};
DecodeWork decode_work(const DecodeCase& c, const std::vector<std::int64_t>& lengths) {
  DecodeWork w;
  for (std::int64_t len : lengths)
    w.all_within &= (len + c.tile_keys - 1) / c.tile_keys <= std::int64_t{c.plan.splits} * c.plan.chunk_tiles;
  for (std::int64_t len : lengths) {
    const int tiles = static_cast<int>((len + c.tile_keys - 1) / c.tile_keys);
    const int chunk = pd::chunk_tiles_of(tiles, w.all_within, c.plan.splits, c.plan.max_chunk_tiles);
    const int chunks = pd::chunks_of_tiles(tiles, chunk);
    if (chunks >= 2) w.slots_used += chunks;
    for (std::int64_t h = 0; h < c.head_blocks; ++h)
      for (int k = 0; k < chunks; ++k) w.item_tiles.push_back(std::max(0, std::min(chunk, tiles - k * chunk)));
  }
  return w;
}

std::vector<std::int64_t> random_cuts(std::int64_t total, std::int64_t batch, std::mt19937_64& rng) {
  std::vector<std::int64_t> cuts(static_cast<std::size_t>(batch - 1));
  for (auto& x : cuts) x = std::uniform_int_distribution<std::int64_t>(0, total)(rng);
  std::sort(cuts.begin(), cuts.end());
  std::vector<std::int64_t> lengths;
  std::int64_t prev = 0;
  for (std::int64_t x : cuts) lengths.push_back(x - prev), prev = x;
  lengths.push_back(total - prev);
  return lengths;
}

// When the last of `item_tiles` ends, handed out from the last item to the first (the kernel's order) to whichever of
// `slots` frees first, an item costing its tiles plus one (its start and its partial output).
double list_schedule_end(const std::vector<int>& item_tiles, std::int64_t slots) {
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (std::int64_t s = 0; s < slots; ++s) free_at.push(0);
  double end = 0;
  for (auto it = item_tiles.rbegin(); it != item_tiles.rend(); ++it) {
    const double t = free_at.top() + *it + 1;
    free_at.pop();
    free_at.push(t);
    end = std::max(end, t);
  }
  return end;
}
}  // namespace

TEST_CASE("paged decode plan: equal lengths are the even split of the average sequence, within the grid") {
  for_each_decode_case([](const DecodeCase& c) {
    CAPTURE(c.batch);
    CAPTURE(c.head_blocks);
    CAPTURE(c.avg_keys);
    CAPTURE(c.slots);
    CAPTURE(c.tile_keys);
    const DecodeWork w = decode_work(c, std::vector<std::int64_t>(static_cast<std::size_t>(c.batch), c.avg_keys));
    REQUIRE(w.all_within);
    const int tiles = static_cast<int>((c.avg_keys + c.tile_keys - 1) / c.tile_keys);
    const int even = (tiles + c.plan.splits - 1) / c.plan.splits;
    CHECK(pd::chunk_tiles_of(tiles, true, c.plan.splits, c.plan.max_chunk_tiles) == std::max(1, even));
    CHECK(static_cast<std::int64_t>(w.item_tiles.size()) <= c.batch * c.head_blocks * c.plan.splits);
    CHECK(static_cast<std::int64_t>(w.item_tiles.size()) <= c.plan.max_ctas);
    CHECK(w.slots_used <= c.plan.max_slots);
  });
}

TEST_CASE("paged decode plan: unequal lengths within the grid and the workspace, ending near the ideal") {
  std::mt19937_64 rng(20261206);
  for_each_decode_case([&](const DecodeCase& c) {
    CAPTURE(c.batch);
    CAPTURE(c.head_blocks);
    CAPTURE(c.avg_keys);
    CAPTURE(c.slots);
    CAPTURE(c.tile_keys);
    std::vector<std::int64_t> one_holds_all(static_cast<std::size_t>(c.batch), 0);
    one_holds_all.back() = c.avg_keys * c.batch;
    for (const auto& lengths : {random_cuts(c.avg_keys * c.batch, c.batch, rng), one_holds_all}) {
      const DecodeWork w = decode_work(c, lengths);
      CHECK(static_cast<std::int64_t>(w.item_tiles.size()) <= c.plan.max_ctas);
      CHECK(w.slots_used <= c.plan.max_slots);
      CHECK(c.plan.max_slots * c.entry_bytes <= 2 * static_cast<std::int64_t>(pd::kWorkspaceCap));
      const int longest = w.all_within ? c.plan.chunk_tiles : c.plan.max_chunk_tiles;
      CHECK(*std::max_element(w.item_tiles.begin(), w.item_tiles.end()) <= longest);
      double work = 0;
      for (int t : w.item_tiles) work += t + 1;
      const double ideal = work / static_cast<double>(c.slots);
      const double end = list_schedule_end(w.item_tiles, c.slots);
      CAPTURE(ideal);
      CAPTURE(end);
      // A list schedule ends within one item of the ideal; with work for four chunks of kMinChunkKeys a slot,
      // within 1.3x of it, whatever the lengths.
      CHECK(end <= ideal + longest + 1);
      const int min_chunk_tiles = (pd::kMinChunkKeys + c.tile_keys - 1) / c.tile_keys;
      if (ideal >= 4.0 * (min_chunk_tiles + 1)) CHECK(end <= 1.3 * ideal);
    }
  });
}

// kb_cuda_sampling (kernels/sampling/cuda/sampling_launch.hpp): the H100's 132 SMs and the shared memory a CTA of
// the cluster kernel may take there (227 KiB opt-in less the kernel's 4048 static bytes). Not measured yet: these
// check the rule's invariants (the row fits, the smallest cluster at full batch, spreading at small batch, the
// streaming kernel beyond 8 CTAs), not a speed.
namespace {
constexpr int kH100Sms = 132;
constexpr std::int64_t kH100SmemPerCta = 232448 - 4048;
}  // namespace

TEST_CASE("kb_cuda_sampling streaming kernel: 16-byte loads on aligned rows, four loads a thread") {
  using kb::kernels::sampling_stream_config;
  auto c = sampling_stream_config(128256, 4, true);
  CHECK(c.cluster == 0);
  CHECK(c.vector_width == 4);
  CHECK(c.block_threads == 1024);
  CHECK(sampling_stream_config(128256, 2, true).vector_width == 8);
  CHECK(sampling_stream_config(128256, 4, false).vector_width == 1);  // misaligned rows: scalar loads
  c = sampling_stream_config(1001, 4, true);                           // no multiple of 4: scalar loads
  CHECK(c.vector_width == 1);
  CHECK(c.block_threads == 256);  // 1001 loads / 4 = 251 threads, a whole number of warps
  CHECK(sampling_stream_config(7, 2, true).block_threads == 32);
}

TEST_CASE("kb_cuda_sampling cluster slices: whole vectors covering the row, the shared memory they need") {
  using kb::kernels::sampling_cluster_config;
  auto c = sampling_cluster_config(128256, 4, 3);
  CHECK(c.cluster == 3);
  CHECK(c.vector_width == 4);
  CHECK(c.slice == 42752);
  CHECK(c.smem_bytes == (42752 + 4) * 4);  // one vector more: the head's alignment padding and the tail's rounding
  CHECK(c.block_threads == 1024);
  // Tails: vocabularies that are no multiple of the vector width or of the cluster size.
  c = sampling_cluster_config(1001, 4, 2);
  CHECK(c.slice == 504);  // 501 rounded up to whole vectors; the second slice holds 497
  CHECK(c.smem_bytes == 508 * 4);
  CHECK(c.block_threads == 32);
  c = sampling_cluster_config(1001, 2, 3);
  CHECK(c.vector_width == 8);
  CHECK(c.slice == 336);
  CHECK(c.smem_bytes == 344 * 2);
  c = sampling_cluster_config(7, 4, 8);  // fewer elements than CTAs: the last slices are empty
  CHECK(c.slice == 4);
  for (int bytes : {4, 2})
    for (std::int64_t vocab : {1, 7, 1000, 1001, 32003, 128256, 151936, 262208, 456768})
      for (int cluster = 1; cluster <= kb::kernels::kSamplingMaxCluster; ++cluster) {
        CAPTURE(bytes);
        CAPTURE(vocab);
        CAPTURE(cluster);
        c = sampling_cluster_config(vocab, bytes, cluster);
        CHECK(c.vector_width * bytes == 16);
        CHECK(c.slice % c.vector_width == 0);
        CHECK(c.slice * cluster >= vocab);
        CHECK((c.slice - c.vector_width) * cluster < vocab);  // no slice larger than it must be
        CHECK(c.smem_bytes == (c.slice + c.vector_width) * bytes);
        CHECK(c.smem_bytes % 16 == 0);
        CHECK(c.block_threads % 32 == 0);
        CHECK(c.block_threads >= 32);
        CHECK(c.block_threads <= 1024);
      }
}

TEST_CASE("kb_cuda_sampling launch rule: the row in the cluster's shared memory, spread at small batch") {
  using kb::kernels::sampling_launch_config;
  auto rule = [](std::int64_t vocab, int bytes, std::int64_t batch) {
    return sampling_launch_config(vocab, bytes, true, batch, kH100Sms, kH100SmemPerCta);
  };
  // batch >= SMs: the smallest cluster whose shared memory holds the row.
  CHECK(rule(128256, 4, 256).cluster == 3);  // 501 KiB over 3 CTAs (2 would need 250 KiB each)
  CHECK(rule(128256, 2, 256).cluster == 2);
  CHECK(rule(151936, 4, 132).cluster == 3);
  CHECK(rule(262208, 4, 256).cluster == 5);
  CHECK(rule(262208, 2, 256).cluster == 3);
  CHECK(rule(32000, 4, 256).cluster == 1);
  CHECK(rule(1000, 4, 256).cluster == 1);
  // batch < SMs: up to SMs / batch CTAs a row and 8, never below the smallest that fits.
  CHECK(rule(128256, 4, 1).cluster == 8);
  CHECK(rule(128256, 4, 16).cluster == 8);
  CHECK(rule(128256, 4, 33).cluster == 4);
  CHECK(rule(128256, 4, 64).cluster == 3);  // 2 a row would fill the SMs but not hold the row
  CHECK(rule(262208, 4, 64).cluster == 5);
  CHECK(rule(262208, 2, 1).cluster == 8);
  // ... and no slice under 32 KiB unless the row needs it: 125 KiB spreads over 3, 4 KiB stays on one CTA.
  CHECK(rule(32000, 4, 1).cluster == 3);
  CHECK(rule(1000, 4, 1).cluster == 1);
  CHECK(rule(7, 2, 1).cluster == 1);
  // The largest rows 8 CTAs hold: 8 x 57096 float32 (8 x 114192 16-bit) elements; beyond, the streaming kernel.
  CHECK(rule(456768, 4, 256).cluster == 8);
  CHECK(rule(456769, 4, 256).cluster == 0);
  const auto big = rule(456772, 4, 256);
  CHECK(big.cluster == 0);
  CHECK(big.vector_width == 4);
  CHECK(big.block_threads == 1024);
  CHECK(rule(913536, 2, 1).cluster == 8);
  CHECK(rule(913537, 2, 1).cluster == 0);
  CHECK(rule(913544, 2, 1).cluster == 0);
  CHECK(rule(913544, 2, 1).vector_width == 8);
  // A device with less shared memory a CTA (e.g. 99 KiB): larger clusters, the fallback sooner.
  CHECK(sampling_launch_config(128256, 4, true, 256, 132, 99 * 1024).cluster == 6);
  CHECK(sampling_launch_config(262208, 4, true, 256, 132, 99 * 1024).cluster == 0);
  // The grid holds batch x cluster CTAs in its x dimension: beyond 2^31 - 1, the streaming kernel.
  CHECK(rule(128256, 4, 0x7fffffffLL).cluster == 0);
  CHECK(rule(128256, 4, 0x7fffffffLL / 3).cluster == 3);
  // Every choice fits: the smallest cluster that holds the row at full batch, at least that one below it (more
  // only while the rows' CTAs still fit on the SMs), the streaming kernel only where 8 CTAs do not hold it.
  for (int bytes : {4, 2})
    for (std::int64_t vocab = 1; vocab < 1000000; vocab = vocab * 3 + 1)
      for (std::int64_t batch : {1, 3, 64, 131, 132, 1000}) {
        CAPTURE(bytes);
        CAPTURE(vocab);
        CAPTURE(batch);
        int fit = 0;
        for (int c = 8; c >= 1; --c)
          if (kb::kernels::sampling_cluster_config(vocab, bytes, c).smem_bytes <= kH100SmemPerCta) fit = c;
        const auto c = rule(vocab, bytes, batch);
        if (fit == 0) {
          CHECK(c.cluster == 0);
          continue;
        }
        CHECK(c.smem_bytes <= kH100SmemPerCta);
        CHECK(c.slice * c.cluster >= vocab);
        if (batch >= kH100Sms) CHECK(c.cluster == fit);
        CHECK(c.cluster >= fit);
        CHECK(c.cluster <= 8);
        if (c.cluster > fit) CHECK(c.cluster * batch <= kH100Sms);
      }
}

TEST_CASE("kb_cuda_gemm takes cuBLASLt over the gemv at M > 8 from 8 MiB of weight (H200 measurements)") {
  using kb::kernels::gemm_cuda::gemv_cublaslt_weight;
  // With the clean L2 flush, at M = 9, 12, 16 cuBLASLt was faster on
  // 2048 x 4096 (16.8 MB) and up, the gemv on 256 x 7168 (3.7 MB).
  CHECK(gemv_cublaslt_weight(9, 2048ll * 4096 * 2));
  CHECK(gemv_cublaslt_weight(16, 5120ll * 17408 * 2));  // 178 MB: the gemv's only under the write flush
  CHECK(gemv_cublaslt_weight(16, 8192ll * 28672 * 2));
  CHECK_FALSE(gemv_cublaslt_weight(16, 256ll * 7168 * 2));
  CHECK_FALSE(gemv_cublaslt_weight(12, 128ll * 2048 * 2));
  // The boundary: 8 MiB exactly takes cuBLASLt.
  CHECK(gemv_cublaslt_weight(9, std::int64_t{8} << 20));
  CHECK_FALSE(gemv_cublaslt_weight(9, (std::int64_t{8} << 20) - 2));
  // M <= 8 keeps the gemv whatever the weight.
  CHECK_FALSE(gemv_cublaslt_weight(8, 8192ll * 28672 * 2));
  CHECK_FALSE(gemv_cublaslt_weight(1, 8192ll * 28672 * 2));
}

TEST_CASE("long-K static rule: the chunks one by one on outputs of at most two 128 x 128 tiles, else one batch") {
  using kb::kernels::gemm_cuda::long_k_one_by_one;
  // Where the one-by-one chunks won every race (M <= 128, N <= 256, in a sweep of made-up shapes), and N = 97 at M = 130.
  CHECK(long_k_one_by_one(17, 32));
  CHECK(long_k_one_by_one(128, 256));
  CHECK(long_k_one_by_one(130, 97));
  CHECK(long_k_one_by_one(256, 128));  // two tiles the other way (not measured)
  // Where the batch won or tied: N >= 1024, M = 2048, M = 128 on N = 1024; and four tiles (M = 512, N = 96: a split
  // decision, the batch kept).
  CHECK_FALSE(long_k_one_by_one(17, 1024));
  CHECK_FALSE(long_k_one_by_one(2048, 32));
  CHECK_FALSE(long_k_one_by_one(512, 96));
  CHECK_FALSE(long_k_one_by_one(129, 256));
  CHECK_FALSE(long_k_one_by_one(128, 8192));
}

TEST_CASE("kb_cuda_gemm's race: the faster median wins; within 1% the static rule's side keeps the problem") {
  // Two candidates, the gemv's rule plan (0) and cuBLASLt (1): whether cuBLASLt wins.
  const auto picks_cublaslt = [](double gemv_ms, double cublaslt_ms, bool static_rule_cublaslt) {
    const double ms[2] = {gemv_ms, cublaslt_ms};
    return kb::kernels::gemm_cuda::race_pick(ms, 2, static_rule_cublaslt ? 1 : 0) == 1;
  };
  CHECK(picks_cublaslt(0.020, 0.018, false));         // cuBLASLt 10% faster
  CHECK_FALSE(picks_cublaslt(0.018, 0.020, true));    // the gemv 10% faster
  CHECK_FALSE(picks_cublaslt(0.0200, 0.0199, false)); // a 0.5% lead: a tie, the static rule's gemv
  CHECK(picks_cublaslt(0.0199, 0.0200, true));        // a tie the other way: the static rule's cuBLASLt
  CHECK(picks_cublaslt(0.0203, 0.0200, false));       // 1.5%: past the margin
  CHECK_FALSE(picks_cublaslt(0.0200, 0.0203, true));
  // A side that failed to run (negative) loses; both failed: the static rule.
  CHECK(picks_cublaslt(-1, 0.5, false));
  CHECK_FALSE(picks_cublaslt(0.5, -1, true));
  CHECK(picks_cublaslt(-1, -1, true));
  CHECK_FALSE(picks_cublaslt(-1, -1, false));
}

TEST_CASE("kb_cuda_gemm's race among several candidates: the fastest, unless the static rule's is within 1%") {
  using kb::kernels::gemm_cuda::race_pick;
  const double spread[] = {0.020, 0.019, 0.017, 0.018};  // rule plan, two other gemv plans, cuBLASLt
  CHECK(race_pick(spread, 4, 0) == 2);
  CHECK(race_pick(spread, 4, 3) == 2);  // 5.5% faster than the static rule's cuBLASLt
  const double close[] = {0.0200, 0.0199, 0.01985, 0.0201};
  CHECK(race_pick(close, 4, 0) == 0);  // the best is 0.75% under the rule plan: a tie
  CHECK(race_pick(close, 4, 3) == 2);  // 1.25% under cuBLASLt
  const double failed[] = {-1, 0.030, -1, 0.031};
  CHECK(race_pick(failed, 4, 0) == 1);  // the static rule's plan failed: the fastest that ran
  CHECK(race_pick(failed, 4, 3) == 1);  // 3.3% under the static rule's cuBLASLt
  const double tie[] = {-1, 0.0300, -1, 0.0302};
  CHECK(race_pick(tie, 4, 3) == 3);  // 0.7%: cuBLASLt keeps it
  const double none[] = {-1, -1, -1};
  CHECK(race_pick(none, 3, 2) == 2);
  CHECK(race_pick(none, 3, 0) == 0);
}

TEST_CASE("kb_cuda_gemm's race caches: a problem already raced never waits for a race in progress") {
  using namespace kb::kernels::gemm_cuda;
  std::map<int, int> cache;  // a race's cache: key -> choice
  CHECK_FALSE(race_cached(cache, 1).has_value());
  race_remember(cache, 1, 7);
  race_remember(cache, 1, 8);  // the first answer stays
  REQUIRE(race_cached(cache, 1).has_value());
  CHECK(*race_cached(cache, 1) == 7);
  // Another thread holds the race lock, as a race of seconds does (long K at large M): looking up a cached
  // problem, and reading the notes, must not wait for it.
  std::unique_lock<std::mutex> racing(gemm_race_mutex(0));
  auto lookup = std::async(std::launch::async, [&] {
    (void)gemm_race_count();  // takes the cache lock, as the notes' readers do
    return race_cached(cache, 1).value_or(-1);
  });
  const bool answered = lookup.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  racing.unlock();  // let the lookup finish either way
  CHECK(answered);
  CHECK(lookup.get() == 7);
}

TEST_CASE("kb_cuda_gemm's races: one at a time on a device, side by side on two") {
  using namespace kb::kernels::gemm_cuda;
  CHECK(&gemm_race_mutex(3) == &gemm_race_mutex(3));
  std::unique_lock<std::mutex> racing(gemm_race_mutex(0));  // a race on device 0
  auto other = std::async(std::launch::async, [] {
    // Another thread: device 1's race may start, device 0's must wait.
    std::unique_lock<std::mutex> one(gemm_race_mutex(1), std::try_to_lock);
    std::unique_lock<std::mutex> zero(gemm_race_mutex(0), std::try_to_lock);
    return std::pair<bool, bool>{one.owns_lock(), zero.owns_lock()};
  });
  const auto [device1_free, device0_free] = other.get();
  CHECK(device1_free);
  CHECK_FALSE(device0_free);
}

TEST_CASE("kb_cuda_gemm's race entry: the cached choice, else the static one when not racing now, else the race lock") {
  using namespace kb::kernels::gemm_cuda;
  std::map<RaceKey, int> cache;
  RaceKey key;
  key.device = 2;
  key.M = 8;
  int queries = 0;
  auto not_capturing = [&] { return ++queries, kb::Result<bool>(false); };
  auto capturing = [&] { return ++queries, kb::Result<bool>(true); };
  std::unique_lock<std::mutex> lock;
  // Not cached, not capturing: race now, with device 2's race lock held.
  auto e = race_entry(cache, key, 5, not_capturing, lock);
  REQUIRE(e);
  CHECK_FALSE(e->has_value());
  CHECK(lock.owns_lock());
  CHECK(lock.mutex() == &gemm_race_mutex(2));
  lock.unlock();
  // Under capture: the static choice, no lock.
  std::unique_lock<std::mutex> lock2;
  e = race_entry(cache, key, 5, capturing, lock2);
  REQUIRE(e);
  CHECK(**e == 5);
  CHECK_FALSE(lock2.owns_lock());
  // The capture query's error is returned.
  e = race_entry(cache, key, 5, [] { return kb::Result<bool>(kb::make_error(kb::Code::cuda_error, "broken")); }, lock2);
  CHECK_FALSE(e);
  // gemm_race=0: the static choice without asking about capture.
  queries = 0;
  {
    kb::tuning::Settings no_race;
    no_race.gemm_race = false;
    const kb::tuning::Scope scope(&no_race, nullptr, nullptr);
    e = race_entry(cache, key, 6, not_capturing, lock2);
  }
  REQUIRE(e);
  CHECK(**e == 6);
  CHECK(queries == 0);
  CHECK_FALSE(lock2.owns_lock());
  // Cached: that choice, before anything else (even under capture).
  race_remember(cache, key, 9);
  queries = 0;
  e = race_entry(cache, key, 5, capturing, lock2);
  REQUIRE(e);
  CHECK(**e == 9);
  CHECK(queries == 0);
  CHECK_FALSE(lock2.owns_lock());
  // Raced by another thread between the first look and the lock: that answer, looked up again under the lock.
  std::map<RaceKey, int> cache2;
  auto raced_meanwhile = [&] { race_remember(cache2, key, 4); return kb::Result<bool>(false); };
  std::unique_lock<std::mutex> lock3;
  e = race_entry(cache2, key, 5, raced_meanwhile, lock3);
  REQUIRE(e);
  CHECK(**e == 4);
  CHECK(lock3.owns_lock());
}

TEST_CASE("kb_cuda_gemm's race key: the problem, the device, which operands are 16-byte aligned, the scratch") {
  using namespace kb::kernels::gemm_cuda;
  alignas(16) static unsigned char buf[64];
  const GemmProblem p{kb::DType::bfloat16, 8, 4096, 4096, buf, buf + 16, buf + 32, nullptr};
  const RaceKey k = race_key(0, p, 1024);
  CHECK(k.misaligned == 0u);
  GemmProblem c_off = p;
  c_off.C = buf + 34;
  CHECK(race_key(0, c_off, 1024).misaligned == 4u);
  GemmProblem a_off = p;
  a_off.A = buf + 8;
  CHECK(race_key(0, a_off, 1024).misaligned == 1u);
  // Keys that differ in any part are different cache entries.
  CHECK(k < race_key(0, c_off, 1024));
  CHECK((race_key(1, p, 1024) < k) == false);
  CHECK(k < race_key(1, p, 1024));
  CHECK(race_key(0, p, 0) < k);
  GemmProblem f16 = p;
  f16.dtype = kb::DType::float16;
  CHECK((race_key(0, f16, 1024) < k) != (k < race_key(0, f16, 1024)));
  CHECK_FALSE(k < race_key(0, p, 1024));
  CHECK_FALSE(race_key(0, p, 1024) < k);
}

namespace {

kb::kernels::gemm_cuda::RaceFileEntry race_file_entry(const char* device, std::int64_t M, const char* choice) {
  kb::kernels::gemm_cuda::RaceFileEntry e;
  e.machine = {device, 132, 90, "cuda_runtime 13.0, cuda_driver 13.0, cublasLt 13.1.0", "0.1.0"};
  e.key.dtype = static_cast<int>(kb::DType::float16);
  e.key.M = M, e.key.N = 8192, e.key.K = 28672, e.key.misaligned = 2;
  e.choice = choice;
  return e;
}

// A fresh path under the temporary directory (removed with its folder at the end of the test).
struct TempDir {
  std::filesystem::path dir;
  TempDir() {
    dir = std::filesystem::temp_directory_path() / ("kb_race_file_" + std::to_string(::getpid()) + "_" +
                                                     std::to_string(std::rand()));
    std::filesystem::create_directories(dir);
  }
  ~TempDir() { std::filesystem::remove_all(dir); }
};

}  // namespace

TEST_CASE("KB_GEMM_RACE_FILE lines: written and read back; every bad line refused with the file and line") {
  using namespace kb::kernels::gemm_cuda;
  const RaceFileEntry e = race_file_entry("NVIDIA H200", 2048, "kb wgmma (clusters of 2)");
  const std::string line = race_file_line(e);
  CHECK(line.find('\n') == std::string::npos);
  auto back = parse_race_file_line(line, "f.jsonl", 7);
  REQUIRE(back);
  CHECK(back->machine == e.machine);
  CHECK(back->key.dtype == e.key.dtype);
  CHECK(back->key.M == 2048);
  CHECK(back->key.N == 8192);
  CHECK(back->key.K == 28672);
  CHECK(back->key.misaligned == 2u);
  CHECK(back->choice == "kb wgmma (clusters of 2)");
  CHECK(back->line == 7u);

  // Each broken form of the line: refused, naming "f.jsonl:7".
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = line;
    const auto at = t.find(from);
    REQUIRE(at != std::string::npos);
    return t.replace(at, from.size(), to);
  };
  const std::string bad[] = {
      "not json",
      "[1, 2]",
      with("\"M\":2048", "\"M\":0"),
      with("\"M\":2048", "\"M\":\"2048\""),
      with("\"M\":2048,", ""),
      with("\"misaligned\":2", "\"misaligned\":8"),
      with("\"float16\"", "\"float17\""),
      with("\"long_k\"", "\"medium_k\""),
      with("\"long_k\"", "\"small_m\""),  // a small-M line without its "scratch_bytes"
      with("\"choice\":\"kb wgmma (clusters of 2)\"", "\"choice\":\"\""),
      with("\"sms\":132", "\"sms\":-1"),
      line.substr(0, line.size() / 2),
  };
  for (const std::string& b : bad) {
    auto r = parse_race_file_line(b, "f.jsonl", 7);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == kb::Code::parse_error);
    CHECK_MESSAGE(r.error().message.rfind("f.jsonl:7: ", 0) == 0, r.error().message);
  }
  // A small-M line (the gemv or cuBLASLt): the stream's scratch size is part of the problem.
  RaceFileEntry small = race_file_entry("NVIDIA H200", 8, "gemv 32r bulk x2");
  small.race = std::string(kRaceSmallM);
  small.key.scratch_bytes = 8u << 20;
  const std::string small_line = race_file_line(small);
  CHECK(small_line.find("\"scratch_bytes\":8388608") != std::string::npos);
  auto small_back = parse_race_file_line(small_line, "f.jsonl", 2);
  REQUIRE(small_back);
  CHECK(small_back->race == "small_m");
  CHECK(small_back->key.scratch_bytes == (8u << 20));
  CHECK(small_back->key.M == 8);
  CHECK(small_back->choice == "gemv 32r bulk x2");
  CHECK(back->key.scratch_bytes == 0u);  // not in long-K lines
  std::string negative = small_line;
  negative.replace(negative.find("8388608"), 7, "-1");
  auto bad_scratch = parse_race_file_line(negative, "f.jsonl", 2);
  REQUIRE_FALSE(bad_scratch);
  CHECK(bad_scratch.error().message.rfind("f.jsonl:2: \"scratch_bytes\" must be", 0) == 0);

  // Members kb does not know are passed over (a later kb may add some).
  CHECK(parse_race_file_line(with("{", "{\"note\":\"x\","), "f.jsonl", 1));

  // A file: blank lines skipped, line numbers counted; a torn last line passed over, a torn middle line refused.
  const std::string text = line + "\n\n  \n" + race_file_line(race_file_entry("NVIDIA H100", 512, "kb wgmma")) + "\n";
  auto all = parse_race_file(text, "f.jsonl");
  REQUIRE(all);
  REQUIRE(all->size() == 2);
  CHECK((*all)[0].line == 1u);
  CHECK((*all)[1].line == 4u);
  CHECK((*all)[1].machine.device == "NVIDIA H100");
  auto torn_end = parse_race_file(text + line.substr(0, 20), "f.jsonl");
  REQUIRE(torn_end);
  CHECK(torn_end->size() == 2);
  auto torn_middle = parse_race_file(line.substr(0, 20) + "\n" + text, "f.jsonl");
  REQUIRE_FALSE(torn_middle);
  CHECK(torn_middle.error().message.rfind("f.jsonl:1: ", 0) == 0);
}

TEST_CASE("KB_GEMM_RACE_FILE store: lines for this machine only, the last one wins, appends seen at once") {
  using namespace kb::kernels::gemm_cuda;
  TempDir tmp;
  const std::string path = (tmp.dir / "races.jsonl").string();
  const RaceFileEntry h200 = race_file_entry("NVIDIA H200", 2048, "kb wgmma");
  RaceKey key = h200.key;
  key.device = 3, key.scratch_bytes = 4096;  // not kept: the file names the machine instead

  // No file yet: nothing, and no error.
  auto none = race_file_lookup(path, h200.machine, kRaceLongK, key);
  REQUIRE(none);
  CHECK_FALSE(*none);
  // Recorded: seen by this process at once, and written as one line.
  REQUIRE(race_file_record(path, h200));
  auto found = race_file_lookup(path, h200.machine, kRaceLongK, key);
  REQUIRE(found);
  REQUIRE(*found);
  CHECK((*found)->choice == "kb wgmma");
  // Another machine's line for the same problem does not count here; a later line for this one replaces it.
  REQUIRE(race_file_record(path, race_file_entry("NVIDIA H100", 2048, "cuBLASLt chunks")));
  REQUIRE(race_file_record(path, race_file_entry("NVIDIA H200", 2048, "cuBLASLt chunks one by one")));
  found = race_file_lookup(path, h200.machine, kRaceLongK, key);
  REQUIRE(found);
  REQUIRE(*found);
  CHECK((*found)->choice == "cuBLASLt chunks one by one");
  CHECK((*found)->line == 3u);  // its place in the file, for messages about it
  RaceMachine other_software = h200.machine;
  other_software.software += " (another driver)";
  auto other = race_file_lookup(path, other_software, kRaceLongK, key);
  REQUIRE(other);
  CHECK_FALSE(*other);
  RaceKey other_problem = key;
  other_problem.misaligned = 0;
  other = race_file_lookup(path, h200.machine, kRaceLongK, other_problem);
  REQUIRE(other);
  CHECK_FALSE(*other);

  // The small-M race's lines: apart from the long-K race's, and its scratch size part of the problem.
  RaceFileEntry small = h200;
  small.race = std::string(kRaceSmallM);
  small.key.scratch_bytes = 4096;
  small.choice = "cuBLASLt";
  auto no_small = race_file_lookup(path, h200.machine, kRaceSmallM, key);
  REQUIRE(no_small);
  CHECK_FALSE(*no_small);  // the long-K lines of the same problem do not count
  REQUIRE(race_file_record(path, small));
  auto small_found = race_file_lookup(path, h200.machine, kRaceSmallM, key);
  REQUIRE(small_found);
  REQUIRE(*small_found);
  CHECK((*small_found)->choice == "cuBLASLt");
  CHECK((*small_found)->line == 4u);
  RaceKey other_scratch = key;
  other_scratch.scratch_bytes = 0;
  auto small_other = race_file_lookup(path, h200.machine, kRaceSmallM, other_scratch);
  REQUIRE(small_other);
  CHECK_FALSE(*small_other);
  found = race_file_lookup(path, h200.machine, kRaceLongK, other_scratch);  // long K: the scratch is not part of it
  REQUIRE(found);
  REQUIRE(*found);
  CHECK((*found)->choice == "cuBLASLt chunks one by one");

  // What another process reads: the four lines, in order.
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto lines = parse_race_file(text, path);
  REQUIRE(lines);
  REQUIRE(lines->size() == 4);
  CHECK((*lines)[2].choice == "cuBLASLt chunks one by one");
  CHECK((*lines)[3].race == "small_m");
  CHECK((*lines)[3].key.scratch_bytes == 4096u);

  // A torn last line (a writer killed mid-line) stays apart from the next record.
  const std::string torn_path = (tmp.dir / "torn.jsonl").string();
  {
    std::ofstream t(torn_path);
    t << race_file_line(h200).substr(0, 30);
  }
  REQUIRE(race_file_record(torn_path, h200));
  auto after_torn = race_file_lookup(torn_path, h200.machine, kRaceLongK, key);  // read now: the torn line is a middle line
  REQUIRE_FALSE(after_torn);
  std::ifstream t2(torn_path);
  std::string torn_text((std::istreambuf_iterator<char>(t2)), std::istreambuf_iterator<char>());
  auto torn_lines = parse_race_file(torn_text, torn_path);
  CHECK_FALSE(torn_lines);  // the torn line is now a middle line: a reader is told where it is
  if (!torn_lines) CHECK(torn_lines.error().message.rfind(torn_path + ":1: ", 0) == 0);
  const auto second = torn_text.find('\n');
  REQUIRE(second != std::string::npos);
  CHECK(parse_race_file(torn_text.substr(second + 1), torn_path));  // the record itself intact on its own line

  // A bad line in a file read for the first time: the lookup fails, naming the file and line.
  const std::string bad_path = (tmp.dir / "bad.jsonl").string();
  {
    std::ofstream b(bad_path);
    b << race_file_line(h200) << "\n{\"kb_gemm_race\": \"long_k\"}\n";
  }
  auto bad = race_file_lookup(bad_path, h200.machine, kRaceLongK, key);
  REQUIRE_FALSE(bad);
  CHECK_MESSAGE(bad.error().message.rfind(bad_path + ":2: ", 0) == 0, bad.error().message);
  // A file that cannot be written: an error naming it.
  auto unwritable = race_file_record((tmp.dir / "no_such_dir" / "races.jsonl").string(), h200);
  REQUIRE_FALSE(unwritable);
  CHECK(unwritable.error().code == kb::Code::io_error);
  CHECK(unwritable.error().message.find("no_such_dir/races.jsonl") != std::string::npos);
}

// The tile rule of kb_cublaslt_gemm's autotuner, on the problems an H200 sweep measured (132 SMs; cuBLAS's m is
// kb's N, its n kb's M): in three the tile it ranks first was the fastest configuration's.
TEST_CASE("cuBLASLt tile variants: the tiles that fill the SMs") {
  using kb::kernels::gemm_cuda::TileShape;
  using kb::kernels::gemm_cuda::tile_wave_fill;
  using kb::kernels::gemm_cuda::wave_fit_tiles;
  std::vector<TileShape> offered;
#define KB_TEST_TILE(rows, cols) offered.push_back(TileShape{rows, cols});
  KB_LT_TILE_SHAPES(KB_TEST_TILE)
#undef KB_TEST_TILE
  REQUIRE(offered.size() > 100);
  auto first = [&](std::int64_t n_kb, std::int64_t m_kb, TileShape own) -> TileShape {
    auto picked = wave_fit_tiles(n_kb, m_kb, offered, own, 132, 2);
    return picked.empty() ? TileShape{} : offered[picked.front()];
  };
  auto same = [](TileShape a, TileShape b) { return a.rows == b.rows && a.cols == b.cols; };

  // 3072 x 256 outputs: 96 x 64 makes 32 x 4 = 128 tiles, one wave on 132 SMs; the heuristic's 128 x 64 made 96.
  CHECK(tile_wave_fill(3072, 256, {96, 64}, 132) == doctest::Approx(128.0 / 132.0));
  CHECK(tile_wave_fill(3072, 256, {128, 64}, 132) == doctest::Approx(96.0 / 132.0));
  CHECK(same(first(3072, 256, {128, 64}), {96, 64}));
  CHECK(same(first(6144, 256, {128, 128}), {96, 128}));  // 64 x 2 tiles
  CHECK(same(first(2048, 256, {128, 64}), {64, 64}));    // 32 x 4 tiles
  // One wave of 128 x 128 or 256 x 64 fills as well as two of 128 x 64 (the sweep's fastest there, by 1.4%):
  // equal fill goes to the larger tile, in the table's order among equal areas.
  const auto two = wave_fit_tiles(16384, 128, offered, {256, 128}, 132, 2);
  REQUIRE(two.size() == 2);
  CHECK(same(offered[two[0]], {128, 128}));
  CHECK(same(offered[two[1]], {256, 64}));
  CHECK(tile_wave_fill(16384, 128, {128, 64}, 132) == doctest::Approx(tile_wave_fill(16384, 128, {128, 128}, 132)));
  // A heuristic tile outside the table (a narrow one, for a small M): no variants.
  CHECK(wave_fit_tiles(3072, 16, offered, {}, 132, 2).empty());
  // Uneven edges count against a tile: 104 x 64 on 3072 rows leaves 48 of 3120 rows empty.
  CHECK(tile_wave_fill(3072, 256, {104, 64}, 132) == doctest::Approx(3072.0 * 256 / (132.0 * 104 * 64)));
  // A heuristic tile that already fills the SMs is kept alone: nothing beats it by the margin.
  CHECK(wave_fit_tiles(4096, 256, offered, {128, 64}, 132, 2).empty());
  // Unknown shapes and empty problems fill nothing.
  CHECK(tile_wave_fill(3072, 256, {}, 132) == 0.0);
  CHECK(tile_wave_fill(0, 256, {96, 64}, 132) == 0.0);
}
