#include "common/result.hpp"

namespace kb {

const char* code_name(Code code) noexcept {
  switch (code) {
    case Code::ok: return "ok";
    case Code::invalid_argument: return "invalid argument";
    case Code::parse_error: return "parse error";
    case Code::invalid_data: return "invalid data";
    case Code::io_error: return "I/O error";
    case Code::not_found: return "not found";
    case Code::unsupported: return "unsupported";
    case Code::limit_exceeded: return "limit exceeded";
    case Code::out_of_memory: return "out of memory";
    case Code::no_cuda_device: return "no CUDA device";
    case Code::cuda_error: return "CUDA error";
    case Code::abi_mismatch: return "ABI mismatch";
    case Code::internal: return "internal error";
  }
  return "unknown";
}

}  // namespace kb
