#!/usr/bin/python3
"""Exports the two training examples' models as ONNX, with PyTorch's random
initial weights (the examples train them from scratch):

  seq2seq.onnx  the encoder-decoder Transformer of "Attention Is All You
                Need" in a small configuration (2+2 layers, d_model 64,
                4 heads, d_ff 256, post-LN), with sinusoidal positions and
                one embedding matrix shared by the source, the target and
                the pre-softmax projection, as in the paper. Inputs: src,
                tgt [64, 8] token ids; output: logits [64, 8, 11].
  gpt.onnx      a decoder-only model over the characters of corpus.txt
                (2 pre-LN layers, d_model 128, 4 heads, d_ff 512, learned
                positions, tied head). Input: ids [32, 64]; output: logits.

The files are bundled, so running the examples needs no PyTorch; run this
to regenerate them. Usage: make_models.py [DIR] (default: this folder)."""
import math
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))

# The sequence task: digits 0-9 and a begin-of-sequence token.
SEQ_VOCAB, SEQ_LEN, SEQ_BATCH = 11, 8, 64
GPT_LEN, GPT_BATCH = 64, 32


def vocabulary(text):
    return sorted(set(text))


class PaperTransformer(nn.Module):
    def __init__(self, vocab, d=64, heads=4, ff=256, layers=2, length=SEQ_LEN):
        super().__init__()
        self.d = d
        self.embed = nn.Embedding(vocab, d)
        nn.init.normal_(self.embed.weight, std=d ** -0.5)
        self.core = nn.Transformer(d, heads, layers, layers, ff, dropout=0.0,
                                   batch_first=True)
        pos = torch.arange(length).unsqueeze(1)
        div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe = torch.zeros(length, d)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)
        self.register_buffer("causal", torch.triu(torch.ones(length, length,
                                                             dtype=torch.bool), 1))

    def embed_tokens(self, ids):
        return self.embed(ids) * math.sqrt(self.d) + self.pe

    def forward(self, src, tgt):
        y = self.core(self.embed_tokens(src), self.embed_tokens(tgt),
                      tgt_mask=self.causal)
        return y @ self.embed.weight.t()


class GPT(nn.Module):
    def __init__(self, vocab, d=128, heads=4, ff=512, layers=2, length=GPT_LEN):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.pos = nn.Parameter(torch.randn(length, d) * 0.02)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True)
            for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.register_buffer("causal", torch.triu(torch.ones(length, length,
                                                             dtype=torch.bool), 1))

    def forward(self, ids):
        x = self.embed(ids) + self.pos
        for block in self.blocks:
            x = block(x, src_mask=self.causal)
        return self.norm(x) @ self.embed.weight.t()


def export(model, inputs, names, path):
    # No constant folding: it would turn the tied head's transpose into a
    # second copy of the embedding matrix, which would then train apart.
    torch.onnx.export(model, inputs, path, input_names=names, output_names=["logits"],
                      opset_version=17, do_constant_folding=False)
    print(f"wrote {path}")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else HERE
    torch.manual_seed(0)
    ids = torch.zeros(SEQ_BATCH, SEQ_LEN, dtype=torch.long)
    export(PaperTransformer(SEQ_VOCAB).eval(), (ids, ids), ["src", "tgt"],
           os.path.join(out, "seq2seq.onnx"))
    with open(os.path.join(HERE, "corpus.txt"), encoding="utf-8") as f:
        vocab = vocabulary(f.read())
    ids = torch.zeros(GPT_BATCH, GPT_LEN, dtype=torch.long)
    export(GPT(len(vocab)).eval(), (ids,), ["ids"], os.path.join(out, "gpt.onnx"))


if __name__ == "__main__":
    main()
