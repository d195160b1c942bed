"""The GPU bench's workloads (PERFORMANCE.md: W1-W4, a BERT-base encoder
at B32 S128, and attention alone at S2048 and, causal, S4096), built the same way where the pack is made (exported as ONNX
and compiled by tfmc) and on the GPU machine (the PyTorch peer), so both
compute the same function on the same weights and inputs.

Weights are one fixed pseudo-random block of TILE values repeated through
every parameter, scaled by 1/sqrt(fan-in): realistic magnitudes, never
zeros, and a model library of hundreds of MB that compresses to a few MB
for the trip to the GPU machine. The block and the inputs come from a hash
of the element index in float64 arithmetic, not from a random generator, so
any PyTorch version builds the same values."""
import math

import torch
import torch.nn as nn

TILE = 4099  # prime, so rows do not repeat in step with the tile

# name: kind, d_model, heads, d_ff, batch, sequence, layers. Attention
# alone takes q, k and v [batch, heads, sequence, d_model / heads].
WORKLOADS = {
    "w1": ("encoder", 768, 12, 3072, 1, 128, 1),
    "w2": ("encoder", 768, 12, 3072, 8, 128, 1),
    "w3": ("encoder", 256, 4, 1024, 1, 32, 1),
    "w4": ("transformer", 512, 8, 2048, 8, 64, 6),
    "bert-base": ("encoder", 768, 12, 3072, 32, 128, 12),
    "attn-2048": ("attention", 2048, 16, 0, 4, 2048, 1),
    "attn-causal-4096": ("causal-attention", 2048, 16, 0, 4, 4096, 1),
    # x [1, 4096, 4096] times w [4096, 4096]: the GEMM library's peer, and
    # with TFM_CUBLASLT=off (a run of its own: the library is chosen once
    # per process) the generated GEMM's.
    "gemm-4096": ("gemm", 4096, 0, 0, 1, 4096, 1),
}
# W5 is W4's training step: forward, cross-entropy over the last axis
# against `labels`, backward and an Adam step (lr 1e-3).
TRAINING = {"w5": "w4"}


def enc_flops(b, s, d, ff):
    return 2 * b * s * d * 3 * d + 2 * 2 * b * s * s * d + 2 * b * s * d * d + 2 * 2 * b * s * d * ff


def flops(name):
    if name in TRAINING:
        return 3 * flops(TRAINING[name])
    kind, d, _, ff, b, s, layers = WORKLOADS[name]
    if kind == "encoder":
        return layers * enc_flops(b, s, d, ff)
    if kind == "gemm":
        return 2 * b * s * d * d
    if kind.endswith("attention"):
        # Q Kᵀ and P V; a causal mask halves both, as flash attention's
        # own figures count it.
        return 2 * 2 * b * s * s * d // (2 if kind == "causal-attention" else 1)
    # Cross-attention: four d x d projections and the two products.
    cross = 4 * 2 * b * s * d * d + 2 * 2 * b * s * s * d
    return layers * enc_flops(b, s, d, ff) + layers * (enc_flops(b, s, d, ff) + cross)


def _noise(n, salt):
    """n values in [-1, 1), a fixed function of the index."""
    i = torch.arange(n, dtype=torch.float64)
    v = torch.sin(i * 12.9898 + salt * 78.233) * 43758.5453
    return (v - torch.floor(v)) * 2 - 1


def _tile(n, k):
    """The block from a start that depends on the parameter's index `k`:
    no two parameters are equal, so no compiler can share their storage
    (identical layers would read one set of weights from cache)."""
    block = torch.roll(_noise(TILE, 0), shifts=(k * 997) % TILE)
    return block.repeat(n // TILE + 1)[:n]


class Seq2Seq(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, src, tgt, mask):
        return self.model(src, tgt, tgt_mask=mask)


class Attention(nn.Module):
    """softmax(q kᵀ / sqrt(head) [+ causal mask]) v. PyTorch runs it as its
    fused kernel (scaled_dot_product_attention), where it has one; the
    export writes it out as the products and the softmax, as exporters
    decompose that kernel."""

    def __init__(self, s, causal):
        super().__init__()
        self.causal = causal
        if causal:
            self.register_buffer("mask", torch.full((s, s), float("-inf")).triu(1))

    def forward(self, q, k, v):
        fused = getattr(nn.functional, "scaled_dot_product_attention", None)
        if fused is not None and not torch.onnx.is_in_onnx_export():
            return fused(q, k, v, is_causal=self.causal)
        scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(q.shape[-1]))
        if self.causal:
            scores = scores + self.mask
        return torch.softmax(scores, -1) @ v


class Gemm(nn.Module):
    def forward(self, x, w):
        return x @ w


def build(name):
    """The module (eval mode, f32, on the CPU) and its inputs."""
    kind, d, h, ff, b, s, layers = WORKLOADS[name]
    if kind == "gemm":
        return Gemm().eval(), [_noise(b * s * d, 1).reshape(b, s, d).float(),
                               (_noise(d * d, 2) / math.sqrt(d)).reshape(d, d).float()], \
            ["x", "w"]
    if kind.endswith("attention"):
        model = Attention(s, kind == "causal-attention").eval()
        shape = (b, h, s, d // h)
        return model, [_noise(b * s * d, salt).reshape(shape).float()
                       for salt in (1, 2, 3)], ["q", "k", "v"]
    if kind == "encoder":
        layer = nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, batch_first=True)
        model = layer if layers == 1 else nn.TransformerEncoder(layer, layers,
                                                                enable_nested_tensor=False)
    else:
        model = Seq2Seq(nn.Transformer(d, h, layers, layers, ff, dropout=0.0,
                                       batch_first=True))
    with torch.no_grad():
        for k, p in enumerate(model.parameters()):
            fan_in = p.shape[-1] if p.dim() > 1 else d
            p.copy_((_tile(p.numel(), k) / math.sqrt(fan_in)).reshape(p.shape).float())
            if p.dim() == 1 and p.numel() == d and "norm" in _name_of(model, p):
                p.add_(1.0)
    model.eval()
    x = _noise(b * s * d, 1).reshape(b, s, d).float()
    if kind == "encoder":
        return model, [x], ["x"]
    mask = nn.Transformer.generate_square_subsequent_mask(s)
    tgt = _noise(b * s * d, 2).reshape(b, s, d).float()
    return model, [x, tgt, mask], ["src", "tgt", "mask"]


def _name_of(model, param):
    for n, p in model.named_parameters():
        if p is param:
            return n
    return ""


def w7():
    """W7's decoder (bench/w7_model.py) with the tiled weights: a library
    that compresses for the trip, and one PyTorch builds alike there. The
    norms' scales stay 1 and their shifts 0."""
    import w7_model
    return _tiled(w7_model.GPT(), w7_model.D, lambda n: n.split(".")[-2].startswith("ln"))


def w10():
    """W10's Llama-style decoder (bench/w10_model.py), tiled as W7's; the
    RMSNorms' scales stay 1."""
    import w10_model
    return _tiled(w10_model.Llama(), w10_model.D, lambda n: "norm" in n)


def _tiled(model, d, is_norm):
    with torch.no_grad():
        for k, (n, p) in enumerate(model.named_parameters()):
            if is_norm(n):
                continue
            fan_in = p.shape[-1] if p.dim() > 1 else d
            p.copy_((_tile(p.numel(), k) / math.sqrt(fan_in)).reshape(p.shape).float())
    return model.eval()


def labels(name):
    """W5's labels: one class of d_model per target position."""
    _, d, _, _, b, s, _ = WORKLOADS[name]
    return ((_noise(b * s, 3) + 1) / 2 * d).long().clamp(0, d - 1).reshape(b, s)


def export(name, path):
    model, inputs, names = build(name)
    torch.onnx.export(model, tuple(inputs), path, input_names=names, output_names=["y"],
                      opset_version=17)
    return [x.numpy() for x in inputs]
