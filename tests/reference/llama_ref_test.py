#!/usr/bin/python3
"""Unit tests of the independent reference forward (llama_ref.py) against
hand-computed values: RoPE in both pair layouts, rope_scaling linear and
llama3, head_dim != hidden/heads, MoE routing, safetensors dtypes, refusals.
Ends with one summary line: "llama_ref_test: checks=N failures=F verdict=...".
"""

import json
import math
import os
import struct
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_ref as R  # noqa: E402


def write_safetensors(path, tensors, dtype="F32"):
    header, blobs, at = {}, [], 0
    for name, arr in tensors.items():
        a = np.asarray(arr, dtype=np.float32)
        if dtype == "F32":
            raw = a.astype("<f4").tobytes()
        elif dtype == "F16":
            raw = a.astype("<f2").tobytes()
        else:  # BF16: truncate (the test values are exact in bf16)
            raw = (a.view(np.uint32) >> 16).astype("<u2").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def tiny_hf(d, head_dim=None, n_experts=0, tied=False, extra=None, seed=0, dtype="F32"):
    """A small random HF directory; head_dim may differ from hidden/heads."""
    rng = np.random.default_rng(seed)
    D, F, V, H, KV = 24, 40, 50, 4, 2
    hd = head_dim or D // H
    cfg = {"model_type": "mixtral" if n_experts else "llama", "hidden_size": D, "intermediate_size": F,
           "num_hidden_layers": 2, "num_attention_heads": H, "num_key_value_heads": KV, "vocab_size": V,
           "max_position_embeddings": 32, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "tie_word_embeddings": tied, "hidden_act": "silu"}
    if head_dim:
        cfg["head_dim"] = head_dim
    if n_experts:
        cfg["num_local_experts"], cfg["num_experts_per_tok"] = n_experts, 2
    cfg.update(extra or {})

    def m(*shape):
        return rng.uniform(-1, 1, shape) * math.sqrt(3.0 / shape[-1])
    t = {"model.embed_tokens.weight": rng.uniform(-1, 1, (V, D)), "model.norm.weight": 1 + 0.1 * rng.uniform(-1, 1, D)}
    for l in range(2):
        p = "model.layers.%d." % l
        t[p + "input_layernorm.weight"] = 1 + 0.1 * rng.uniform(-1, 1, D)
        t[p + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.uniform(-1, 1, D)
        t[p + "self_attn.q_proj.weight"] = m(H * hd, D)
        t[p + "self_attn.k_proj.weight"] = m(KV * hd, D)
        t[p + "self_attn.v_proj.weight"] = m(KV * hd, D)
        t[p + "self_attn.o_proj.weight"] = m(D, H * hd)
        if n_experts:
            t[p + "block_sparse_moe.gate.weight"] = m(n_experts, D)
            for e in range(n_experts):
                q = p + "block_sparse_moe.experts.%d." % e
                t[q + "w1.weight"], t[q + "w3.weight"], t[q + "w2.weight"] = m(F, D), m(F, D), m(D, F)
        else:
            t[p + "mlp.gate_proj.weight"], t[p + "mlp.up_proj.weight"] = m(F, D), m(F, D)
            t[p + "mlp.down_proj.weight"] = m(D, F)
    if not tied:
        t["lm_head.weight"] = m(V, D)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    write_safetensors(os.path.join(d, "model.safetensors"), t, dtype)
    return cfg


def naive_logits(c, w, tokens):
    """A second, scalar-loop forward (no cache, no vectorized attention)."""
    inv = R.inverse_frequencies(c)
    hd, H, KV = c.head_dim, c.n_heads, c.n_kv_heads
    xs = [w["embed"][t].copy() for t in tokens]
    for L in w["layers"]:
        qs, ks, vs = [], [], []
        for p, x in enumerate(xs):
            h = x / math.sqrt(float(np.dot(x, x)) / len(x) + c.norm_eps) * L["attn_norm"]
            q, k, v = L["wq"] @ h, L["wk"] @ h, L["wv"] @ h
            for vec, n in ((q, H), (k, KV)):
                for head in range(n):
                    for i in range(hd // 2):
                        a, b = (head * hd + 2 * i, head * hd + 2 * i + 1) if c.interleaved else \
                               (head * hd + i, head * hd + i + hd // 2)
                        ang = p * inv[i]
                        va, vb = vec[a], vec[b]
                        vec[a], vec[b] = va * math.cos(ang) - vb * math.sin(ang), va * math.sin(ang) + vb * math.cos(ang)
            qs.append(q), ks.append(k), vs.append(v)
        for p in range(len(xs)):
            out = np.zeros(H * hd)
            for head in range(H):
                g = head // (H // KV)
                s = [float(np.dot(qs[p][head * hd:(head + 1) * hd], ks[j][g * hd:(g + 1) * hd])) / math.sqrt(hd)
                     for j in range(p + 1)]
                m = max(s)
                e = [math.exp(v - m) for v in s]
                for j in range(p + 1):
                    out[head * hd:(head + 1) * hd] += e[j] / sum(e) * vs[j][g * hd:(g + 1) * hd]
            xs[p] = xs[p] + L["wo"] @ out
        for p, x in enumerate(xs):
            h = x / math.sqrt(float(np.dot(x, x)) / len(x) + c.norm_eps) * L["ffn_norm"]
            if c.n_experts:
                r = L["router"] @ h
                order = sorted(range(len(r)), key=lambda e: (-r[e], e))[:c.top_k]
                z = sum(math.exp(r[e] - r[order[0]]) for e in order)
                for e in order:
                    E = L["experts"][e]
                    a = E["w1"] @ h
                    xs[p] = xs[p] + math.exp(r[e] - r[order[0]]) / z * (E["w2"] @ (a / (1 + np.exp(-a)) * (E["w3"] @ h)))
            else:
                a = L["w1"] @ h
                xs[p] = xs[p] + L["w2"] @ (a / (1 + np.exp(-a)) * (L["w3"] @ h))
    out = []
    for x in xs:
        h = x / math.sqrt(float(np.dot(x, x)) / len(x) + c.norm_eps) * w["norm"]
        out.append(w["lm_head"] @ h)
    return np.array(out)


class RopeTest(unittest.TestCase):
    def test_pairs_interleaved_and_halves(self):
        # head_dim 4, theta 100: inv_freq = [1, 0.1]; position 1 rotates pair 0 by 1 rad, pair 1 by 0.1 rad.
        c = R.Config()
        c.head_dim, c.rope_theta = 4, 100.0
        inv = R.inverse_frequencies(c)
        np.testing.assert_allclose(inv, [1.0, 0.1], rtol=1e-15)
        x = np.array([[[1.0, 2.0, 3.0, 4.0]]])
        inter = R.rope(x, [1], inv, True)[0, 0]
        c1, s1, c2, s2 = math.cos(1), math.sin(1), math.cos(0.1), math.sin(0.1)
        # pairs (0,1) and (2,3)
        np.testing.assert_allclose(inter, [1 * c1 - 2 * s1, 1 * s1 + 2 * c1, 3 * c2 - 4 * s2, 3 * s2 + 4 * c2], rtol=1e-14)
        halves = R.rope(x, [1], inv, False)[0, 0]
        # pairs (0,2) and (1,3)
        np.testing.assert_allclose(halves, [1 * c1 - 3 * s1, 2 * c2 - 4 * s2, 1 * s1 + 3 * c1, 2 * s2 + 4 * c2], rtol=1e-14)
        np.testing.assert_allclose(R.rope(x, [0], inv, True)[0, 0], x[0, 0])  # position 0: identity

    def test_linear_scaling_divides_every_frequency(self):
        c = R.Config()
        c.head_dim, c.rope_theta = 4, 100.0
        c.rope_scaling = R.rope_scaling_from({"rope_scaling": {"type": "linear", "factor": 4.0}}, "cfg")
        np.testing.assert_allclose(R.inverse_frequencies(c), [0.25, 0.025], rtol=1e-15)

    def test_llama3_scaling_by_wavelength_band(self):
        # head_dim 8, theta 10000: inv_freq 1, 0.1, 0.01, 0.001; wavelengths 2pi/f = 6.28, 62.8, 628, 6283.
        # original 64, low 1, high 4: keep below 64/4 = 16, divide by 8 above 64/1 = 64, blend between.
        c = R.Config()
        c.head_dim, c.rope_theta = 8, 10000.0
        c.rope_scaling = R.rope_scaling_from({"rope_scaling": {
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64}}, "cfg")
        # pair 1: smooth = (64 / 62.83185307179586 - 1) / 3 = 0.006197211929376734,
        # 0.1 * ((1 - smooth) / 8 + smooth) = 0.013042256043993...
        want = [1.0, 0.013042256044, 0.00125, 0.000125]
        np.testing.assert_allclose(R.inverse_frequencies(c), want, rtol=1e-10)

    def test_refused_scaling_types_and_keys_are_named(self):
        with self.assertRaisesRegex(R.RefError, "'yarn'"):
            R.rope_scaling_from({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "cfg")
        with self.assertRaisesRegex(R.RefError, "low_freq_factor"):
            R.rope_scaling_from({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, "cfg")
        base = {"model_type": "llama", "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
                "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 4, "max_position_embeddings": 4}
        for key, value in (("attention_bias", True), ("mlp_bias", True), ("hidden_act", "gelu"),
                           ("partial_rotary_factor", 0.5), ("sliding_window", 4096)):
            with self.assertRaisesRegex(R.RefError, "'%s'" % key):
                R.config_from_hf(dict(base, **{key: value}), "config.json")
        with self.assertRaisesRegex(R.RefError, "model_type 'gemma'"):
            R.config_from_hf(dict(base, model_type="gemma"), "config.json")
        with self.assertRaisesRegex(R.RefError, "'hidden_size'"):
            R.config_from_hf({k: v for k, v in base.items() if k != "hidden_size"}, "config.json")
        with self.assertRaisesRegex(R.RefError, "head_dim 3 is odd"):
            R.config_from_hf(dict(base, head_dim=3), "config.json")


class MoeTest(unittest.TestCase):
    def test_top_k_ties_go_to_the_lower_index(self):
        chosen, weight = R.route(np.array([1.0, 3.0, 3.0, 0.0, 3.0]), 2)
        self.assertEqual(list(chosen), [1, 2])
        np.testing.assert_allclose(weight, [0.5, 0.5])

    def test_weights_are_a_softmax_over_the_chosen_k(self):
        chosen, weight = R.route(np.array([0.0, math.log(3.0), -5.0]), 2)
        self.assertEqual(list(chosen), [1, 0])
        np.testing.assert_allclose(weight, [0.75, 0.25], rtol=1e-14)


class ForwardTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="llama_ref_test")
        self.tmp = self.dir.name

    def tearDown(self):
        self.dir.cleanup()

    def check_against_naive(self, d, tokens):
        c, w = R.load_model(d)
        got = R.Reference(c, w).forward(tokens)
        np.testing.assert_allclose(got, naive_logits(c, w, tokens), rtol=1e-9, atol=1e-9)
        return c, w, got

    def test_head_dim_other_than_hidden_over_heads(self):
        d = os.path.join(self.tmp, "hd")
        tiny_hf(d, head_dim=10)  # hidden 24 / 4 heads = 6; q_proj [40, 24], o_proj [24, 40]
        c, _, _ = self.check_against_naive(d, [1, 5, 9, 2, 7])
        self.assertEqual((c.head_dim, c.dim, c.n_heads), (10, 24, 4))

    def test_rope_scaling_and_theta_reach_the_forward(self):
        d = os.path.join(self.tmp, "l3")
        tiny_hf(d, head_dim=8, tied=True, extra={"rope_theta": 500000.0, "rope_scaling": {
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8}})
        c, w, got = self.check_against_naive(d, list(range(1, 20)))
        plain = R.Config()
        plain.__dict__.update(c.__dict__)
        plain.rope_scaling = None
        self.assertGreater(np.abs(R.Reference(plain, w).forward(list(range(1, 20))) - got).max(), 1e-6,
                           "rope_scaling changed nothing")

    def test_moe_and_bf16_f16(self):
        for dt in ("BF16", "F16"):
            d = os.path.join(self.tmp, "moe" + dt)
            tiny_hf(d, n_experts=4, dtype=dt)
            self.check_against_naive(d, [3, 1, 4, 1, 5, 9])

    def test_cached_steps_equal_one_pass(self):
        d = os.path.join(self.tmp, "cache")
        tiny_hf(d)
        c, w = R.load_model(d)
        tokens = [2, 7, 1, 8, 2, 8]
        whole = R.Reference(c, w).forward(tokens)
        ref = R.Reference(c, w)
        steps = np.concatenate([ref.forward(tokens[:2])] + [ref.forward([t]) for t in tokens[2:]])
        np.testing.assert_allclose(steps, whole, rtol=1e-12, atol=1e-12)

    def test_interleaved_pairs_equal_permuted_halves(self):
        # The same attention expressed in both layouts: q/k rows of each head permuted
        # (2i -> i, 2i+1 -> i + hd/2) must give the same logits.
        d = os.path.join(self.tmp, "perm")
        tiny_hf(d, head_dim=6)
        c, w = R.load_model(d)
        halves = R.Reference(c, w).forward([1, 2, 3, 4])
        hd = c.head_dim
        perm = [r for r in range(hd) if r % 2 == 0] + [r for r in range(hd) if r % 2 == 1]

        def unpermute(m):  # rows in halves order -> interleaved order
            out = np.empty_like(m)
            for h in range(m.shape[0] // hd):
                for j, r in enumerate(perm):
                    out[h * hd + r] = m[h * hd + j]
            return out
        for L in w["layers"]:
            L["wq"], L["wk"] = unpermute(L["wq"]), unpermute(L["wk"])
        c.interleaved = True
        np.testing.assert_allclose(R.Reference(c, w).forward([1, 2, 3, 4]), halves, rtol=1e-10, atol=1e-12)

    def test_bad_files_are_named(self):
        d = os.path.join(self.tmp, "bad")
        tiny_hf(d)
        with open(os.path.join(d, "model.safetensors"), "r+b") as f:
            f.truncate(200)
        with self.assertRaisesRegex(R.RefError, "header length|data_offsets"):
            R.load_model(d)
        p = os.path.join(self.tmp, "short.bin")
        with open(p, "wb") as f:
            f.write(struct.pack("<7i", 8, 8, 1, 2, 2, 4, 4))
        with self.assertRaisesRegex(R.RefError, "short.bin: 28 bytes, but the header implies"):
            R.load_model(p)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=1).result
    bad = len(result.failures) + len(result.errors)
    print("llama_ref_test: checks=%d failures=%d verdict=%s" % (result.testsRun, bad, "PASS" if bad == 0 else "FAIL"))
    sys.exit(0 if bad == 0 and result.testsRun > 0 else 1)
