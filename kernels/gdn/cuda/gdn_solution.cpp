// kb_cuda_gdn: kb's CUDA solution for op_type "gdn" (gated delta rule with
// the k-last state layout): decode, mtp and prefill. Kernel and launch
// shape: gdn.cu.
//
// Outputs follow the definitions: decode and prefill write new_state per
// sequence (a prefill sequence without tokens gets a zero row, as the
// reference's zeros); mtp returns final_state as a copy of the pool, which
// the reference clones and leaves unchanged. mtp's optional
// intermediate_states_buffer is an input the reference fills in place; kb
// judges outputs and requires inputs unchanged, so it is not written.
#include <fmt/format.h>

#include <string>
#include <variant>

#include "../../common/solution_workspace.hpp"
#include "gdn_cuda.hpp"
#include "harness/implementation.hpp"
#include "harness/per_definition.hpp"

namespace kb::kernels {
namespace {

const char* kName = "kb_cuda_gdn";

bool is_prefill(const Definition& d) { return input_index(d, "cu_seqlens").has_value(); }
bool is_mtp(const Definition& d) { return !is_prefill(d) && input_index(d, "initial_state_indices").has_value(); }

std::string check_definition(const Definition& d) {
  if (d.op_type != "gdn") return fmt::format("op_type {} is not gdn", d.op_type);
  // The forms (decode / mtp / prefill), the k-last layout and the argument
  // names the oracle accepts are the ones this kernel runs.
  if (auto o = find_oracle(d); !o) return o.error().message;
  const bool mtp = is_mtp(d);
  const TensorSpec* state = d.find_input(mtp ? "initial_state" : "state");
  const TensorSpec* state_out = d.find_output(mtp ? "final_state" : "new_state");
  if (state && state->dtype != DType::float32)
    return fmt::format("the state is {}; this kernel keeps a float32 state", dtype_name(state->dtype));
  if (!state_out || state_out->dtype != DType::float32)
    return "the state output must be float32 (the kernel writes the fp32 state it carries)";
  if (mtp && !state) return "mtp needs initial_state";
  const TensorSpec* q = d.find_input("q");
  if (q && q->shape && !q->shape->empty())
    if (const Axis* ax = d.find_axis(q->shape->back()); ax && ax->kind == AxisKind::const_ && ax->value > 512)
      return fmt::format("head size K = {}: this kernel holds K <= 512 in registers", ax->value);
  const TensorSpec* scale = d.find_input("scale");
  if (!scale || !scale->is_scalar()) return "expects a Python scalar input scale";
  for (const char* n : {"initial_state_indices", "cu_seqlens"})
    if (const TensorSpec* t = d.find_input(n); t && t->dtype != DType::int32 && t->dtype != DType::int64)
      return fmt::format("{} is {}; this kernel reads int32 or int64 indices", n, dtype_name(t->dtype));
  return {};
}

// Once per definition (harness/per_definition.hpp): find_oracle reads the reference, which allocates.
std::string supports(const Definition& d) {
  static PerDefinition<std::string> memo;
  return memo.get(d, check_definition);
}

// The stream's scratch (kernels/common/solution_workspace.hpp), allocated at the size asked for.
Result<void*> workspace(void* stream, std::size_t bytes) {
  static auto* buffers = new StreamWorkspaces;
  return solution_workspace(*buffers, stream, bytes, kName);
}

Status bad(const std::string& what) { return make_error(Code::invalid_argument, std::string(kName) + ": " + what); }

Status run(const CudaCall& c) {
  const Definition& d = c.definition;
  if (std::string why = supports(d); !why.empty()) return make_error(Code::unsupported, std::string(kName) + ": " + why);
  if (c.inputs.size() != d.inputs.size() || c.outputs.size() != d.outputs.size())
    return bad("wrong number of arguments");
  const bool prefill = is_prefill(d), mtp = is_mtp(d);
  auto in = [&](const char* n) -> const cuda::DeviceTensor* {
    auto i = input_index(d, n);
    return i ? c.inputs[*i].tensor : nullptr;
  };
  const cuda::DeviceTensor *q = in("q"), *k = in("k"), *v = in("v"), *a = in("a"), *b = in("b"), *a_log = in("A_log"),
                           *dt_bias = in("dt_bias"), *state = in(mtp ? "initial_state" : "state");
  if (!q || !k || !v || !a || !b || !a_log || !dt_bias) return bad("q, k, v, a, b, A_log and dt_bias are required");
  if (mtp && !state) return bad("initial_state is required");
  const cuda::DeviceTensor& out = c.outputs[*output_index(d, "output")];
  const cuda::DeviceTensor& state_out = c.outputs[*output_index(d, mtp ? "final_state" : "new_state")];

  const std::size_t r = prefill ? 3 : 4;
  if (q->shape.size() != r || k->shape.size() != r || v->shape.size() != r) return bad("q, k, v have the wrong rank");
  GdnArgs g;
  g.hq = q->dim(r - 2), g.hk = k->dim(r - 2), g.hv = v->dim(r - 2), g.dk = q->dim(r - 1), g.dv = v->dim(r - 1);
  if (k->dim(r - 1) != g.dk) return bad("q and k head sizes differ");
  if (g.hq <= 0 || g.hk <= 0 || g.hv % g.hq || g.hv % g.hk)
    return bad(fmt::format("value heads {} must be a multiple of query heads {} and key heads {}", g.hv, g.hq, g.hk));
  for (const cuda::DeviceTensor* t : {k, v})
    if (t->dim(0) != q->dim(0) || (r == 4 && t->dim(1) != q->dim(1))) return bad("q, k, v token axes differ");
  const std::int64_t tokens = prefill ? q->dim(0) : q->dim(0) * q->dim(1);
  if (a->numel() != tokens * g.hv || b->numel() != tokens * g.hv)
    return bad("a and b must hold one value per token and value head");
  if (a_log->numel() != g.hv || dt_bias->numel() != g.hv) return bad("A_log and dt_bias must hold one value per value head");
  if (out.numel() != tokens * g.hv * g.dv) return bad("output has the wrong size");
  const std::int64_t per = g.hv * g.dv * g.dk;

  if (prefill) {
    const cuda::DeviceTensor* cu = in("cu_seqlens");
    if (!cu || cu->shape.size() != 1 || cu->numel() < 1) return bad("cu_seqlens must be a 1-D tensor of num_seqs + 1 values");
    g.cu_seqlens = cu->data, g.cu_dt = cu->dtype;
    g.seqs = cu->numel() - 1;
    g.state_rows = g.seqs;
  } else {
    g.seqs = q->dim(0);
    g.tokens_per_seq = q->dim(1);
    g.state_rows = mtp ? state->dim(0) : g.seqs;
    if (mtp) {
      const cuda::DeviceTensor* idx = in("initial_state_indices");
      if (!idx || idx->numel() != g.seqs) return bad("initial_state_indices must hold one index per sequence");
      g.seq_index = idx->data, g.seq_index_dt = idx->dtype;
    }
  }
  g.total_tokens = tokens;
  if (state) {
    if (state->dtype != DType::float32) return bad("the state must be float32");
    if (state->shape.size() != 4 || state->dim(0) != g.state_rows || state->numel() != g.state_rows * per)
      return bad(fmt::format("the state must be [{}, {}, {}, {}]", g.state_rows, g.hv, g.dv, g.dk));
    g.state = static_cast<const float*>(state->data);
  }
  if (state_out.dtype != DType::float32 || state_out.numel() != g.state_rows * per)
    return bad("the state output must be float32 with the state's shape");
  g.state_out = static_cast<float*>(state_out.data);

  g.q = q->data, g.k = k->data, g.v = v->data, g.a = a->data, g.b = b->data, g.a_log = a_log->data,
  g.dt_bias = dt_bias->data;
  g.q_dt = q->dtype, g.k_dt = k->dtype, g.v_dt = v->dtype, g.a_dt = a->dtype, g.b_dt = b->dtype,
  g.a_log_dt = a_log->dtype, g.dt_bias_dt = dt_bias->dtype;
  g.out = out.data, g.out_dt = out.dtype;
  const cuda::DeviceArg& scale = c.inputs[*input_index(d, "scale")];
  if (scale.tensor) return bad("scale must be a Python scalar, not a tensor");
  // The reference multiplies fp32 values by the scalar: fp32(scale), 0 or None meaning 1 / sqrt(K).
  if (scale.scalar) g.scale = static_cast<float>(std::visit([](auto x) { return static_cast<double>(x); }, *scale.scalar));
  if (const std::size_t bytes = gdn_workspace_bytes(g)) {
    auto ws = workspace(c.stream, bytes);
    if (!ws) return ws.error();
    g.workspace = *ws, g.workspace_bytes = bytes;
  }
  return launch_gdn(g, c.stream);
}

}  // namespace

void add_gdn_cuda(Registry& r) {
  Implementation impl;
  impl.name = kName;
  impl.author = "kb";
  impl.device = Device::cuda;
  impl.description =
      "gated delta rule (decode, mtp, prefill; k-last fp32 state): each CTA holds a slice of rows of one (sequence, "
      "value head) state in registers (16 lanes a row, 16-byte loads along K), loaded and stored once, and applies "
      "the sequence's tokens one by one (tiles of tokens staged in shared memory, both row reductions in one "
      "shuffle tree); mtp's CTAs own pool rows: each copies its slice to final_state and walks the tokens of every "
      "sequence reading it, so the pool is read once; prefill of long sequences (K <= 128) runs the chunked form instead: the UT "
      "transform of every 64-token chunk in parallel, then the state walked chunk by chunk, on tf32 tensor cores";
  impl.supports = supports;
  impl.run_cuda = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
