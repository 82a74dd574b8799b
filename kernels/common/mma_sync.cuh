// Warp-level tensor-core PTX (sm_80 and later) shared by kb's mma.sync
// kernels: ldmatrix fragment loads from shared memory and the bf16 and tf32
// mma shapes. Users: the paged decode (attention/decode.cuh), the MoE expert
// GEMMs (moe/cuda/moe.cu) and the GDN chunks (gdn/cuda/gdn_chunked.cu).
//
// Fragment layouts (g = lane / 4, t = lane % 4):
//  - ldmatrix .b16 8x8 matrix: lane l holds row l / 4, 16-bit columns 2 (l % 4)
//    and 2 (l % 4) + 1 (the lower column in the low half). Lanes 8 i .. 8 i + 7
//    give the row addresses of matrix i (16 bytes each, 16-byte aligned). Read
//    as 32-bit elements, the same matrix is 8 x 4 and lane l holds (l / 4, l % 4):
//    the tf32 fragment layout.
//  - m16n8k16 bf16: a rows (g, g + 8) x cols (2t, 2t + 1, 2t + 8, 2t + 9),
//    b rows (2t, 2t + 1, 2t + 8, 2t + 9) x col g; m16n8k8 tf32: a rows (g, g + 8)
//    x cols (t, t + 4), b rows (t, t + 4) x col g; both accumulate c rows
//    (g, g + 8) x cols (2t, 2t + 1) in fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "hopper_ptx.cuh"  // saddr: a shared-memory pointer as a 32-bit shared-window address

namespace kb::kernels::mma_sync {

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(hopper::saddr(p))
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(hopper::saddr(p))
               : "memory");
}
// Two matrices: lanes 0-15 give the row addresses (the others' are ignored).
__device__ __forceinline__ void ldmatrix_x2(std::uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(hopper::saddr(p))
               : "memory");
}

// d += a (16x16, row) * b (16x8, col); bf16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d += a (16x8, row) * b (8x8, col); tf32 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_tf32(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace kb::kernels::mma_sync
