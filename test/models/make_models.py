#!/usr/bin/python3
"""Exports the model families the ONNX importer must handle, with PyTorch, at
opsets 11, 13 and 17 (11 reaches the importer through the ONNX version
converter), plus one test case for each (ONNX backend-test layout:
test_data_set_0/input_N.pb, output_N.pb, outputs computed by PyTorch).

  encoder_layer   nn.TransformerEncoderLayer (post-LN, batch_first)
  decoder_layer   nn.TransformerDecoderLayer with a causal target mask input
  transformer     nn.Transformer, encoder-decoder, causal target mask in-graph
  gpt             GPT-style decoder: separate Q/K/V Linear layers, a causal
                  mask sliced from a lower-triangle buffer inside the graph,
                  GELU (tanh), pre-LN, tied LM head
  bert            BERT-style encoder with an attention_mask input, exported
                  with dynamic batch and sequence axes (needs --shape)
  packed_mha      self-attention with one packed in-projection split the way
                  newer nn.MultiheadAttention does it: view, unsqueeze,
                  transpose, squeeze, then Gather of parts 0, 1 and 2

Run with Debian's python:  /usr/bin/python3 test/models/make_models.py
"""
import math
import os
import shutil

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
D, H, FF, B, S, VOCAB = 32, 4, 64, 2, 8, 50
torch.manual_seed(0)


class DecoderLayerWithMask(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(D, H, FF, dropout=0.1, batch_first=True)

    def forward(self, tgt, memory, tgt_mask):
        return self.layer(tgt, memory, tgt_mask=tgt_mask)


class Seq2Seq(nn.Module):
    """nn.Transformer with the causal mask made inside the graph."""

    def __init__(self):
        super().__init__()
        self.t = nn.Transformer(D, H, 2, 2, FF, dropout=0.1, batch_first=True)

    def forward(self, src, tgt):
        # Built from Range and a comparison, which opset 13 can express.
        i = torch.arange(tgt.shape[1])
        mask = torch.zeros(tgt.shape[1], tgt.shape[1]).masked_fill(
            i[None, :] > i[:, None], float("-inf"))
        return self.t(src, tgt, tgt_mask=mask)


class GPTBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.q, self.k, self.v = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
        self.proj = nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, FF), nn.Linear(FF, D)
        # The lower triangle as a buffer, sliced to the sequence length.
        self.register_buffer("causal", torch.tril(torch.ones(S, S)).view(1, 1, S, S))

    def forward(self, x):
        b, n, _ = x.shape
        h = self.ln1(x)
        q, k, v = (t(h).view(b, n, H, D // H).transpose(1, 2) for t in (self.q, self.k, self.v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D // H)
        att = att.masked_fill(self.causal[:, :, :n, :n] == 0, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, n, D)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, D), nn.Embedding(S, D)
        self.blocks = nn.ModuleList([GPTBlock(), GPTBlock()])
        self.ln = nn.LayerNorm(D)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.tok(ids) + self.pos(positions)
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.tok.weight.t()  # tied LM head


class Bert(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, D), nn.Embedding(S, D)
        self.ln = nn.LayerNorm(D, eps=1e-12)
        self.layers = nn.ModuleList([BertLayer(), BertLayer()])

    def forward(self, input_ids, attention_mask):
        positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
        x = self.ln(self.tok(input_ids) + self.pos(positions))
        # The Hugging Face form: (1 - mask) * a large negative, broadcast.
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return x


class BertLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
        self.o, self.ln1 = nn.Linear(D, D), nn.LayerNorm(D, eps=1e-12)
        self.fc1, self.fc2, self.ln2 = nn.Linear(D, FF), nn.Linear(FF, D), nn.LayerNorm(D, eps=1e-12)

    def forward(self, x, bias):
        b, n, _ = x.shape
        q, k, v = (t(x).view(b, n, H, D // H).permute(0, 2, 1, 3) for t in (self.q, self.k, self.v))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D // H) + bias
        ctx = torch.matmul(F.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).reshape(b, n, D)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


class PackedMHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.in_proj, self.out_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)

    def forward(self, x):
        b, n, _ = x.shape
        qkv = self.in_proj(x).view(b, n, 3, D).unsqueeze(0).transpose(0, -2).squeeze(-2)
        q, k, v = (t.reshape(b, n, H, D // H).transpose(1, 2) for t in (qkv[0], qkv[1], qkv[2]))
        att = torch.softmax(q @ k.transpose(-2, -1) * (1.0 / math.sqrt(D // H)), dim=-1)
        return self.out_proj((att @ v).transpose(1, 2).reshape(b, n, D))


def write_case(folder, inputs, outputs):
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data)
    for i, x in enumerate(inputs):
        with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x.numpy(), f"input_{i}").SerializeToString())
    for i, y in enumerate(outputs):
        with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y.detach().numpy(), f"output_{i}").SerializeToString())


def export(name, model, inputs, input_names, dynamic_axes=None):
    model.eval()
    with torch.no_grad():
        expected = model(*inputs)
    for opset in (11, 13, 17):
        folder = os.path.join(HERE, f"{name}_opset{opset}")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        torch.onnx.export(model, tuple(inputs), os.path.join(folder, "model.onnx"),
                          input_names=input_names, output_names=["output"],
                          opset_version=opset, dynamic_axes=dynamic_axes,
                          do_constant_folding=True)
        write_case(folder, inputs, [expected])


def main():
    x = torch.randn(B, S, D)
    memory = torch.randn(B, S + 2, D)
    causal = nn.Transformer.generate_square_subsequent_mask(S)
    export("encoder_layer", nn.TransformerEncoderLayer(D, H, FF, dropout=0.1, batch_first=True),
           [x], ["src"])
    export("decoder_layer", DecoderLayerWithMask(), [x, memory, causal], ["tgt", "memory", "tgt_mask"])
    export("transformer", Seq2Seq(), [memory, x], ["src", "tgt"])
    ids = torch.randint(0, VOCAB, (B, S))
    export("gpt", GPT(), [ids], ["input_ids"])
    mask = torch.ones(B, S, dtype=torch.int64)
    mask[1, 5:] = 0
    export("bert", Bert(), [ids, mask], ["input_ids", "attention_mask"],
           dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                         "attention_mask": {0: "batch", 1: "sequence"}})
    export("packed_mha", PackedMHA(), [x], ["x"])
    print("exported", sorted(d for d in os.listdir(HERE) if os.path.isdir(os.path.join(HERE, d))))


if __name__ == "__main__":
    main()
