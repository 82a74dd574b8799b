// The work schedule of kb_cuda_moe's row-streaming GEMMs (moe.cu): rules of the shape and of the
// plan's per-expert counts, one definition for the host and the device, no CUDA types, so
// tests/kernels/test_moe.cpp checks them on the CPU.
//
// A routed expert's rows are cut into tiles of at most kStreamRowTile rows (the most one CTA
// dots a weight row with inside its register budget: 64 registers a thread, four CTAs an SM). A
// work item is (tile, block of weight rows); the items of a GEMM are numbered
//
//   q = N_blocks x t0(e) + block x tiles(e) + j      (tile j of expert e, t0(e) its first tile)
//
// so the experts follow each other, and inside one expert the tiles of one weight block are
// consecutive: CTAs that take consecutive items at the same time read the same weight rows, and
// the second and later reads of an expert's block come from L2. q / N_blocks is always a tile of
// the item's expert (t0(e) <= q / N_blocks < t0(e) + tiles(e)), so a CTA finds the expert from
// the tile table with one lookup and no search.
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(__CUDACC__)
#define KB_MOE_HOST_DEVICE __host__ __device__
#else
#define KB_MOE_HOST_DEVICE
#endif

namespace kb::kernels::moe_schedule {

// Routed rows a tile of the streaming path at most.
inline constexpr int kStreamRowTile = 4;
// Resident CTAs an SM of the streaming kernels (their launch bounds): the persistent grid.
inline constexpr int kStreamCtasPerSm = 4;

// Tiles of `tile` rows covering an expert's `rows` rows.
KB_MOE_HOST_DEVICE inline int tiles_of(int rows, int tile) { return (rows + tile - 1) / tile; }

// The most tiles any routing of `pairs` rows over `experts` local experts makes: each expert's
// last tile may be partial, and at most min(experts, pairs) experts get a row. Sizes the tile
// table in the workspace.
inline std::int64_t max_tiles(std::int64_t pairs, std::int64_t experts, int tile) {
  return (pairs + tile - 1) / tile + std::min(experts, pairs);
}

// Work items of a streaming GEMM: every tile x every block of weight rows.
KB_MOE_HOST_DEVICE inline std::int64_t stream_items(std::int64_t tiles, std::int64_t blocks) { return tiles * blocks; }

// The persistent grid of a streaming GEMM: kStreamCtasPerSm CTAs an SM, never more than the
// most items any routing makes (`max_items`; CTAs past the real items exit at once). An unknown
// SM count (0) gives one CTA an item at most. At least one CTA.
inline std::int64_t stream_grid(std::int64_t max_items, int sm_count) {
  const std::int64_t most = std::max<std::int64_t>(1, max_items);
  if (sm_count <= 0) return most;
  return std::min<std::int64_t>(most, static_cast<std::int64_t>(kStreamCtasPerSm) * sm_count);
}

// What item q asks of a CTA: the block of weight rows and the tile's rows [r0, r0 + rows) of the
// pair rows. `first_tile`, `first_row` and `rows_of_expert` describe the expert owning tile
// q / blocks (its first tile, its segment's first row and its row count).
struct StreamWork {
  int block = 0;
  int r0 = 0;
  int rows = 0;
};
KB_MOE_HOST_DEVICE inline StreamWork stream_work(long long q, int blocks, int first_tile, int first_row, int rows_of_expert) {
  const int nt = tiles_of(rows_of_expert, kStreamRowTile);
  const long long local = q - static_cast<long long>(first_tile) * blocks;
  const int j = static_cast<int>(local % nt);
  StreamWork w;
  w.block = static_cast<int>(local / nt);
  w.r0 = first_row + j * kStreamRowTile;
  w.rows = rows_of_expert - j * kStreamRowTile < kStreamRowTile ? rows_of_expert - j * kStreamRowTile : kStreamRowTile;
  return w;
}

}  // namespace kb::kernels::moe_schedule
