#!/usr/bin/python3
"""Attention long enough for the CPU's ATTENTION kernel to walk several
blocks of queries and of keys (64 to 256 queries, 512 keys a block), with
ragged last blocks, against PyTorch's outputs:

  causal   self-attention over 600 positions with a causal triangle (a
           boolean buffer and masked_fill, as GPT exports do), which the
           compiler recognizes: the kernel skips the keys after each
           query's block; 2 heads of 16
  masked   the same with the triangle and an additive padding mask input
           (0 or -10000 per key) added into one [B, 1, S, S] mask first,
           as Hugging Face's models do: a mask row per query
  cross    cross-attention: 300 queries over 700 keys and values from a
           second input, a boolean key mask input (masked_fill with -inf),
           4 heads of 8, no causal mask
  grouped  grouped-query attention as `transformers` writes it: 8 query
           heads of 8 and 2 key and value heads, each repeated 4 times by
           expand + reshape, with masked's triangle and padding mask

Writes test/models/attention/<model>/{model.onnx, test_data_set_0/}.

  /usr/bin/python3 test/models/make_attention_fixtures.py
"""
import math
import os
import shutil
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_models  # noqa: E402

OUT = os.path.join(HERE, "attention")


class Attention(nn.Module):
    def __init__(self, d, heads, causal_length=0):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        if causal_length:
            tri = torch.ones(causal_length, causal_length, dtype=torch.bool).tril()
            self.register_buffer("causal", tri)
        else:
            self.causal = None

    def split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.dh).transpose(1, 2)

    def forward(self, x, memory, mask):
        q, k, v = self.split(self.q(x)), self.split(self.k(memory)), self.split(self.v(memory))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.dh)
        if mask is None:
            scores = scores.masked_fill(~self.causal, float("-inf"))
        elif mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        else:
            triangle = torch.zeros(self.causal.shape).masked_fill(~self.causal, float("-inf"))
            scores = scores + (triangle + mask[:, None, None, :])
        out = torch.softmax(scores, dim=-1) @ v
        b, _, s, _ = out.shape
        return self.o(out.transpose(1, 2).reshape(b, s, -1))


class SelfAttention(nn.Module):
    def __init__(self, d, heads, length):
        super().__init__()
        self.attention = Attention(d, heads, length)

    def forward(self, x, mask=None):
        return self.attention(x, x, mask)


class GroupedAttention(nn.Module):
    def __init__(self, d, heads, kv_heads, length):
        super().__init__()
        self.heads, self.kv_heads, self.dh = heads, kv_heads, d // heads
        self.q, self.o = nn.Linear(d, d), nn.Linear(d, d)
        self.k = nn.Linear(d, kv_heads * self.dh)
        self.v = nn.Linear(d, kv_heads * self.dh)
        tri = torch.ones(length, length, dtype=torch.bool).tril()
        self.register_buffer("causal", tri)

    def split(self, x, heads):
        b, s, _ = x.shape
        return x.view(b, s, heads, self.dh).transpose(1, 2)

    def repeat(self, x):
        # transformers' repeat_kv
        b, h, s, dh = x.shape
        groups = self.heads // self.kv_heads
        return x[:, :, None, :, :].expand(b, h, groups, s, dh).reshape(b, h * groups, s, dh)

    def forward(self, x, mask):
        q = self.split(self.q(x), self.heads)
        k = self.repeat(self.split(self.k(x), self.kv_heads))
        v = self.repeat(self.split(self.v(x), self.kv_heads))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.dh)
        triangle = torch.zeros(self.causal.shape).masked_fill(~self.causal, float("-inf"))
        scores = scores + (triangle + mask[:, None, None, :])
        out = torch.softmax(scores, dim=-1) @ v
        b, _, s, _ = out.shape
        return self.o(out.transpose(1, 2).reshape(b, s, -1))


def export(name, model, inputs, names):
    folder = os.path.join(OUT, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    model.eval()
    torch.onnx.export(model, inputs, os.path.join(folder, "model.onnx"),
                      input_names=names, output_names=["output"], opset_version=17)
    with torch.no_grad():
        expected = model(*inputs)
    make_models.write_case(folder, list(inputs), [expected])


def main():
    torch.manual_seed(0)
    s = 600
    padding = torch.zeros(2, s)
    padding[1, 450:] = -10000.0  # the second sequence is 450 long
    export("causal", SelfAttention(32, 2, s), (torch.randn(2, s, 32),), ["x"])
    export("masked", SelfAttention(32, 2, s), (torch.randn(2, s, 32), padding),
           ["x", "padding"])

    keep = torch.ones(2, 700, dtype=torch.bool)
    keep[0, 520:] = False  # the first source is 520 long
    export("cross", Attention(32, 4), (torch.randn(2, 300, 32), torch.randn(2, 700, 32), keep),
           ["x", "memory", "keep"])
    export("grouped", GroupedAttention(64, 8, 2, s), (torch.randn(2, s, 64), padding),
           ["x", "padding"])
    print("exported", sorted(os.listdir(OUT)))


if __name__ == "__main__":
    main()
