// The ideal cost of one call, for achieved bytes/s and FLOP/s: every input
// and output moved once; FLOPs where the op type has a clear count (gemm).
#pragma once

#include <cstdint>

#include "oracle/oracle.hpp"

namespace kb {

struct CallCost {
  double bytes = 0;
  double flops = 0;
};

CallCost ideal_cost(const Definition& d, const AxisValues& axes);

}  // namespace kb
