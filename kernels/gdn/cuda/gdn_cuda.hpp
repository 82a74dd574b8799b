// kb_cuda_gdn's launcher: the gated delta rule (k-last state [.., HV, V, K])
// for decode, mtp and prefill, one launch. Plain host declarations.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/result.hpp"
#include "schema/dtype.hpp"

namespace kb::kernels {

// Device pointers and sizes of one call. Token-major tensors: q [tokens, HQ,
// K], k [tokens, HK, K], v [tokens, HV, V], a and b [tokens, HV], output
// [tokens, HV, V]; decode and mtp have `tokens_per_seq` tokens a sequence,
// prefill the ranges of cu_seqlens.
struct GdnArgs {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *a = nullptr, *b = nullptr, *a_log = nullptr,
             *dt_bias = nullptr;
  DType q_dt = DType::bfloat16, k_dt = DType::bfloat16, v_dt = DType::bfloat16, a_dt = DType::bfloat16,
        b_dt = DType::bfloat16, a_log_dt = DType::float32, dt_bias_dt = DType::float32;
  const float* state = nullptr;  // fp32 [state_rows, HV, V, K]; null: every sequence starts from zeros
  std::int64_t state_rows = 0;
  // mtp: the pool row each sequence reads (int32 or int64); its final state is
  // not written (the definition returns the pool unchanged: state_out).
  const void* seq_index = nullptr;
  DType seq_index_dt = DType::int32;
  // prefill: cu_seqlens [seqs + 1] (int32 or int64), a partition of the tokens.
  const void* cu_seqlens = nullptr;
  DType cu_dt = DType::int64;
  void* out = nullptr;
  DType out_dt = DType::bfloat16;
  // decode / prefill: new_state [seqs, HV, V, K]; mtp: final_state
  // [state_rows, HV, V, K], a copy of the pool `state`.
  float* state_out = nullptr;
  std::int64_t hq = 0, hk = 0, hv = 0, dk = 0, dv = 0;
  std::int64_t seqs = 0, tokens_per_seq = 0, total_tokens = 0;
  float scale = 0;  // 0: 1 / sqrt(K)
  // Scratch of gdn_workspace_bytes(*this) bytes (the chunked prefill's
  // per-chunk transforms, mtp's lists of each pool row's readers); unused
  // where that is 0.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

// Prefill runs in chunks of 64 tokens on tensor cores (gdn_chunked.cu) where
// q, k, v are bf16 with K <= 128 and V <= 256 (both multiples of 8, rows
// 16-byte aligned) and the sequences average at least 128 tokens (64 where
// sequences x value heads <= 1024, 32 where <= 512); else, and for decode and
// mtp, token by token (gdn.cu).
bool gdn_prefill_uses_chunks(const GdnArgs& args);

// Scratch bytes the call needs: mtp two ints a pool row and sequence; a
// prefill run in chunks W and U of every chunk and value head in fp32, about
// (K + V) * 4 bytes a token and value head; else 0.
std::size_t gdn_workspace_bytes(const GdnArgs& args);

// Launch shape from gdn_launch_config(). A CTA holds rows [slice * rows_cta,
// + rows_cta) of one (sequence, value head) state in registers: 16 lanes a
// row, `elems` (4, 8, 16 or 32) consecutive-in-fours K elements a lane,
// 32 / elems rows a thread (2 rows a warp at a time).
struct GdnConfig {
  int elems = 0;          // K elements a lane holds of each row (16 * elems >= K)
  bool vectorized = false;  // 16-byte state loads and stores (K % 4 == 0, aligned)
  int warps = 1;
  int rows_cta = 0;
  std::int64_t slices = 0;  // CTAs a (sequence, head)
  int tile_tokens = 1;      // tokens staged in shared memory at once
  std::size_t smem_bytes = 0;
  std::int64_t ctas = 0;
};

// `sms` is the device's SM count (the CTA count aims at a few CTAs an SM);
// `max_tokens` a bound on one sequence's tokens (decode / mtp: T; prefill:
// the total). elems == 0 when K is over 512 (no kernel).
GdnConfig gdn_launch_config(std::int64_t dk, std::int64_t dv, std::int64_t hv, std::int64_t seqs,
                            std::int64_t max_tokens, int sms, bool vectorizable);

// Runs the recurrence for every sequence; mtp also copies the pool to
// final_state (in the same pass over it). Launches on `stream` (a
// cudaStream_t); allocates nothing (scratch is args.workspace), no
// synchronization.
Status launch_gdn(const GdnArgs& args, void* stream);

}  // namespace kb::kernels
