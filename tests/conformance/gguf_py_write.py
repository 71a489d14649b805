#!/usr/bin/python3
"""Writes a Hugging Face Qwen2, Qwen3, Phi-3, Gemma 2 or Gemma 3 directory (config.json,
model.safetensors in F32 or BF16) as an F32 GGUF file with gguf-py's
GGUFWriter, llama.cpp's own Python writer, in the layout llama.cpp's
convert_hf_to_gguf.py gives the family: architecture "qwen2" with the
blk.N.attn_{q,k,v}.bias tensors; "qwen3" with blk.N.attn_{q,k}_norm and its
head size stated (attention.key_length / value_length, since head_dim is not
hidden_size / heads there); "phi3" with the fused tensors as they are
(blk.N.attn_qkv, and gate_up_proj as blk.N.ffn_up), its sliding window and
original context; "gemma2" and "gemma3" (from model_type gemma3_text) as
convert_hf_to_gguf.py's Gemma2Model and Gemma3Model: every norm weight
stored as 1 + w, post_attention_layernorm as blk.N.post_attention_norm,
pre_feedforward_layernorm as blk.N.ffn_norm, post_feedforward_layernorm as
blk.N.post_ffw_norm, gemma2's soft-caps and window, gemma3's final soft-cap
(where set) and window, and no window pattern or local RoPE base (llama.cpp's
defaults, 2 and 6 layers, 10000); q/k rows as Hugging Face stores them
(llama.cpp runs all of these with its NEOX rope, which rotates halves); no
output.weight when the embeddings are tied. So a GGUF that verity did not write, for
tests/llama_peer_test.cc.

    gguf_py_write.py GGUF_PY_DIR HF_DIR OUT.gguf

GGUF_PY_DIR is the gguf-py directory extracted from tests/npm's llama.cpp
source bundle (tests/CMakeLists.txt). Run with /usr/bin/python3 (Debian's
python3-numpy).
"""
import json
import os
import struct
import sys


def read_safetensors(path, np):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        raw = data[base + a:base + b]
        if t["dtype"] == "F32":
            arr = np.frombuffer(raw, dtype="<f4")
        elif t["dtype"] == "BF16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit("%s: tensor %s has dtype %s (F32 or BF16 only)" % (path, name, t["dtype"]))
        out[name] = arr.reshape(t["shape"]).astype(np.float32)
    return out


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    gguf_py, hf, out = sys.argv[1:]
    sys.path.insert(0, gguf_py)
    import numpy as np
    import gguf

    with open(os.path.join(hf, "config.json")) as f:
        cfg = json.load(f)
    arch = {"gemma3_text": "gemma3"}.get(cfg.get("model_type"), cfg.get("model_type"))
    if arch not in ("qwen2", "qwen3", "phi3", "gemma2", "gemma3"):
        raise SystemExit("%s: model_type is %r, not qwen2, qwen3, phi3, gemma2 or gemma3_text" % (hf, arch))
    gemma = arch.startswith("gemma")
    t = read_safetensors(os.path.join(hf, "model.safetensors"), np)
    w = gguf.GGUFWriter(out, arch)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_vocab_size(cfg["vocab_size"])  # no tokenizer.ggml.tokens to count
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(float(cfg["rope_theta"]))
    w.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))
    if arch in ("qwen3", "gemma2", "gemma3"):
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    if arch == "phi3":  # as convert_hf_to_gguf.py's Phi3MiniModel
        w.add_rope_dimension_count(cfg["hidden_size"] // cfg["num_attention_heads"])
        w.add_rope_scaling_orig_ctx_len(cfg.get("original_max_position_embeddings", cfg["max_position_embeddings"]))
        w.add_sliding_window(cfg.get("sliding_window") or 0)
    if arch == "gemma2":  # as Gemma2Model.set_gguf_parameters
        w.add_attn_logit_softcapping(cfg["attn_logit_softcapping"])
        w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
        w.add_sliding_window(cfg["sliding_window"])
    if arch == "gemma3":  # as Gemma3Model.set_gguf_parameters
        if cfg.get("final_logit_softcapping"):
            w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
        w.add_sliding_window(cfg["sliding_window"])
    w.add_file_type(0)  # all F32
    w.add_tokenizer_model("no_vocab")
    if cfg.get("bos_token_id") is not None:
        w.add_bos_token_id(cfg["bos_token_id"])
    if cfg.get("eos_token_id") is not None:
        eos = cfg["eos_token_id"]
        w.add_eos_token_id(eos[0] if isinstance(eos, list) else eos)
    names = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
             "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.weight": "attn_k.weight",
             "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.weight": "attn_v.weight",
             "self_attn.v_proj.bias": "attn_v.bias", "self_attn.o_proj.weight": "attn_output.weight",
             "post_attention_layernorm.weight": "ffn_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
             "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
             "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
             "self_attn.qkv_proj.weight": "attn_qkv.weight", "mlp.gate_up_proj.weight": "ffn_up.weight"}
    if gemma:  # Gemma's norms follow its own names (post_attention_layernorm is the attention output's)
        names.update({"post_attention_layernorm.weight": "post_attention_norm.weight",
                      "pre_feedforward_layernorm.weight": "ffn_norm.weight",
                      "post_feedforward_layernorm.weight": "post_ffw_norm.weight"})
    for name, arr in t.items():
        if gemma and name.endswith("norm.weight"):  # Gemma's RMSNorm multiplies by 1 + w
            arr = arr + np.float32(1.0)
        if name == "model.embed_tokens.weight":
            to = "token_embd.weight"
        elif name == "model.norm.weight":
            to = "output_norm.weight"
        elif name == "lm_head.weight":
            to = "output.weight"
        else:
            parts = name.split(".")  # model.layers.N.rest
            to = "blk.%s.%s" % (parts[2], names[".".join(parts[3:])])
        w.add_tensor(to, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
