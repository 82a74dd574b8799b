// kb's CUDA GQA attention (kb_cuda_gqa_paged_decode, kb_cuda_gqa_paged_prefill,
// kb_cuda_gqa_ragged_prefill), and MLA decode (kb_cuda_mla_paged_decode) on
// unequal lengths, over the shape rule of
// kernels/attention/dispatch.cuh, against kb's CPU oracle
// (kernels/attention/oracle.cpp), with definitions and index tensors built here
// (none read from the shipped files):
//  * every group 1..16 at head_dim 128 (2 kv heads, page size 16), in decode,
//    paged prefill and ragged prefill;
//  * every head_dim of kGqaHeadDims (64, 96, 128, 192, 256) at groups 1, 5 and 8,
//    page sizes 1, 16 and 64 (decode, paged prefill) and ragged prefill, each
//    on one of a few batch / length mixes (a length-1 sequence, lengths that
//    are not multiples of the page size, query tiles and key tiles past the
//    first, one long sequence whose keys are split over CTAs and merged);
//  * the split merge as its own launch (group 16, one long sequence) at every
//    head dim, and a prefill group past 16 (20 query heads over one kv head);
//  * decode over very unequal sequence lengths (GQA at several groups and head
//    dims, and MLA): one sequence holding 90% of the keys, lengths drawn as a
//    random split of the total, three quarters of the sequences empty, batch
//    1..256, so a long sequence's chunks spread over many CTAs and the merge
//    of many splits runs in each of its forms (decode.cuh's work plan);
//  * refusals: a decode group of 17 and an unsupported head dim are refused by
//    supports() and by the launchers, with messages that name the supported set.
// Each case goes through the solution's run_cuda with guarded inputs and
// NaN-poisoned outputs and is judged with the definition's tolerance
// (TolerancePolicy, as the other attention tests). One line per case.
//
// usage: test_cuda_attention_shapes [--filter SUBSTRING] [--dry-run]
//   --dry-run: no GPU; definitions, inputs, supports(), refusals and the oracle only
// Exit codes: 0 all passed, 1 a failure, 77 skipped (no usable CUDA device).
#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../kernels/attention/launch.hpp"
#include "attention_test_support.hpp"
#include "cuda/device.hpp"
#include "harness/implementation.hpp"
#include "harness/judge.hpp"
#include "inputs/inputs.hpp"
#include "schema/io.hpp"

namespace kb::kernels {
void add_gqa_paged_cuda(Registry& r);
void add_gqa_paged_prefill_cuda(Registry& r);
void add_gqa_ragged_cuda(Registry& r);
void add_mla_paged_cuda(Registry& r);
}  // namespace kb::kernels

using namespace kb_gpu_test;

namespace {

enum class Op { decode, paged_prefill, ragged_prefill, mla_decode };

const char* op_name(Op op) {
  return op == Op::decode          ? "decode"
         : op == Op::paged_prefill ? "paged prefill"
         : op == Op::mla_decode    ? "mla decode"
                                   : "ragged prefill";
}

// The definitions' PyTorch references (what kb's CPU oracle computes: causal
// masks aligned bottom-right, lse in base 2, rows with no key output 0 and lse
// -inf). kb never runs them; they document the generated definitions.
const char* kReferenceHead = R"py(import math
import torch


def attend(q, k, v, sm_scale, causal):
    # q [n_q, H, D], k / v [n_kv, H_kv, D] (float32): output [n_q, H, D], lse [n_q, H] (base 2)
    h, hkv = q.shape[1], k.shape[1]
    k = k.repeat_interleave(h // hkv, dim=1)
    v = v.repeat_interleave(h // hkv, dim=1)
    s = torch.einsum("qhd,khd->hqk", q, k) * sm_scale
    if causal:
        n_q, n_kv = q.shape[0], k.shape[0]
        keep = torch.arange(n_kv)[None, :] <= torch.arange(n_q)[:, None] + (n_kv - n_q)
        s = s.masked_fill(~keep[None], float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.nan_to_num(torch.exp(s - lse[..., None]))
    o = torch.einsum("hqk,khd->qhd", p, v)
    return o, (lse / math.log(2)).transpose(0, 1)


def paged_rows(cache, pages, n):
    return cache[pages].reshape(-1, cache.shape[2], cache.shape[3])[:n].float()

)py";
const char* kReferenceDecode = R"py(
@torch.no_grad()
def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    out = torch.zeros_like(q)
    lse = torch.full(q.shape[:2], float("-inf"), dtype=torch.float32, device=q.device)
    ps = k_cache.shape[1]
    for b in range(q.shape[0]):
        pages = kv_indices[kv_indptr[b]:kv_indptr[b + 1]].long()
        if len(pages) == 0:
            continue
        n = (len(pages) - 1) * ps + int(kv_last_page_len[b])
        o, l = attend(q[b:b + 1].float(), paged_rows(k_cache, pages, n), paged_rows(v_cache, pages, n), sm_scale, False)
        out[b], lse[b] = o[0].to(q.dtype), l[0]
    return out, lse
)py";
const char* kReferencePagedPrefill = R"py(
@torch.no_grad()
def run(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    out = torch.zeros_like(q)
    lse = torch.full(q.shape[:2], float("-inf"), dtype=torch.float32, device=q.device)
    ps = k_cache.shape[1]
    for b in range(len(qo_indptr) - 1):
        q0, q1 = int(qo_indptr[b]), int(qo_indptr[b + 1])
        pages = kv_indices[kv_indptr[b]:kv_indptr[b + 1]].long()
        if q1 == q0 or len(pages) == 0:
            continue
        n = (len(pages) - 1) * ps + int(kv_last_page_len[b])
        o, l = attend(q[q0:q1].float(), paged_rows(k_cache, pages, n), paged_rows(v_cache, pages, n), sm_scale, True)
        out[q0:q1], lse[q0:q1] = o.to(q.dtype), l
    return out, lse
)py";
const char* kReferenceRaggedPrefill = R"py(
@torch.no_grad()
def run(q, k, v, qo_indptr, kv_indptr, sm_scale):
    out = torch.zeros_like(q)
    lse = torch.full(q.shape[:2], float("-inf"), dtype=torch.float32, device=q.device)
    for b in range(len(qo_indptr) - 1):
        q0, q1 = int(qo_indptr[b]), int(qo_indptr[b + 1])
        k0, k1 = int(kv_indptr[b]), int(kv_indptr[b + 1])
        if q1 == q0 or k1 == k0:
            continue
        o, l = attend(q[q0:q1].float(), k[k0:k1].float(), v[k0:k1].float(), sm_scale, True)
        out[q0:q1], lse[q0:q1] = o.to(q.dtype), l
    return out, lse
)py";

// s as the characters of a JSON string.
std::string json_escaped(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '\\' || ch == '"') o += '\\', o += ch;
    else if (ch == '\n') o += "\\n";
    else o += ch;
  }
  return o;
}

const char* kReferenceMlaDecode = R"py(import math
import torch


@torch.no_grad()
def run(q_nope, q_pe, ckv_cache, kpe_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    # absorbed MLA: logits over [ckv | kpe], values ckv; lse in base 2; empty sequences output 0, lse -inf
    b_n, h, dc = q_nope.shape
    ps = ckv_cache.shape[1]
    out = torch.zeros_like(q_nope)
    lse = torch.full((b_n, h), float("-inf"), dtype=torch.float32, device=q_nope.device)
    for b in range(b_n):
        pages = kv_indices[kv_indptr[b]:kv_indptr[b + 1]].long()
        if len(pages) == 0:
            continue
        n = (len(pages) - 1) * ps + int(kv_last_page_len[b])
        kc = ckv_cache[pages].reshape(-1, dc)[:n].float()
        kp = kpe_cache[pages].reshape(-1, kpe_cache.shape[2])[:n].float()
        s = (q_nope[b].float() @ kc.T + q_pe[b].float() @ kp.T) * sm_scale
        lse[b] = torch.logsumexp(s, -1) / math.log(2.0)
        out[b] = (torch.softmax(s, -1) @ kc).to(q_nope.dtype)
    return out, lse
)py";

// An MLA (absorbed, ckv 512 + kpe 64) paged decode definition at hq query
// heads and page size ps, in the shipped definitions' form.
kb::Definition make_mla_definition(std::int64_t hq, std::int64_t ps) {
  const std::string name = fmt::format("mla_paged_decode_h{}_ckv512_kpe64_ps{}", hq, ps);
  const std::string text = fmt::format(
      R"j({{"name": "{}", "description": "MLA decode at a generated shape: kb's shape test", "reference": "{}",
          "op_type": "mla_paged",
          "axes": {{"batch_size": {{"type": "var"}}, "num_qo_heads": {{"type": "const", "value": {}}},
                   "head_dim_ckv": {{"type": "const", "value": 512}}, "head_dim_kpe": {{"type": "const", "value": 64}},
                   "page_size": {{"type": "const", "value": {}}}, "num_pages": {{"type": "var"}},
                   "len_indptr": {{"type": "var"}}, "num_kv_indices": {{"type": "var"}}}},
          "constraints": ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"],
          "inputs": {{"q_nope": {{"shape": ["batch_size", "num_qo_heads", "head_dim_ckv"], "dtype": "bfloat16"}},
                     "q_pe": {{"shape": ["batch_size", "num_qo_heads", "head_dim_kpe"], "dtype": "bfloat16"}},
                     "ckv_cache": {{"shape": ["num_pages", "page_size", "head_dim_ckv"], "dtype": "bfloat16"}},
                     "kpe_cache": {{"shape": ["num_pages", "page_size", "head_dim_kpe"], "dtype": "bfloat16"}},
                     "kv_indptr": {{"shape": ["len_indptr"], "dtype": "int32"}},
                     "kv_indices": {{"shape": ["num_kv_indices"], "dtype": "int32"}},
                     "kv_last_page_len": {{"shape": ["batch_size"], "dtype": "int32"}},
                     "sm_scale": {{"shape": null, "dtype": "float32"}}}},
          "outputs": {{"output": {{"shape": ["batch_size", "num_qo_heads", "head_dim_ckv"], "dtype": "bfloat16"}},
                      "lse": {{"shape": ["batch_size", "num_qo_heads"], "dtype": "float32"}}}}}})j",
      name, json_escaped(kReferenceMlaDecode), hq, ps);
  auto d = kb::read_definition(text, name);
  if (!d) throw std::runtime_error("generated definition " + name + ": " + d.error().message);
  return *d;
}

// A definition of op at these constants, in FlashInfer-Bench's format (the
// shipped GQA definitions' axes, inputs and outputs; kv_last_page_len on
// every paged one, so last pages may be partial).
kb::Definition make_definition(Op op, std::int64_t hq, std::int64_t hkv, std::int64_t dim, std::int64_t ps) {
  const std::string consts = fmt::format(
      R"("num_qo_heads": {{"type": "const", "value": {}}}, "num_kv_heads": {{"type": "const", "value": {}}},
         "head_dim": {{"type": "const", "value": {}}})",
      hq, hkv, dim);
  const std::string outs_rows = op == Op::decode ? "batch_size" : "total_q";
  const std::string outputs = fmt::format(
      R"("outputs": {{"output": {{"shape": ["{0}", "num_qo_heads", "head_dim"], "dtype": "bfloat16"}},
                      "lse": {{"shape": ["{0}", "num_qo_heads"], "dtype": "float32"}}}})",
      outs_rows);
  const std::string scale = R"("sm_scale": {"shape": null, "dtype": "float32"})";
  std::string name, body;
  if (op == Op::ragged_prefill) {
    name = fmt::format("gqa_ragged_prefill_causal_h{}_kv{}_d{}", hq, hkv, dim);
    body = fmt::format(
        R"j("op_type": "gqa_ragged",
           "axes": {{{}, "len_indptr": {{"type": "var"}}, "total_q": {{"type": "var"}}, "total_kv": {{"type": "var"}}}},
           "inputs": {{"q": {{"shape": ["total_q", "num_qo_heads", "head_dim"], "dtype": "bfloat16"}},
                      "k": {{"shape": ["total_kv", "num_kv_heads", "head_dim"], "dtype": "bfloat16"}},
                      "v": {{"shape": ["total_kv", "num_kv_heads", "head_dim"], "dtype": "bfloat16"}},
                      "qo_indptr": {{"shape": ["len_indptr"], "dtype": "int32"}},
                      "kv_indptr": {{"shape": ["len_indptr"], "dtype": "int32"}}, {}}}, {},
           "constraints": ["total_q == qo_indptr[-1].item()", "total_kv == kv_indptr[-1].item()"])j",
        consts, scale, outputs);
  } else {
    const bool prefill = op == Op::paged_prefill;
    name = fmt::format("gqa_paged_{}_h{}_kv{}_d{}_ps{}", prefill ? "prefill_causal" : "decode", hq, hkv, dim, ps);
    body = fmt::format(
        R"j("op_type": "gqa_paged",
           "axes": {{{}, "page_size": {{"type": "const", "value": {}}}, "batch_size": {{"type": "var"}},
                    "num_pages": {{"type": "var"}}, "len_indptr": {{"type": "var"}}, "num_kv_indices": {{"type": "var"}}{}}},
           "inputs": {{"q": {{"shape": ["{}", "num_qo_heads", "head_dim"], "dtype": "bfloat16"}},
                      "k_cache": {{"shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bfloat16"}},
                      "v_cache": {{"shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bfloat16"}},
                      {}"kv_indptr": {{"shape": ["len_indptr"], "dtype": "int32"}},
                      "kv_indices": {{"shape": ["num_kv_indices"], "dtype": "int32"}},
                      "kv_last_page_len": {{"shape": ["batch_size"], "dtype": "int32"}}, {}}}, {},
           "constraints": ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"{}])j",
        consts, ps, prefill ? R"(, "total_q": {"type": "var"})" : "", outs_rows,
        prefill ? R"("qo_indptr": {"shape": ["len_indptr"], "dtype": "int32"}, )" : "", scale, outputs,
        prefill ? R"j(, "total_q == qo_indptr[-1].item()")j" : "");
  }
  const std::string reference = std::string(kReferenceHead) + (op == Op::decode          ? kReferenceDecode
                                                               : op == Op::paged_prefill ? kReferencePagedPrefill
                                                                                         : kReferenceRaggedPrefill);
  const std::string text = fmt::format(
      R"({{"name": "{}", "description": "GQA attention at a generated shape: kb's shape test",
          "reference": "{}", {}}})",
      name, json_escaped(reference), body);
  auto d = kb::read_definition(text, name);
  if (!d) throw std::runtime_error("generated definition " + name + ": " + d.error().message);
  return *d;
}

struct Case {
  Op op;
  std::int64_t group, hkv, dim, ps;  // ps: paged only; MLA: group = query heads, hkv 1, dim 512
  std::vector<std::int64_t> q;       // queries per sequence (prefill)
  std::vector<std::int64_t> keys;    // keys per sequence
  std::string mix;                   // the mix's name, for the line
  std::uint64_t seed;
};

// Batch / length mixes: (queries, keys) per sequence; decode reads only the keys.
struct Mix {
  const char* name;
  std::vector<std::int64_t> q, keys;
};
const std::vector<Mix>& decode_mixes() {
  static const std::vector<Mix> m = {
      {"b4 keys 1/33/200/1500", {}, {1, 33, 200, 1500}},
      {"b1 key 1", {}, {1}},
      {"b37 keys 1..300", {}, random_lengths(37, 1, 300, 5)},
      {"b1 keys 4001 (split)", {}, {4001}},
  };
  return m;
}
const std::vector<Mix>& prefill_mixes() {
  static const std::vector<Mix> m = {
      {"b3 q 1/9/150 kv 1/40/260", {1, 9, 150}, {1, 40, 260}},
      {"b1 q 1 kv 1", {1}, {1}},
      {"b4 q 70/33/129/5 kv 70/100/129/300", {70, 33, 129, 5}, {70, 100, 129, 300}},
      {"b1 q 200 kv 333", {200}, {333}},
  };
  return m;
}

// Very unequal decode lengths (decode.cuh's work plan): `total` keys over
// `batch` sequences.
std::vector<std::int64_t> split_lengths(std::size_t batch, std::int64_t total, std::uint64_t seed) {
  // A random split of the total: batch - 1 uniform cuts of [0, total] (empty
  // sequences where two cuts meet), as the bench's unequal workloads.
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> u(0, total);
  std::vector<std::int64_t> cuts{0, total};
  for (std::size_t i = 1; i < batch; ++i) cuts.push_back(u(rng));
  std::sort(cuts.begin(), cuts.end());
  std::vector<std::int64_t> v;
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) v.push_back(cuts[i + 1] - cuts[i]);
  return v;
}
std::vector<std::int64_t> one_long_lengths(std::size_t batch, std::int64_t total, std::uint64_t seed) {
  // One sequence (at a random place) holds 90% of the keys, the rest a random split.
  const std::int64_t big = total * 9 / 10;
  std::vector<std::int64_t> v = batch > 1 ? split_lengths(batch - 1, total - big, seed) : std::vector<std::int64_t>{};
  std::mt19937_64 rng(seed + 1);
  const auto at = static_cast<std::ptrdiff_t>(std::uniform_int_distribution<std::size_t>(0, v.size())(rng));
  v.insert(v.begin() + at, batch > 1 ? big : total);
  return v;
}
std::vector<std::int64_t> mostly_empty_lengths(std::size_t batch, std::int64_t total, std::uint64_t seed) {
  // Three sequences in four empty, the keys a random split over the rest.
  std::vector<std::int64_t> full = split_lengths(std::max<std::size_t>(1, batch / 4), total, seed);
  std::vector<std::int64_t> v(batch, 0);
  std::mt19937_64 rng(seed + 2);
  std::vector<std::size_t> pos(batch);
  std::iota(pos.begin(), pos.end(), std::size_t{0});
  std::shuffle(pos.begin(), pos.end(), rng);
  for (std::size_t i = 0; i < full.size(); ++i) v[pos[i]] = full[i];
  return v;
}

const kb::Implementation& impl_for(const kb::Registry& reg, Op op) {
  const char* name = op == Op::decode          ? "kb_cuda_gqa_paged_decode"
                     : op == Op::paged_prefill ? "kb_cuda_gqa_paged_prefill"
                     : op == Op::mla_decode    ? "kb_cuda_mla_paged_decode"
                                               : "kb_cuda_gqa_ragged_prefill";
  const kb::Implementation* impl = reg.find(name);
  if (!impl) throw std::runtime_error(std::string("not registered: ") + name);
  return *impl;
}

std::string case_label(const Case& c) {
  if (c.op == Op::mla_decode) return fmt::format("mla decode h{} ps{}, {}", c.group, c.ps, c.mix);
  std::string s = fmt::format("{} d{} group {} (h{}/kv{})", op_name(c.op), c.dim, c.group, c.group * c.hkv, c.hkv);
  if (c.op != Op::ragged_prefill) s += fmt::format(" ps{}", c.ps);
  return s + ", " + c.mix;
}

void run_case(const kb::Registry& reg, const Case& c) {
  const std::string label = case_label(c);
  if (!selected(label)) return;
  const auto t0 = std::chrono::steady_clock::now();
  auto fail = [&](const std::string& why) {
    std::printf("FAIL %s: %s\n", label.c_str(), why.c_str());
    std::fflush(stdout);
    ++g_failures;
  };
  const kb::Definition d = c.op == Op::mla_decode ? make_mla_definition(c.group, c.ps)
                                                  : make_definition(c.op, c.group * c.hkv, c.hkv, c.dim, c.ps);
  const kb::Implementation& impl = impl_for(reg, c.op);
  if (std::string why = impl.supports(d); !why.empty()) return fail("supports() refused: " + why);
  const bool paged = c.op != Op::ragged_prefill, prefill = c.op != Op::decode && c.op != Op::mla_decode;

  // Index tensors: pages of ps rows (the last partial), in random order among
  // 13 spare pages; ragged rows back to back.
  const BatchLayout l = batch_layout(label, prefill ? c.q : std::vector<std::int64_t>{}, c.keys, paged, c.ps,
                                     /*has_last=*/true, 13, c.seed);
  const kb::Workload w = layout_workload(
      d, l, paged, prefill, label, 1.0 / std::sqrt(c.op == Op::mla_decode ? 192.0 : static_cast<double>(c.dim)));
  OracleCase oc;
  if (std::string why = prepare_case(d, w, l, c.seed, oc); !why.empty()) return fail(why);
  if (g_dry) {
    std::printf("DRY %s: definition, inputs and oracle %.2f s\n", label.c_str(), seconds_since(t0));
    ++g_passes;
    return;
  }

  // Guarded device copies; outputs poisoned with NaN.
  GuardedCall call(*oc.m, oc.expected, 4);
  if (kb::Status st = call.run(impl, d, oc.m->axes); !st) return fail("run_cuda: " + st.error().message);
  if (std::string why = call.inputs_intact(*oc.m, d); !why.empty()) return fail(why);
  const Judged j = call.judge(d, oc.expected);
  if (!j.failure.empty()) return fail(j.failure);
  std::printf("%s %s (%lld queries, %lld %s, %.2f s):%s\n", j.ok ? "PASSED" : "FAIL", label.c_str(),
              static_cast<long long>(l.total_q), static_cast<long long>(l.units), paged ? "pages" : "keys",
              seconds_since(t0), j.line.c_str());
  std::fflush(stdout);
  if (j.ok) ++g_passes;
  else ++g_failures;
}

// A refusal: `what` must be refused with a message holding every one of `needles`.
void check_refusal(const std::string& label, const std::string& message, std::initializer_list<const char*> needles) {
  if (!selected(label)) return;
  bool ok = !message.empty();
  for (const char* n : needles) ok = ok && message.find(n) != std::string::npos;
  std::printf("%s %s: \"%s\"\n", ok ? "PASSED" : "FAIL", label.c_str(), message.c_str());
  std::fflush(stdout);
  if (ok) ++g_passes;
  else ++g_failures;
}

void run_refusals(const kb::Registry& reg) {
  // supports(): a decode group of 17 (the 16 mma rows of a decode CTA), a head dim with no kernel.
  check_refusal("decode supports() refuses group 17",
                impl_for(reg, Op::decode).supports(make_definition(Op::decode, 17, 1, 128, 16)), {"1..16"});
  for (Op op : {Op::decode, Op::paged_prefill, Op::ragged_prefill})
    check_refusal(std::string(op_name(op)) + " supports() refuses head_dim 80",
                  impl_for(reg, op).supports(make_definition(op, 8, 2, 80, 16)), {"80", "64, 96, 128, 192 and 256"});
  // The launchers, before they read any pointer.
  kb::kernels::GqaPagedDecodeArgs a;
  a.batch = 1, a.num_qo_heads = 17, a.num_kv_heads = 1, a.head_dim = 128, a.page_size = 16, a.num_pages = 1;
  a.num_kv_indices = 1;
  auto st = kb::kernels::launch_gqa_paged_decode(a, nullptr);
  check_refusal("decode launcher refuses group 17", st ? std::string() : st.error().message, {"group 17", "1..16"});
  a.num_qo_heads = 16, a.head_dim = 80;
  st = kb::kernels::launch_gqa_paged_decode(a, nullptr);
  check_refusal("decode launcher refuses head_dim 80", st ? std::string() : st.error().message,
                {"head_dim 80", "64, 96, 128, 192 and 256"});
  kb::kernels::GqaPrefillArgs p;
  p.batch = 1, p.total_q = 1, p.num_qo_heads = 8, p.num_kv_heads = 2, p.head_dim_qk = p.head_dim_vo = 80;
  p.kv_rows = 1;
  st = kb::kernels::launch_gqa_prefill(p, nullptr);
  check_refusal("prefill launcher refuses head_dim 80", st ? std::string() : st.error().message,
                {"80", "64, 96, 128, 192 and 256"});
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  std::uint64_t seed = 100;
  // Every group 1..16 at head_dim 128, one small shape per op.
  for (std::int64_t g = 1; g <= 16; ++g) {
    const Mix& dm = decode_mixes()[0];
    const Mix& pm = prefill_mixes()[0];
    cases.push_back({Op::decode, g, 2, 128, 16, {}, dm.keys, dm.name, ++seed});
    cases.push_back({Op::paged_prefill, g, 2, 128, 16, pm.q, pm.keys, pm.name, ++seed});
    cases.push_back({Op::ragged_prefill, g, 2, 128, 0, pm.q, pm.keys, pm.name, ++seed});
  }
  // Every head dim x groups 1, 5, 8 x page sizes 1, 16, 64; the mixes in turn.
  std::size_t k = 0;
  for (const int dim : kb::kernels::kGqaHeadDims)
    for (const std::int64_t g : {1, 5, 8}) {
      for (const std::int64_t ps : {1, 16, 64}) {
        const Mix& dm = decode_mixes()[k % decode_mixes().size()];
        const Mix& pm = prefill_mixes()[k % prefill_mixes().size()];
        ++k;
        cases.push_back({Op::decode, g, 2, dim, ps, {}, dm.keys, dm.name, ++seed});
        cases.push_back({Op::paged_prefill, g, 2, dim, ps, pm.q, pm.keys, pm.name, ++seed});
      }
      const Mix& pm = prefill_mixes()[k % prefill_mixes().size()];
      ++k;
      cases.push_back({Op::ragged_prefill, g, 2, dim, 0, pm.q, pm.keys, pm.name, ++seed});
    }
  // The split merge as its own launch (more rows than the fused merge takes),
  // and a prefill group past the decode bound.
  for (const int dim : kb::kernels::kGqaHeadDims) {
    cases.push_back({Op::decode, 16, 1, dim, 16, {}, {3001}, "b1 keys 3001 (split, merge kernel)", ++seed});
    cases.push_back({Op::ragged_prefill, 20, 1, dim, 0, {1, 130}, {7, 200}, "b2 q 1/130 kv 7/200", ++seed});
  }
  // Decode over very unequal lengths: a long sequence cut into many chunks
  // beside short and empty ones; each merge form (a warp a row, every warp
  // on a row of many splits, merge_kernel at group 16 and MLA's 16 rows).
  enum class Lengths { one_long, random_split, mostly_empty };
  auto lengths = [](Lengths l, std::size_t batch, std::int64_t total, std::uint64_t sd) {
    return l == Lengths::one_long       ? one_long_lengths(batch, total, sd)
           : l == Lengths::random_split ? split_lengths(batch, total, sd)
                                        : mostly_empty_lengths(batch, total, sd);
  };
  auto mix_name = [](Lengths l, std::size_t batch, std::int64_t total) {
    const char* what = l == Lengths::one_long       ? "one holds 90%"
                       : l == Lengths::random_split ? "random split"
                                                    : "3/4 empty";
    return fmt::format("b{} {} keys, {} (unequal)", batch, total, what);
  };
  struct Unequal {
    Op op;
    std::int64_t group, hkv, dim, ps;
    std::size_t batch;
    std::int64_t total;
    Lengths l;
  };
  const Unequal unequal[] = {
      {Op::decode, 8, 2, 128, 1, 64, 16384, Lengths::one_long},
      {Op::decode, 8, 2, 128, 16, 64, 16384, Lengths::random_split},
      {Op::decode, 8, 2, 128, 1, 256, 30000, Lengths::one_long},
      {Op::decode, 16, 1, 128, 1, 32, 12000, Lengths::one_long},
      {Op::decode, 16, 2, 128, 16, 256, 20000, Lengths::one_long},
      {Op::decode, 4, 4, 64, 64, 256, 20000, Lengths::mostly_empty},
      {Op::decode, 5, 2, 96, 1, 1, 5000, Lengths::random_split},
      {Op::decode, 1, 8, 192, 16, 128, 16384, Lengths::one_long},
      {Op::decode, 2, 2, 256, 16, 3, 9000, Lengths::random_split},
      {Op::decode, 8, 2, 128, 64, 17, 40000, Lengths::random_split},
      {Op::mla_decode, 16, 1, 512, 64, 8, 32768, Lengths::one_long},
      {Op::mla_decode, 16, 1, 512, 1, 64, 16384, Lengths::random_split},
      {Op::mla_decode, 16, 1, 512, 1, 256, 16384, Lengths::mostly_empty},
      {Op::mla_decode, 32, 1, 512, 16, 4, 8192, Lengths::one_long},
      {Op::mla_decode, 16, 1, 512, 64, 64, 65536, Lengths::random_split},
      {Op::mla_decode, 16, 1, 512, 1, 64, 262144, Lengths::one_long},  // 32-key kernel (dispatch.cuh)
  };
  for (const Unequal& u : unequal) {
    ++seed;
    cases.push_back({u.op, u.group, u.hkv, u.dim, u.ps, {}, lengths(u.l, u.batch, u.total, seed),
                     mix_name(u.l, u.batch, u.total), seed});
  }
  return cases;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--filter" && i + 1 < argc) g_filter = argv[++i];
    else if (a == "--dry-run") g_dry = true;
    else {
      std::printf("usage: %s [--filter SUBSTRING] [--dry-run]\n", argv[0]);
      return 2;
    }
  }
  if (int rc = g_dry ? 0 : require_device()) return rc;
  kb::Registry reg;
  kb::kernels::add_gqa_paged_cuda(reg);
  kb::kernels::add_gqa_paged_prefill_cuda(reg);
  kb::kernels::add_gqa_ragged_cuda(reg);
  kb::kernels::add_mla_paged_cuda(reg);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    run_refusals(reg);
    for (const Case& c : all_cases()) run_case(reg, c);
    if (!g_dry) check_cuda(cudaDeviceSynchronize(), "final cudaDeviceSynchronize");
  } catch (const SkipTest& s) {
    std::printf("skipped: no usable CUDA device (%s)\n", s.reason.c_str());
    return 77;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  std::printf("%s: %d passed, %d failed%s (%.1f s)\n", g_failures ? "FAILED" : "all passed", g_passes, g_failures,
              g_dry ? " (dry run: CPU side only)" : "", seconds_since(t0));
  return g_failures ? 1 : 0;
}
