#!/usr/bin/python3
"""Exports the benchmark workloads of PERFORMANCE.md as ONNX (opset 17):
W1-W3 and W8 (S 1024 and 4096) PyTorch TransformerEncoderLayer (post-LN, ReLU) and W4 nn.Transformer
(6+6 layers, causal target mask as an input). W5 trains W4: its batch
(src, tgt, mask and a label per target position) goes to DIR/w5-data in
the layout `tfmc train --data` reads. W7 and W10 are the decoders of
w7_model.py and w10_model.py, each exported twice: plain (w7.onnx, token
ids to logits, dynamic batch and sequence), which tfm compiles with
--generate, and with past_key_values (w7-past.onnx), which ONNX Runtime
needs. w1-dyn.onnx is W1's layer with a
dynamic sequence, for the lengths table. Usage: export_workloads.py DIR"""
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn

import w7_model
import w10_model

W4 = (512, 8, 2048, 6, 8, 64)  # d_model, heads, d_ff, layers, batch, sequence

ENCODERS = {  # name: d_model, heads, d_ff, batch, sequence
    "w1": (768, 12, 3072, 1, 128),
    "w2": (768, 12, 3072, 8, 128),
    "w3": (256, 4, 1024, 1, 32),
    "w8-1k": (768, 12, 3072, 1, 1024),  # W8: long sequences
    "w8-4k": (768, 12, 3072, 1, 4096),
}


class Seq2Seq(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, src, tgt, mask):
        return self.model(src, tgt, tgt_mask=mask)


def export_decoder(out, module):
    """A decoder of W7 or W10 twice: plain (NAME.onnx) and with
    past_key_values (NAME-past.onnx)."""
    name = module.__name__.split("_")[0]
    model = None
    for file, past in ((name, False), (f"{name}-past", True)):
        path = os.path.join(out, f"{file}.onnx")
        if os.path.exists(path):
            continue
        model = model or module.build()
        ids = module.prompt_ids()
        if past:
            class WithPast(nn.Module):
                def __init__(self, decoder):
                    super().__init__()
                    self.decoder = decoder

                def forward(self, ids, past_k, past_v):
                    return self.decoder.forward_past(ids, past_k, past_v)

            k, v = module.empty_past()
            seq = {3: "past"}
            torch.onnx.export(WithPast(model), (ids, k, v), path,
                              input_names=["input_ids", "past_k", "past_v"],
                              output_names=["logits", "present_k", "present_v"],
                              dynamic_axes={"input_ids": {1: "sequence"}, "past_k": seq,
                                            "past_v": seq, "logits": {1: "sequence"},
                                            "present_k": {3: "total"},
                                            "present_v": {3: "total"}},
                              opset_version=17)
        else:
            torch.onnx.export(model, (ids,), path, input_names=["input_ids"],
                              output_names=["logits"],
                              dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                            "logits": {0: "batch", 1: "sequence"}},
                              opset_version=17)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    for name, (d, h, ff, b, s) in ENCODERS.items():
        path = os.path.join(out, f"{name}.onnx")
        if os.path.exists(path):
            continue
        layer = nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, batch_first=True).eval()
        torch.onnx.export(layer, (torch.randn(b, s, d),), path, input_names=["x"],
                          output_names=["y"], opset_version=17)
    # W9: a BERT-large-sized encoder (24 layers d1024 h16 ff4096, 1.2 GB of
    # f32 weights). nn.TransformerEncoder clones one layer, whose copies the
    # exporter would store once, so every layer is drawn anew.
    path = os.path.join(out, "w9.onnx")
    if not os.path.exists(path):
        layer = nn.TransformerEncoderLayer(1024, 16, 4096, dropout=0.0, batch_first=True)
        enc = nn.TransformerEncoder(layer, 24, enable_nested_tensor=False).eval()
        with torch.no_grad():
            for p in enc.parameters():
                if p.dim() > 1:  # the matrices; norms and biases may repeat
                    p.normal_(0, 0.02)
        torch.onnx.export(enc, (torch.randn(1, 128, 1024),), path, input_names=["x"],
                          output_names=["y"], opset_version=17)
    # W1's layer with a dynamic sequence, for the lengths table (one
    # artifact for sequence=1..512 against static compiles).
    path = os.path.join(out, "w1-dyn.onnx")
    if not os.path.exists(path):
        d, h, ff, b, s = ENCODERS["w1"]
        layer = nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, batch_first=True).eval()
        torch.onnx.export(layer, (torch.randn(b, s, d),), path, input_names=["x"],
                          output_names=["y"], opset_version=17,
                          dynamic_axes={"x": {1: "sequence"}, "y": {1: "sequence"}})
    d, h, ff, layers, b, s = W4
    path = os.path.join(out, "w4.onnx")
    if not os.path.exists(path):
        model = nn.Transformer(d, h, layers, layers, ff, dropout=0.0, batch_first=True).eval()
        mask = model.generate_square_subsequent_mask(s)
        torch.onnx.export(Seq2Seq(model), (torch.randn(b, s, d), torch.randn(b, s, d), mask),
                          path, input_names=["src", "tgt", "mask"], output_names=["y"],
                          opset_version=17)
    for module in (w7_model, w10_model):
        export_decoder(out, module)
    data = os.path.join(out, "w5-data")
    if not os.path.exists(os.path.join(data, "labels.pb")):
        os.makedirs(data, exist_ok=True)
        g = torch.Generator().manual_seed(5)
        mask = nn.Transformer.generate_square_subsequent_mask(s)
        batch = [torch.randn(b, s, d, generator=g), torch.randn(b, s, d, generator=g), mask,
                 torch.randint(0, d, (b, s), generator=g)]
        for i, x in enumerate(batch):
            name = "labels" if i == 3 else f"input_{i}"
            t = onnx.numpy_helper.from_array(np.ascontiguousarray(x.numpy()), name)
            with open(os.path.join(data, f"{name}.pb"), "wb") as f:
                f.write(t.SerializeToString())


if __name__ == "__main__":
    main()
