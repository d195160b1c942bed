#!/usr/bin/python3
"""The modern decoders of make_modern_models.py, Llama-style (RMSNorm, rotary
embeddings, grouped-query attention, SwiGLU, no biases) and GPT-NeoX-style
(parallel attention and MLP, interleaved partial rotary embeddings), each
trained briefly to continue periodic sequences as make_generation_fixtures.py
trains its GPT, exported with dynamic batch and sequence axes, and the
tokens PyTorch generates greedily by rerunning the whole model on the whole
prefix at every step, in float64, each choice decided by a margin far above
float32 rounding.

Writes test/models/generation/{llama,neox}/{model.onnx, expected.txt}.

  /usr/bin/python3 test/models/make_modern_generation_fixtures.py
"""
import os

import torch

import make_generation_fixtures as gen
import make_modern_models as modern

HERE = os.path.dirname(os.path.abspath(__file__))
assert modern.VOCAB == gen.VOCAB


def fixture(name, ctor, seed):
    torch.manual_seed(seed)
    model = ctor()
    print(name, "final training loss", gen.train(model))
    model.eval()
    folder = os.path.join(HERE, "generation", name)
    os.makedirs(folder, exist_ok=True)
    ids = torch.randint(0, gen.VOCAB, (2, gen.MAXLEN))
    torch.onnx.export(model, (ids,), os.path.join(folder, "model.onnx"),
                      input_names=["input_ids"], output_names=["logits"],
                      opset_version=17, do_constant_folding=True,
                      dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                    "logits": {0: "batch", 1: "sequence"}})
    model = model.double()
    lines = ["# Made by make_modern_generation_fixtures.py: tokens PyTorch generates",
             "# by rerunning the whole model on the whole prefix at every step.",
             f"# max_length {gen.MAXLEN} vocab {gen.VOCAB}"]
    for p in [[5, 17, 3, 5, 17, 3], [42, 7, 30, 11, 42, 7, 30, 11, 42, 7]]:
        lines.append("greedy " + ",".join(map(str, p)) + " " +
                     ",".join(map(str, gen.greedy(gen.decoder_logits(model, p),
                                                  gen.MAXLEN - len(p), p))))
    with open(os.path.join(folder, "expected.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", folder)


def main():
    fixture("llama", modern.Llama, 5)
    fixture("neox", modern.NeoX, 6)


if __name__ == "__main__":
    main()
