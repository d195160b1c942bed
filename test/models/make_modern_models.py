#!/usr/bin/python3
"""Exports the decoders that descend from the paper through Llama, written the
way their reference implementations write them, at opsets 13 and 17, with one
test case each (test_data_set_0, outputs computed by PyTorch), in the layout
of make_models.py.

  llama   pre-norm decoder: RMSNorm (pow, mean, rsqrt, mul, then the weight),
          rotary embeddings on Q and K by rotate_half (slice, neg, concat),
          grouped-query attention (4 query heads, 2 K/V heads, repeated by
          expand + reshape), an additive causal mask of the float minimum
          built from Range and a comparison, the gated MLP
          down(silu(gate(x)) * up(x)), no biases, an untied head
  neox    parallel attention and MLP (x + attn(ln1(x)) + mlp(ln2(x))), one
          packed QKV projection with bias, interleaved rotary embeddings on
          part of each head (rotate_every_two: strided slices, stack,
          flatten), LayerNorm, GELU

Run with Debian's python:  /usr/bin/python3 test/models/make_modern_models.py
"""
import math
import os
import shutil

import torch
import torch.nn as nn
import torch.nn.functional as F

from make_models import write_case

HERE = os.path.dirname(os.path.abspath(__file__))
D, HQ, HKV, FF, VOCAB, B, S = 32, 4, 2, 48, 50, 2, 8
HD = D // HQ
torch.manual_seed(0)


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(d))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotary_tables(positions, dim, base=10000.0):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def repeat_kv(x, n_rep):
    b, h, n, d = x.shape
    x = x[:, :, None, :, :].expand(b, h, n_rep, n, d)
    return x.reshape(b, h * n_rep, n, d)


def causal_mask(n, dtype):
    mask = torch.full((n, n), torch.finfo(dtype).min, dtype=dtype)
    cond = torch.arange(n)
    mask = mask.masked_fill(cond < (cond + 1).view(n, 1), 0)
    return mask[None, None, :, :]


class LlamaAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(D, HQ * HD, bias=False)
        self.k_proj = nn.Linear(D, HKV * HD, bias=False)
        self.v_proj = nn.Linear(D, HKV * HD, bias=False)
        self.o_proj = nn.Linear(HQ * HD, D, bias=False)

    def forward(self, x, cos, sin, mask):
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, HQ, HD).transpose(1, 2)
        k = self.k_proj(x).view(b, n, HKV, HD).transpose(1, 2)
        v = self.v_proj(x).view(b, n, HKV, HD).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, HQ // HKV), repeat_kv(v, HQ // HKV)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(HD) + mask
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, n, HQ * HD)
        return self.o_proj(out)


class LlamaMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(D, FF, bias=False)
        self.up_proj = nn.Linear(D, FF, bias=False)
        self.down_proj = nn.Linear(FF, D, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(D), RMSNorm(D)
        self.self_attn, self.mlp = LlamaAttention(), LlamaMLP()

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, D)
        self.layers = nn.ModuleList([LlamaLayer(), LlamaLayer()])
        self.norm = RMSNorm(D)
        self.lm_head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, ids):
        n = ids.shape[1]
        x = self.embed_tokens(ids)
        cos, sin = rotary_tables(torch.arange(n).unsqueeze(0), HD)
        mask = causal_mask(n, x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.lm_head(self.norm(x))


def rotate_every_two(x):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


class NeoXLayer(nn.Module):
    ROTARY = HD // 2

    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.dense = nn.Linear(D, D)
        self.fc_in, self.fc_out = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def rotate(self, t, sin, cos):
        r, rest = t[..., : self.ROTARY], t[..., self.ROTARY:]
        return torch.cat((r * cos + rotate_every_two(r) * sin, rest), dim=-1)

    def attention(self, x, sin, cos):
        b, n, _ = x.shape
        qkv = self.qkv(x).view(b, n, HQ, 3 * HD).permute(0, 2, 1, 3)
        q, k, v = qkv[..., :HD], qkv[..., HD:2 * HD], qkv[..., 2 * HD:]
        q, k = self.rotate(q, sin, cos), self.rotate(k, sin, cos)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HD)
        i = torch.arange(n)
        scores = scores.masked_fill(i[None, :] > i[:, None], float("-inf"))
        out = torch.matmul(F.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).reshape(b, n, D)
        return self.dense(out)

    def forward(self, x, sin, cos):
        mlp = self.fc_out(F.gelu(self.fc_in(self.ln2(x))))
        return x + self.attention(self.ln1(x), sin, cos) + mlp


class NeoX(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_in = nn.Embedding(VOCAB, D)
        self.layers = nn.ModuleList([NeoXLayer(), NeoXLayer()])
        self.final_layer_norm = nn.LayerNorm(D)
        self.embed_out = nn.Linear(D, VOCAB, bias=False)

    def forward(self, ids):
        n = ids.shape[1]
        x = self.embed_in(ids)
        # Interleaved tables: each frequency twice, side by side.
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, NeoXLayer.ROTARY, 2).float() / NeoXLayer.ROTARY))
        freqs = torch.arange(n).float()[:, None] * inv_freq
        sin = torch.stack((freqs.sin(), freqs.sin()), dim=-1).flatten(-2)[None, None]
        cos = torch.stack((freqs.cos(), freqs.cos()), dim=-1).flatten(-2)[None, None]
        for layer in self.layers:
            x = layer(x, sin, cos)
        return self.embed_out(self.final_layer_norm(x))


def export(name, model, inputs, opsets):
    model.eval()
    with torch.no_grad():
        expected = model(*inputs)
    for opset in opsets:
        folder = os.path.join(HERE, f"{name}_opset{opset}")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        torch.onnx.export(model, tuple(inputs), os.path.join(folder, "model.onnx"),
                          input_names=["input_ids"], output_names=["logits"],
                          opset_version=opset, do_constant_folding=True)
        write_case(folder, inputs, [expected])


def main():
    ids = torch.randint(0, VOCAB, (B, S))
    export("llama", Llama(), [ids], (13, 17))
    export("neox", NeoX(), [ids], (13, 17))


if __name__ == "__main__":
    main()
