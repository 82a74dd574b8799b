// Which output-tile shapes fill the SMs for a cuBLASLt problem: a shape-only rule the autotuner uses to pick a
// few tile variants of the heuristic's first algorithm (cublaslt_gemm.cpp, add_tile_variants). No cuBLASLt
// types here, so the rule is tested without a GPU (tests/kernels/test_launch_rules.cpp).
//
// Why: at M = 256 on an H200, kb_cuda_gemm ran 3072 x 6144 at 1.03x torch.matmul with the heuristic's list, and
// a sweep over every configuration cuBLASLt accepts found the
// heuristic's own algorithm 66 fastest with a 96 x 64 tile (6% faster than the heuristic's first): 32 x 4 = 128
// tiles on 132 SMs, one wave nearly full, where a 128 x 64 tile leaves 36 SMs idle. Of the four problems swept
// at M = 128 / 256 (N x K = 3072 x 6144, 6144 x 4096, 2048 x 4096, 16384 x 3072), the fastest tile was the one
// this rule ranks first in three. In the fourth the fastest, 128 x 64 (two waves), fills as well as the larger
// tiles the rule puts first (128 x 128, 256 x 64: one wave), and the sweep timed 128 x 128 1.4% slower.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kb::kernels::gemm_cuda {

// Every cuBLASLt tile shape (cublasLt.h's CUBLASLT_MATMUL_TILE_<rows>x<cols>) with both sides 64 to 256: the
// sizes Hopper's tensor-core kernels use for problems this large. X(rows, cols); the ids come from the names,
// in cublaslt_gemm.cpp.
#define KB_LT_TILE_SHAPES(X) \
  X(64, 64) X(64, 72) X(64, 80) X(64, 88) X(64, 96) X(64, 104) X(64, 112) X(64, 120) X(64, 128) \
  X(64, 136) X(64, 144) X(64, 152) X(64, 160) X(64, 168) X(64, 176) X(64, 184) X(64, 192) X(64, 200) \
  X(64, 208) X(64, 216) X(64, 224) X(64, 232) X(64, 240) X(64, 248) X(64, 256) X(72, 64) X(72, 128) \
  X(72, 192) X(72, 256) X(80, 64) X(80, 128) X(80, 192) X(80, 256) X(88, 64) X(88, 128) X(88, 192) \
  X(88, 256) X(96, 64) X(96, 128) X(96, 192) X(96, 256) X(104, 64) X(104, 128) X(104, 192) X(104, 256) \
  X(112, 64) X(112, 128) X(112, 192) X(112, 256) X(120, 64) X(120, 128) X(120, 192) X(120, 256) X(128, 64) \
  X(128, 72) X(128, 80) X(128, 88) X(128, 96) X(128, 104) X(128, 112) X(128, 120) X(128, 128) X(128, 136) \
  X(128, 144) X(128, 152) X(128, 160) X(128, 168) X(128, 176) X(128, 184) X(128, 192) X(128, 200) X(128, 208) \
  X(128, 216) X(128, 224) X(128, 232) X(128, 240) X(128, 248) X(128, 256) X(136, 64) X(136, 128) X(136, 192) \
  X(136, 256) X(144, 64) X(144, 128) X(144, 192) X(144, 256) X(152, 64) X(152, 128) X(152, 192) X(152, 256) \
  X(160, 64) X(160, 128) X(160, 192) X(160, 256) X(168, 64) X(168, 128) X(168, 192) X(168, 256) X(176, 64) \
  X(176, 128) X(176, 192) X(176, 256) X(184, 64) X(184, 128) X(184, 192) X(184, 256) X(192, 64) X(192, 72) \
  X(192, 80) X(192, 88) X(192, 96) X(192, 104) X(192, 112) X(192, 120) X(192, 128) X(192, 136) X(192, 144) \
  X(192, 152) X(192, 160) X(192, 168) X(192, 176) X(192, 184) X(192, 192) X(192, 200) X(192, 208) X(192, 216) \
  X(192, 224) X(192, 232) X(192, 240) X(192, 248) X(192, 256) X(200, 64) X(200, 128) X(200, 192) X(208, 64) \
  X(208, 128) X(208, 192) X(216, 64) X(216, 128) X(216, 192) X(224, 64) X(224, 128) X(224, 192) X(232, 64) \
  X(232, 128) X(232, 192) X(240, 64) X(240, 128) X(240, 192) X(248, 64) X(248, 128) X(248, 192) X(256, 64) \
  X(256, 72) X(256, 80) X(256, 88) X(256, 96) X(256, 104) X(256, 112) X(256, 120) X(256, 128) X(256, 136) \
  X(256, 144) X(256, 152) X(256, 160) X(256, 168) X(256, 176) X(256, 184) X(256, 192) X(256, 200) X(256, 208) \
  X(256, 216) X(256, 224) X(256, 232) X(256, 240) X(256, 248) X(256, 256)

// One output tile, in cuBLAS's column-major terms: `rows` of the m dimension (kb's N), `cols` of n (kb's M).
struct TileShape {
  int rows = 0, cols = 0;
};

// The fraction of the SMs' work spent on wanted outputs, if every tile takes time in proportion to its area:
// m x n outputs over waves x SMs x one tile's area, where waves = ceil(tiles / SMs). 1 only when the tiles
// divide the problem exactly and fill every SM in every wave. 0 for an unknown shape.
inline double tile_wave_fill(std::int64_t m, std::int64_t n, TileShape t, int sms) {
  if (t.rows <= 0 || t.cols <= 0 || m <= 0 || n <= 0 || sms <= 0) return 0.0;
  const std::int64_t tiles = ((m + t.rows - 1) / t.rows) * ((n + t.cols - 1) / t.cols);
  const std::int64_t waves = (tiles + sms - 1) / sms;
  return static_cast<double>(m) * static_cast<double>(n) /
         (static_cast<double>(waves) * sms * static_cast<double>(t.rows) * t.cols);
}

// How much better a tile must fill the SMs than the heuristic's own to be worth timing.
inline constexpr double kTileFillMargin = 0.05;

// Indices into `offered` of at most `count` shapes that fill the SMs best, each by at least kTileFillMargin
// more than `own` (the heuristic's tile); best first, the larger tile first among equals (fewer, larger tiles
// read each operand fewer times). None when `own` is outside KB_LT_TILE_SHAPES (a narrow tile for a small M,
// where 64-wide tiles would mostly compute padding).
inline std::vector<std::size_t> wave_fit_tiles(std::int64_t m, std::int64_t n, const std::vector<TileShape>& offered,
                                               TileShape own, int sms, std::size_t count) {
  std::vector<std::size_t> picked;
  if (own.rows <= 0 || own.cols <= 0) return picked;
  const double bar = tile_wave_fill(m, n, own, sms) + kTileFillMargin;
  std::vector<double> fill(offered.size());
  for (std::size_t i = 0; i < offered.size(); ++i) {
    fill[i] = tile_wave_fill(m, n, offered[i], sms);
    if (fill[i] >= bar) picked.push_back(i);
  }
  std::stable_sort(picked.begin(), picked.end(), [&](std::size_t a, std::size_t b) {
    if (fill[a] != fill[b]) return fill[a] > fill[b];
    return offered[a].rows * offered[a].cols > offered[b].rows * offered[b].cols;
  });
  if (picked.size() > count) picked.resize(count);
  return picked;
}

}  // namespace kb::kernels::gemm_cuda
