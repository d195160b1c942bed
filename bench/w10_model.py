"""W10 of PERFORMANCE.md: a Llama-style decoder of about 110 M parameters
(12 layers, d768, 12 query heads, 4 K/V heads, SwiGLU 2048, vocabulary
32000; RMSNorm, rotary embeddings, no biases, an untied head), written the
way Llama's reference code writes it, built from one seed so that every
peer has the same weights.

  Llama.forward(ids)                      logits of every position, no cache:
                                          what tfm compiles (--generate)
  Llama.forward_past(ids, past_k, past_v) the same with the keys and values
                                          of the earlier positions as inputs
                                          ([layers, B, KV, P, d/H], the K/V
                                          heads only) and the extended ones
                                          as outputs: the past_key_values
                                          export ONNX Runtime needs, and
                                          PyTorch's own cached loop
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

LAYERS, D, H, KV, FF, VOCAB = 12, 768, 12, 4, 2048, 32000
HD = D // H
PROMPT, NEW = 32, 128
MAXLEN = PROMPT + NEW
EPS = 1e-6


class RMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(D))

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + EPS))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotary(positions):
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, HD, 2, device=positions.device).float()
                                  / HD))
    freqs = positions[:, None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos()[None, None], emb.sin()[None, None]


def repeat_kv(x):
    b, h, n, d = x.shape
    return x[:, :, None].expand(b, h, H // KV, n, d).reshape(b, H, n, d)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(), RMSNorm()
        self.q_proj = nn.Linear(D, H * HD, bias=False)
        self.k_proj = nn.Linear(D, KV * HD, bias=False)
        self.v_proj = nn.Linear(D, KV * HD, bias=False)
        self.o_proj = nn.Linear(H * HD, D, bias=False)
        self.gate_proj = nn.Linear(D, FF, bias=False)
        self.up_proj = nn.Linear(D, FF, bias=False)
        self.down_proj = nn.Linear(FF, D, bias=False)

    def forward(self, x, cos, sin, past_k=None, past_v=None):
        b, n, _ = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(b, n, H, HD).transpose(1, 2)
        k = self.k_proj(h).view(b, n, KV, HD).transpose(1, 2)
        v = self.v_proj(h).view(b, n, KV, HD).transpose(1, 2)
        cos, sin = cos.to(q.dtype), sin.to(q.dtype)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if past_k is not None:
            k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        total = k.shape[2]
        i = torch.arange(total - n, total, device=x.device)[:, None]
        j = torch.arange(total, device=x.device)[None, :]
        scores = (q @ repeat_kv(k).transpose(2, 3)) / math.sqrt(HD)
        scores = scores.masked_fill(j > i, float("-inf"))
        y = (F.softmax(scores, dim=-1) @ repeat_kv(v)).transpose(1, 2).reshape(b, n, D)
        x = x + self.o_proj(y)
        h = self.post_attention_layernorm(x)
        x = x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))
        return x, k, v


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed_tokens = nn.Embedding(VOCAB, D)
        self.layers = nn.ModuleList([Layer() for _ in range(LAYERS)])
        self.norm = RMSNorm()
        self.lm_head = nn.Linear(D, VOCAB, bias=False)
        with torch.no_grad():
            for p in self.parameters():
                if p.dim() == 2:
                    p.normal_(0.0, 0.02)
        self.eval()

    def forward(self, ids):
        x = self.embed_tokens(ids)
        cos, sin = rotary(torch.arange(ids.shape[1], device=ids.device))
        for layer in self.layers:
            x = layer(x, cos, sin)[0]
        return self.lm_head(self.norm(x))

    def forward_past(self, ids, past_k, past_v):
        p = past_k.shape[3]
        x = self.embed_tokens(ids)
        cos, sin = rotary(torch.arange(p, p + ids.shape[1], device=ids.device))
        ks, vs = [], []
        for i, layer in enumerate(self.layers):
            x, k, v = layer(x, cos, sin, past_k[i], past_v[i])
            ks.append(k)
            vs.append(v)
        return self.lm_head(self.norm(x)), torch.stack(ks), torch.stack(vs)


def build():
    return Llama()


def empty_past(batch=1, device=None, dtype=None):
    return tuple(torch.zeros(LAYERS, batch, KV, 0, HD, device=device, dtype=dtype)
                 for _ in range(2))


def prompt_ids():
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, VOCAB, (1, PROMPT), generator=g)


def weight_bytes_per_token():
    """The bytes of weights a decoding step must read: every layer's
    projections and norms, the final norm and the untied head; the token
    embedding reads one row."""
    per_layer = D * (H * HD) + 2 * D * (KV * HD) + (H * HD) * D + 3 * D * FF + 2 * D
    return 4 * (LAYERS * per_layer + D + VOCAB * D + D)


def kv_bytes_per_token():
    """The bytes of the KV cache a token must read, on average over the
    bench's generation: the step at position p attends to the keys and
    values of positions 0..p (f32), and the NEW tokens take NEW - 1 steps,
    at positions PROMPT..MAXLEN - 2 (the first comes from the prompt)."""
    positions = sum(p + 1 for p in range(PROMPT, MAXLEN - 1))
    return 4 * LAYERS * 2 * KV * HD * positions / NEW


DESCRIPTION = (f"Llama-style decoder {LAYERS} layers d{D}, {H} query heads, {KV} K/V "
               f"heads, SwiGLU {FF}, vocabulary {VOCAB}")
