#!/usr/bin/python3
"""Exports small, randomly initialised configurations of Transformer code that
nobody on this project wrote (torchvision, torchaudio, torchtext, PyTorch's own
layers, and models written in Hugging Face's idioms), at opset 17 and, where
the exporter manages it, 13 (the Hugging-Face-style BERT and GPT-2 also at 11),
plus one test case for each (ONNX backend-test layout:
test_data_set_0/input_N.pb, output_N.pb, outputs computed by PyTorch in eval
mode).

  vit             torchvision VisionTransformer (image 32, patch 8): the patch
                  embedding is a Conv2d, a class token is concatenated, the
                  encoder is nn.MultiheadAttention (batch_first, packed
                  in-projection), the head reads token 0
  wav2vec2        torchaudio wav2vec2_model: a Conv1d feature extractor with
                  GroupNorm (group_norm mode), a feature projection, a grouped
                  positional Conv1d with weight_norm and GELU, post-LN encoder
                  layers; the input is a raw waveform [1, 400]
  conformer       torchaudio Conformer: a padding mask built from a lengths
                  input (arange >= lengths), macaron half-step feed-forward
                  with SiLU, MHA with key_padding_mask, a convolution module
                  (pointwise Conv1d, GLU, depthwise Conv1d, BatchNorm1d, SiLU)
  emformer        torchaudio Emformer forward (full utterance with right
                  context, memory bank from AvgPool1d, a block attention mask
                  made of many Concat'ed blocks, lengths input)
  emformer_infer  torchaudio Emformer.infer, the streaming entry point, on a
                  second chunk: the state a first chunk left is an input, the
                  next state an output (the first chunk cannot be exported:
                  torch 1.13's exporter dies with SIGFPE on its zero-length
                  slice assignment)
  roberta         torchtext's RoBERTa encoder (loaded from its Python files):
                  position ids by CumSum over a padding mask (tokens != pad),
                  nn.TransformerEncoder (post-LN, GELU) with a padding mask
                  made from the tokens; the output is sequence-major (T, B, C)
  nn_encoder      nn.TransformerEncoder, 2 layers, norm_first=True and a final
                  LayerNorm, with a bool src_key_padding_mask input
  nn_mha          nn.MultiheadAttention (batch_first) self-attention with a
                  bool key_padding_mask input; both outputs (attention output
                  and the head-averaged attention weights)
  hf_bert         BERT in Hugging Face's idioms: token type and position ids
                  sliced from buffers, separate Q/K/V Linear layers and
                  transpose_for_scores (view, permute), the extended mask
                  (1 - mask[:, None, None, :]) * finfo.min, exact GELU, dense +
                  dropout + LayerNorm(residual), a tanh pooler (two outputs)
  hf_gpt2         GPT-2 in Hugging Face's idioms: Conv1D (addmm on a
                  flattened input, view back), packed c_attn split into
                  Q/K/V, a causal mask sliced from a bool tril buffer applied
                  with Where(mask, w, finfo.min), an additive padding mask from
                  attention_mask, gelu_new (tanh, Pow), pre-LN, tied LM head

Every parameter is perturbed with small noise after construction (biases that
init to zero and LayerNorm affine parameters are then non-trivial), and
BatchNorm running statistics are randomised.  Expected outputs are computed
with autograd enabled, the mode torch.onnx.export traces in, so PyTorch's
inference fast paths (nested tensors, fused encoder layers) are not taken.

Run with Debian's python:  /usr/bin/python3 test/families/make_families.py
(needs python3-torch, python3-torchvision, python3-torchaudio and the Python
files of python3-torchtext; its compiled extension need not load).
"""
import importlib.util
import math
import os
import shutil
import sys
import types

import torch
import torch.nn as nn
import torchaudio
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
# The backend-test layout writer is the one the project's own exports use.
sys.path.insert(0, os.path.join(HERE, "..", "models"))
from make_models import write_case  # noqa: E402

B, S = 2, 8


# ----------------------------------------------------------------------------
# Helpers


def perturb(model, scale=0.1):
    """Adds noise to every parameter and randomises BatchNorm statistics."""
    with torch.no_grad():
        for _, p in model.named_parameters():
            p.add_(scale * torch.randn_like(p))
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
                m.running_mean.copy_(0.1 * torch.randn_like(m.running_mean))
                m.running_var.copy_(1.0 + 0.5 * torch.rand_like(m.running_var))
    return model




FAILURES = []


def export(name, model, inputs, input_names, output_names=("output",), opsets=(13, 17)):
    """Exports `model` at each opset; an opset the exporter refuses is
    recorded in FAILURES and leaves no folder behind."""
    model.eval()
    # Autograd stays on, as in torch.onnx.export, so that the same code path
    # (no nested-tensor fast path) computes the expected outputs.
    expected = model(*inputs)
    if isinstance(expected, torch.Tensor):
        expected = [expected]
    assert len(expected) == len(output_names), name
    for opset in opsets:
        folder = os.path.join(HERE, f"{name}_opset{opset}")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        try:
            torch.onnx.export(model, tuple(inputs), os.path.join(folder, "model.onnx"),
                              input_names=input_names, output_names=list(output_names),
                              opset_version=opset, do_constant_folding=True)
        except Exception as e:  # the exporter's refusal is a result too
            shutil.rmtree(folder)
            FAILURES.append((f"{name}_opset{opset}", f"{type(e).__name__}: {e}".splitlines()[0]))
            continue
        write_case(folder, inputs, expected)


# ----------------------------------------------------------------------------
# Wrappers around library models (a single tensor result, fixed arguments)


class Wav2Vec2(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = torchaudio.models.wav2vec2_model(
            extractor_mode="group_norm", extractor_conv_layer_config=[(8, 10, 5), (8, 3, 2)],
            extractor_conv_bias=False, encoder_embed_dim=32, encoder_projection_dropout=0.1,
            encoder_pos_conv_kernel=16, encoder_pos_conv_groups=2, encoder_num_layers=2,
            encoder_num_heads=2, encoder_attention_dropout=0.1, encoder_ff_interm_features=64,
            encoder_ff_interm_dropout=0.1, encoder_dropout=0.1, encoder_layer_norm_first=False,
            encoder_layer_drop=0.0, aux_num_out=None)

    def forward(self, waveforms):
        return self.model(waveforms)[0]


class WithLengths(nn.Module):
    """Conformer and Emformer return (output, lengths); keep the output."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, lengths):
        return self.model(x, lengths)[0]


class EmformerInfer(nn.Module):
    """The streaming entry point on a second chunk: the state a first chunk
    left (per layer: memory, left-context keys, left-context values) comes in
    as inputs and the updated state goes out as outputs.  The state's
    past_length is read with .item() by torchaudio, so it is a constant of the
    trace, kept here as a buffer.  (The first chunk, states=None, cannot be
    exported: it assigns to a zero-length slice, attention_mask[-1, :0] = True,
    and torch 1.13's index_put symbolic dies with SIGFPE on it.)"""

    def __init__(self, model, past_length, batch):
        super().__init__()
        self.model = model
        self.register_buffer("past_length", torch.full((1, batch), past_length, dtype=torch.int32))

    def forward(self, x, lengths, *state):
        states = [list(state[i:i + 3]) + [self.past_length] for i in range(0, len(state), 3)]
        output, _, new_states = self.model.infer(x, lengths, states)
        return (output,) + tuple(t for s in new_states for t in s[:3])


def torchtext_roberta():
    """torchtext's RoBERTa model files, imported by path: Debian's torchtext
    package cannot be imported (its compiled extension does not load)."""
    root = os.path.join(importlib.util.find_spec("torchtext").submodule_search_locations[0],
                        "models", "roberta")
    pkg = types.ModuleType("torchtext_roberta")
    pkg.__path__ = [root]
    sys.modules["torchtext_roberta"] = pkg
    spec = importlib.util.spec_from_file_location("torchtext_roberta.model",
                                                  os.path.join(root, "model.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class NNEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(32),
                                             enable_nested_tensor=False)

    def forward(self, src, src_key_padding_mask):
        return self.encoder(src, src_key_padding_mask=src_key_padding_mask)


class NNMha(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4, dropout=0.1, batch_first=True)

    def forward(self, x, key_padding_mask):
        return self.attn(x, x, x, key_padding_mask=key_padding_mask)


# ----------------------------------------------------------------------------
# BERT, the way Hugging Face's transformers writes it (modeling_bert.py)


class BertConfig:
    vocab_size = 50
    hidden_size = 32
    num_hidden_layers = 2
    num_attention_heads = 2
    intermediate_size = 64
    hidden_dropout_prob = 0.1
    attention_probs_dropout_prob = 0.1
    max_position_embeddings = 16
    type_vocab_size = 2
    layer_norm_eps = 1e-12
    pad_token_id = 0


class BertEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size,
                                            padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.register_buffer("position_ids",
                             torch.arange(config.max_position_embeddings).expand((1, -1)),
                             persistent=False)
        self.register_buffer("token_type_ids",
                             torch.zeros(self.position_ids.size(), dtype=torch.long),
                             persistent=False)

    def forward(self, input_ids, token_type_ids=None, past_key_values_length=0):
        input_shape = input_ids.size()
        seq_length = input_shape[1]
        position_ids = self.position_ids[:, past_key_values_length:seq_length + past_key_values_length]
        if token_type_ids is None:
            buffered_token_type_ids = self.token_type_ids[:, :seq_length]
            token_type_ids = buffered_token_type_ids.expand(input_shape[0], seq_length)
        inputs_embeds = self.word_embeddings(input_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        position_embeddings = self.position_embeddings(position_ids)
        embeddings += position_embeddings
        embeddings = self.LayerNorm(embeddings)
        embeddings = self.dropout(embeddings)
        return embeddings


class BertSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = int(config.hidden_size / config.num_attention_heads)
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask=None):
        mixed_query_layer = self.query(hidden_states)
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        query_layer = self.transpose_for_scores(mixed_query_layer)
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(new_context_layer_shape)
        return context_layer


class BertSelfOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


class BertAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(self, hidden_states, attention_mask=None):
        self_outputs = self.self(hidden_states, attention_mask)
        return self.output(self_outputs, hidden_states)


class GELUActivation(nn.Module):
    def forward(self, input):
        return nn.functional.gelu(input)


class BertIntermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = GELUActivation()

    def forward(self, hidden_states):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.intermediate_act_fn(hidden_states)
        return hidden_states


class BertOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


class BertLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, hidden_states, attention_mask=None):
        attention_output = self.attention(hidden_states, attention_mask)
        intermediate_output = self.intermediate(attention_output)
        return self.output(intermediate_output, attention_output)


class BertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(config) for _ in range(config.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask=None):
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, attention_mask)
        return hidden_states


class BertPooler(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        first_token_tensor = hidden_states[:, 0]
        pooled_output = self.dense(first_token_tensor)
        pooled_output = self.activation(pooled_output)
        return pooled_output


class BertModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config)

    @property
    def dtype(self):
        return next(self.parameters()).dtype

    def get_extended_attention_mask(self, attention_mask, input_shape, dtype=None):
        if dtype is None:
            dtype = self.dtype
        if attention_mask.dim() == 3:
            extended_attention_mask = attention_mask[:, None, :, :]
        elif attention_mask.dim() == 2:
            extended_attention_mask = attention_mask[:, None, None, :]
        else:
            raise ValueError(f"Wrong shape for input_ids (shape {input_shape})")
        extended_attention_mask = extended_attention_mask.to(dtype=dtype)  # fp16 compatibility
        extended_attention_mask = (1.0 - extended_attention_mask) * torch.finfo(dtype).min
        return extended_attention_mask

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        input_shape = input_ids.size()
        batch_size, seq_length = input_shape
        if attention_mask is None:
            attention_mask = torch.ones((batch_size, seq_length), device=input_ids.device)
        extended_attention_mask = self.get_extended_attention_mask(attention_mask, input_shape)
        embedding_output = self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        sequence_output = self.encoder(embedding_output, attention_mask=extended_attention_mask)
        pooled_output = self.pooler(sequence_output)
        return sequence_output, pooled_output


# ----------------------------------------------------------------------------
# GPT-2, the way Hugging Face's transformers writes it (modeling_gpt2.py)


class GPT2Config:
    vocab_size = 50
    n_positions = 16
    n_embd = 32
    n_layer = 2
    n_head = 2
    n_inner = None
    resid_pdrop = embd_pdrop = attn_pdrop = 0.1
    layer_norm_epsilon = 1e-5
    scale_attn_weights = True


class Conv1D(nn.Module):
    """Basically works like a linear layer but the weights are transposed."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(size_out)
        return x


class NewGELUActivation(nn.Module):
    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        max_positions = config.n_positions
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(
                1, 1, max_positions, max_positions),
            persistent=False,
        )
        self.embed_dim = config.n_embd
        self.num_heads = config.n_head
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.scale_attn_weights = config.scale_attn_weights
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)

    def _attn(self, query, key, value, attention_mask=None):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        if self.scale_attn_weights:
            attn_weights = attn_weights / torch.full(
                [], value.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device)
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
        mask_value = torch.finfo(attn_weights.dtype).min
        # Need to be a tensor, otherwise we get error: `RuntimeError: expected scalar type float but found double`.
        mask_value = torch.full([], mask_value, dtype=attn_weights.dtype).to(attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.type(value.dtype)
        attn_weights = self.attn_dropout(attn_weights)
        attn_output = torch.matmul(attn_weights, value)
        return attn_output, attn_weights

    def _split_heads(self, tensor, num_heads, attn_head_size):
        new_shape = tensor.size()[:-1] + (num_heads, attn_head_size)
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)  # (batch, head, seq_length, head_features)

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + (num_heads * attn_head_size,)
        return tensor.view(new_shape)

    def forward(self, hidden_states, attention_mask=None):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)
        attn_output, _ = self._attn(query, key, value, attention_mask)
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        attn_output = self.c_proj(attn_output)
        attn_output = self.resid_dropout(attn_output)
        return attn_output


class GPT2MLP(nn.Module):
    def __init__(self, intermediate_size, config):
        super().__init__()
        embed_dim = config.n_embd
        self.c_fc = Conv1D(intermediate_size, embed_dim)
        self.c_proj = Conv1D(embed_dim, intermediate_size)
        self.act = NewGELUActivation()
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, hidden_states):
        hidden_states = self.c_fc(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.c_proj(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return hidden_states


class GPT2Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        hidden_size = config.n_embd
        inner_dim = config.n_inner if config.n_inner is not None else 4 * hidden_size
        self.ln_1 = nn.LayerNorm(hidden_size, eps=config.layer_norm_epsilon)
        self.attn = GPT2Attention(config)
        self.ln_2 = nn.LayerNorm(hidden_size, eps=config.layer_norm_epsilon)
        self.mlp = GPT2MLP(inner_dim, config)

    def forward(self, hidden_states, attention_mask=None):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        attn_output = self.attn(hidden_states, attention_mask=attention_mask)
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        feed_forward_hidden_states = self.mlp(hidden_states)
        hidden_states = residual + feed_forward_hidden_states
        return hidden_states


class GPT2Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_dim = config.n_embd
        self.wte = nn.Embedding(config.vocab_size, self.embed_dim)
        self.wpe = nn.Embedding(config.n_positions, self.embed_dim)
        self.drop = nn.Dropout(config.embd_pdrop)
        self.h = nn.ModuleList([GPT2Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(self.embed_dim, eps=config.layer_norm_epsilon)

    @property
    def dtype(self):
        return next(self.parameters()).dtype

    def forward(self, input_ids, attention_mask=None):
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        batch_size = input_ids.shape[0]
        device = input_ids.device
        past_length = 0
        position_ids = torch.arange(past_length, input_shape[-1] + past_length,
                                    dtype=torch.long, device=device)
        position_ids = position_ids.unsqueeze(0)
        if attention_mask is not None:
            attention_mask = attention_mask.view(batch_size, -1)
            attention_mask = attention_mask[:, None, None, :]
            attention_mask = attention_mask.to(dtype=self.dtype)  # fp16 compatibility
            attention_mask = (1.0 - attention_mask) * torch.finfo(self.dtype).min
        inputs_embeds = self.wte(input_ids)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds
        hidden_states = self.drop(hidden_states)
        output_shape = (-1,) + input_shape[1:] + (hidden_states.size(-1),)
        for block in self.h:
            hidden_states = block(hidden_states, attention_mask=attention_mask)
        hidden_states = self.ln_f(hidden_states)
        hidden_states = hidden_states.view(output_shape)
        return hidden_states


class GPT2LMHeadModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.transformer = GPT2Model(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tie_weights()

    def forward(self, input_ids, attention_mask=None):
        hidden_states = self.transformer(input_ids, attention_mask=attention_mask)
        return self.lm_head(hidden_states)


# ----------------------------------------------------------------------------


def padding_mask(batch, length, valid):
    """A 0/1 int64 mask: row i has valid[i] leading ones."""
    mask = torch.zeros(batch, length, dtype=torch.int64)
    for i, n in enumerate(valid):
        mask[i, :n] = 1
    return mask


def main():
    torch.manual_seed(0)
    vit = torchvision.models.vision_transformer.VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
        dropout=0.1, attention_dropout=0.1, num_classes=10)
    export("vit", perturb(vit), [torch.randn(B, 3, 32, 32)], ["images"])

    torch.manual_seed(0)
    export("wav2vec2", perturb(Wav2Vec2()), [torch.randn(1, 400)], ["waveforms"])

    torch.manual_seed(0)
    conformer = torchaudio.models.Conformer(input_dim=32, num_heads=2, ffn_dim=64, num_layers=2,
                                            depthwise_conv_kernel_size=7, dropout=0.1)
    export("conformer", perturb(WithLengths(conformer)),
           [torch.randn(B, 10, 32), torch.tensor([10, 7], dtype=torch.int64)], ["input", "lengths"])

    torch.manual_seed(0)
    emformer = perturb(torchaudio.models.Emformer(
        input_dim=32, num_heads=2, ffn_dim=64, num_layers=2, segment_length=4, dropout=0.1,
        left_context_length=4, right_context_length=1, max_memory_size=2))
    export("emformer", WithLengths(emformer),
           [torch.randn(B, 12 + 1, 32), torch.tensor([12, 9], dtype=torch.int64)], ["input", "lengths"])
    chunk = 4 + 1  # segment_length + right_context_length
    first, second = torch.randn(B, chunk, 32), torch.randn(B, chunk, 32)
    lengths = torch.tensor([chunk, chunk], dtype=torch.int64)
    with torch.no_grad():
        _, _, states = emformer.eval().infer(first, lengths, None)
    state = [t.detach() for s in states for t in s[:3]]
    names = [f"{kind}_{layer}" for layer in range(len(states)) for kind in ("memory", "lc_key", "lc_val")]
    export("emformer_infer", EmformerInfer(emformer, int(states[0][3][0, 0]), B),
           [second, lengths] + state, ["input", "lengths"] + names, ["output"] + [f"next_{n}" for n in names])

    torch.manual_seed(0)
    roberta = torchtext_roberta().RobertaEncoder(
        vocab_size=50, embedding_dim=32, ffn_dimension=64, padding_idx=1, max_seq_len=16,
        num_attention_heads=2, num_encoder_layers=2, dropout=0.1)
    tokens = torch.randint(2, 50, (B, S))
    tokens[1, 5:] = 1  # padding_idx
    export("roberta", perturb(roberta), [tokens], ["tokens"])

    torch.manual_seed(0)
    key_padding = padding_mask(B, S, [S, 5]) == 0  # True where padded
    export("nn_encoder", perturb(NNEncoder()), [torch.randn(B, S, 32), key_padding],
           ["src", "src_key_padding_mask"])
    torch.manual_seed(0)
    export("nn_mha", perturb(NNMha()), [torch.randn(B, S, 32), key_padding],
           ["x", "key_padding_mask"], ["attn_output", "attn_weights"])

    torch.manual_seed(0)
    ids = torch.randint(1, BertConfig.vocab_size, (B, S))
    ids[1, 5:] = BertConfig.pad_token_id
    token_types = torch.zeros(B, S, dtype=torch.int64)
    token_types[:, 4:] = 1
    export("hf_bert", perturb(BertModel(BertConfig())),
           [ids, padding_mask(B, S, [S, 5]), token_types],
           ["input_ids", "attention_mask", "token_type_ids"],
           ["last_hidden_state", "pooler_output"], opsets=(11, 13, 17))

    torch.manual_seed(0)
    ids = torch.randint(0, GPT2Config.vocab_size, (B, S))
    export("hf_gpt2", perturb(GPT2LMHeadModel(GPT2Config())), [ids, padding_mask(B, S, [S, 5])],
           ["input_ids", "attention_mask"], ["logits"], opsets=(11, 13, 17))

    print("exported", sorted(d for d in os.listdir(HERE) if os.path.isdir(os.path.join(HERE, d))))
    for folder, why in FAILURES:
        print(f"not exported: {folder}: {why}")


if __name__ == "__main__":
    main()
