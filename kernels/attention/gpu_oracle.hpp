// The attention GPU oracle's kernel, as the host side (gpu_oracle.cpp)
// calls it: plain types only, so the checks and lists are ordinary C++ and
// the .cu file holds nothing but the kernel.
#pragma once

namespace kb::kernels::attention_gpu_oracle {

constexpr int kMaxHeadDim = 1024;  // d_qk and d_v
constexpr int kMaxRopeDim = 64;    // d_pe (MLA's q_pe / kpe)

// Element types, told at run time (one kernel for every mix of dtypes).
enum ElemType : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

struct Params {
  // q0 [tokens, H_q, d_qk], q1 [tokens, H_q, d_pe] (MLA's q_pe, else null);
  // k0 [rows, H_kv, d_qk], k1 [rows, d_pe] (MLA's kpe, else null),
  // v [rows, H_kv, d_v]; a paged cache's row is page * page_size + slot.
  const void *q0, *q1, *k0, *k1, *v;
  int q0_type, q1_type, k0_type, k1_type, v_type;
  void* out;  // [tokens, H_q, d_v]
  int out_type;
  void* lse;  // [tokens, H_q] or null
  int lse_type;
  long long tokens;
  int q_heads, kv_heads, group, d_qk, d_pe, d_v;
  float scale;
  bool causal;
  const int* token_seq;         // [tokens]: the sequence a token's query belongs to, -1 for none
  const long long* seq_q_begin;  // [sequences]
  const long long* seq_q_len;
  const long long* seq_kv_begin;  // into kv_rows
  const long long* seq_kv_len;
  const long long* kv_rows;      // every sequence's keys in order, as rows of k0 / k1 / v
  // The blocks' rows, the same for every KV head g: n_chunks pairs (u0, n),
  // the flattened rows u = token * group + (head - g * group) in [u0, u0 + n),
  // 1 <= n <= rows_per_chunk(), all of one token_seq value; together they
  // cover [0, tokens * group) once.
  const long long* chunks;
  long long n_chunks;
};

// The most rows a chunk may have (one block's rows).
int rows_per_chunk();

// Queues the kernel on `stream` (a block per chunk, KV head and slice of the
// value columns); returns a cudaError_t value, 0 on success.
int launch(const Params& p, void* stream);

}  // namespace kb::kernels::attention_gpu_oracle
