#!/usr/bin/python3
"""Models exported with dynamic axes, and PyTorch's outputs at several
lengths, for one artifact compiled for a range of sizes
(`tfmc compile --shape sequence=LO..HI`): each case is a length the
artifact serves, most of them padded to a larger bucket, and PyTorch ran
the model at exactly that length.

  encoder    nn.TransformerEncoderLayer (post-LN, batch_first), no mask:
             the compiler adds a key mask over the padding
  bert       make_models.py's BERT (attention_mask input, Hugging Face's
             additive form), dynamic batch and sequence
  gpt        make_models.py's GPT (causal triangle sliced from a buffer,
             learned positions gathered by arange, tied head): causal, so
             the padding needs no mask
  meanpool   an encoder whose output is the mean over positions: padding
             is not exact there, and the compile must say so
  lasttoken  the GPT's logits of the last position only (x[:, -1]): the
             last row of a bucket is padding, and the compile must say so
  hf_gpt2    make_hf_gpt2_fixture.py's GPT-2 in Hugging Face's idiom
             (Conv1D's view(-1, D) merges the batch with the positions,
             an attention_mask input), untrained, at batch 2
  mha        nn.MultiheadAttention with its default layout [S, B, D]
             (the batch merged with the heads): a range of batches

Writes test/models/lengths/<model>/{model.onnx, test_data_set_N/}.

  /usr/bin/python3 test/models/make_length_fixtures.py
"""
import os
import shutil
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_models  # noqa: E402

OUT = os.path.join(HERE, "lengths")
MAXLEN = 40
make_models.S = MAXLEN  # the position tables and the causal buffer
D, H, FF, VOCAB = make_models.D, make_models.H, make_models.FF, make_models.VOCAB


class MeanPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x).mean(dim=1)


class LastToken(nn.Module):
    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, ids):
        return self.gpt(ids)[:, -1]


def export(name, model, example, names, axes, cases):
    """Exports `model` with `axes` dynamic, and one test case per inputs
    tuple in `cases`."""
    folder = os.path.join(OUT, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    model.eval()
    torch.onnx.export(model, example, os.path.join(folder, "model.onnx"),
                      input_names=names, output_names=["output"], opset_version=17,
                      dynamic_axes={**{n: axes[n] for n in names}, "output": axes["output"]})
    scratch = os.path.join(folder, "scratch")
    for i, inputs in enumerate(cases):
        with torch.no_grad():
            expected = model(*inputs)
        make_models.write_case(scratch, list(inputs), [expected])
        os.rename(os.path.join(scratch, "test_data_set_0"),
                  os.path.join(folder, f"test_data_set_{i}"))
    os.rmdir(scratch)


def bert_inputs(b, s):
    ids = torch.randint(0, VOCAB, (b, s))
    mask = torch.ones(b, s, dtype=torch.int64)
    mask[0, s // 2:] = 0  # a padded sentence inside the batch
    return ids, mask


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(D, H, dropout=0.0)

    def forward(self, x):
        return self.mha(x, x, x, need_weights=False)[0]


def main():
    torch.manual_seed(0)
    seq = {1: "sequence"}
    encoder = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True)
    export("encoder", encoder, (torch.randn(2, 8, D),), ["x"],
           {"x": seq, "output": seq},
           [(torch.randn(2, s, D),) for s in (1, 9, 17, 29, 33, 40)])

    both = {0: "batch", 1: "sequence"}
    export("bert", make_models.Bert(), bert_inputs(2, 8), ["input_ids", "attention_mask"],
           {"input_ids": both, "attention_mask": both, "output": both},
           [bert_inputs(b, s) for b, s in ((17, 20), (16, 33), (20, 40), (16, 17))])

    gpt = make_models.GPT()
    export("gpt", gpt, (torch.randint(0, VOCAB, (2, 8)),), ["input_ids"],
           {"input_ids": seq, "output": seq},
           [(torch.randint(0, VOCAB, (2, s)),) for s in (5, 17, 29, 40)])

    export("meanpool", MeanPool(), (torch.randn(2, 8, D),), ["x"],
           {"x": seq, "output": {}}, [(torch.randn(2, 20, D),)])
    export("lasttoken", LastToken(gpt), (torch.randint(0, VOCAB, (2, 8)),), ["input_ids"],
           {"input_ids": seq, "output": {}}, [(torch.randint(0, VOCAB, (2, 20)),)])

    import make_hf_gpt2_fixture  # noqa: E402
    hf_len = make_hf_gpt2_fixture.MAXLEN
    hf = make_hf_gpt2_fixture.GPT2()
    export("hf_gpt2", hf, bert_inputs(2, 8), ["input_ids", "attention_mask"],
           {"input_ids": both, "attention_mask": both, "output": both},
           [bert_inputs(2, s) for s in (5, 11, 17, hf_len)])
    export("mha", SelfAttention(), (torch.randn(8, 2, D),), ["x"],
           {"x": {0: "sequence", 1: "batch"}, "output": {0: "sequence", 1: "batch"}},
           [(torch.randn(8, b, D),) for b in (1, 3, 5, 8)])
    print("exported", sorted(os.listdir(OUT)))


if __name__ == "__main__":
    main()
