#!/usr/bin/python3
"""Exports the benchmark workloads of PERFORMANCE.md as ONNX (opset 17):
W1-W3 PyTorch TransformerEncoderLayer (post-LN, ReLU) and W4 nn.Transformer
(6+6 layers, causal target mask as an input). W5 trains W4: its batch
(src, tgt, mask and a label per target position) goes to DIR/w5-data in
the layout `tfmc train --data` reads. Usage: export_workloads.py DIR"""
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn

W4 = (512, 8, 2048, 6, 8, 64)  # d_model, heads, d_ff, layers, batch, sequence

ENCODERS = {  # name: d_model, heads, d_ff, batch, sequence
    "w1": (768, 12, 3072, 1, 128),
    "w2": (768, 12, 3072, 8, 128),
    "w3": (256, 4, 1024, 1, 32),
}


class Seq2Seq(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, src, tgt, mask):
        return self.model(src, tgt, tgt_mask=mask)


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
    d, h, ff, layers, b, s = W4
    path = os.path.join(out, "w4.onnx")
    if not os.path.exists(path):
        model = nn.Transformer(d, h, layers, layers, ff, dropout=0.0, batch_first=True).eval()
        mask = model.generate_square_subsequent_mask(s)
        torch.onnx.export(Seq2Seq(model), (torch.randn(b, s, d), torch.randn(b, s, d), mask),
                          path, input_names=["src", "tgt", "mask"], output_names=["y"],
                          opset_version=17)
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
