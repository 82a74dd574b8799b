// kb_cuda_mamba_ssu: kb's CUDA solution for op_type "mamba_ssu" (Mamba2's
// selective state update over a slot cache). Kernel and launch shape:
// mamba_ssu.cu. new_state is the whole cache: slots no batch element names
// are copied, named ones updated (a slot named twice in batch order, as the
// reference's loop); padding elements (negative slot) get output 0.
#include <fmt/format.h>

#include <string>

#include "harness/implementation.hpp"
#include "harness/per_definition.hpp"
#include "mamba_ssu_cuda.hpp"

namespace kb::kernels {
namespace {

const char* kName = "kb_cuda_mamba_ssu";

bool float_dtype(DType t) { return t == DType::float32 || t == DType::float16 || t == DType::bfloat16; }

std::string check_definition(const Definition& d) {
  if (d.op_type != "mamba_ssu") return fmt::format("op_type {} is not mamba_ssu", d.op_type);
  // The arguments (names, ranks, float dtypes, integer slots) the oracle accepts.
  if (auto o = find_oracle(d); !o) return o.error().message;
  const TensorSpec* state = d.find_input("state");
  const TensorSpec* new_state = d.find_output("new_state");
  if (!state || !new_state || state->dtype != new_state->dtype)
    return "new_state must have the state's dtype (the cache is copied and updated in its dtype)";
  if (!float_dtype(state->dtype)) return fmt::format("the state is {}", dtype_name(state->dtype));
  if (const TensorSpec* s = d.find_input("state_batch_indices"); s->dtype != DType::int32 && s->dtype != DType::int64)
    return fmt::format("state_batch_indices is {}; this kernel reads int32 or int64", dtype_name(s->dtype));
  if (state->shape && state->shape->size() == 4)
    if (const Axis* ax = d.find_axis(state->shape->back()); ax && ax->kind == AxisKind::const_ && ax->value > 512)
      return fmt::format("dstate = {}: this kernel holds dstate <= 512 in registers", ax->value);
  return {};
}

// Once per definition (harness/per_definition.hpp): find_oracle reads the reference, which allocates.
std::string supports(const Definition& d) {
  static PerDefinition<std::string> memo;
  return memo.get(d, check_definition);
}

Status bad(const std::string& what) { return make_error(Code::invalid_argument, std::string(kName) + ": " + what); }

Status run(const CudaCall& c) {
  const Definition& d = c.definition;
  if (std::string why = supports(d); !why.empty()) return make_error(Code::unsupported, std::string(kName) + ": " + why);
  if (c.inputs.size() != d.inputs.size() || c.outputs.size() != d.outputs.size())
    return bad("wrong number of arguments");
  auto in = [&](const char* n) -> const cuda::DeviceTensor* {
    auto i = input_index(d, n);
    return i ? c.inputs[*i].tensor : nullptr;
  };
  const cuda::DeviceTensor *state = in("state"), *x = in("x"), *dt = in("dt"), *A = in("A"), *Bm = in("B"),
                           *Cm = in("C"), *D = in("D"), *bias = in("dt_bias"), *slots = in("state_batch_indices");
  for (const cuda::DeviceTensor* t : {state, x, dt, A, Bm, Cm, D, bias, slots})
    if (!t) return bad("every input must be a tensor");
  const cuda::DeviceTensor& out = c.outputs[*output_index(d, "output")];
  const cuda::DeviceTensor& new_state = c.outputs[*output_index(d, "new_state")];
  if (state->shape.size() != 4 || x->shape.size() != 3 || A->shape.size() != 3 || Bm->shape.size() != 3 ||
      D->shape.size() != 2)
    return bad("state [slots, H, P, N], x [batch, H, P], A [H, P, N], B / C [batch, G, N], D [H, P] expected");
  MambaSsuArgs g;
  g.batch = x->dim(0), g.H = x->dim(1), g.P = x->dim(2), g.G = Bm->dim(1), g.N = Bm->dim(2), g.cache = state->dim(0);
  if (state->dim(1) != g.H || state->dim(2) != g.P || state->dim(3) != g.N) return bad("state must be [slots, H, P, N]");
  if (dt->shape != x->shape) return bad("dt must have x's shape");
  if (A->dim(0) != g.H || A->dim(1) != g.P || A->dim(2) != g.N) return bad("A must be [H, P, N]");
  if (Bm->dim(0) != g.batch || Cm->shape != Bm->shape) return bad("B and C must be [batch, groups, N]");
  if (D->dim(0) != g.H || D->dim(1) != g.P || bias->shape != D->shape) return bad("D and dt_bias must be [H, P]");
  if (g.G <= 0 || g.H % g.G) return bad(fmt::format("heads {} are not a multiple of groups {}", g.H, g.G));
  if (slots->numel() != g.batch) return bad("state_batch_indices must hold one slot per batch element");
  if (out.shape != x->shape || new_state.shape != state->shape || new_state.dtype != state->dtype)
    return bad("outputs have the wrong shapes or dtypes");
  g.state = state->data, g.new_state = new_state.data, g.state_dt = state->dtype;
  g.x = x->data, g.dt = dt->data, g.A = A->data, g.B = Bm->data, g.C = Cm->data, g.D = D->data, g.dt_bias = bias->data;
  g.x_dt = x->dtype, g.dt_dt = dt->dtype, g.A_dt = A->dtype, g.B_dt = Bm->dtype, g.C_dt = Cm->dtype, g.D_dt = D->dtype,
  g.dt_bias_dt = bias->dtype;
  g.slots = slots->data, g.slots_dt = slots->dtype;
  g.out = out.data, g.out_dt = out.dtype;
  return launch_mamba_ssu(g, c.stream);
}

}  // namespace

void add_mamba_ssu_cuda(Registry& r) {
  Implementation impl;
  impl.name = kName;
  impl.author = "kb";
  impl.device = Device::cuda;
  impl.description =
      "Mamba2 selective state update: one CTA per (cache slot, chunk of head rows) finds the batch elements naming "
      "its slot (block-wide scan; none: the rows are copied), streams the rows once in 16-byte vectors (16 lanes a "
      "row, 32 state elements a thread), applies each naming element in batch order in registers (fp32, the "
      "reference's rounding order, state rounded to the cache dtype between elements) and stores once; B and C "
      "staged in shared memory; padding slots give output 0; scalar fallback for unaligned tensors or odd dstate";
  impl.supports = supports;
  impl.run_cuda = run;
  r.add(std::move(impl));
}

}  // namespace kb::kernels
