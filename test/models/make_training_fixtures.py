#!/usr/bin/python3
"""Loss trajectories of PyTorch training, for tfm's training tests.

For each model family of make_models.py, two convolutional front ends (a
speech one with a depthwise convolution, ViT's patch embedding) and the
Llama-style decoder of make_modern_models.py, builds
the module, exports it to
ONNX (constant folding off, so a tied weight stays one initializer), and
trains a copy of the same module in PyTorch from the same weights: 10 SGD
steps, then, from the initial weights again, 10 Adam steps with label
smoothing. The loss is the cross-entropy of the model's output over its last
axis against fixed labels (two of them the ignore_index -100), the mean over
tokens. Dropout is off (eval mode), since no two frameworks share a
generator. The loss before each update is recorded, which is what tfm's
@train_step returns.

  training/<family>_opset<N>/model.onnx
  training/<family>_opset<N>/data/input_N.pb, labels.pb
  training/<family>_opset<N>/trajectory.json

Run with Debian's python:  /usr/bin/python3 test/models/make_training_fixtures.py
"""
import copy
import json
import os
import shutil

import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

import make_models as mm
import make_modern_models as modern

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "training")
STEPS = 10
SGD = {"optimizer": "sgd", "lr": 0.05, "label_smoothing": 0.0}
ADAM = {"optimizer": "adam", "lr": 2e-3, "label_smoothing": 0.1}


def save(path, array, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array, name).SerializeToString())


def trajectory(model, inputs, labels, setting, double=False):
    model = copy.deepcopy(model)
    if double:
        model = model.double()
        inputs = [x.double() if x.is_floating_point() else x for x in inputs]
    model.eval()  # dropout off; gradients still flow
    params = [p for p in model.parameters() if p.requires_grad]
    if setting["optimizer"] == "sgd":
        opt = torch.optim.SGD(params, lr=setting["lr"])
    else:
        opt = torch.optim.Adam(params, lr=setting["lr"])
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        logits = model(*inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                               ignore_index=-100, label_smoothing=setting["label_smoothing"])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def make(name, ctor, inputs, input_names, opsets, double=False):
    torch.manual_seed(1)
    model = ctor()
    # The exporter merges initializers of equal value (all layer norms start
    # at ones and zeros), which would tie parameters that PyTorch trains
    # apart; a small perturbation keeps every parameter distinct.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    model.eval()
    with torch.no_grad():
        out = model(*inputs)
    g = torch.Generator().manual_seed(2)
    labels = torch.randint(0, out.shape[-1], out.shape[:-1], generator=g)
    flat = labels.view(-1)
    flat[1] = -100
    flat[-1] = -100
    sgd = trajectory(model, inputs, labels, SGD, double)
    adam = trajectory(model, inputs, labels, ADAM, double)
    for opset in opsets:
        folder = os.path.join(OUT, f"{name}_opset{opset}")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(os.path.join(folder, "data"))
        torch.onnx.export(model, tuple(inputs), os.path.join(folder, "model.onnx"),
                          input_names=input_names, output_names=["logits"],
                          opset_version=opset, do_constant_folding=False)
        for i, x in enumerate(inputs):
            save(os.path.join(folder, "data", f"input_{i}.pb"), x.numpy(), f"input_{i}")
        save(os.path.join(folder, "data", "labels.pb"), labels.numpy(), "labels")
        with open(os.path.join(folder, "trajectory.json"), "w") as f:
            json.dump({"steps": STEPS,
                       "runs": [dict(SGD, losses=sgd), dict(ADAM, losses=adam)]},
                      f, indent=1)
        print(name, opset, "sgd", [round(v, 4) for v in sgd[:3]], "adam",
              [round(v, 4) for v in adam[:3]])


class SpeechFront(nn.Module):
    """A speech front end as wav2vec2 and Conformer have it: a strided
    convolution over the samples' channels, a depthwise convolution added
    back, then an encoder layer and a per-frame classifier."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, mm.D, kernel_size=3, stride=2, padding=1)
        self.depthwise = nn.Conv1d(mm.D, mm.D, kernel_size=3, padding=2,
                                   dilation=2, groups=mm.D)
        self.layer = nn.TransformerEncoderLayer(mm.D, mm.H, mm.FF, dropout=0.1,
                                                batch_first=True)
        self.head = nn.Linear(mm.D, 7)

    def forward(self, x):
        h = F.gelu(self.conv(x))
        h = h + self.depthwise(h)
        return self.head(self.layer(h.transpose(1, 2)))


class PatchFront(nn.Module):
    """ViT's patch embedding: a convolution with stride = kernel, flattened
    to tokens, then an encoder layer and a classifier per token."""

    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, mm.D, kernel_size=4, stride=4)
        self.layer = nn.TransformerEncoderLayer(mm.D, mm.H, mm.FF, dropout=0.1,
                                                batch_first=True, norm_first=True)
        self.head = nn.Linear(mm.D, 5)

    def forward(self, images):
        tokens = self.patch(images).flatten(2).transpose(1, 2)
        return self.head(self.layer(tokens))


def main():
    torch.manual_seed(0)
    B, S, D, VOCAB = mm.B, mm.S, mm.D, mm.VOCAB
    x = torch.randn(B, S, D)
    memory = torch.randn(B, S + 2, D)
    causal = nn.Transformer.generate_square_subsequent_mask(S)
    ids = torch.randint(0, VOCAB, (B, S))
    mask = torch.ones(B, S, dtype=torch.int64)
    mask[1, 5:] = 0
    make("encoder_layer",
         lambda: nn.TransformerEncoderLayer(D, mm.H, mm.FF, dropout=0.1, batch_first=True),
         [x], ["src"], (17,))
    make("decoder_layer", mm.DecoderLayerWithMask, [x, memory, causal],
         ["tgt", "memory", "tgt_mask"], (17,))
    make("transformer", mm.Seq2Seq, [memory, x], ["src", "tgt"], (13, 17))
    make("gpt", mm.GPT, [ids], ["input_ids"], (13, 17))
    make("bert", mm.Bert, [ids, mask], ["input_ids", "attention_mask"], (17,))
    make("packed_mha", mm.PackedMHA, [x], ["x"], (17,))
    # The convolutional front ends train in double precision: PyTorch's f32
    # CPU backward here gives a second step that differs from f64's in the
    # third digit, and differs from run to run.
    make("speech_conv", SpeechFront, [torch.randn(B, 4, 2 * S)], ["samples"], (17,),
         double=True)
    make("vit_patch", PatchFront, [torch.randn(B, 3, 8, 12)], ["images"], (17,),
         double=True)
    # A modern decoder (make_modern_models.py): RMSNorm, rotary embeddings,
    # grouped-query attention, SwiGLU, no biases, an untied head.
    make("llama", modern.Llama, [ids], ["input_ids"], (17,))


if __name__ == "__main__":
    main()
