//===- Passes.td - The tfm passes -------------------------*- tablegen -*-===//
//
// Every fusion pass can report each fusion site as a remark: "fused" or
// "missed: <reason>", at the site's location (the ONNX node for imported
// models). `tfmc compile --fusion-report` collects these remarks; tfm-opt
// shows them with `remarks=true`.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_TRANSFORMS_PASSES_TD
#define TFM_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

class Tfm_FusionPass<string flag> : Pass<flag, "::mlir::func::FuncOp"> {
  let dependentDialects = ["::mlir::tfm::TfmDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Emit a remark for every fusion site, fused or missed">
  ];
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def FuseBiasActivationPass : Tfm_FusionPass<"tfm-fuse-bias-activation"> {
  let summary = "Folds bias adds and relu/gelu activations into tfm.linear.";
  let description = [{
    First turns a matmul by a constant 2-D weight into `tfm.linear` (with
    the weight transposed at compile time) and folds a following constant
    bias add into it (and into a `tfm.quantized_linear`). Then recognizes GELU written out with Erf or Tanh, and
    folds relu or gelu into the linear's `activation`.

    ```mlir
    %m = tfm.matmul %x, %w : ...            %y = tfm.linear %x, %wt, %b
    %a = tfm.add %b, %m : ...        =>          activation = gelu : ...
    %y = tfm.gelu %a : ...
    ```
  }];
}

def FuseQuantizedLinearPass : Tfm_FusionPass<"tfm-fuse-quantized-linear"> {
  let summary = "Makes each product by a dequantized weight one tfm.quantized_linear.";
  let description = [{
    A linear or matmul of a dequantized constant weight (QDQ, MatMulNBits:
    per tensor, per output feature, or in blocks along K; a [K, N] weight
    transposed at compile time), its input quantized statically when it is
    a QDQ pair, and the QOperator form of dynamic quantization (a
    `matmul_integer` of a `dynamic_quantize`d input, converted to f32 and
    scaled by the two scales) become `tfm.quantized_linear`. Biases and
    activations then fold into it in `tfm-fuse-bias-activation`.

    ```mlir
    %w = tfm.dequantize %q, %s axis = 1 : ...        %y = tfm.quantized_linear %x, %qt scale %s
    %y = tfm.matmul %x, %w : ...              =>         : ...
    ```
  }];
}

def QuantizePass : Pass<"tfm-quantize", "::mlir::func::FuncOp"> {
  let summary = "Quantizes the float linear layers' constant weights (tfmc --quantize).";
  let description = [{
    Each product of an activation by a constant 2-D float weight (a
    `tfm.matmul` or `tfm.linear`) becomes a `tfm.quantized_linear`: with
    `mode=int8` the weight symmetric int8 per output feature and the input
    quantized at run time (`input_quantization = dynamic`); with
    `mode=int4` the weight unsigned 4-bit with a scale and a zero point per
    block of `block-size` along K, the input float. A layer that cannot be
    quantized stays float, and with `remarks` its remark says why. Runs
    before the fusions, which fold biases and activations into the result.

    ```mlir
    %y = tfm.matmul %x, %w : ...      =>    %y = tfm.quantized_linear %x, %q scale %s
                                               input_quantization = dynamic : ...
    ```
  }];
  let options = [
    Option<"mode", "mode", "::mlir::tfm::QuantizeMode",
           /*default=*/"::mlir::tfm::QuantizeMode::None",
           "What the weights become (none, int8, int4)",
           "::mlir::tfm::quantizeModeValues()">,
    Option<"blockSize", "block-size", "int64_t", /*default=*/"32",
           "With mode=int4: the weights along K that share a scale and a "
           "zero point (a multiple of 16)">,
    Option<"sevenBit", "seven-bit", "bool", /*default=*/"false",
           "With mode=int8: weights in [-64, 64], which a CPU without VNNI "
           "multiplies exactly at its full int8 rate">,
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Emit a remark for every layer, quantized or kept float">
  ];
  let dependentDialects = ["::mlir::tfm::TfmDialect",
                           "::mlir::arith::ArithDialect"];
}

def FuseMaskedSoftmaxPass : Tfm_FusionPass<"tfm-fuse-masked-softmax"> {
  let summary = "Fuses score scaling, masking and softmax into tfm.masked_softmax.";
  let description = [{
    Matches a softmax over the last axis of attention scores `q·kᵀ`, scaled
    by Div or Mul (on the scores or on q), plus an additive mask (a tensor,
    a constant -inf pattern, or a padding mask built from an input), or a
    boolean mask through `tfm.select`. A constant mask that is the causal
    triangle becomes the `causal` flag.

    ```mlir
    %s = tfm.matmul %q, %k transpose_rhs     %s = tfm.matmul %q, %k transpose_rhs
    %t = tfm.div %s, %c8                 =>  %p = tfm.masked_softmax %s causal
    %u = tfm.add %t, %triu_neg_inf               {scale = 0.125}
    %p = tfm.softmax %u
    ```
  }];
}

def FuseRotaryPass : Tfm_FusionPass<"tfm-fuse-rotary"> {
  let summary = "Fuses rotary position embeddings into tfm.rotary.";
  let description = [{
    `x · cos + rotate(x) · sin`, with rotate as exporters write it: the
    halves swapped with the first negated (`rotate_half`, Llama), or the
    pairs of neighbours swapped (interleaved: step-2 slices stacked on a new
    axis and merged back), either factor and term first, becomes one
    `tfm.rotary`. The tables may be constants or read at the positions.
  }];
}

def FuseGroupedQueryPass : Tfm_FusionPass<"tfm-fuse-grouped-query"> {
  let summary = "Reads each key and value head for its group of query heads instead of repeating it.";
  let description = [{
    Grouped-query attention repeats each of its H/G key and value heads G
    times (`expand` of a new axis after the heads, then `reshape`) before
    `q·kᵀ` and `p·v`. The repeats go: the query and the scores split their
    heads as [.., H/G, G, ..], the keys and values gain a unit axis,
    [.., H/G, 1, ..], and the products broadcast over it. Runs after
    tfm-fuse-masked-softmax and before a KV cache is derived, which then
    holds H/G heads; tfm-fuse-attention makes the three ops one grouped
    `tfm.attention`.

    ```mlir
    %k1 = tfm.reshape %k : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
    %k2 = tfm.broadcast %k1 : tensor<1x2x1x8x16xf32> -> tensor<1x2x3x8x16xf32>
    %kr = tfm.reshape %k2 : tensor<1x2x3x8x16xf32> -> tensor<1x6x8x16xf32>
    %s = tfm.matmul %q, %kr transpose_rhs   // and likewise for the values
    =>
    %q5 = tfm.reshape %q : tensor<1x6x8x16xf32> -> tensor<1x2x3x8x16xf32>
    %k5 = tfm.reshape %k : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
    %s = tfm.matmul %q5, %k5 transpose_rhs
    ```
  }];
}

def FuseGatedMLPPass : Tfm_FusionPass<"tfm-fuse-gated-mlp"> {
  let summary = "Fuses a gated MLP's gate and up projections and their product into tfm.gated_linear.";
  let description = [{
    `act(x · Wgᵀ + bg) · (x · Wuᵀ + bu)`, with act SiLU (written as
    x · sigmoid(x)), GELU (with Erf or Tanh) or relu, and constant weights
    of one shape, becomes one `tfm.gated_linear` over `[Wg; Wu]`
    concatenated at compile time. Runs before tfm-fuse-qkv.
  }];
}

def FuseQKVPass : Tfm_FusionPass<"tfm-fuse-qkv"> {
  let summary = "Fuses the Q, K and V projections of one input into tfm.qkv_projection.";
  let description = [{
    Three `tfm.linear` ops (or matmuls by constant weights) that read the
    same input become one `tfm.qkv_projection` over weights concatenated at
    compile time; two (K and V of cross-attention) fuse as well. A single
    packed linear whose only users slice or split its output along the last
    axis becomes a `tfm.qkv_projection` with the same weight.
  }];
}

def FuseAttentionPass : Tfm_FusionPass<"tfm-fuse-attention"> {
  let summary = "Folds q·kᵀ, the masked softmax and ·v into one tfm.attention.";
  let description = [{
    Runs after tfm-fuse-masked-softmax, where a target computes attention
    without the scores in memory (the CPU's ATTENTION kernel). A masked
    softmax whose input is a matmul `q·kᵀ` with no other reader, and whose
    only reader is the matmul `p·v`, becomes one op; the transpose that made
    `kᵀ` is folded into the key:

    ```mlir
    %kt = tfm.transpose %k permutation = [0, 2, 1] : ... 
    %s = tfm.matmul %q, %kt : ...
    %p = tfm.masked_softmax %s, mask %m mask_kind = additive {scale = 0.125}
    %o = tfm.matmul %p, %v : ...
      =>  %o = tfm.attention %q, %k, %v, mask %m {scale = 0.125}
    ```

    A training graph keeps its softmax (the backward pass reads p), and so
    does a softmax whose batch dimensions broadcast.

    With a `target` whose layout rules read the attention's operands at any
    strides (the CPU's ATTENTION kernel), an attention over `[B·H, S, D]`
    operands that are PyTorch's reshapes of `[S, B, H·D]` projections takes
    B and H as two batch dimensions instead, so the projections are read in
    place rather than copied:

    ```mlir
    %r = tfm.reshape %x : tensor<128x8x768xf32> -> tensor<128x96x64xf32>
    %q = tfm.transpose %r permutation = [1, 0, 2] : ... -> tensor<96x128x64xf32>
      =>  %r = tfm.reshape %x : ... -> tensor<128x8x12x64xf32>
          %q = tfm.transpose %r permutation = [1, 2, 0, 3] : ... -> tensor<8x12x128x64xf32>
    ```
  }];
  let options = [
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Emit a remark for every fusion site, fused or missed">,
    Option<"target", "target", "std::string", /*default=*/"\"\"",
           "The target whose layout rules decide whether attention's batch "
           "dimensions split to read merged heads in place (cpu; none)">
  ];
}

def FuseResidualLayerNormPass : Tfm_FusionPass<"tfm-fuse-residual-layernorm"> {
  let summary = "Recognizes decomposed layer norms and fuses residual adds into tfm.add_layer_norm.";
  let description = [{
    First recognizes LayerNorm written out as ReduceMean, Sub, Pow, ReduceMean,
    Add, Sqrt, Div, Mul and Add, and makes it `tfm.layer_norm`. Then fuses
    `layer_norm(a + b)` into `tfm.add_layer_norm`. When the sum has other
    users (pre-LN residual streams), the fused op also returns the sum.
  }];
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

def AutodiffPass : Pass<"tfm-autodiff", "::mlir::ModuleOp"> {
  let summary = "Builds @train_step: loss, reverse-mode gradients, optimizer updates.";
  let description = [{
    With `mode=train` (the default), clones the forward function into
    `@train_step(inputs..., labels) -> loss`: the model's first output
    becomes the logits of a cross-entropy loss, the reverse sweep
    differentiates the loss with respect to every `tfm.parameter` not
    frozen, and one `tfm.sgd_update` or `tfm.adam_update` per parameter ends
    the step. Dropout becomes active, drawing from the step count. Gradients
    of a parameter read in several places add up.

    With `mode=vjp`, adds for every function `@f` a function
    `@f_vjp(args..., cotangents...) -> (gradients of the float arguments)`,
    which the gradient tests compare against finite differences.

    Every op on the differentiated path must implement
    `DifferentiableOpInterface`; one that does not is an error at its
    location.
  }];
  let dependentDialects = ["::mlir::tfm::TfmDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
  // The training options (lr, optimizer, ...) come from
  // TrainingOptions.def, which tfmc's flags share; the pass declares them.
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"train\"",
           "train (build @train_step) or vjp (build @f_vjp for every @f)">,
    Option<"forward", "forward", "std::string", /*default=*/"\"\"",
           "The forward function (default: the module's only public one)">
  ];
}

def PromoteConstantsPass : Pass<"tfm-promote-constants", "::mlir::ModuleOp"> {
  let summary = "Makes a parameter of every float constant, unless the module names its own.";
  let description = [{
    Training needs parameters. The ONNX importer makes one of every float
    initializer; a model written as MLIR has only constants. When the module
    has no `tfm.parameter`, each float constant of at least two elements
    becomes one, named by its location (or `param_<n>` in order):

    ```mlir
    %w = arith.constant dense<...> : tensor<4x8xf32> loc("w")
      =>  %w = tfm.parameter "w" = dense<...> : tensor<4x8xf32>
    ```
  }];
  let dependentDialects = ["::mlir::tfm::TfmDialect"];
}

//===----------------------------------------------------------------------===//
// Generation
//===----------------------------------------------------------------------===//

def ExactPaddingPass : Pass<"tfm-exact-padding", "::mlir::ModuleOp"> {
  let summary = "Proves that padding a bucket's inputs to its size is exact, adding key masks.";
  let description = [{
    For an artifact that serves a range of sizes (`tfmc compile --shape
    sequence=1..512`): the functions marked `tfm.bucket_of = "infer"` are
    the static buckets of the entry `infer`, their arguments' `tfm.symbols`
    name the symbol each axis follows, and the module's `tfm.symbol_ranges`
    (`{sequence = array<i64: 1, 512>}`) the sizes each takes. A run of size
    n uses the smallest bucket L >= n with its inputs padded by zeros; the
    pass proves, op by op, that no output row below n then reads a padded
    position, or fails at the op that would (a reduction over the sequence,
    the last token picked from the end, ...). Row-wise ops keep a padded
    axis; a matmul may sum over it only where one side is exactly zero on
    the padding; a softmax over it gets an additive key mask, a new
    argument `key_mask.<symbol>` of the bucket's size, unless a causal
    mask over the same symbol already hides every later key.

    The result is the module's `tfm.dynamic_entries`, one
    `#tfm.dynamic_entry` per entry, from which the artifact's table of
    dynamic entries is written.
  }];
  let dependentDialects = ["::mlir::tfm::TfmDialect",
                           "::mlir::arith::ArithDialect"];
}

def DeriveKVCachePass : Pass<"tfm-derive-kv-cache", "::mlir::ModuleOp"> {
  let summary = "Derives @prefill and @decode_step, with a KV cache, from a causal model.";
  let description = [{
    Takes the forward function of a causal language model, token ids
    `[B, S]` to logits `[B, S, V]`, and adds two functions that compute a
    chunk of `C` new tokens starting at a run-time `position`:
    `@prefill(ids [B, C], position) -> logits [B, C, V]` (C =
    `prefill-chunk`, at most S) and `@decode_step` (C = 1). S is the
    longest sequence the caches hold.

    The pass follows the query axis (axis 1 of the ids) through the model.
    Row-wise ops (linear layers, norms, activations) run on the C new rows.
    The right operand of a matmul whose result gets a key axis (q·kᵀ), or
    whose contraction pairs the key axis with the query axis (p·v), is the
    keys or values of an attention: its new rows are written into a
    `tfm.cache_update` at `position` and the product reads the whole cache.
    A causal mask becomes the rows `position + i` of the causal triangle,
    and every tensor that depends on position alone (position embeddings, a
    constant mask) is gathered at those rows. Anything else that mixes
    positions (a reduction or a reshape across the query axis) is an error
    at its location: the model is not one whose steps can be cached.

    ```mlir
    %s = tfm.matmul %q, %k transpose_rhs     %kc = tfm.cache_update "attention0.keys", %k, %pos
    %p = tfm.masked_softmax %s causal    =>  %s = tfm.matmul %q, %kc transpose_rhs
                                             %p = tfm.masked_softmax %s, mask %rows
    ```
  }];
  let options = [
    Option<"forward", "forward", "std::string", /*default=*/"\"\"",
           "The forward function (default: the module's only public one)">,
    Option<"maxLength", "max-length", "int64_t", /*default=*/"0",
           "The longest sequence (0: the model's sequence length)">,
    Option<"prefillChunk", "prefill-chunk", "int64_t", /*default=*/"32",
           "The tokens @prefill takes at once (at most the longest sequence)">
  ];
  let dependentDialects = ["::mlir::tfm::TfmDialect",
                           "::mlir::arith::ArithDialect"];
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

def PlanMemoryPass : Pass<"tfm-plan-memory", "::mlir::func::FuncOp"> {
  let summary = "Decides where every tensor lives and places the arena.";
  let description = [{
    Gives each tensor an op produces one place, recorded as `tfm.plan` (one
    attribute per result, TfmAttrs.td): the caller's output buffer for a
    returned tensor (`#tfm.output`); a view of another tensor's storage at
    an element offset and strides (`#tfm.view`: reshapes the strides allow,
    and what the target's layout rules take); nothing, for a tensor its
    readers compute where they read it (`#tfm.inline`: a compare inside its
    selects; on the GPU, a rotary embedding inside the attention that reads
    it), whose operands then live as long as those readers; or storage of
    its own in the arena (`#tfm.arena`), possibly an operand's that dies at
    the op.

    Storage that views share is one buffer, alive from its first write to
    the last read of any view of it; buffers are placed at the lowest offset
    free over their lifetime, 64-byte aligned, so that two buffers alive at
    once never overlap. The function gets `tfm.arena_bytes` and
    `tfm.arena_lower_bound` (the most bytes alive at once, which no plan can
    beat).

    ```mlir
    %y = tfm.relu %x                    %y = tfm.relu %x {tfm.plan = [#tfm.arena<offset = 0>]}
    %r = tfm.reshape %y          =>     %r = tfm.reshape %y {tfm.plan =
                                          [#tfm.view<operand = 0, offset = 0, strides = array<i64: 1>>]}
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "The target whose layout rules decide the views (cpu, generic)">,
    Option<"computeType", "compute-type", "::mlir::tfm::ComputeType",
           /*default=*/"::mlir::tfm::ComputeType::F32",
           "The type --dtype lets the target's kernels round to, which "
           "decides some of them (f32, bf16 or f16)",
           "::mlir::tfm::computeTypeValues()">
  ];
  let dependentDialects = ["::mlir::tfm::TfmDialect"];
}

#endif // TFM_TRANSFORMS_PASSES_TD
