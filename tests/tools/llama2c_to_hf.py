#!/usr/bin/env python3
"""A converter independent of verity's own: llama2.c checkpoint -> Hugging Face
directory, in plain Python (stdlib only), the way the llama conversion scripts
do it: q/k rows permuted from interleaved pairs to rotate-half, f32 safetensors,
tensors spread over shards with model.norm.weight alone in the last shard.

usage: llama2c_to_hf.py MODEL.bin OUT_DIR [--shards N] [--zero TENSOR]
                        [--bad-shape TENSOR]   (test fixtures: zeroed or mis-shaped tensor)
"""
import argparse, array, json, os, struct

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("out")
ap.add_argument("--shards", type=int, default=3)
ap.add_argument("--zero", default="")
ap.add_argument("--bad-shape", default="")
a = ap.parse_args()

raw = open(a.model, "rb").read()
dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack("<7i", raw[:28])
shared = vocab > 0
vocab = abs(vocab)
hs = dim // heads
kv_dim = kv_heads * hs
floats = array.array("f")
floats.frombytes(raw[28:])
pos = 0
def take(n):
    global pos
    t = floats[pos:pos + n]
    pos += n
    return t

emb = take(vocab * dim)
rms_att = take(layers * dim)
wq = take(layers * dim * dim)
wk = take(layers * kv_dim * dim)
wv = take(layers * kv_dim * dim)
wo = take(layers * dim * dim)
rms_ffn = take(layers * dim)
w1 = take(layers * hidden * dim)
w2 = take(layers * dim * hidden)
w3 = take(layers * hidden * dim)
norm = take(dim)
take(seq_len * hs)  # legacy RoPE tables
cls = None if shared else take(vocab * dim)

def permute(w, n_heads, rows, cols):
    out = array.array("f", bytes(4 * rows * cols))
    for h in range(n_heads):
        for r in range(hs):
            to = h * hs + (r % 2) * (hs // 2) + r // 2
            out[to * cols:(to + 1) * cols] = w[(h * hs + r) * cols:(h * hs + r + 1) * cols]
    return out

def layer(t, l, n):
    return t[l * n:(l + 1) * n]

tensors = [("model.embed_tokens.weight", [vocab, dim], emb)]
for l in range(layers):
    p = f"model.layers.{l}."
    tensors += [
        (p + "input_layernorm.weight", [dim], layer(rms_att, l, dim)),
        (p + "self_attn.q_proj.weight", [dim, dim], permute(layer(wq, l, dim * dim), heads, dim, dim)),
        (p + "self_attn.k_proj.weight", [kv_dim, dim], permute(layer(wk, l, kv_dim * dim), kv_heads, kv_dim, dim)),
        (p + "self_attn.v_proj.weight", [kv_dim, dim], layer(wv, l, kv_dim * dim)),
        (p + "self_attn.o_proj.weight", [dim, dim], layer(wo, l, dim * dim)),
        (p + "post_attention_layernorm.weight", [dim], layer(rms_ffn, l, dim)),
        (p + "mlp.gate_proj.weight", [hidden, dim], layer(w1, l, hidden * dim)),
        (p + "mlp.up_proj.weight", [hidden, dim], layer(w3, l, hidden * dim)),
        (p + "mlp.down_proj.weight", [dim, hidden], layer(w2, l, dim * hidden)),
    ]
if cls is not None:
    tensors.append(("lm_head.weight", [vocab, dim], cls))
last = [("model.norm.weight", [dim], norm)]

if a.zero:
    tensors = [(n, s, array.array("f", bytes(4 * len(d))) if n == a.zero else d) for n, s, d in tensors]
    last = [(n, s, array.array("f", bytes(4 * len(d))) if n == a.zero else d) for n, s, d in last]
if a.bad_shape:
    tensors = [(n, list(reversed(s)) if n == a.bad_shape else s, d) for n, s, d in tensors]

# Everything but the final norm over shards-1 files, the final norm alone in the last.
groups = [[] for _ in range(a.shards - 1)]
for i, t in enumerate(tensors):
    groups[i * (a.shards - 1) // len(tensors)].append(t)
groups.append(last)

os.makedirs(a.out, exist_ok=True)
weight_map, total = {}, 0
for k, group in enumerate(groups):
    name = f"model-{k + 1:05d}-of-{a.shards:05d}.safetensors"
    header, at = {}, 0
    for n, s, d in group:
        header[n] = {"dtype": "F32", "shape": s, "data_offsets": [at, at + 4 * len(d)]}
        at += 4 * len(d)
        weight_map[n] = name
    total += at
    h = json.dumps(header).encode()
    h += b" " * ((8 - (len(h) + 8) % 8) % 8)
    with open(os.path.join(a.out, name), "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for n, s, d in group:
            f.write(d.tobytes())
json.dump({"metadata": {"total_size": total}, "weight_map": weight_map},
          open(os.path.join(a.out, "model.safetensors.index.json"), "w"), indent=2)
json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": dim,
           "intermediate_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
           "num_key_value_heads": kv_heads, "vocab_size": vocab, "max_position_embeddings": seq_len,
           "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": shared,
           "hidden_act": "silu", "torch_dtype": "float32"},
          open(os.path.join(a.out, "config.json"), "w"), indent=2)
print(f"llama2c_to_hf: wrote {a.out} ({a.shards} shards, {len(weight_map)} tensors)")
