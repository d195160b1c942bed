#!/usr/bin/python3
"""A GPT-2 in the idiom of the `transformers` library's GPT-2, exported as
people export it for generation, and the tokens PyTorch generates with it.

The model follows that library's code, not this project's other GPTs:
Conv1D layers (addmm with [in, out] weights), one c_attn projection split
into Q, K and V, a boolean lower-triangle `bias` buffer applied with
`where` and float's minimum, the 2-D `attention_mask` made 4-D and added as
(1 - mask) * float's minimum, `gelu_new`, learned positions, a tied head.
It is trained on periodic sequences (make_generation_fixtures.py's task) so
that greedy choices are decided by a wide margin, and exported at opset 17
with dynamic batch and sequence axes on input_ids, attention_mask and the
logits. The expected tokens rerun the whole model on the whole prefix at
every step, in float64, with the mask all ones.

Writes test/models/generation/hf_gpt2/{model.onnx, expected.txt}.

  /usr/bin/python3 test/models/make_hf_gpt2_fixture.py
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_generation_fixtures import (D, FF, H, LAYERS, MAXLEN, VOCAB,  # noqa: E402
                                      greedy, train)


class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
                                       (x + 0.044715 * torch.pow(x, 3.0))))


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones((MAXLEN, MAXLEN), dtype=torch.bool))
                             .view(1, 1, MAXLEN, MAXLEN), persistent=False)
        self.c_attn, self.c_proj = Conv1D(3 * D, D), Conv1D(D, D)

    def split_heads(self, t):
        return t.view(t.size()[:-1] + (H, D // H)).permute(0, 2, 1, 3)

    def forward(self, x, attention_mask):
        query, key, value = self.c_attn(x).split(D, dim=2)
        query, key, value = (self.split_heads(t) for t in (query, key, value))
        w = torch.matmul(query, key.transpose(-1, -2))
        w = w / torch.full([], value.size(-1) ** 0.5, dtype=w.dtype)
        q_len, k_len = query.size(-2), key.size(-2)
        causal = self.bias[:, :, k_len - q_len:k_len, :k_len]
        w = torch.where(causal, w, torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype))
        w = nn.functional.softmax(w + attention_mask, dim=-1)
        out = torch.matmul(w, value).permute(0, 2, 1, 3).contiguous()
        return self.c_proj(out.view(out.size()[:-2] + (D,)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = Attention()
        self.c_fc, self.c_proj = Conv1D(FF, D), Conv1D(D, FF)

    def forward(self, x, attention_mask):
        x = x + self.attn(self.ln_1(x), attention_mask)
        return x + self.c_proj(gelu_new(self.c_fc(self.ln_2(x))))


class GPT2(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, D), nn.Embedding(MAXLEN, D)
        self.h = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(D)

    def forward(self, input_ids, attention_mask=None):
        b, n = input_ids.shape
        if attention_mask is None:
            attention_mask = torch.ones(b, n, dtype=torch.long)
        position_ids = torch.arange(0, n, dtype=torch.long).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(position_ids)
        mask = attention_mask.view(b, -1)[:, None, None, :].to(x.dtype)
        mask = (1.0 - mask) * torch.finfo(x.dtype).min
        for block in self.h:
            x = block(x, mask)
        return self.ln_f(x) @ self.wte.weight.t()


def main():
    torch.manual_seed(13)
    model = GPT2()
    print("final training loss", train(model, steps=1500))
    model.eval()
    folder = os.path.join(HERE, "generation", "hf_gpt2")
    os.makedirs(folder, exist_ok=True)
    ids = torch.randint(0, VOCAB, (2, MAXLEN))
    torch.onnx.export(model, (ids, torch.ones(2, MAXLEN, dtype=torch.long)),
                      os.path.join(folder, "model.onnx"),
                      input_names=["input_ids", "attention_mask"], output_names=["logits"],
                      opset_version=17, do_constant_folding=True,
                      dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                    "attention_mask": {0: "batch", 1: "sequence"},
                                    "logits": {0: "batch", 1: "sequence"}})
    model = model.double()
    lines = ["# Made by make_hf_gpt2_fixture.py: tokens PyTorch generates by",
             "# rerunning the whole model on the whole prefix at every step,",
             "# attention_mask all ones.",
             f"# max_length {MAXLEN} vocab {VOCAB}"]

    def next_logits_of(prompt):
        def next_logits(tokens):
            with torch.no_grad():
                return model(torch.tensor([prompt + tokens]))[0, -1]
        return next_logits

    for p in [[5, 17, 3, 5, 17, 3], [42, 7, 30, 11, 42, 7, 30, 11, 42, 7]]:
        lines.append("greedy " + ",".join(map(str, p)) + " " +
                     ",".join(map(str, greedy(next_logits_of(p), MAXLEN - len(p), p))))
    with open(os.path.join(folder, "expected.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", folder)


if __name__ == "__main__":
    main()
