// kb_cuda_mla_paged_decode's launcher is declared beside the GQA one (both
// kernels are the one template in kernels/common/paged_decode.cuh).
#pragma once

#include "../../gqa_paged/cuda/decode_cuda.hpp"
