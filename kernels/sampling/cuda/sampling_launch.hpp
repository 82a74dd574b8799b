// kb_cuda_sampling's launch rule: which kernel takes a call, with how many
// CTAs per row and threads per CTA, from the shape and the device alone.
// Plain host code (no CUDA headers) so that tests/kernels/test_launch_rules.cpp
// checks it on the CPU.
//
// Two kernels (sampling.cu):
//  - the cluster kernel (cluster = 1..8): a row is split into `cluster` equal
//    slices, each CTA of a thread-block cluster loads its slice into shared
//    memory once, and every pass runs over shared memory, the CTAs combining
//    their partial results through distributed shared memory;
//  - the streaming kernel (cluster = 0): one CTA per row, every pass reads the
//    row from global memory. It takes rows too large for 8 CTAs' shared memory.
#pragma once

#include <cstdint>

namespace kb::kernels {

struct SamplingConfig {
  // 0: the streaming kernel; 1..8: the cluster kernel with this many CTAs a row.
  int cluster = 0;
  // Elements a load: 16 bytes' worth in the cluster kernel (it aligns its
  // slices itself); in the streaming kernel 16 bytes where the rows are
  // 16-byte aligned and vocab is a multiple of it, else 1.
  int vector_width = 1;
  // A multiple of 32, 32..1024: about four loads a thread before the block grows.
  int block_threads = 32;
  // Cluster kernel: elements of the row each CTA holds (a multiple of
  // vector_width; the last CTA's slice may be shorter or empty) and the
  // dynamic shared memory each CTA needs for them.
  std::int64_t slice = 0;
  std::int64_t smem_bytes = 0;
};

inline constexpr int kSamplingMaxCluster = 8;  // the portable cluster size limit
inline constexpr int kSamplingMaxThreads = 1024;
// A CTA of a spread row holds at least this much of it: more CTAs shorten
// each pass but add a cluster barrier to each, which a slice of a few
// kilobytes does not repay (a starting point; the cluster kernel is not yet
// measured).
inline constexpr std::int64_t kSamplingMinSliceBytes = 32 * 1024;

namespace sampling_rule {
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
// Threads for `vectors` loads: four a thread, a whole number of warps, 32..1024.
inline int threads_for(std::int64_t vectors) {
  std::int64_t t = ceil_div(ceil_div(vectors, 4), 32) * 32;
  return static_cast<int>(t < 32 ? 32 : t > kSamplingMaxThreads ? kSamplingMaxThreads : t);
}
}  // namespace sampling_rule

// The streaming kernel's configuration.
inline SamplingConfig sampling_stream_config(std::int64_t vocab, int element_bytes, bool rows_aligned16) {
  SamplingConfig c;
  const int vec = 16 / element_bytes;
  c.vector_width = rows_aligned16 && vocab % vec == 0 ? vec : 1;
  c.block_threads = sampling_rule::threads_for(sampling_rule::ceil_div(vocab, c.vector_width));
  return c;
}

// The cluster kernel's configuration for a given cluster size (1..8), fitting or not.
// A CTA's shared memory holds its slice plus up to one vector before it (the
// slice starts in shared memory at the offset its global address has from a
// 16-byte boundary, so that 16-byte copies land aligned) and the rounding of
// its end to a whole vector: slice + vector_width elements.
inline SamplingConfig sampling_cluster_config(std::int64_t vocab, int element_bytes, int cluster) {
  using sampling_rule::ceil_div;
  SamplingConfig c;
  c.cluster = cluster;
  c.vector_width = 16 / element_bytes;
  c.slice = ceil_div(ceil_div(vocab, cluster), c.vector_width) * c.vector_width;
  const std::int64_t vectors = c.slice / c.vector_width + 1;
  c.smem_bytes = vectors * 16;
  c.block_threads = sampling_rule::threads_for(vectors);
  return c;
}

// The one rule. `smem_per_cta`: the dynamic shared memory one CTA may take
// (the device's opt-in limit less the kernel's static shared memory).
//  - The row must fit the cluster's shared memory: the smallest cluster that
//    holds it, else (more than 8 CTAs' worth) the streaming kernel.
//  - batch >= SMs: that smallest cluster (every SM has rows to work on;
//    fewer CTAs a row, fewer cluster barriers).
//  - batch < SMs: rows spread over the idle SMs for latency, up to
//    SMs / batch CTAs a row and 8, but no slice under kSamplingMinSliceBytes
//    unless the row needs it to fit.
inline SamplingConfig sampling_launch_config(std::int64_t vocab, int element_bytes, bool rows_aligned16,
                                             std::int64_t batch, int sm_count, std::int64_t smem_per_cta) {
  int fit = 0;
  for (int c = 1; c <= kSamplingMaxCluster && fit == 0; ++c)
    if (sampling_cluster_config(vocab, element_bytes, c).smem_bytes <= smem_per_cta) fit = c;
  if (fit == 0 || vocab <= 0 || batch <= 0) return sampling_stream_config(vocab, element_bytes, rows_aligned16);
  int cluster = fit;
  if (batch < sm_count) {
    std::int64_t spread = sm_count / batch;
    const std::int64_t by_size = vocab * element_bytes / kSamplingMinSliceBytes;
    if (spread > by_size) spread = by_size;
    if (spread > kSamplingMaxCluster) spread = kSamplingMaxCluster;
    if (spread > cluster) cluster = static_cast<int>(spread);
  }
  if (batch > 0x7fffffffLL / cluster)  // the grid's x dimension holds batch * cluster CTAs
    return sampling_stream_config(vocab, element_bytes, rows_aligned16);
  return sampling_cluster_config(vocab, element_bytes, cluster);
}

}  // namespace kb::kernels
