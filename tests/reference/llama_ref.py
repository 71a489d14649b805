#!/usr/bin/python3
"""An independent float64 reference forward for Llama / Mixtral / Gemma 2-3 checkpoints.

Written from the model definition, sharing no code with the verity engine:
it parses llama2.c `.bin` files, Hugging Face directories (config.json,
safetensors, shards) and llama GGUF files (F32/F16/BF16/Q8_0) itself, runs the forward pass in float64 NumPy and writes
a reference logits file (format: docs/parity.md, "Reference logits files"),
which `verity parity --against FILE` compares the engine with.

    llama_ref.py MODEL --out FILE [--tokens FILE] [--greedy N] [--bos ID]
                 [--positions parity|all|P,P,...]

Run it with /usr/bin/python3 (Debian's python3-numpy). Errors print
"llama_ref: error: ..." naming the file, key or tensor, and exit 1.
"""

import argparse
import copy
import hashlib
import json
import math
import os
import struct
import sys

import numpy as np

MAGIC = b"VRLOGIT1"
SCHEMA = "verity.ref-logits/1"


class RefError(Exception):
    """Bad input: a message naming the file, key or tensor."""


# ----------------------------------------------------------------------------
# Configuration: the numbers that define the math.

class Config:
    def __init__(self):
        self.dim = 0             # residual width (hidden_size)
        self.hidden_dim = 0      # FFN width (intermediate_size)
        self.n_layers = 0
        self.n_heads = 0
        self.n_kv_heads = 0
        self.head_dim = 0        # may differ from dim / n_heads (HF head_dim)
        self.vocab_size = 0
        self.seq_len = 0         # context: positions the model may see
        self.rope_theta = 10000.0
        self.rope_scaling = None  # None or a dict with "type" linear|llama3 and its numbers
        self.freq_factors = None  # GGUF rope_freqs.weight: pair i's frequency divided by factor i
        self.interleaved = True   # llama2.c pairs (2i, 2i+1); HF rotates halves (i, i+hd/2)
        self.norm_eps = 1e-5
        self.tied = False         # classifier = token embedding
        self.n_experts = 0
        self.top_k = 0
        self.bos = 1
        self.qkv_bias = False     # Qwen2: q, k and v projections add a bias
        self.qk_norm = False      # Qwen3: each head's q and k RMS-normalised over head_dim before RoPE
        self.fused = False        # Phi-3: q/k/v rows in one qkv_proj, gate/up rows in one gate_up_proj
        self.window = 0           # Mistral: each position attends to at most this many (0: all)
        self.sliding = None       # Gemma: per layer, True where the window applies (None: every layer)
        self.embed_scale = 1.0    # Gemma: the embedding row times sqrt(hidden_size)
        self.norm_offset = 0.0    # Gemma: RMSNorm scales by (1 + w), w the stored weight
        self.activation = "silu"  # the gated FFN's activation: silu, or gelu_pytorch_tanh (Gemma)
        self.sandwich = False     # Gemma: attention and FFN outputs normed before the residual add
        self.attn_scalar = 0.0    # Gemma: scores times query_pre_attn_scalar^-0.5 (0: head_dim)
        self.attn_softcap = None  # Gemma 2: scores -> cap * tanh(scores / cap) before the mask
        self.final_softcap = None  # Gemma 2: logits -> cap * tanh(logits / cap)
        self.rope_local_theta = None  # Gemma 3: sliding layers' RoPE base, unscaled (None: one table)

    def as_json(self):
        return {
            "hidden_size": self.dim, "intermediate_size": self.hidden_dim, "num_hidden_layers": self.n_layers,
            "num_attention_heads": self.n_heads, "num_key_value_heads": self.n_kv_heads, "head_dim": self.head_dim,
            "vocab_size": self.vocab_size, "context": self.seq_len, "rope_theta": self.rope_theta,
            "rope_scaling": self.rope_scaling, "rope_freq_factors": None if self.freq_factors is None
            else [float(f) for f in self.freq_factors], "rope_pairs": "interleaved" if self.interleaved else "halves",
            "rms_norm_eps": self.norm_eps, "tie_word_embeddings": self.tied,
            "num_local_experts": self.n_experts, "num_experts_per_tok": self.top_k, "qkv_bias": self.qkv_bias,
            "qk_norm": self.qk_norm, "fused_projections": self.fused, "sliding_window": self.window,
            "layer_types": None if self.sliding is None
            else ["sliding_attention" if s else "full_attention" for s in self.sliding],
            "embedding_scale": self.embed_scale, "rms_norm_weight_offset": self.norm_offset,
            "hidden_activation": self.activation, "sandwich_norms": self.sandwich,
            "query_pre_attn_scalar": self.attn_scalar or None, "attn_logit_softcapping": self.attn_softcap,
            "final_logit_softcapping": self.final_softcap, "rope_local_base_freq": self.rope_local_theta,
        }


def check_config(c, where):
    for name in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "head_dim", "vocab_size", "seq_len"):
        if getattr(c, name) <= 0:
            raise RefError("%s: %s must be positive, got %r" % (where, name, getattr(c, name)))
    if c.n_heads % c.n_kv_heads:
        raise RefError("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d"
                       % (where, c.n_heads, c.n_kv_heads))
    if c.head_dim % 2:
        raise RefError("%s: head_dim %d is odd; RoPE rotates pairs" % (where, c.head_dim))
    if not c.rope_theta > 0 or not c.norm_eps > 0:
        raise RefError("%s: rope_theta and rms_norm_eps must be positive" % where)
    if c.n_experts and not 0 < c.top_k <= c.n_experts:
        raise RefError("%s: num_experts_per_tok %d is not in [1, num_local_experts=%d]" % (where, c.top_k, c.n_experts))
    if c.sliding is not None and len(c.sliding) != c.n_layers:
        raise RefError("%s: %d layer types for %d layers" % (where, len(c.sliding), c.n_layers))


# ----------------------------------------------------------------------------
# llama2.c checkpoints: 7 int32 header fields, then f32 tensors in a fixed order.

def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except ValueError:
        raise RefError("%s: not valid JSON" % path)


def load_llama2c(path):
    data = read_bytes(path)
    if len(data) < 28:
        raise RefError("%s: %d bytes is shorter than the 28-byte llama2.c header" % (path, len(data)))
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack("<7i", data[:28])
    c = Config()
    c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads = dim, hidden, layers, heads, kv_heads
    c.tied = vocab > 0  # a negative vocab_size means an unshared classifier follows
    c.vocab_size, c.seq_len = abs(vocab), seq_len
    if heads <= 0 or dim % heads:
        raise RefError("%s: dim %d is not a multiple of n_heads %d" % (path, dim, heads))
    c.head_dim = dim // heads
    c.rope_theta, c.norm_eps, c.interleaved = 10000.0, 1e-5, True  # fixed by the format
    check_config(c, path)
    kv = kv_heads * c.head_dim
    L, D, H, V = layers, dim, hidden, c.vocab_size
    shapes = [("token_embedding", (V, D)), ("rms_att", (L, D)), ("wq", (L, D, D)), ("wk", (L, kv, D)),
              ("wv", (L, kv, D)), ("wo", (L, D, D)), ("rms_ffn", (L, D)), ("w1", (L, H, D)), ("w2", (L, D, H)),
              ("w3", (L, H, D)), ("rms_final", (D,)), ("freq_cis", (2, seq_len, c.head_dim // 2))]
    if not c.tied:
        shapes.append(("wcls", (V, D)))
    want = 28 + 4 * sum(int(np.prod(s)) for _, s in shapes)
    if len(data) != want:
        raise RefError("%s: %d bytes, but the header implies %d" % (path, len(data), want))
    t, off = {}, 28
    for name, shape in shapes:
        n = int(np.prod(shape))
        t[name] = np.frombuffer(data, dtype="<f4", count=n, offset=off).reshape(shape).astype(np.float64)
        off += 4 * n
    w = {"embed": t["token_embedding"], "norm": t["rms_final"],
         "lm_head": t["token_embedding"] if c.tied else t["wcls"], "layers": []}
    for l in range(L):
        w["layers"].append({"attn_norm": t["rms_att"][l], "wq": t["wq"][l], "wk": t["wk"][l], "wv": t["wv"][l],
                            "wo": t["wo"][l], "ffn_norm": t["rms_ffn"][l], "w1": t["w1"][l], "w2": t["w2"][l],
                            "w3": t["w3"][l]})
    return c, w


# ----------------------------------------------------------------------------
# Hugging Face directories: config.json plus safetensors (one file or shards).

ST_DTYPES = {"F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2)}


def read_safetensors(path):
    """Returns {name: float64 array} for every tensor in one safetensors file."""
    data = read_bytes(path)
    if len(data) < 8:
        raise RefError("%s: too short for a safetensors header length" % path)
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise RefError("%s: header length %d runs past the end of the file" % (path, n))
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise RefError("%s: the header is not JSON" % path)
    base, out = 8 + n, {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if e.get("dtype") not in ST_DTYPES:
            raise RefError("%s: tensor %s has dtype %r (supported: F32, F16, BF16)" % (path, name, e.get("dtype")))
        code, size = ST_DTYPES[e["dtype"]]
        shape = tuple(e["shape"])
        begin, end = e["data_offsets"]
        count = int(np.prod(shape)) if shape else 1
        if end - begin != count * size or base + end > len(data):
            raise RefError("%s: tensor %s: data_offsets %r do not hold %s %s values"
                           % (path, name, e["data_offsets"], shape, e["dtype"]))
        raw = np.frombuffer(data, dtype=code, count=count, offset=base + begin)
        if e["dtype"] == "BF16":  # the top 16 bits of an IEEE float32
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        out[name] = raw.astype(np.float64).reshape(shape)
    return out


# Keys that change the math, and the values the reference supports.
UNSUPPORTED_IF = [
    ("attention_bias", lambda v: v not in (None, False)),
    ("mlp_bias", lambda v: v not in (None, False)),
    ("partial_rotary_factor", lambda v: v not in (None, 1, 1.0)),
    ("sliding_window", lambda v: v is not None),
    ("hidden_act", lambda v: v not in (None, "silu")),
    ("qk_layernorm", lambda v: v not in (None, False)),
    ("attention_multiplier", lambda v: v is not None),
    ("logits_scaling", lambda v: v is not None),
    ("embedding_multiplier", lambda v: v is not None),
    ("use_bidirectional_attention", lambda v: v not in (None, False)),
    ("rope_parameters", lambda v: v is not None),  # newer transformers' form of rope_theta/rope_scaling
]
GEMMA = ("gemma2", "gemma3_text")


def rope_scaling_from(cfg, path):
    s = cfg.get("rope_scaling")
    if s is None:
        return None
    if not isinstance(s, dict):
        raise RefError("%s: rope_scaling must be an object or null" % path)
    kind = s.get("rope_type", s.get("type"))
    if kind in (None, "default"):
        return None

    def num(key):
        if key not in s or not isinstance(s[key], (int, float)) or isinstance(s[key], bool):
            raise RefError("%s: rope_scaling (%s) needs a number '%s'" % (path, kind, key))
        return float(s[key])
    if kind == "linear":
        return {"type": "linear", "factor": num("factor")}
    if kind == "llama3":
        r = {"type": "llama3", "factor": num("factor"), "low_freq_factor": num("low_freq_factor"),
             "high_freq_factor": num("high_freq_factor"),
             "original_max_position_embeddings": num("original_max_position_embeddings")}
        if not r["high_freq_factor"] > r["low_freq_factor"]:
            raise RefError("%s: rope_scaling high_freq_factor must exceed low_freq_factor" % path)
        return r
    raise RefError("%s: rope_scaling type %r is not supported (supported: linear, llama3)" % (path, kind))


def config_from_hf(cfg, path):
    """The math of a config.json; every key it cannot honour is refused by name."""
    mt = cfg.get("model_type")
    if mt == "gemma3":
        raise RefError("%s: model_type gemma3 is Gemma 3 with its vision tower; only gemma3_text is supported" % path)
    if mt not in ("llama", "mistral", "mixtral", "qwen2", "qwen3", "phi3") + GEMMA:
        raise RefError("%s: model_type %r is not supported (llama, mistral, mixtral, qwen2, qwen3, phi3, gemma2, "
                       "gemma3_text)" % (path, mt))
    if "vision_config" in cfg:
        raise RefError("%s: key 'vision_config': a multimodal config; the reference runs text models only" % path)
    qwen2, qwen3, gemma = mt == "qwen2", mt == "qwen3", mt in GEMMA
    # Qwen2 (Qwen2Config, Qwen2Attention): the window applies only with
    # use_sliding_window; the q/k/v biases are always there.
    if cfg.get("use_sliding_window") not in (None, False):
        raise RefError("%s: key 'use_sliding_window' = %r changes the math and is not supported"
                       % (path, cfg["use_sliding_window"]))
    # Mistral (MistralConfig): sliding_window is read; a query attends to
    # itself and the window - 1 keys before it (Reference.forward).
    # Qwen3 (Qwen3Config, Qwen3Attention): the same window keys; attention_bias
    # is read (biases on q, k, v and o when true: refused by UNSUPPORTED_IF); q_norm and
    # k_norm always; head_dim defaults to 128 in Qwen3Config, so it is required.
    # Phi-3 (Phi3Config, Phi3Attention, Phi3MLP): Mistral's window; qkv_proj
    # and gate_up_proj split by rows; rope_scaling longrope refused below.
    # Gemma 2/3 (Gemma2Config, Gemma3TextConfig): the MLP reads hidden_activation,
    # not hidden_act; sliding_window is read (on sliding layers only): gemma_config.
    inert = ("sliding_window", "attention_bias") if qwen2 else \
        ("sliding_window",) if mt in ("mistral", "qwen3", "phi3") else \
        ("sliding_window", "hidden_act") if gemma else ()
    for key, bad in UNSUPPORTED_IF:
        if key in cfg and bad(cfg[key]) and key not in inert:
            raise RefError("%s: key '%s' = %r changes the math and is not supported" % (path, key, cfg[key]))

    def need_int(key):
        v = cfg.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise RefError("%s: key '%s' must be a positive integer, got %r" % (path, key, v))
        return v
    c = Config()
    c.dim = need_int("hidden_size")
    c.hidden_dim = need_int("intermediate_size")
    c.n_layers = need_int("num_hidden_layers")
    c.n_heads = need_int("num_attention_heads")
    if gemma and "num_key_value_heads" not in cfg:  # Gemma2Config's and Gemma3TextConfig's default is 4
        raise RefError("%s: a %s config needs 'num_key_value_heads' (its config class's default is 4)" % (path, mt))
    c.n_kv_heads = need_int("num_key_value_heads") if "num_key_value_heads" in cfg else c.n_heads
    c.vocab_size = need_int("vocab_size")
    c.seq_len = need_int("max_position_embeddings")
    c.head_dim = need_int("head_dim") if cfg.get("head_dim") is not None else c.dim // c.n_heads
    # Defaults are the ones the Hugging Face config classes define.
    mixtral = mt == "mixtral"
    c.rope_theta = float(cfg.get("rope_theta", 1e6 if mixtral or mt == "gemma3_text" else 10000.0))
    c.norm_eps = float(cfg.get("rms_norm_eps", 1e-5 if mixtral else 1e-6))
    c.tied = bool(cfg.get("tie_word_embeddings", gemma))  # Gemma's config classes default to tied
    if mt == "gemma2" and cfg.get("rope_scaling") is not None:
        raise RefError("%s: key 'rope_scaling' = %r: gemma2 takes no RoPE scaling (null only)"
                       % (path, cfg["rope_scaling"]))
    c.rope_scaling = rope_scaling_from(cfg, path)
    if mt == "gemma3_text" and c.rope_scaling is not None and c.rope_scaling["type"] != "linear":
        raise RefError("%s: rope_scaling type %r is not supported for gemma3_text (linear only)"
                       % (path, c.rope_scaling["type"]))
    c.interleaved = False
    c.qkv_bias = qwen2
    c.qk_norm = qwen3
    if qwen3 and cfg.get("head_dim") is None:
        raise RefError("%s: a qwen3 config needs 'head_dim' (Qwen3Config's default is 128)" % path)
    if gemma:
        if cfg.get("head_dim") is None:
            raise RefError("%s: a %s config needs 'head_dim' (its config class's default is 256)" % (path, mt))
        gemma_config(c, cfg, path, mt, need_int)
    c.fused = mt == "phi3"
    if mt in ("mistral", "phi3") and cfg.get("sliding_window") is not None:
        c.window = need_int("sliding_window")
    if isinstance(cfg.get("bos_token_id"), int):
        c.bos = cfg["bos_token_id"]
    if mixtral:
        c.n_experts = need_int("num_local_experts")
        c.top_k = need_int("num_experts_per_tok")
    check_config(c, path)
    return c


def gemma_config(c, cfg, path, mt, need_int):
    """Gemma 2 (Gemma2Config, Gemma2DecoderLayer) and Gemma 3 text
    (Gemma3TextConfig, Gemma3DecoderLayer): sandwich norms scaling by (1 + w),
    embeddings times sqrt(hidden_size), a GELU-tanh gated FFN, scores scaled by
    query_pre_attn_scalar^-0.5, optional tanh soft-capping of scores and logits,
    a window on sliding layers only; Gemma 3: q/k norms and a second RoPE base."""
    def num(key, default="required"):
        v = cfg.get(key, default)
        if v == "required":
            raise RefError("%s: a %s config needs '%s'" % (path, mt, key))
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
            raise RefError("%s: key '%s' must be a positive number, got %r" % (path, key, v))
        return float(v)

    def cap(key, default):  # null: no capping
        return None if cfg.get(key, default) is None else num(key, default)
    act = cfg.get("hidden_activation", "gelu_pytorch_tanh")  # Gemma2Config/Gemma3TextConfig default
    if act != "gelu_pytorch_tanh":
        raise RefError("%s: key 'hidden_activation' = %r is not supported (gelu_pytorch_tanh only)" % (path, act))
    gemma2 = mt == "gemma2"
    c.activation, c.sandwich, c.norm_offset = act, True, 1.0
    c.embed_scale = math.sqrt(c.dim)
    c.attn_scalar = num("query_pre_attn_scalar")
    # Gemma2Config's defaults are 50 and 30; Gemma3TextConfig's are null.
    c.attn_softcap = cap("attn_logit_softcapping", 50.0 if gemma2 else None)
    c.final_softcap = cap("final_logit_softcapping", 30.0 if gemma2 else None)
    if cfg.get("sliding_window") is None:
        raise RefError("%s: a %s config needs 'sliding_window'" % (path, mt))
    c.window = need_int("sliding_window")
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != c.n_layers:
            raise RefError("%s: key 'layer_types' must be a list of num_hidden_layers=%d entries, got %r"
                           % (path, c.n_layers, types))
        for i, t in enumerate(types):
            if t not in ("sliding_attention", "full_attention"):
                raise RefError("%s: key 'layer_types' entry %d is %r (sliding_attention or full_attention)"
                               % (path, i, t))
        c.sliding = [t == "sliding_attention" for t in types]
    elif gemma2:  # even layers slide, odd layers are global
        c.sliding = [i % 2 == 0 for i in range(c.n_layers)]
    else:
        if cfg.get("sliding_window_pattern") is None:
            raise RefError("%s: a gemma3_text config needs 'layer_types' or 'sliding_window_pattern'" % path)
        n = need_int("sliding_window_pattern")  # layer i is global iff (i + 1) % n == 0
        c.sliding = [(i + 1) % n != 0 for i in range(c.n_layers)]
    if not gemma2:
        c.qk_norm = True
        c.rope_local_theta = num("rope_local_base_freq")


def hf_files(d):
    """The files that hold a HF model's math: config.json, the index, every shard."""
    names = sorted(n for n in os.listdir(d) if n == "config.json" or (len(n) > 12 and n.endswith(".safetensors"))
                   or n == "model.safetensors.index.json")
    return names


def load_hf(d):
    cpath = os.path.join(d, "config.json")
    if not os.path.isfile(cpath):
        raise RefError("%s: no config.json" % d)
    cfg = read_json(cpath)
    if not isinstance(cfg, dict):
        raise RefError("%s: not a JSON object" % cpath)
    c = config_from_hf(cfg, cpath)
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.isfile(index):
        wm = read_json(index).get("weight_map")
        if not isinstance(wm, dict):
            raise RefError("%s: no weight_map object" % index)
        shards = sorted(set(wm.values()))
    elif os.path.isfile(os.path.join(d, "model.safetensors")):
        wm, shards = None, ["model.safetensors"]
    else:
        raise RefError("%s: neither model.safetensors.index.json nor model.safetensors" % d)
    t = {}
    for s in shards:
        for name, arr in read_safetensors(os.path.join(d, s)).items():
            if wm is not None and wm.get(name) != s:
                raise RefError("%s: tensor %s is not placed in this shard by the index" % (os.path.join(d, s), name))
            t[name] = arr
    used = set()

    def get(name, shape):
        if name not in t:
            raise RefError("%s: tensor %s is missing" % (d, name))
        if tuple(t[name].shape) != tuple(shape):
            raise RefError("%s: tensor %s has shape %s, the config implies %s" % (d, name, list(t[name].shape), list(shape)))
        used.add(name)
        return t[name]
    D, F, V, hd = c.dim, c.hidden_dim, c.vocab_size, c.head_dim
    qd, kvd = c.n_heads * hd, c.n_kv_heads * hd
    w = {"embed": get("model.embed_tokens.weight", (V, D)), "layers": []}
    for l in range(c.n_layers):
        p = "model.layers.%d." % l
        L = {"attn_norm": get(p + "input_layernorm.weight", (D,)), "wo": get(p + "self_attn.o_proj.weight", (D, qd))}
        if c.sandwich:  # Gemma: post_attention_layernorm norms the attention's output, not the FFN's input
            L["post_attn_norm"] = get(p + "post_attention_layernorm.weight", (D,))
            L["ffn_norm"] = get(p + "pre_feedforward_layernorm.weight", (D,))
            L["post_ffn_norm"] = get(p + "post_feedforward_layernorm.weight", (D,))
        else:
            L["ffn_norm"] = get(p + "post_attention_layernorm.weight", (D,))
        if c.fused:  # Phi-3: q's rows, then k's, then v's; gate's, then up's
            qkv = get(p + "self_attn.qkv_proj.weight", (qd + 2 * kvd, D))
            L["wq"], L["wk"], L["wv"] = qkv[:qd], qkv[qd:qd + kvd], qkv[qd + kvd:]
        else:
            L["wq"] = get(p + "self_attn.q_proj.weight", (qd, D))
            L["wk"] = get(p + "self_attn.k_proj.weight", (kvd, D))
            L["wv"] = get(p + "self_attn.v_proj.weight", (kvd, D))
        if c.qkv_bias:
            L["bq"] = get(p + "self_attn.q_proj.bias", (qd,))
            L["bk"] = get(p + "self_attn.k_proj.bias", (kvd,))
            L["bv"] = get(p + "self_attn.v_proj.bias", (kvd,))
        if c.qk_norm:
            L["q_norm"] = get(p + "self_attn.q_norm.weight", (hd,))
            L["k_norm"] = get(p + "self_attn.k_norm.weight", (hd,))
        if c.n_experts:
            L["router"] = get(p + "block_sparse_moe.gate.weight", (c.n_experts, D))
            L["experts"] = [{"w1": get(p + "block_sparse_moe.experts.%d.w1.weight" % e, (F, D)),
                             "w2": get(p + "block_sparse_moe.experts.%d.w2.weight" % e, (D, F)),
                             "w3": get(p + "block_sparse_moe.experts.%d.w3.weight" % e, (F, D))}
                            for e in range(c.n_experts)]
        elif c.fused:
            gate_up = get(p + "mlp.gate_up_proj.weight", (2 * F, D))
            L["w1"], L["w3"] = gate_up[:F], gate_up[F:]
            L["w2"] = get(p + "mlp.down_proj.weight", (D, F))
        else:
            L["w1"] = get(p + "mlp.gate_proj.weight", (F, D))
            L["w3"] = get(p + "mlp.up_proj.weight", (F, D))
            L["w2"] = get(p + "mlp.down_proj.weight", (D, F))
        w["layers"].append(L)
    w["norm"] = get("model.norm.weight", (D,))
    w["lm_head"] = w["embed"] if c.tied else get("lm_head.weight", (V, D))
    extra = sorted(set(t) - used)
    if extra:
        raise RefError("%s: unexpected tensor %s (the reference does not know what it does)" % (d, extra[0]))
    return c, w


# ----------------------------------------------------------------------------
# GGUF files (llama architecture): metadata, tensor infos, aligned data.
# Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md

GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30


class GgufReader:
    def __init__(self, path):
        self.path, self.data, self.at = path, read_bytes(path), 0

    def take(self, fmt):
        n = struct.calcsize(fmt)
        if self.at + n > len(self.data):
            raise RefError("%s: truncated at offset %d" % (self.path, self.at))
        (v,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += n
        return v

    def string(self):
        n = self.take("<Q")
        if self.at + n > len(self.data):
            raise RefError("%s: a string runs past the end" % self.path)
        s = self.data[self.at:self.at + n].decode("utf-8", errors="replace")
        self.at += n
        return s

    def value(self, t):
        if t in GGUF_SCALARS:
            return self.take(GGUF_SCALARS[t])
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            if n > len(self.data):
                raise RefError("%s: array of %d entries cannot fit" % (self.path, n))
            return [self.value(et) for _ in range(n)]
        raise RefError("%s: unknown GGUF value type %d" % (self.path, t))


def f16_bits_to_f64(raw):
    return raw.view("<f2").astype(np.float64)


def read_gguf(path):
    """Returns (metadata dict, {name: float64 array in row-major [rows, cols] order})."""
    r = GgufReader(path)
    if r.data[:4] != b"GGUF":
        raise RefError("%s: not a GGUF file" % path)
    r.at = 4
    version = r.take("<I")
    if version not in (2, 3):
        raise RefError("%s: GGUF version %d is not supported" % (path, version))
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.take("<Q") for _ in range(r.take("<I"))]
        infos.append((name, dims, r.take("<I"), r.take("<Q")))
    align = meta.get("general.alignment", 32)
    base = (r.at + align - 1) // align * align
    tensors = {}
    for name, dims, ggml_type, offset in infos:
        count = int(np.prod(dims)) if dims else 1
        at = base + offset
        if ggml_type == GGML_F32:
            vals = np.frombuffer(r.data, dtype="<f4", count=count, offset=at).astype(np.float64)
        elif ggml_type == GGML_F16:
            vals = f16_bits_to_f64(np.frombuffer(r.data, dtype="<u2", count=count, offset=at))
        elif ggml_type == GGML_BF16:
            raw = np.frombuffer(r.data, dtype="<u2", count=count, offset=at)
            vals = (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        elif ggml_type == GGML_Q8_0:  # blocks of 32: f16 scale d, then 32 int8 q; x = d * q
            blocks = np.frombuffer(r.data, dtype=np.uint8, count=count // 32 * 34, offset=at).reshape(-1, 34)
            d = f16_bits_to_f64(blocks[:, :2].copy().view("<u2").reshape(-1))
            q = blocks[:, 2:].view(np.int8).astype(np.float64)
            vals = (q * d[:, None]).reshape(-1)
        else:
            raise RefError("%s: tensor %s has ggml type %d (supported: F32, F16, BF16, Q8_0)" % (path, name, ggml_type))
        # GGUF dims are innermost first: [cols, rows] is a row-major [rows, cols] matrix.
        tensors[name] = vals.reshape(list(reversed(dims)))
    return meta, tensors


def load_gguf(path):
    meta, t = read_gguf(path)
    if meta.get("general.architecture") != "llama":
        raise RefError("%s: general.architecture %r is not llama" % (path, meta.get("general.architecture")))

    def key(k, default=None):
        if k not in meta:
            if default is None:
                raise RefError("%s: required key %s is missing" % (path, k))
            return default
        return meta[k]
    c = Config()
    c.dim = key("llama.embedding_length")
    c.hidden_dim = key("llama.feed_forward_length")
    c.n_layers = key("llama.block_count")
    c.n_heads = key("llama.attention.head_count")
    c.n_kv_heads = key("llama.attention.head_count_kv", c.n_heads)
    c.head_dim = key("llama.attention.key_length", c.dim // c.n_heads)
    if key("llama.rope.dimension_count", c.head_dim) != c.head_dim:
        raise RefError("%s: partial RoPE (llama.rope.dimension_count) is not supported" % path)
    c.seq_len = key("llama.context_length")
    c.norm_eps = float(key("llama.attention.layer_norm_rms_epsilon"))
    c.rope_theta = float(key("llama.rope.freq_base", 10000.0))
    c.n_experts = key("llama.expert_count", 0)
    c.top_k = key("llama.expert_used_count", 0)
    c.interleaved = True  # llama.cpp's NORM rope: q/k rows are stored for adjacent pairs
    kind = key("llama.rope.scaling.type", "none")
    if kind == "linear":
        c.rope_scaling = {"type": "linear", "factor": float(key("llama.rope.scaling.factor"))}
    elif kind != "none":
        raise RefError("%s: llama.rope.scaling.type %r is not supported" % (path, kind))
    c.bos = key("tokenizer.ggml.bos_token_id", 1)
    if "rope_freqs.weight" in t:
        c.freq_factors = t["rope_freqs.weight"]
    c.vocab_size = t["token_embd.weight"].shape[0] if "token_embd.weight" in t else 0
    c.tied = "output.weight" not in t
    check_config(c, path)
    used = set()

    def get(name, shape):
        if name not in t:
            raise RefError("%s: tensor %s is missing" % (path, name))
        if tuple(t[name].shape) != tuple(shape):
            raise RefError("%s: tensor %s has shape %s, the metadata implies %s" % (path, name, list(t[name].shape), list(shape)))
        used.add(name)
        return t[name]
    D, F, V, hd = c.dim, c.hidden_dim, c.vocab_size, c.head_dim
    qd, kvd = c.n_heads * hd, c.n_kv_heads * hd
    w = {"embed": get("token_embd.weight", (V, D)), "layers": []}
    for l in range(c.n_layers):
        p = "blk.%d." % l
        L = {"attn_norm": get(p + "attn_norm.weight", (D,)), "wq": get(p + "attn_q.weight", (qd, D)),
             "wk": get(p + "attn_k.weight", (kvd, D)), "wv": get(p + "attn_v.weight", (kvd, D)),
             "wo": get(p + "attn_output.weight", (D, qd)), "ffn_norm": get(p + "ffn_norm.weight", (D,))}
        if c.n_experts:
            L["router"] = get(p + "ffn_gate_inp.weight", (c.n_experts, D))
            g = get(p + "ffn_gate_exps.weight", (c.n_experts, F, D))
            dn = get(p + "ffn_down_exps.weight", (c.n_experts, D, F))
            up = get(p + "ffn_up_exps.weight", (c.n_experts, F, D))
            L["experts"] = [{"w1": g[e], "w2": dn[e], "w3": up[e]} for e in range(c.n_experts)]
        else:
            L["w1"] = get(p + "ffn_gate.weight", (F, D))
            L["w3"] = get(p + "ffn_up.weight", (F, D))
            L["w2"] = get(p + "ffn_down.weight", (D, F))
        w["layers"].append(L)
    w["norm"] = get("output_norm.weight", (D,))
    w["lm_head"] = w["embed"] if c.tied else get("output.weight", (V, D))
    used.add("rope_freqs.weight")
    extra = sorted(set(t) - used)
    if extra:
        raise RefError("%s: unexpected tensor %s (the reference does not know what it does)" % (path, extra[0]))
    return c, w


def is_gguf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"GGUF"


def load_model(path):
    if os.path.isdir(path):
        return load_hf(path)
    if not os.path.isfile(path):
        raise RefError("%s: no such model file or directory" % path)
    return load_gguf(path) if is_gguf(path) else load_llama2c(path)


def model_sha256(path):
    """A file's sha256; for a directory, the sha256 of its manifest: one line
    "<sha256 of file>  <name>\\n" per math-holding file (hf_files), by name."""
    def file_sha(p):
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    if not os.path.isdir(path):
        return file_sha(path)
    manifest = "".join("%s  %s\n" % (file_sha(os.path.join(path, n)), n) for n in hf_files(path))
    return hashlib.sha256(manifest.encode()).hexdigest()


# ----------------------------------------------------------------------------
# The forward pass, float64 throughout.

def inverse_frequencies(c):
    """theta^(-2i/head_dim) for i < head_dim/2, then rope_scaling as Hugging
    Face defines it (linear: / factor; llama3: by wavelength band)."""
    hd = c.head_dim
    inv = 1.0 / (c.rope_theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    if c.freq_factors is not None:  # llama.cpp's form of Llama 3 scaling: theta_i / factor_i
        inv = inv / c.freq_factors
    s = c.rope_scaling
    if s is None:
        return inv
    if s["type"] == "linear":
        return inv / s["factor"]
    # llama3: wavelengths shorter than original/high_freq_factor keep their
    # frequency, longer than original/low_freq_factor are divided by factor,
    # and the band between interpolates linearly in original/wavelength.
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    orig = s["original_max_position_embeddings"]
    out = np.empty_like(inv)
    for i, f in enumerate(inv):
        wavelen = 2.0 * math.pi / f
        if wavelen < orig / high:
            out[i] = f
        elif wavelen > orig / low:
            out[i] = f / factor
        else:
            smooth = (orig / wavelen - low) / (high - low)
            out[i] = (1.0 - smooth) * f / factor + smooth * f
    return out


def rope(x, positions, inv, interleaved):
    """Rotates x [T, heads, head_dim] by position; returns a new array."""
    ang = np.asarray(positions, dtype=np.float64)[:, None] * inv[None, :]  # [T, hd/2]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    half = x.shape[-1] // 2
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
    else:
        a, b = x[..., :half], x[..., half:]
    ra, rb = a * cos - b * sin, a * sin + b * cos
    out = np.empty_like(x)
    if interleaved:
        out[..., 0::2], out[..., 1::2] = ra, rb
    else:
        out[..., :half], out[..., half:] = ra, rb
    return out


def rmsnorm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def route(logits, k):
    """Top-k experts by router logit (ties to the lower index) and their
    weights: a softmax over the chosen k logits."""
    order = np.argsort(-logits, kind="stable")[:k]
    return order, softmax(logits[order])


def gelu_tanh(x):
    """GELU, tanh approximation (PyTorch's approximate="tanh", gelu_pytorch_tanh)."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_tanh_fp16(x):
    """llama.cpp's CPU GELU (ggml's GGML_GELU_FP16 table), to measure its own
    rounding: x rounded to float16 (0 below -10, x itself above 10), the
    tanh GELU of that in float32, rounded to float16."""
    h = x.astype(np.float32).astype(np.float16).astype(np.float32)
    g = (np.float32(0.5) * h * (np.float32(1.0) + np.tanh(np.float32(math.sqrt(2.0 / math.pi)) * h *
                                                     (np.float32(1.0) + np.float32(0.044715) * h * h))))
    g = g.astype(np.float16).astype(np.float64)
    return np.where(x <= -10.0, 0.0, np.where(x >= 10.0, x, g))


GELU = {"exact": gelu_tanh, "fp16": gelu_tanh_fp16}
gelu_mode = "exact"  # --gelu


def swiglu_ffn(h, w1, w2, w3, act=silu):
    return (act(h @ w1.T) * (h @ w3.T)) @ w2.T


def softcap(x, cap):
    return x if cap is None else cap * np.tanh(x / cap)


class Reference:
    """The model plus a KV cache; forward() appends positions."""

    def __init__(self, c, w):
        self.c, self.w = c, w
        self.inv = inverse_frequencies(c)
        self.inv_local = None  # Gemma 3: sliding layers' table, rope_local_base_freq, no scaling
        if c.rope_local_theta is not None:
            local = copy.copy(c)
            local.rope_theta, local.rope_scaling, local.freq_factors = c.rope_local_theta, None, None
            self.inv_local = inverse_frequencies(local)
        self.k = [np.zeros((0, c.n_kv_heads, c.head_dim)) for _ in range(c.n_layers)]
        self.v = [np.zeros((0, c.n_kv_heads, c.head_dim)) for _ in range(c.n_layers)]

    def forward(self, tokens):
        """Logits [T, vocab] for `tokens` at the next T positions."""
        c, w = self.c, self.w
        T, p0 = len(tokens), self.k[0].shape[0]
        if p0 + T > c.seq_len:
            raise RefError("%d positions exceed the context of %d" % (p0 + T, c.seq_len))
        pos = np.arange(p0, p0 + T)
        H, KV, hd = c.n_heads, c.n_kv_heads, c.head_dim
        group = H // KV
        act = GELU[gelu_mode] if c.activation == "gelu_pytorch_tanh" else silu

        def norm(v, weight):  # Gemma stores w and scales by (1 + w)
            return rmsnorm(v, weight + c.norm_offset if c.norm_offset else weight, c.norm_eps)
        x = w["embed"][np.asarray(tokens)]
        if c.embed_scale != 1.0:
            x = x * c.embed_scale
        for l, L in enumerate(w["layers"]):
            sliding = c.sliding is None or c.sliding[l]  # the window (if any) applies on this layer
            inv = self.inv_local if self.inv_local is not None and sliding else self.inv
            h = norm(x, L["attn_norm"])
            bq, bk, bv = (L["bq"], L["bk"], L["bv"]) if c.qkv_bias else (0.0, 0.0, 0.0)
            q = (h @ L["wq"].T + bq).reshape(T, H, hd)
            k = (h @ L["wk"].T + bk).reshape(T, KV, hd)
            if c.qk_norm:  # Qwen3: over each head's head_dim values, before RoPE
                q, k = norm(q, L["q_norm"]), norm(k, L["k_norm"])
            q = rope(q, pos, inv, c.interleaved)
            k = rope(k, pos, inv, c.interleaved)
            v = (h @ L["wv"].T + bv).reshape(T, KV, hd)
            self.k[l] = np.concatenate([self.k[l], k])
            self.v[l] = np.concatenate([self.v[l], v])
            K, Vv = self.k[l], self.v[l]  # [p0 + T, KV, hd]
            out = np.empty((T, H, hd))
            keys = np.arange(p0 + T)[None, :]
            causal = keys > pos[:, None]  # key after query: masked
            if c.window and sliding:  # Mistral, Phi-3, Gemma's sliding layers: a key window or more back is masked too
                causal |= keys <= pos[:, None] - c.window
            for head in range(H):
                kv = head // group  # grouped-query attention: query heads share a KV head
                s = (q[:, head, :] @ K[:, kv, :].T) / math.sqrt(c.attn_scalar or hd)
                s = softcap(s, c.attn_softcap)  # Gemma 2: before the mask
                s[causal] = -np.inf
                out[:, head, :] = softmax(s) @ Vv[:, kv, :]
            a = out.reshape(T, H * hd) @ L["wo"].T
            x = x + (norm(a, L["post_attn_norm"]) if c.sandwich else a)
            h = norm(x, L["ffn_norm"])
            if c.n_experts:
                y = np.zeros_like(x)
                logits = h @ L["router"].T
                for t in range(T):
                    chosen, weight = route(logits[t], c.top_k)
                    for e, g in zip(chosen, weight):
                        E = L["experts"][e]
                        y[t] += g * swiglu_ffn(h[t], E["w1"], E["w2"], E["w3"])
                x = x + y
            else:
                y = swiglu_ffn(h, L["w1"], L["w2"], L["w3"], act)
                x = x + (norm(y, L["post_ffn_norm"]) if c.sandwich else y)
        return softcap(norm(x, w["norm"]) @ w["lm_head"].T, c.final_softcap)


# ----------------------------------------------------------------------------
# Positions and the logits file.

def parity_depths(tokens, k, window):
    """The depths `verity parity` scores over `tokens` positions by default
    (docs/parity.md): k spread over the context, the last at its end, none
    shallower than the window."""
    shallowest = max(1, min(window, tokens))
    return [max(shallowest, (i * tokens + k - 1) // k) for i in range(1, k + 1)]


def parity_positions(tokens):
    """Every position a default standard (7 depths x 8) or deep (14 x 16)
    parity run scores: row p is the logits after token p."""
    pos = set()
    for k, window in ((7, 8), (14, 16)):
        for d in parity_depths(tokens, k, window):
            pos.update(range(max(0, d - window), d))
    return sorted(pos)


def write_logits_file(out, header, rows):
    body = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    body += b" " * ((-(16 + len(body))) % 8)  # rows start 8-byte aligned
    with open(out, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<Q", len(body)))
        f.write(body)
        f.write(np.ascontiguousarray(rows, dtype="<f4").tobytes())


def read_logits_file(path):
    data = read_bytes(path)
    if data[:8] != MAGIC:
        raise RefError("%s: not a reference logits file (no %r magic)" % (path, MAGIC))
    (n,) = struct.unpack("<Q", data[8:16])
    header = json.loads(data[16:16 + n].decode())
    rows = np.frombuffer(data, dtype="<f4", offset=16 + n).reshape(len(header["positions"]), header["vocab_size"])
    return header, rows


def read_ids(path):
    try:
        with open(path) as f:
            ids = [int(t) for t in f.read().replace(",", " ").split()]
    except ValueError:
        raise RefError("%s: token ids must be integers" % path)
    if not ids:
        raise RefError("%s: no token ids" % path)
    return ids


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="llama2.c .bin file, Hugging Face directory or llama GGUF file")
    ap.add_argument("--out", required=True, help="reference logits file to write")
    ap.add_argument("--tokens", help="file of token ids (teacher-forced); default: BOS alone")
    ap.add_argument("--greedy", type=int, default=0,
                    help="extend the ids with the reference's own greedy choices to N tokens in all")
    ap.add_argument("--bos", type=int, help="first token when --tokens is not given (default: the model's BOS)")
    ap.add_argument("--positions", default="parity",
                    help="rows to keep: parity (every position a default parity run scores), all, or P,P,...")
    ap.add_argument("--model-name", help="model path to record in the header (default: as given)")
    ap.add_argument("--gelu", choices=("exact", "fp16"), default="exact",
                    help="Gemma's GELU: exact (float64), or fp16 as llama.cpp's CPU backend rounds it "
                         "(to measure llama.cpp's own noise; not a reference of the model)")
    a = ap.parse_args(argv)
    global gelu_mode
    gelu_mode = a.gelu
    c, w = load_model(a.model)
    ids = read_ids(a.tokens) if a.tokens else [c.bos if a.bos is None else a.bos]
    for i, t in enumerate(ids):
        if not 0 <= t < c.vocab_size:
            raise RefError("token id %d at index %d is outside the vocabulary [0, %d)" % (t, i, c.vocab_size))
    given, total = len(ids), max(a.greedy, len(ids))
    if total > c.seq_len:
        raise RefError("%d tokens exceed the model's context of %d" % (total, c.seq_len))
    ref = Reference(c, w)
    rows = [ref.forward(ids)]
    while len(ids) < total:  # greedy: the argmax of the last row (ties: lowest id)
        ids.append(int(np.argmax(rows[-1][-1])))
        rows.append(ref.forward(ids[-1:]))
    logits = np.concatenate(rows)[:len(ids)]
    if a.positions == "parity":
        positions = parity_positions(len(ids))
    elif a.positions == "all":
        positions = list(range(len(ids)))
    else:
        try:
            positions = sorted(set(int(p) for p in a.positions.split(",")))
        except ValueError:
            raise RefError("--positions %r: expected parity, all or integers" % a.positions)
        if not positions or positions[0] < 0 or positions[-1] >= len(ids):
            raise RefError("--positions: every position must be in [0, %d)" % len(ids))
    header = {
        "schema": SCHEMA,
        "generator": "tests/reference/llama_ref.py (NumPy %s, float64%s)" % (np.__version__, ", GELU rounded to float16 as llama.cpp's" if a.gelu == "fp16" else ""),
        "model": {"path": a.model_name or a.model, "sha256": model_sha256(a.model),
                  "format": "hf" if os.path.isdir(a.model) else "gguf" if is_gguf(a.model) else "llama2c"},
        "config": c.as_json(),
        "vocab_size": c.vocab_size,
        "tokens": ids,
        "source": "%d given, %d the reference's greedy choices" % (given, len(ids) - given),
        "positions": positions,
        "rows": "float32 little-endian, one row of vocab_size logits per entry of positions, in that order",
    }
    write_logits_file(a.out, header, logits[positions])
    print("llama_ref: wrote %s: %d tokens, %d rows of %d logits (%s, %d layers%s)"
          % (a.out, len(ids), len(positions), c.vocab_size, header["model"]["format"], c.n_layers,
             ", %d experts top-%d" % (c.n_experts, c.top_k) if c.n_experts else ""))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except RefError as e:
        print("llama_ref: error: %s" % e, file=sys.stderr)
        sys.exit(1)
