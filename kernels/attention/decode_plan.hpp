// The work plan of the paged decode (decode.cuh): how each sequence's keys are
// cut into chunks, one CTA a chunk and head block. Plain C++ (the device
// uses chunk_tiles_of, the host plan_chunks), so the rules are tested on the
// CPU (tests/kernels/test_launch_rules.cpp).
//
// The host plans from shapes only (the page table stays on the device, and a
// captured graph replays for any page table of these shapes):
//  * splits: chunks of the average sequence, chosen by a wave model of the
//    SM slots (choose_splits); chunk_tiles = ceil(average tiles / splits).
//  * max_chunk_tiles: the longest chunk where the lengths are unequal.
// The device then decides per call, from the lengths it reads anyway:
//  * no sequence past splits x chunk_tiles tiles (equal lengths, and any
//    lengths near them): every sequence is split evenly into `splits`
//    chunks, ceil(tiles / splits) tiles each, the even split of the
//    average sequence.
//  * some sequence past it: no chunk longer than max_chunk_tiles, so the
//    many chunks of the long sequences spread over the slots as the CTAs
//    finish. With chunks of one slot's whole share (the bound before), a
//    slot could be handed two shares: with lengths cut at random the
//    longest of 64 sequences holds ~5x the average, and the launch ended at
//    ~1.6x its ideal time. Chunks of a quarter share (kPlanWaves) bound
//    the end at ~1.25x the ideal for any lengths.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define KB_DECODE_PLAN_HD __host__ __device__
#else
#define KB_DECODE_PLAN_HD
#endif

namespace kb::kernels::paged_decode {

constexpr std::size_t kWorkspaceCap = std::size_t{64} << 20;  // bytes of partial results at most
constexpr int kMaxSplits = 256;
// Chunks of one slot's share of the batch's keys where lengths are unequal:
// the list-scheduling end is at most the ideal plus one chunk.
constexpr int kPlanWaves = 4;
// The shortest chunk max_chunk_tiles asks for (its start, Q load, pipeline
// fill and partial output cost about as much as streaming ~100 keys).
constexpr int kMinChunkKeys = 512;

// Tiles a chunk of a sequence of `tiles` tiles. `all_within`: no sequence of
// this call is past splits x chunk_tiles tiles. At least 1.
KB_DECODE_PLAN_HD inline int chunk_tiles_of(int tiles, bool all_within, int splits, int max_chunk_tiles) {
  const int even = (tiles + splits - 1) / splits;
  const int c = all_within ? even : (even < max_chunk_tiles ? even : max_chunk_tiles);
  return c > 1 ? c : 1;
}

// Chunks of a sequence of `tiles` tiles: one at least (an empty sequence
// still writes its output 0 and lse -inf).
KB_DECODE_PLAN_HD inline int chunks_of_tiles(int tiles, int chunk) {
  const int n = (tiles + chunk - 1) / chunk;
  return n > 1 ? n : 1;
}

// Splits per (sequence, head block): enough CTAs to fill `slots` (SMs x
// resident CTAs per SM) with the fewest waves per unit of work, each split
// keeping at least `min_tiles` tiles of the average sequence. Ties go to
// fewer splits (less merging).
inline int choose_splits(std::int64_t work_items, std::int64_t avg_tiles, std::int64_t slots, int min_tiles,
                         std::int64_t max_by_workspace) {
  if (work_items <= 0 || slots <= 0 || work_items >= slots) return 1;
  std::int64_t smax = std::max<std::int64_t>(1, avg_tiles / std::max(1, min_tiles));
  smax = std::min<std::int64_t>({smax, max_by_workspace, kMaxSplits});
  auto cost = [&](std::int64_t s) {
    return static_cast<double>((work_items * s + slots - 1) / slots) / static_cast<double>(s);
  };
  double best_cost = cost(1);
  for (std::int64_t s = 2; s <= smax; ++s) best_cost = std::min(best_cost, cost(s));
  // The wave model ignores what each split costs besides its share of the keys (its start, its Q load and
  // pipeline fill, the partial output and the merge), which makes many splits of a few tiles each slower
  // than one wave of long splits. So take the fewest splits within 5% of the model's best.
  for (std::int64_t s = 1; s <= smax; ++s)
    if (cost(s) <= best_cost * 1.05) return static_cast<int>(s);
  return 1;
}

// The chunking of one decode's shapes.
struct Plan {
  int splits = 1;                // chunks of the average sequence (choose_splits)
  int chunk_tiles = 1;           // ceil(average tiles / splits): the even split's chunk
  int max_chunk_tiles = 1;       // the longest chunk where some sequence is past splits x chunk_tiles
  std::int64_t max_ctas = 0;     // grid: CTAs (chunks x head blocks) of every page table of these shapes, at most
  std::int64_t max_slots = 0;    // partial slots (chunks of sequences of two or more) of every page table, at most
};

// `total_keys`: the keys the page table can address (num_kv_indices x
// page_size, an upper bound of the sum of the sequences' lengths);
// `entry_bytes`: one partial slot's bytes (query heads x (DV + 1) fp32);
// `slots`: SMs x resident CTAs; `min_tiles`: the shortest even chunk;
// `max_by_workspace`: splits of every sequence the workspace holds.
//  * max_chunk_tiles = max(min(chunk_tiles, kMinChunkKeys), a 1 / kPlanWaves
//    share of one slot's tiles), and where below chunk_tiles, a whole part
//    of it (ceil(chunk_tiles / k)), so a sequence of the average length is
//    cut into equal chunks. Doubled while its chunks' partials would pass
//    the workspace cap.
//  * bounds: the sequences' tiles T <= (total_keys + batch (TK - 1)) / TK.
//    All within: at most `splits` chunks a sequence. Otherwise a sequence of
//    n tiles has ceil(n / min(ceil(n / splits), m)) chunks, at most
//    max(splits, floor(n / m) + 1) <= splits + floor(n / m) (m =
//    max_chunk_tiles); so at most min(batch x splits + floor(T / m), T +
//    batch) chunks in all, and min(batch x splits + floor(T / m), T) slots.
inline Plan plan_chunks(std::int64_t batch, std::int64_t head_blocks, std::int64_t entry_bytes,
                        std::int64_t total_keys, int tile_keys, std::int64_t slots, int min_tiles,
                        std::int64_t max_by_workspace) {
  Plan pl;
  if (batch <= 0) return pl;
  const std::int64_t work = batch * head_blocks;
  const std::int64_t avg_keys = total_keys / batch;
  const std::int64_t avg_tiles = (avg_keys + tile_keys - 1) / tile_keys;
  pl.splits = choose_splits(work, avg_tiles, slots, min_tiles, max_by_workspace);
  // splits x chunk_tiles stays an int
  const std::int64_t c = std::min<std::int64_t>(
      std::max<std::int64_t>({(avg_tiles + pl.splits - 1) / pl.splits, min_tiles, 1}), 0x3fffffff / pl.splits);
  pl.chunk_tiles = static_cast<int>(c);
  const std::int64_t tiles = (total_keys + batch * (tile_keys - 1)) / tile_keys;
  const std::int64_t all_tiles = (total_keys + tile_keys - 1) / tile_keys;
  const std::int64_t min_chunk = std::min<std::int64_t>(c, (kMinChunkKeys + tile_keys - 1) / tile_keys);
  const std::int64_t share =
      slots > 0 ? (head_blocks * all_tiles + kPlanWaves * slots - 1) / (kPlanWaves * slots) : c;
  std::int64_t m = std::max<std::int64_t>({min_chunk, share, 1});
  if (m < c) m = (c + (c + m - 1) / m - 1) / ((c + m - 1) / m);  // c cut into ceil(c / m) equal parts
  while (tiles / m * entry_bytes > static_cast<std::int64_t>(kWorkspaceCap)) m *= 2;
  pl.max_chunk_tiles = static_cast<int>(std::min<std::int64_t>(m, 0x3fffffff));
  const std::int64_t chunks = batch * pl.splits + tiles / pl.max_chunk_tiles;
  pl.max_ctas = head_blocks * std::min(chunks, tiles + batch);
  pl.max_slots = std::min(chunks, tiles);
  return pl;
}

}  // namespace kb::kernels::paged_decode
