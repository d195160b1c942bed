"""W7 of PERFORMANCE.md: a GPT-style decoder (12 layers, d768, h12, ff3072,
vocabulary 32000; GPT-2's layout: pre-LN, one packed QKV projection, tanh
GELU, learned positions, a tied LM head), built from one seed so that every
peer has the same weights.

  GPT.forward(ids)                      logits of every position, no cache:
                                        what tfm compiles (--generate)
  GPT.forward_past(ids, past_k, past_v) the same with the keys and values of
                                        the earlier positions as inputs
                                        ([layers, B, H, P, d/H]) and the
                                        extended ones as outputs: the
                                        past_key_values export ONNX Runtime
                                        needs, and PyTorch's own cached loop
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

LAYERS, D, H, FF, VOCAB = 12, 768, 12, 3072, 32000
PROMPT, NEW = 32, 128
MAXLEN = PROMPT + NEW


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, FF), nn.Linear(FF, D)
        self.register_buffer("causal", torch.tril(torch.ones(MAXLEN, MAXLEN, dtype=torch.bool)))

    def heads(self, t):
        b, n, _ = t.shape
        return t.view(b, n, H, D // H).transpose(1, 2)

    def attend(self, x, q, k, v, mask):
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D // H)
        att = att.masked_fill(~mask, float("-inf"))
        b, n, _ = x.shape
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, n, D)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    def forward(self, x):
        n = x.shape[1]
        q, k, v = (self.heads(t) for t in self.qkv(self.ln1(x)).split(D, dim=-1))
        return self.attend(x, q, k, v, self.causal[:n, :n])

    def forward_past(self, x, past_k, past_v):
        p, n = past_k.shape[2], x.shape[1]
        q, k, v = (self.heads(t) for t in self.qkv(self.ln1(x)).split(D, dim=-1))
        k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        return self.attend(x, q, k, v, self.causal[p:p + n, :p + n]), k, v


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.tok, self.pos = nn.Embedding(VOCAB, D), nn.Embedding(MAXLEN, D)
        self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln = nn.LayerNorm(D)
        self.eval()

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device).unsqueeze(0))
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.tok.weight.t()

    def forward_past(self, ids, past_k, past_v):
        p = past_k.shape[3]
        x = self.tok(ids) + self.pos(torch.arange(p, p + ids.shape[1],
                                                  device=ids.device).unsqueeze(0))
        ks, vs = [], []
        for i, blk in enumerate(self.blocks):
            x, k, v = blk.forward_past(x, past_k[i], past_v[i])
            ks.append(k)
            vs.append(v)
        return self.ln(x) @ self.tok.weight.t(), torch.stack(ks), torch.stack(vs)


def build():
    return GPT()


def empty_past(batch=1, device=None, dtype=None):
    return tuple(torch.zeros(LAYERS, batch, H, 0, D // H, device=device, dtype=dtype)
                 for _ in range(2))


def prompt_ids():
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, VOCAB, (1, PROMPT), generator=g)


def weight_bytes_per_token():
    """The bytes of weights a decoding step must read: every layer's
    matrices and vectors, the final norm, and the tied LM head (the whole
    token table); the token and position embeddings read one row each."""
    per_layer = 4 * D * D + 2 * D * FF + 3 * D + D + FF + D + 4 * D
    return 4 * (LAYERS * per_layer + VOCAB * D + 2 * D + 2 * D)


def kv_bytes_per_token():
    """The bytes of the KV cache a token must read, on average over the
    bench's generation: the step at position p attends to the keys and
    values of positions 0..p (f32), and the NEW tokens take NEW - 1 steps,
    at positions PROMPT..MAXLEN - 2 (the first comes from the prompt)."""
    positions = sum(p + 1 for p in range(PROMPT, MAXLEN - 1))
    return 4 * LAYERS * 2 * D * positions / NEW


DESCRIPTION = f"GPT decoder {LAYERS} layers d{D} h{H} ff{FF}, vocabulary {VOCAB}"
