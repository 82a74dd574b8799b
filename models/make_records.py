#!/usr/bin/env python3
"""Writes models/*.json: Kernel Calling Records of real models, one per (model, step), derived
from each model's published config.json values (kept in the record's "architecture" with the
URL in "source") against the definitions FlashInfer-Bench ships (../shared/flashinfer-trace).

Only definitions that exist are referenced; the kernels of the step whose exact shape is not
shipped are named in the record's "notes", so nobody mistakes the record for the whole step.

usage: make_records.py SHARED_DIR OUT_DIR    (checks every id against SHARED_DIR's definitions)
"""
import glob
import json
import os
import sys

shared, out_dir = sys.argv[1:3]
shipped = {}
for f in glob.glob(os.path.join(shared, "flashinfer-trace", "definitions", "*", "*.json")):
    d = json.load(open(f))
    shipped[d["name"]] = d

# The two steps every record describes (the same for every model, so records compare):
# decode: 32 sequences, one new token each, 2048 tokens of context each (KV pages of 1 token);
# prefill: one fresh prompt of 2048 tokens (no cached prefix).
DECODE_BATCH, CONTEXT = 32, 2048
PREFILL_TOKENS = 2048
STEPS = {
    "decode": f"decode: {DECODE_BATCH} sequences, 1 new token each, {CONTEXT} tokens of context each, page size 1",
    "prefill": f"prefill: 1 prompt of {PREFILL_TOKENS} tokens, no cached prefix",
}


def tokens(step):
    return DECODE_BATCH if step == "decode" else PREFILL_TOKENS


def paged_decode_axes(step):
    pages = DECODE_BATCH * CONTEXT  # the pages this step reads; the engine's pool is larger, and unread
    return {"batch_size": DECODE_BATCH, "num_pages": pages, "len_indptr": DECODE_BATCH + 1, "num_kv_indices": pages}


def ragged_prefill_axes():
    return {"total_q": PREFILL_TOKENS, "total_kv": PREFILL_TOKENS, "len_indptr": 2}


def norms(hidden, layers, step, fused_ok=True):
    """SGLang's order: layer 0's input norm has no residual yet (rmsnorm); every later norm of the
    residual stream (each layer's input and post-attention norms, and the final norm) adds the
    residual first (fused_add_rmsnorm)."""
    t = tokens(step)
    return [
        (f"rmsnorm_h{hidden}", 1, {"batch_size": t}, "layer 0's input_layernorm (no residual yet)"),
        (f"fused_add_rmsnorm_h{hidden}", 2 * layers, {"batch_size": t},
         f"input_layernorm of layers 1..{layers - 1}, post_attention_layernorm of all {layers}, and the final norm"),
    ]


def sampling(vocab, step):
    b = DECODE_BATCH if step == "decode" else 1
    return [(f"top_k_top_p_sampling_from_probs_v{vocab}", 1, {"batch_size": b},
             "one token per sequence" + (" (the prompt's last position)" if step == "prefill" else ""))]


def record(model, source, arch, step, kernels, unshipped, notes):
    missing = [k for k, _, _, _ in kernels if k not in shipped]
    if missing:
        sys.exit(f"{model}: not shipped: {missing}")
    for k, _, axes, _ in kernels:
        var = [a for a, v in shipped[k]["axes"].items() if v["type"] == "var"]
        if sorted(var) != sorted(axes):
            sys.exit(f"{model}: {k}: axes {sorted(axes)} != var axes {sorted(var)}")
    return {
        "model": model,
        "framework": "SGLang",
        "step": step,
        "description": STEPS[step],
        "source": source,
        "architecture": arch,
        "notes": notes + " Not in this record because no shipped definition has the exact shape: " +
                 "; ".join(unshipped) + ".",
        "kernels": [dict({"id": k, "count": c, "axes": a}, **({"notes": n} if n else {})) for k, c, a, n in kernels],
    }


def llama_3_1_8b(step):
    a = {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
         "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256, "rms_norm_eps": 1e-05,
         "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    L, H, KV, D, h, I = (a["num_hidden_layers"], a["num_attention_heads"], a["num_key_value_heads"], a["head_dim"],
                         a["hidden_size"], a["intermediate_size"])
    t = tokens(step)
    ks = [
        (f"gemm_n{(H + 2 * KV) * D}_k{h}", L, {"M": t}, "qkv_proj: q 32x128 + k 8x128 + v 8x128 outputs"),
        (f"gemm_n{h}_k{H * D}", L, {"M": t}, "o_proj"),
        (f"gemm_n{2 * I}_k{h}", L, {"M": t}, "gate_up_proj (gate and up fused)"),
        (f"gemm_n{h}_k{I}", L, {"M": t}, "down_proj"),
    ] + norms(h, L, step)
    if step == "decode":
        ks.append((f"gqa_paged_decode_h{H}_kv{KV}_d{D}_ps1", L, paged_decode_axes(step), "one call per layer"))
    else:
        ks.append((f"gqa_ragged_prefill_causal_h{H}_kv{KV}_d{D}", L, ragged_prefill_axes(),
                   "a fresh prompt attends to its own keys: the ragged kernel; one call per layer"))
    ks += sampling(a["vocab_size"], step)
    return record("meta-llama/Llama-3.1-8B", "https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json",
                  a, step, ks,
                  ["lm_head (gemm N=128256, K=4096)", "rotary embedding over the full head (rotary_dim 128; the "
                   "shipped rope definition has rotary_dim 64)", "silu_and_mul (no definition)"],
                  "Tensor parallel 1, bf16.")


def qwen3_32b(step):
    a = {"hidden_size": 5120, "intermediate_size": 25600, "num_hidden_layers": 64, "num_attention_heads": 64,
         "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "rms_norm_eps": 1e-06,
         "rope_theta": 1000000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    tp = 4
    L, H, KV, D, h, I = (a["num_hidden_layers"], a["num_attention_heads"] // tp, a["num_key_value_heads"] // tp,
                         a["head_dim"], a["hidden_size"], a["intermediate_size"])
    t = tokens(step)
    ks = [
        (f"gemm_n{h}_k{H * D}", L, {"M": t}, f"o_proj, this GPU's {H} of 64 heads in (row-parallel)"),
        (f"rmsnorm_h{h}", 1, {"batch_size": t}, "layer 0's input_layernorm (no residual yet)"),
        (f"rmsnorm_h{D}", L, {"batch_size": t * H}, f"q_norm: per head over head_dim, {H} heads per token"),
        (f"rmsnorm_h{D}", L, {"batch_size": t * KV}, f"k_norm: per head over head_dim, {KV} kv heads per token"),
    ]
    if step == "decode":
        ks.append((f"gqa_paged_decode_h{H}_kv{KV}_d{D}_ps1", L, paged_decode_axes(step), "one call per layer"))
    else:
        ks.append((f"gqa_paged_prefill_causal_h{H}_kv{KV}_d{D}_ps1", L,
                   {"len_indptr": 2, "total_q": t, "num_kv_indices": t, "num_pages": t},
                   "no ragged definition has 16/2 heads: the paged kernel over the prompt's own pages"))
    ks += sampling(a["vocab_size"], step)
    return record("Qwen/Qwen3-32B", "https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json", a, step, ks,
                  [f"qkv_proj (gemm N={(H + 2 * KV) * D}, K={h})", f"gate_up_proj (gemm N={2 * I // tp}, K={h})",
                   f"down_proj (gemm N={h}, K={I // tp})", f"fused_add_rmsnorm over {h} (the later input and "
                   "post-attention norms and the final norm)", "lm_head (gemm N=151936/4, K=5120)",
                   "rotary embedding over the full head (rotary_dim 128)", "silu_and_mul", "the all-reduces"],
                  "Tensor parallel 4 (the shipped attention definitions' tp:4): per GPU, 16 query and 2 KV heads; "
                  "counts are per GPU.")


def qwen3_30b_a3b(step):
    a = {"hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
         "head_dim": 128, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
         "norm_topk_prob": True, "decoder_sparse_step": 1, "vocab_size": 151936, "rms_norm_eps": 1e-06,
         "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    L, H, KV, D, h = (a["num_hidden_layers"], a["num_attention_heads"], a["num_key_value_heads"], a["head_dim"],
                      a["hidden_size"])
    E, k, I = a["num_experts"], a["num_experts_per_tok"], a["moe_intermediate_size"]
    t = tokens(step)
    ks = [
        (f"gemm_n{(H + 2 * KV) * D}_k{h}", L, {"M": t}, "qkv_proj: q 32x128 + k 4x128 + v 4x128 outputs"),
        (f"gemm_n{h}_k{H * D}", L, {"M": t}, "o_proj"),
        (f"gemm_n{E}_k{h}", L, {"M": t}, "router (gate): one logit per expert; every layer is MoE (decoder_sparse_step 1)"),
        (f"moe_fp8_block_scale_renorm_topk{k}_e{E}_h{h}_i{I}", L, {"seq_len": t},
         "the experts: softmax, top-8, renormalized (norm_topk_prob); FP8 block-scale as Qwen/Qwen3-30B-A3B-FP8 "
         "serves it (no bf16 MoE definition is shipped)"),
        (f"rmsnorm_h{D}", L, {"batch_size": t * H}, "q_norm: per head over head_dim, 32 heads per token"),
        (f"rmsnorm_h{D}", L, {"batch_size": t * KV}, "k_norm: per head over head_dim, 4 kv heads per token"),
    ] + norms(h, L, step)
    if step == "decode":
        ks.append((f"gqa_paged_decode_h{H}_kv{KV}_d{D}_ps1", L, paged_decode_axes(step), "one call per layer"))
    else:
        ks.append((f"gqa_ragged_prefill_causal_h{H}_kv{KV}_d{D}", L, ragged_prefill_axes(), "one call per layer"))
    ks += sampling(a["vocab_size"], step)
    return record("Qwen/Qwen3-30B-A3B", "https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json", a, step,
                  ks, ["lm_head (gemm N=151936, K=2048)", "rotary embedding over the full head (rotary_dim 128)"],
                  "Tensor and expert parallel 1; attention and dense projections bf16, experts FP8 with 128x128 "
                  "block scales.")


def deepseek_v3(step):
    a = {"hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
         "first_k_dense_replace": 3, "num_attention_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512,
         "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 256,
         "n_shared_experts": 1, "num_experts_per_tok": 8, "n_group": 8, "topk_group": 4,
         "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "topk_method": "noaux_tc", "vocab_size": 129280,
         "rms_norm_eps": 1e-06, "torch_dtype": "bfloat16", "quantization": "fp8, 128x128 block scales"}
    tp = ep = 8
    L, h, E = a["num_hidden_layers"], a["hidden_size"], a["n_routed_experts"]
    moe_layers = L - a["first_k_dense_replace"]
    H = a["num_attention_heads"] // tp
    t = tokens(step)
    ks = [
        (f"rmsnorm_h{a['q_lora_rank']}", L, {"batch_size": t}, "q_a_layernorm over the query's low-rank latent"),
        (f"rmsnorm_h{a['kv_lora_rank']}", L, {"batch_size": t}, "kv_a_layernorm over the compressed KV latent"),
        (f"gemm_n{E}_k{h}", moe_layers, {"M": t}, f"router (gate) of the {moe_layers} MoE layers (3..60)"),
        (f"moe_fp8_block_scale_ds_routing_topk8_ng{a['n_group']}_kg{a['topk_group']}_e{E // ep}_h{h}_i"
         f"{a['moe_intermediate_size']}", moe_layers, {"seq_len": t},
         "routed experts, DeepSeek routing (sigmoid, 8 groups, top-4 groups, top-8), this GPU's 32 of 256 (EP 8)"),
    ] + norms(h, L, step)
    if step == "decode":
        ks.append((f"mla_paged_decode_h{H}_ckv512_kpe64_ps1", L, paged_decode_axes(step),
                   "absorbed MLA over the 512 + 64 latent cache; one call per layer"))
    else:
        ks.append((f"mla_ragged_prefill_causal_h{H}_qk192_vo128", L,
                   {"total_q": t, "total_kv": t, "len_indptr": 2},
                   "a fresh prompt: MLA expanded to 192-wide q/k (128 nope + 64 rope) and 128-wide v"))
    ks += sampling(a["vocab_size"], step)
    return record("deepseek-ai/DeepSeek-V3", "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json",
                  a, step, ks,
                  ["q_a_proj, q_b_proj, kv_a_proj_with_mqa, the absorbed kv_b_proj batched matmuls and o_proj",
                   "the dense MLP of layers 0..2 and the shared expert of every MoE layer (fp8 block-scale gemms)",
                   "the rotary embedding of the 64 rope dims (interleaved, not neox)", "lm_head (gemm N=129280/8, K=7168)",
                   "the all-reduces and the expert all-to-all"],
                  "Attention tensor parallel 8 (16 of 128 heads per GPU, the shipped MLA definitions' tp:8), experts "
                  "parallel 8 (32 of 256 routed experts per GPU); counts are per GPU.")


os.makedirs(out_dir, exist_ok=True)
for name, make in [("llama-3.1-8b", llama_3_1_8b), ("qwen3-32b", qwen3_32b), ("qwen3-30b-a3b", qwen3_30b_a3b),
                   ("deepseek-v3", deepseek_v3)]:
    for step in ("decode", "prefill"):
        with open(os.path.join(out_dir, f"{name}_{step}.json"), "w") as f:
            f.write(json.dumps(make(step), indent=2) + "\n")
print(f"wrote {len(os.listdir(out_dir))} records to {out_dir}")
