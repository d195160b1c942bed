//===- TfmOps.td - Operations of the tfm dialect ------------*- tablegen -*-===//
//
// Shape rules are written once, in TypeInference.cpp, and reached from both
// the verifiers and InferTypeOpInterface. Semantics are fixed by the reference
// interpreter (compiler/lib/Reference), which every lowering is tested against.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_IR_TFMOPS_TD
#define TFM_IR_TFMOPS_TD

include "tfm/IR/TfmDialect.td"
include "tfm/IR/TfmAttrs.td"
include "tfm/IR/TfmInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"

//===----------------------------------------------------------------------===//
// Projections
//===----------------------------------------------------------------------===//

def Tfm_MatmulOp : Tfm_PureOp<"matmul",
    [Tfm_AxisMapped, Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "batched matrix product with optional transposes";
  let description = [{
    Multiplies the two innermost dimensions of `lhs` and `rhs`; the leading
    (batch) dimensions broadcast as in numpy.

    Shape rules: both operands have rank >= 2. With `transpose_lhs` the last
    two dimensions of `lhs` are read as `[K, M]` instead of `[M, K]`; with
    `transpose_rhs`, `rhs` is read as `[N, K]` instead of `[K, N]`. The
    contracting sizes must agree, the batch dimensions must broadcast, and the
    result is `[broadcast(batch)..., M, N]`. All element types are equal.

    ```mlir
    %s = tfm.matmul %q, %k transpose_rhs
        : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$lhs, Tfm_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    attr-dict `:` functional-type(operands, results)
  }];
}

def Tfm_LinearOp : Tfm_PureOp<"linear",
    [Tfm_AxisMapped, Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "affine projection x·Wᵀ + b, with an optional activation";
  let description = [{
    Computes `activation(input · weightᵀ + bias)` over the last dimension of
    `input`, as `torch.nn.Linear` does. A bias with an activation is what
    `tfm-fuse-bias-activation` produces.

    Shape rules: `input` is `[..., K]` (rank >= 1), `weight` is `[N, K]`,
    `bias`, when present, is `[N]`; the result is `[..., N]`. All element
    types are equal.

    ```mlir
    %y = tfm.linear %x, %w, %b activation = gelu
        : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$weight,
                       Optional<Tfm_FloatTensor>:$bias,
                       DefaultValuedAttr<Tfm_Activation,
                                         "::mlir::tfm::Activation::none">:$activation);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? (`activation` `=` $activation^)?
    attr-dict `:` functional-type(operands, results)
  }];
}

def Tfm_RotaryOp : Tfm_PureOp<"rotary",
    [Tfm_AxisMapped, Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "rotary position embedding: input · cos + rotate(input) · sin";
  let description = [{
    RoPE over the last axis, of even width 2h: `rotate` pairs element `i`
    with element `i + h` (`rotate_half`: `[-x[h:], x[:h]]`), or with
    `interleaved`, element `2j` with `2j + 1` (`[-x1, x0, -x3, x2, ..]`).
    `cos` and `sin` broadcast to the input's shape (the tables of the
    positions, `[.., S, 2h]`). `tfm-fuse-rotary` makes it of the exporter's
    slices, negation, concatenation, products and sum; a partial rotary
    embedding is one of a slice of the heads.

    Shape rules: the result is the input's type; `cos` and `sin` broadcast
    to it, of its element type.

    ```mlir
    %y = tfm.rotary %q, %cos, %sin
        : (tensor<1x4x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x4x8x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$cos,
                       Tfm_FloatTensor:$sin, UnitAttr:$interleaved);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $cos `,` $sin (`interleaved` $interleaved^)?
    attr-dict `:` functional-type(operands, results)
  }];
}

def Tfm_GatedLinearOp : Tfm_PureOp<"gated_linear",
    [Tfm_AxisMapped, InferTypeOpAdaptor]> {
  let summary = "a packed projection whose activated first half gates its second";
  let description = [{
    The gated MLP of Llama and its kin (SwiGLU with `silu`, GeGLU with
    `gelu`): with `h = input · weightᵀ + bias` of width 2F,
    `result = activation(h[..., :F]) · h[..., F:]`. The weight is the gate's
    rows, then the up projection's, so that one GEMM computes both and the
    product is its epilogue. `tfm-fuse-gated-mlp` produces it; training
    splits it back into the projection, the activation and the product.

    Shape rules: those of `tfm.linear` for `h`, whose width 2F must be even;
    the result is `[..., F]`.

    ```mlir
    %y = tfm.gated_linear %x, %w activation = silu
        : (tensor<2x8x16xf32>, tensor<96x16xf32>) -> tensor<2x8x48xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$weight,
                       Optional<Tfm_FloatTensor>:$bias,
                       Tfm_Activation:$activation);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? `activation` `=` $activation
    attr-dict `:` functional-type(operands, results)
  }];
}

def Tfm_Conv2DOp : Tfm_PureOp<"conv2d", [Tfm_AxisMapped, Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "2-D convolution with groups, padding, strides and dilations";
  let description = [{
    Computes, for image n, output channel m and position (y, x),
    `bias[m] + Σ input[n, g·Cg + c, y·sh + i·dh − pt, x·sw + j·dw − pl] ·
    weight[m, c, i, j]` over c < Cg, i < KH, j < KW, where the group
    g = m / (M / group), Cg = C / group, and positions outside the input
    read zero. A 1-D convolution is one with H = KH = 1.

    Shape rules: `input` is `[N, C, H, W]`, `weight` `[M, C / group, KH, KW]`
    with `group` dividing C and M, `bias` (optional) `[M]`; `strides` and
    `dilations` are two positive values (h, w), `pads` four non-negative
    ones (top, left, bottom, right). The result is `[N, M, OH, OW]` with
    `OH = (H + pt + pb − dh·(KH − 1) − 1) / sh + 1`, which must be positive,
    and likewise OW.

    ```mlir
    %y = tfm.conv2d %x, %w, %b strides = [4, 4] pads = [0, 0, 0, 0]
        dilations = [1, 1] group = 1
        : (tensor<1x3x32x32xf32>, tensor<16x3x4x4xf32>, tensor<16xf32>)
        -> tensor<1x16x8x8xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$weight,
                       Optional<Tfm_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations, I64Attr:$group);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? `strides` `=` $strides `pads` `=` $pads
    `dilations` `=` $dilations `group` `=` $group attr-dict `:`
    functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Elementwise arithmetic
//===----------------------------------------------------------------------===//

class Tfm_BinaryOp<string mnemonic, string expr, list<Trait> traits = []>
    : Tfm_PureOp<mnemonic,
                 !listconcat(traits, [InferTypeOpAdaptor, Tfm_Differentiable,
                                     Tfm_AxisMapped])> {
  let summary = "elementwise " # expr # " with numpy broadcasting";
  let description = [{
    Computes `}] # expr # [{` elementwise.

    Shape rules: the operands have the same element type; their shapes
    broadcast as in numpy (dimensions aligned from the right, each pair equal
    or one of them 1), and the result has the broadcast shape.

    ```mlir
    %r = tfm.}] # mnemonic # [{ %x, %y
        : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins Tfm_NumericTensor:$lhs, Tfm_NumericTensor:$rhs);
  let results = (outs Tfm_NumericTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
}

def Tfm_AddOp : Tfm_BinaryOp<"add", "lhs + rhs", [Commutative]> {
  let hasCanonicalizer = 1;
}
def Tfm_SubOp : Tfm_BinaryOp<"sub", "lhs - rhs">;
def Tfm_MulOp : Tfm_BinaryOp<"mul", "lhs * rhs", [Commutative]>;
def Tfm_DivOp : Tfm_BinaryOp<"div", "lhs / rhs">;
def Tfm_PowOp : Tfm_BinaryOp<"pow", "lhs ^ rhs">;
def Tfm_MaxOp : Tfm_BinaryOp<"max", "max(lhs, rhs)", [Commutative]>;
def Tfm_MinOp : Tfm_BinaryOp<"min", "min(lhs, rhs)", [Commutative]>;

def Tfm_CompareOp : Tfm_PureOp<"compare", [Tfm_AxisMapped, InferTypeOpAdaptor]> {
  let summary = "elementwise comparison with numpy broadcasting";
  let description = [{
    Computes `lhs <predicate> rhs` elementwise into an i1 tensor, with
    `predicate` one of `eq`, `ne`, `lt`, `le`, `gt`, `ge`.

    Shape rules: the operands have the same element type and broadcast as in
    numpy; the result has the broadcast shape and element type i1.

    ```mlir
    %m = tfm.compare lt, %x, %y : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xi1>
    ```
  }];
  let arguments = (ins Tfm_ComparePredicate:$predicate, Tfm_AnyTensor:$lhs,
                       Tfm_AnyTensor:$rhs);
  let results = (outs RankedTensorOf<[I1]>:$result);
  let assemblyFormat = [{
    $predicate `,` $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def Tfm_SelectOp : Tfm_PureOp<"select", [Tfm_AxisMapped, Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "elementwise choice between two tensors by a boolean condition";
  let description = [{
    `result = condition ? true_value : false_value`, elementwise, with all
    three operands broadcast together as in numpy (ONNX Where).

    Shape rules: `condition` is i1; the two values have the same element
    type; the three shapes broadcast, and the result has the broadcast shape.

    ```mlir
    %r = tfm.select %causal, %scores, %neg_inf
        : (tensor<8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I1]>:$condition,
                       Tfm_AnyTensor:$true_value, Tfm_AnyTensor:$false_value);
  let results = (outs Tfm_AnyTensor:$result);
  let assemblyFormat = [{
    $condition `,` $true_value `,` $false_value attr-dict `:`
    functional-type(operands, results)
  }];
}

def Tfm_CastOp : Tfm_PureOp<"cast", [Tfm_AxisMapped, Tfm_Differentiable]> {
  let summary = "converts elements to another element type";
  let description = [{
    Converts every element: floats round to the nearest representable value,
    float to integer truncates toward zero, anything to i1 is `x != 0`, and i1
    to numbers is 0 or 1.

    Shape rules: the result has the input's shape.

    ```mlir
    %f = tfm.cast %mask : tensor<2x8xi64> -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Tfm_AnyTensor:$input);
  let results = (outs Tfm_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Activations and normalization
//===----------------------------------------------------------------------===//

def Tfm_ReluOp : Tfm_PureOp<"relu",
    [Tfm_AxisMapped, Tfm_Differentiable, SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "rectified linear unit, max(x, 0)";
  let description = [{
    Shape rules: the result has the type of the input.

    ```mlir
    %y = tfm.relu %x : tensor<2x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasFolder = 1;
}

def Tfm_GeluOp : Tfm_PureOp<"gelu",
    [Tfm_AxisMapped, Tfm_Differentiable, SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "gaussian error linear unit, exact or with the tanh approximation";
  let description = [{
    With `approximate = none` (the default) computes
    `0.5·x·(1 + erf(x/√2))`; with `approximate = tanh` computes
    `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`, as PyTorch does.

    Shape rules: the result has the type of the input.

    ```mlir
    %y = tfm.gelu %x approximate = tanh : tensor<2x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input,
                       DefaultValuedAttr<Tfm_GeluApproximation,
                           "::mlir::tfm::GeluApproximation::none">:$approximate);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`approximate` `=` $approximate^)? attr-dict `:` type($input)
  }];
}

def Tfm_SoftmaxOp : Tfm_PureOp<"softmax",
    [Tfm_AxisMapped, Tfm_Differentiable, SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "softmax along one axis";
  let description = [{
    Computes `exp(x - max(x)) / sum(exp(x - max(x)))` along `axis`
    (negative values count from the back; the default is -1). A slice whose
    entries are all -inf yields NaN, as the unfused decomposition does.

    Shape rules: `-rank <= axis < rank`; the result has the type of the input.

    ```mlir
    %p = tfm.softmax %s axis = -1 : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`axis` `=` $axis^)? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Tfm_LayerNormOp : Tfm_PureOp<"layer_norm",
    [Tfm_AxisMapped, Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "layer normalization over the trailing dimensions";
  let description = [{
    Normalizes `input` over the dimensions `[axis, rank)` to zero mean and
    unit (biased) variance, then applies `scale` and the optional `bias`:
    `(x - mean) / sqrt(var + epsilon) · scale + bias`, as ONNX
    LayerNormalization and `torch.nn.LayerNorm` do.

    With `rms`, it is RMSNorm (the norm of Llama and T5): no mean is
    subtracted, and the row is divided by its root mean square,
    `x / sqrt(mean(x²) + epsilon) · scale + bias` (the bias is usually
    absent). That is layer norm with the mean held at zero, which is how
    every backend computes it.

    Shape rules: `-rank <= axis < rank`; `scale` and `bias` have exactly the
    normalized shape `input.shape[axis:]`; `epsilon > 0`. The result has the
    type of the input.

    ```mlir
    %y = tfm.layer_norm %x, %gamma, %beta {epsilon = 1.0e-05}
        : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    %r = tfm.layer_norm %x, %gamma {epsilon = 1.0e-06, rms}
        : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$scale,
                       Optional<Tfm_FloatTensor>:$bias,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon,
                       UnitAttr:$rms);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

def Tfm_EmbeddingOp : Tfm_PureOp<"embedding",
    [Tfm_AxisMapped, Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "gathers rows of an embedding table by index";
  let description = [{
    `result[i..., :] = table[indices[i...], :]`. An index outside
    `[0, V)` is an error at run time.

    Shape rules: `table` is `[V, D]`, `indices` is any shape `[I...]` of i32
    or i64; the result is `[I..., D]` with the table's element type.

    ```mlir
    %e = tfm.embedding %table, %ids
        : (tensor<100x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$table, Tfm_IndexTensor:$indices);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $indices attr-dict `:` functional-type(operands, results)
  }];
}

def Tfm_PositionalEncodingOp : Tfm_PureOp<"positional_encoding"> {
  let summary = "the sinusoidal position table of the Transformer paper";
  let description = [{
    Produces the `[S, D]` table
    `PE[p, 2i] = sin(p / 10000^(2i/D))`, `PE[p, 2i+1] = cos(p / 10000^(2i/D))`.
    Add it to the token embeddings to encode positions.

    Shape rules: the result is a rank-2 float tensor with an even `D`.

    ```mlir
    %pe = tfm.positional_encoding : tensor<8x16xf32>
    ```
  }];
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
  // A constant table: folded, so that no target computes sin and cos of
  // large angles at run time (a GPU has them in f64 only through libdevice).
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Tfm_TransposeOp : Tfm_PureOp<"transpose",
    [Tfm_AxisMapped, Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "permutes the dimensions of a tensor";
  let description = [{
    `result.shape[i] = input.shape[permutation[i]]`, as numpy's `transpose`.

    Shape rules: `permutation` is a permutation of `[0, rank)`.

    ```mlir
    %t = tfm.transpose %x permutation = [0, 2, 1, 3]
        : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins Tfm_AnyTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Tfm_AnyTensor:$result);
  let assemblyFormat = [{
    $input `permutation` `=` $permutation attr-dict `:` type($input) `->` type($result)
  }];
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Tfm_ReshapeOp : Tfm_PureOp<"reshape", [Tfm_AxisMapped, Tfm_Differentiable]> {
  let summary = "reinterprets a tensor with another shape of the same size";
  let description = [{
    Keeps the elements in row-major order and gives them the result's shape.

    Shape rules: the element types are equal and the element counts are equal.

    ```mlir
    %r = tfm.reshape %x : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
    ```
  }];
  let arguments = (ins Tfm_AnyTensor:$input);
  let results = (outs Tfm_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Tfm_ConcatOp : Tfm_PureOp<"concat",
    [Tfm_AxisMapped, Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "joins tensors along one axis";
  let description = [{
    Shape rules: at least one input; all inputs have the same rank and
    element type, and equal sizes in every dimension but `axis`
    (`-rank <= axis < rank`). The result's `axis` size is the sum.

    ```mlir
    %c = tfm.concat %a, %b axis = 1
        : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Variadic<Tfm_AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs Tfm_AnyTensor:$result);
  let assemblyFormat = [{
    $inputs `axis` `=` $axis attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
}

def Tfm_SplitOp : Tfm_PureOp<"split",
    [Tfm_AxisMapped, Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "cuts a tensor into consecutive pieces along one axis";
  let description = [{
    Result `i` holds `sizes[i]` consecutive slices of `input` along `axis`.

    Shape rules: `-rank <= axis < rank`; no size is negative and the sizes
    add up to `input.shape[axis]`; there is one result per size.

    ```mlir
    %q, %k, %v = tfm.split %qkv axis = 2 sizes = [16, 16, 16]
        : tensor<2x8x48xf32> -> tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins Tfm_AnyTensor:$input, I64Attr:$axis, DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Tfm_AnyTensor>:$results);
  let assemblyFormat = [{
    $input `axis` `=` $axis `sizes` `=` $sizes attr-dict `:` type($input) `->` type($results)
  }];
  let hasFolder = 1;
}

def Tfm_DropoutOp : Tfm_PureOp<"dropout",
    [Tfm_AxisMapped, AllTypesMatch<["input", "result"]>, Tfm_Differentiable]> {
  let summary = "zeroes elements at random in training; the identity otherwise";
  let description = [{
    Without `training` this is the identity (and folds away, unless it is
    `trainable`: imported for a training step, which `tfm-autodiff` makes
    `training` in `@train_step`; it folds in the forward function once
    `tfm-autodiff` has cloned it). With `training`,
    element `i` is kept when `u(s, i) >= rate`, where `u` is the counter-based
    generator of `runtime/include/tfm/CounterRNG.h`, and kept elements are
    scaled by `1 / (1 - rate)`. The stream `s` is `seed` itself, or, given a
    `step` (the optimizer's step count, a rank-0 i64), `tfm_rng_stream(seed,
    step)`, so every training step draws a fresh mask. The same seed and step
    give the same mask on every backend, so a training run is reproducible.

    Shape rules: `0 <= rate < 1`; `step`, when present, is `tensor<i64>`; the
    result has the type of the input.

    ```mlir
    %y = tfm.dropout %x training step %t {rate = 1.0e-01, seed = 7 : i64}
        : tensor<2x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input,
                       Optional<Tfm_StepTensor>:$step,
                       DefaultValuedAttr<F64Attr, "0.1">:$rate,
                       DefaultValuedAttr<I64Attr, "0">:$seed,
                       UnitAttr:$training, UnitAttr:$trainable);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`training` $training^)? (`trainable` $trainable^)? (`step` $step^)?
    attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Tfm_BroadcastOp : Tfm_PureOp<"broadcast", [Tfm_AxisMapped, Tfm_Differentiable]> {
  let summary = "repeats a tensor to a larger shape by numpy broadcasting";
  let description = [{
    Materializes the numpy broadcast of `input` to the result's shape (ONNX
    Expand, with the shape known statically).

    Shape rules: the element types are equal and `input` broadcasts to the
    result's shape.

    ```mlir
    %b = tfm.broadcast %x : tensor<1x8xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Tfm_AnyTensor:$input);
  let results = (outs Tfm_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Tfm_SliceOp : Tfm_PureOp<"slice", [Tfm_AxisMapped, Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "takes a strided window of a tensor";
  let description = [{
    Along dimension `d`, result index `i` reads input index
    `starts[d] + i * steps[d]`, for `i < sizes[d]`. Steps may be negative.

    Shape rules: `starts`, `sizes` and `steps` have one entry per dimension;
    steps are non-zero, sizes are non-negative, and every index read lies in
    `[0, input.shape[d])`. The result shape is `sizes`.

    ```mlir
    %s = tfm.slice %x starts = [0, 2] sizes = [4, 3] steps = [1, 1]
        : tensor<4x8xf32> -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Tfm_AnyTensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$sizes, DenseI64ArrayAttr:$steps);
  let results = (outs Tfm_AnyTensor:$result);
  let assemblyFormat = [{
    $input `starts` `=` $starts `sizes` `=` $sizes `steps` `=` $steps attr-dict
    `:` type($input) `->` type($result)
  }];
  let hasFolder = 1;
}

def Tfm_GatherOp : Tfm_PureOp<"gather", [Tfm_AxisMapped, Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "gathers slices along one axis by index";
  let description = [{
    ONNX Gather: `result[a..., i..., b...] = input[a..., indices[i...], b...]`
    where `a` spans the dimensions before `axis`. A negative index counts
    from the end; an index outside `[-n, n)` is an error at run time.
    `tfm.embedding` is the rank-2, axis-0 case that models use.

    Shape rules: `-rank <= axis < rank`; the result shape is
    `input.shape[:axis] + indices.shape + input.shape[axis+1:]`.

    ```mlir
    %g = tfm.gather %x, %i axis = 1 : (tensor<2x5x3xf32>, tensor<4xi64>) -> tensor<2x4x3xf32>
    ```
  }];
  let arguments = (ins Tfm_AnyTensor:$input, Tfm_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Tfm_AnyTensor:$result);
  let assemblyFormat = [{
    $input `,` $indices `axis` `=` $axis attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
}

def Tfm_ScatterNDOp : Tfm_PureOp<"scatter_nd", [InferTypeOpAdaptor]> {
  let summary = "writes slices into a copy of a tensor at run-time positions";
  let description = [{
    ONNX ScatterND: the result starts as `input`; with `k` the last dimension
    of `indices`, each position `p` of `indices.shape[:-1]` names the slice
    `input[indices[p, 0], ..., indices[p, k-1], ...]`, which `updates[p, ...]`
    replaces (`none`) or is combined into (`add`, `mul`, `max`, `min`).
    Positions are applied in row-major order, so with `none` the last of
    repeated positions wins. A negative index counts from the end; an index
    outside `[-n, n)` is an error at run time. Caches that models update in
    place (a decoder's keys and values) are written this way.

    Shape rules: `1 <= k <= rank(input)`; `updates.shape` is
    `indices.shape[:-1] + input.shape[k:]`; the result has input's type.

    ```mlir
    %r = tfm.scatter_nd %cache, %pos, %kv reduction = none : (tensor<2x8x4xf32>, tensor<2x1x2xi64>, tensor<2x1x4xf32>) -> tensor<2x8x4xf32>
    ```
  }];
  let arguments = (ins Tfm_AnyTensor:$input, Tfm_IndexTensor:$indices,
                       Tfm_AnyTensor:$updates,
                       Tfm_ScatterReduction:$reduction);
  let results = (outs Tfm_AnyTensor:$result);
  let assemblyFormat = [{
    $input `,` $indices `,` $updates `reduction` `=` $reduction attr-dict `:`
    functional-type(operands, results)
  }];
  // Writing every element in order (a cache written whole) is its updates.
  let hasFolder = 1;
}

def Tfm_TopKOp : Tfm_PureOp<"top_k", [Tfm_AxisMapped, InferTypeOpAdaptor]> {
  let summary = "the k largest (or smallest) elements along an axis";
  let description = [{
    ONNX TopK: `values` holds the `k` largest elements of each line along
    `axis` (the smallest with `smallest`), in order, and `indices` their
    positions on the line. Equal elements keep their order (the lower index
    first); NaN counts as larger than every number.

    Shape rules: `-rank <= axis < rank`; `0 <= k <= input.shape[axis]`;
    both results have input's shape with `k` at `axis`.

    ```mlir
    %v, %i = tfm.top_k %logits k = 5 axis = -1 : tensor<2x100xf32> -> tensor<2x5xf32>, tensor<2x5xi64>
    ```
  }];
  let arguments = (ins Tfm_NumericTensor:$input, I64Attr:$k, I64Attr:$axis,
                       UnitAttr:$smallest);
  let results = (outs Tfm_NumericTensor:$values, RankedTensorOf<[I64]>:$indices);
  let assemblyFormat = [{
    $input `k` `=` $k `axis` `=` $axis (`smallest` $smallest^)? attr-dict `:`
    type($input) `->` type($values) `,` type($indices)
  }];
}

def Tfm_ReduceOp : Tfm_PureOp<"reduce", [Tfm_AxisMapped, Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "sum, mean, max or min over some axes";
  let description = [{
    Combines the elements along `axes` with `kind`. With `keepdims` the
    reduced dimensions stay as size 1; otherwise they are dropped.

    Shape rules: `axes` are distinct and in `[-rank, rank)`; `mean` needs a
    float tensor.

    ```mlir
    %m = tfm.reduce mean %x axes = [-1] keepdims : tensor<2x8x16xf32> -> tensor<2x8x1xf32>
    ```
  }];
  let arguments = (ins Tfm_ReduceKind:$kind, Tfm_NumericTensor:$input,
                       DenseI64ArrayAttr:$axes, UnitAttr:$keepdims);
  let results = (outs Tfm_NumericTensor:$result);
  let assemblyFormat = [{
    $kind $input `axes` `=` $axes (`keepdims` $keepdims^)? attr-dict `:`
    type($input) `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Attention and loss
//===----------------------------------------------------------------------===//

def Tfm_AttentionOp : Tfm_PureOp<"attention",
    [Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "scaled dot-product attention with an optional mask";
  let description = [{
    Computes `softmax(scale · query · keyᵀ ⊕ mask) · value` over the last
    axis, where `⊕` adds an additive (float) mask or, for an i1 mask, keeps
    the scores where the mask is true and sets the others to -inf. With
    `causal`, score `(i, j)` is also dropped when `j > i` (the top-left
    aligned lower triangle, as PyTorch's `is_causal`). `scale` defaults to
    `1/sqrt(D)`.

    Shape rules: `query` is `[B..., Sq, D]`, `key` is `[B..., Sk, D]`,
    `value` is `[B..., Sk, Dv]`, with equal batch dimensions `B...`; the mask
    broadcasts to `[B..., Sq, Sk]`. The result is `[B..., Sq, Dv]`.

    Grouped-query attention (and multi-query, one key head): the last batch
    dimension of `key` and `value`, their heads, may be `H/G` where the
    query's is `H`. Query head `h` then reads key and value head `h / G`,
    the order in which an exporter's repeat (`expand` of a new axis after
    the heads, then `reshape`) lays the copies out. No copy exists here.

    ```mlir
    %o = tfm.attention %q, %k, %v, mask %m causal
        : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x1x1x8xi1>)
        -> tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$query, Tfm_FloatTensor:$key,
                       Tfm_FloatTensor:$value, Optional<Tfm_MaskTensor>:$mask,
                       OptionalAttr<F64Attr>:$scale, UnitAttr:$causal);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`,` `mask` $mask^)? (`causal` $causal^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// The query heads that read each key and value head: 1, or G for
    /// grouped-query attention.
    int64_t getKVGroup();
  }];
}

def Tfm_CrossEntropyOp : Tfm_PureOp<"cross_entropy",
    [Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "mean cross-entropy over the last axis, with label smoothing";
  let description = [{
    For each position `t` whose label is not `ignore_index`, with
    `p = log_softmax(logits[t])` over `K` classes:
    `loss_t = -(1 - ε)·p[label_t] - (ε/K)·Σ_k p[k]`, which is PyTorch's
    label smoothing (target = (1-ε)·one-hot + ε/K). The result is the mean of
    `loss_t` over the positions that are not ignored.

    Shape rules: `logits` is `[T..., K]`, `labels` is `[T...]` of i32 or i64;
    `0 <= label_smoothing <= 1`. The result is a rank-0 tensor of the logits'
    element type.

    ```mlir
    %l = tfm.cross_entropy %logits, %labels {label_smoothing = 1.0e-01}
        : (tensor<2x8x100xf32>, tensor<2x8xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$logits, Tfm_IndexTensor:$labels,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Quantization: integers with explicit scales and zero points
//===----------------------------------------------------------------------===//

// How a scale (and its zero point) covers the tensor it quantizes: one for
// the tensor (rank 0), one per index of `axis` (rank 1, `block_size` 0), or
// one per block of `block_size` consecutive indices along `axis` (the
// tensor's rank, its size along `axis` ceil(n / block_size), the other
// sizes the tensor's). docs/dialect.md says why the dialect spells them as
// operands rather than as quant types.

def Tfm_QuantizeOp : Tfm_PureOp<"quantize", [Tfm_AxisMapped]> {
  let summary = "float to integer: saturate(round(x / scale) + zero_point)";
  let description = [{
    ONNX QuantizeLinear: `x / scale` is rounded to the input's float type,
    then to the nearest integer (halves to even), the zero point added, and
    the sum saturated to the result type's range (i4 [-8, 7], ui4 [0, 15],
    i8 [-128, 127], ...). A NaN quotient gives the zero point. Without a
    zero point it is 0.

    Shape rules: the scale's granularity as above; the zero point has the
    scale's shape and the result's element type; the result has the
    input's shape.

    ```mlir
    %q = tfm.quantize %x, %s, %z axis = 0 : (tensor<4x8xf32>, tensor<4xf32>, tensor<4xi8>) -> tensor<4x8xi8>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$scale,
                       Optional<Tfm_QuantizedTensor>:$zero_point,
                       DefaultValuedAttr<I64Attr, "1">:$axis,
                       DefaultValuedAttr<I64Attr, "0">:$block_size);
  let results = (outs Tfm_QuantizedTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $zero_point^)? (`axis` `=` $axis^)?
    (`block_size` `=` $block_size^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfm_DequantizeOp : Tfm_PureOp<"dequantize", [Tfm_AxisMapped, InferTypeOpAdaptor]> {
  let summary = "integer to float: (x - zero_point) · scale";
  let description = [{
    ONNX DequantizeLinear, in the scale's float type. An i32 input (a
    quantized bias) takes no zero point but 0.

    Shape rules: the scale's granularity as above; the zero point has the
    scale's shape and the input's element type; the result has the input's
    shape and the scale's element type.

    ```mlir
    %w = tfm.dequantize %q, %s, %z axis = 1 block_size = 32
        : (tensor<64x128xui4>, tensor<64x4xf32>, tensor<64x4xui4>) -> tensor<64x128xf32>
    ```
  }];
  let arguments = (ins Tfm_DequantizableTensor:$input, Tfm_FloatTensor:$scale,
                       Optional<Tfm_QuantizedTensor>:$zero_point,
                       DefaultValuedAttr<I64Attr, "1">:$axis,
                       DefaultValuedAttr<I64Attr, "0">:$block_size);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $zero_point^)? (`axis` `=` $axis^)?
    (`block_size` `=` $block_size^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Tfm_DynamicQuantizeOp : Tfm_PureOp<"dynamic_quantize", [InferTypeOpAdaptor]> {
  let summary = "float to ui8 with the scale and zero point of the tensor's own range";
  let description = [{
    ONNX DynamicQuantizeLinear, in f32 as its definition computes: with
    `lo = min(0, min(x))` and `hi = max(0, max(x))`, `scale = (hi - lo) /
    255` (1 when `hi == lo`: every element is 0), `zero_point =
    round(clamp(-lo / scale, 0, 255))`, and `result = quantize(x, scale,
    zero_point)`. NaN elements take no part in the range.

    Shape rules: the input is f32; `result` has its shape, `scale` (f32) and
    `zero_point` (ui8) are rank 0.

    ```mlir
    %q, %s, %z = tfm.dynamic_quantize %x : tensor<2x8x16xf32> -> (tensor<2x8x16xui8>, tensor<f32>, tensor<ui8>)
    ```
  }];
  let arguments = (ins TensorOf<[F32]>:$input);
  let results = (outs TensorOf<[UI8]>:$result, 0DTensorOf<[F32]>:$scale,
                      0DTensorOf<[UI8]>:$zero_point);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` `(` type($result) `,` type($scale) `,` type($zero_point) `)`
  }];
}

def Tfm_MatmulIntegerOp : Tfm_PureOp<"matmul_integer",
    [Tfm_AxisMapped, InferTypeOpAdaptor, AttrSizedOperandSegments]> {
  let summary = "integer matrix product with zero points, accumulated in i32";
  let description = [{
    ONNX MatMulInteger: `Σ_k (lhs[.., m, k] - lhs_zero_point) · (rhs[.., k, n]
    - rhs_zero_point)` in i32 (wrapping), the batch dimensions broadcast as
    in numpy. A zero point is absent (0), rank 0 (the tensor's), or
    broadcasts to its operand's shape with the contracted size 1: a row's
    zero point for `lhs` (`[.., M, 1]`), a column's for `rhs` (`[.., 1, N]`).

    Shape rules: those of `tfm.matmul`; each zero point has its operand's
    element type; the result is i32.

    ```mlir
    %y = tfm.matmul_integer %a, %b lhs_zero_point %az rhs_zero_point %bz
        : (tensor<8x16xui8>, tensor<16x4xi8>, tensor<ui8>, tensor<4xi8>) -> tensor<8x4xi32>
    ```
  }];
  let arguments = (ins Tfm_Integer8Tensor:$lhs, Tfm_Integer8Tensor:$rhs,
                       Optional<Tfm_Integer8Tensor>:$lhs_zero_point,
                       Optional<Tfm_Integer8Tensor>:$rhs_zero_point);
  let results = (outs TensorOf<[I32]>:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`lhs_zero_point` $lhs_zero_point^)?
    (`rhs_zero_point` $rhs_zero_point^)? attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Fused ops (produced by the fusion passes; names are fixed)
//===----------------------------------------------------------------------===//

def Tfm_QKVProjectionOp : Tfm_PureOp<"qkv_projection",
    [Tfm_AxisMapped, Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "one GEMM over concatenated projection weights, split into its parts";
  let description = [{
    Computes `y = input · weightᵀ + bias` once and splits the last dimension
    of `y` into consecutive parts of `sizes`. Three parts are Q, K and V; two
    parts are the K and V of cross-attention, which read the encoder memory.

    Shape rules: `input` is `[..., K]`, `weight` is `[Σsizes, K]`, `bias`,
    when present, is `[Σsizes]`; there are two or three positive sizes, and
    result `i` is `[..., sizes[i]]`.

    ```mlir
    %q, %k, %v = tfm.qkv_projection %x, %w, %b sizes = [16, 16, 16]
        : (tensor<2x8x16xf32>, tensor<48x16xf32>, tensor<48xf32>)
        -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$weight,
                       Optional<Tfm_FloatTensor>:$bias, DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Tfm_FloatTensor>:$results);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? `sizes` `=` $sizes
    attr-dict `:` functional-type(operands, results)
  }];
}

def Tfm_MaskedSoftmaxOp : Tfm_PureOp<"masked_softmax",
    [Tfm_AxisMapped, Tfm_Differentiable, InferTypeOpAdaptor]> {
  let summary = "scale, mask and softmax over the last axis in one op";
  let description = [{
    Computes `softmax(scale · input ⊕ mask)` over the last axis. With
    `mask_kind = additive` the (float) mask is added; with `boolean` the
    scores where the i1 mask is false become -inf; with `none` there is no
    mask. With `causal`, entry `(i, j)` of the last two dimensions is also
    dropped when `j > i`.

    Shape rules: `input` has rank >= 1, and rank >= 2 with `causal`; the mask
    broadcasts to the input's shape, and its element type agrees with
    `mask_kind` (float for additive, i1 for boolean, absent for none). The
    result has the input's type.

    ```mlir
    %p = tfm.masked_softmax %s, mask %m mask_kind = additive causal {scale = 2.5e-01}
        : (tensor<2x4x8x8xf32>, tensor<2x1x1x8xf32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Optional<Tfm_MaskTensor>:$mask,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale,
                       DefaultValuedAttr<Tfm_MaskKind,
                                         "::mlir::tfm::MaskKind::none">:$mask_kind,
                       UnitAttr:$causal);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`,` `mask` $mask^)? (`mask_kind` `=` $mask_kind^)? (`causal` $causal^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfm_AddLayerNormOp : Tfm_PureOp<"add_layer_norm", [Tfm_AxisMapped, Tfm_Differentiable]> {
  let summary = "residual add followed by layer normalization";
  let description = [{
    Computes `s = input + residual` (numpy broadcasting) and
    `layer_norm(s, scale, bias)` over `[axis, rank)`. The optional second
    result is `s` itself, for pre-LN residual streams where the sum also
    feeds the next residual. With `rms`, the norm is RMSNorm, as for
    `tfm.layer_norm`.

    Shape rules: those of `tfm.add` for `s`, then those of `tfm.layer_norm`
    on `s`. The results have the type of `s`.

    ```mlir
    %y, %s = tfm.add_layer_norm %x, %r, %gamma, %beta {epsilon = 1.0e-05}
        : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
        -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>)
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$residual,
                       Tfm_FloatTensor:$scale, Optional<Tfm_FloatTensor>:$bias,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon,
                       UnitAttr:$rms);
  let results = (outs Tfm_FloatTensor:$output, Optional<Tfm_FloatTensor>:$sum);
  let assemblyFormat = [{
    $input `,` $residual `,` $scale (`,` $bias^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfm_QuantizedLinearOp : Tfm_PureOp<"quantized_linear",
    [Tfm_AxisMapped, InferTypeOpAdaptor, AttrSizedOperandSegments]> {
  let summary = "a linear layer whose weight is quantized, and maybe its input";
  let description = [{
    `activation(x' · w'ᵀ + bias)` where `w' = dequantize(weight,
    weight_scale, weight_zero_point)` and `x'` is the input as the
    `input_quantization` reads it: `none`, the input itself (weight-only
    quantization); `dynamic`, `dequantize(dynamic_quantize(input))` over the
    whole input; `static`, `dequantize(quantize(input, input_scale,
    input_zero_point))`; `blocked`, each row cut into the weight's blocks of
    `block_size` along K, each block rounded to symmetric int8 by a scale
    of its own, `s · clamp(round_half_even(x / s), -127, 127)` with `s =
    max |x| / 127` over the block (NaNs ignored, and read as 0; a block of
    zeros stays 0): what `MatMulNBits` with `accuracy_level` 4 allows, so
    that a kernel may take int8 dot products. `tfm-fuse-quantized-linear`
    makes it of what exporters write: `MatMulInteger` on
    `DynamicQuantizeLinear`, a matmul of a `DequantizeLinear`ed weight (QDQ,
    `MatMulNBits`); the ONNX importer makes the `blocked` ones.

    Shape rules: `input` is `[..., K]`, `weight` `[N, K]` (i4, ui4, i8 or
    ui8); `weight_scale` is rank 0 (the tensor's), `[N]` (each output
    column's) or, with `block_size`, `[N, ceil(K / block_size)]`;
    `weight_zero_point` has its shape and the weight's type; `bias` is
    `[N]`; `input_scale` and `input_zero_point` (i8 or ui8) are rank 0 and
    given exactly with `static`; `dynamic` needs an f32 input, `blocked` a
    `block_size`. Floats share
    one element type; the result is `[..., N]`.

    ```mlir
    %y = tfm.quantized_linear %x, %w scale %s bias %b input_quantization = dynamic activation = gelu
        : (tensor<2x8x64xf32>, tensor<128x64xi8>, tensor<128xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_QuantizedWeightTensor:$weight,
                       Tfm_FloatTensor:$weight_scale,
                       Optional<Tfm_QuantizedWeightTensor>:$weight_zero_point,
                       Optional<Tfm_FloatTensor>:$bias,
                       Optional<Tfm_FloatTensor>:$input_scale,
                       Optional<Tfm_Integer8Tensor>:$input_zero_point,
                       DefaultValuedAttr<Tfm_InputQuantization,
                           "::mlir::tfm::InputQuantization::none">:$input_quantization,
                       DefaultValuedAttr<Tfm_Activation,
                                         "::mlir::tfm::Activation::none">:$activation,
                       DefaultValuedAttr<I64Attr, "0">:$block_size);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `scale` $weight_scale (`zero_point` $weight_zero_point^)?
    (`bias` $bias^)? (`input_scale` $input_scale^)?
    (`input_zero_point` $input_zero_point^)?
    (`input_quantization` `=` $input_quantization^)?
    (`activation` `=` $activation^)? (`block_size` `=` $block_size^)?
    attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Training: parameters, gradients that need ops of their own, optimizers
//===----------------------------------------------------------------------===//

// What tfm.parameter reads and the optimizer updates write: the session's
// training state. Modelled as a resource so that no pass moves a read of a
// parameter across the update that changes it, or merges the two.
def Tfm_TrainingState : Resource<"::mlir::tfm::TrainingStateResource">;

def Tfm_ParameterOp : Tfm_Op<"parameter",
    [MemoryEffects<[MemRead<Tfm_TrainingState>]>]> {
  let summary = "a trainable parameter, with its initial value";
  let description = [{
    The value of the parameter `name` when the enclosing function starts.
    Parameters live in the session that runs the compiled model: they start
    at `initial_value`, `tfm.sgd_update` and `tfm.adam_update` change them
    when a training step ends, and the runtime reads and writes them by
    name. Unlike constants, two parameters with equal values stay distinct,
    and a read is never moved across an update of the same state.

    Shape rules: `initial_value` has the result's type.

    ```mlir
    %w = tfm.parameter "layer0.fc.weight" {initial_value = dense<0.5> : tensor<4x8xf32>}
        : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, ElementsAttr:$initial_value);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tfm_NextStepOp : Tfm_Op<"next_step",
    [MemoryEffects<[MemRead<Tfm_TrainingState>, MemWrite<Tfm_TrainingState>]>]> {
  let summary = "advances the session's training step count and returns it";
  let description = [{
    The session counts training steps from 0. This op adds one and returns
    the new count, so the first step sees 1, as Adam's bias correction and
    the learning-rate schedules expect.

    ```mlir
    %t = tfm.next_step : tensor<i64>
    ```
  }];
  let results = (outs Tfm_StepTensor:$step);
  let assemblyFormat = "attr-dict `:` type($step)";
}

def Tfm_ProcessRankOp : Tfm_Op<"process_rank",
    [MemoryEffects<[MemRead<Tfm_TrainingState>]>]> {
  let summary = "this process's rank in a data-parallel run";
  let description = [{
    0 in one process; the rank that the runtime was given with a
    communicator otherwise (`docs/training.md`). `tfm-autodiff` offsets the
    dropouts' step by it, so that every rank draws its own masks.

    ```mlir
    %r = tfm.process_rank : tensor<i64>
    ```
  }];
  let results = (outs Tfm_StepTensor:$rank);
  let assemblyFormat = "attr-dict `:` type($rank)";
}

def Tfm_CrossEntropyGradOp : Tfm_PureOp<"cross_entropy_grad",
    [AllTypesMatch<["logits", "result"]>]> {
  let summary = "the gradient of tfm.cross_entropy with respect to its logits";
  let description = [{
    With `p = softmax(logits[t])`, `q = (1 - ε)·one-hot(label_t) + ε/K` and
    `n` the number of positions whose label is not `ignore_index`:
    `result[t] = grad · (p - q) / n`, and zero at ignored positions.

    Shape rules: those of `tfm.cross_entropy`; `grad` is the rank-0 gradient
    of the loss, and the result has the logits' type.

    ```mlir
    %d = tfm.cross_entropy_grad %logits, %labels, %g {label_smoothing = 1.0e-01}
        : (tensor<2x8x100xf32>, tensor<2x8xi64>, tensor<f32>) -> tensor<2x8x100xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$logits, Tfm_IndexTensor:$labels,
                       0DTensorOf<[F32, BF16, F16]>:$grad,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfm_LayerNormGradOp : Tfm_PureOp<"layer_norm_grad"> {
  let summary = "the gradients of tfm.layer_norm";
  let description = [{
    The vector-Jacobian products of `tfm.layer_norm` over the dimensions
    `[axis, rank)`, from its input `x`, its `scale` and the gradient `grad`
    of its result. With `rstd = 1 / sqrt(var(x) + epsilon)`,
    `x̂ = (x - mean(x)) · rstd` and `g = grad · scale`, all per normalized
    row:

    * `input_grad = rstd · (g - mean(g) - x̂ · mean(g · x̂))`
    * `scale_grad = Σ grad · x̂` over the leading dimensions
    * `bias_grad = Σ grad` over the leading dimensions

    With `rms`, the gradients of RMSNorm: the mean is held at zero, in x̂
    and in the variance, and the `mean(g)` term drops out.

    One op rather than its dozen elementwise steps, so that a backend can
    compute it in one kernel; the gradient rules of `tfm.layer_norm` and
    `tfm.add_layer_norm` build it.

    Shape rules: `grad` has the type of `input`; `scale` has the normalized
    shape `input.shape[axis:]`; `input_grad` has the input's type and the
    other two results the scale's.

    ```mlir
    %dx, %dg, %db = tfm.layer_norm_grad %x, %gamma, %dy {epsilon = 1.0e-05}
        : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<2x8x16xf32>)
        -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$scale,
                       Tfm_FloatTensor:$grad,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon,
                       UnitAttr:$rms);
  let results = (outs Tfm_FloatTensor:$input_grad, Tfm_FloatTensor:$scale_grad,
                      Tfm_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfm_SoftmaxGradOp : Tfm_PureOp<"softmax_grad",
    [SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "the gradient of tfm.softmax and tfm.masked_softmax";
  let description = [{
    The vector-Jacobian product of a softmax along `axis`, from its result
    `output` (y) and the gradient `grad` (dy) of that result:
    `input_grad = scale · y · (dy - Σ dy · y)`, the sum along `axis`.
    `scale` is the masked softmax's scale of its scores (1 for
    `tfm.softmax`); masked entries have y = 0, so their gradient is 0.

    One op rather than a product, a row sum and two elementwise steps, so
    that a backend can compute it in one pass over each row; the gradient
    rules of `tfm.softmax`, `tfm.masked_softmax` and `tfm.attention` build
    it.

    Shape rules: `-rank <= axis < rank`; `output`, `grad` and the result
    have one type.

    ```mlir
    %dx = tfm.softmax_grad %p, %dp {scale = 1.25e-01} : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$output, Tfm_FloatTensor:$grad,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs Tfm_FloatTensor:$input_grad);
  let assemblyFormat = [{
    $output `,` $grad (`axis` `=` $axis^)? attr-dict `:` type($output)
  }];
  let hasVerifier = 1;
}

def Tfm_AttentionGradOp : Tfm_PureOp<"attention_grad",
    [InferTypeOpAdaptor]> {
  let summary = "the gradient of tfm.attention, recomputing its scores";
  let description = [{
    The vector-Jacobian products of `tfm.attention` with respect to its
    query, key and value, from the forward pass's operands and attributes,
    its result `output` (O) and the gradient `grad` (dO) of that result.
    With `P = masked_softmax(scale · Q·Kᵀ ⊕ mask)` recomputed,
    `dS = scale · P ∘ (dO·Vᵀ - rowsum(dO ∘ O))`:
    `query_grad = dS·K`, `key_grad = dSᵀ·Q`, `value_grad = Pᵀ·dO`.

    One op, so that a backend can recompute P a tile at a time from each
    row's log-sum-exp and never hold the `[Sq, Sk]` scores in memory: the
    forward pass keeps nothing but its result. `tfm.attention`'s gradient
    rule builds it when the mask needs no gradient.

    Shape rules: the operands and attributes are those of `tfm.attention`;
    `output` and `grad` have the attention's result type. The results have
    the types of `query`, `key` and `value`.

    ```mlir
    %dq, %dk, %dv = tfm.attention_grad %q, %k, %v, %o, %do causal
        : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>,
           tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
        -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$query, Tfm_FloatTensor:$key,
                       Tfm_FloatTensor:$value, Tfm_FloatTensor:$output,
                       Tfm_FloatTensor:$grad, Optional<Tfm_MaskTensor>:$mask,
                       OptionalAttr<F64Attr>:$scale, UnitAttr:$causal);
  let results = (outs Tfm_FloatTensor:$query_grad, Tfm_FloatTensor:$key_grad,
                      Tfm_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $grad (`,` `mask` $mask^)?
    (`causal` $causal^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Tfm_EmbeddingGradOp : Tfm_PureOp<"embedding_grad"> {
  let summary = "the gradient of tfm.embedding with respect to its table";
  let description = [{
    Scatters with addition: `result` starts at zero and, for every index
    position `i...`, `result[indices[i...], :] += grad[i..., :]`. Repeated
    indices accumulate. An index outside `[0, V)` adds nothing (the forward
    embedding has already reported it).

    Shape rules: `grad` is `[I..., D]`, `indices` is `[I...]`, the result is
    `[V, D]` with the gradient's element type.

    ```mlir
    %dt = tfm.embedding_grad %g, %ids
        : (tensor<2x8x16xf32>, tensor<2x8xi64>) -> tensor<100x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$grad, Tfm_IndexTensor:$indices);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $indices attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

class Tfm_OptimizerOp<string mnemonic, string rule>
    : Tfm_Op<mnemonic, [MemoryEffects<[MemRead<Tfm_TrainingState>,
                                       MemWrite<Tfm_TrainingState>]>]> {
  let description = [{
    Updates the parameter named `parameter` in place, with its gradient
    `grad` and the step count `step` (from `tfm.next_step`):
    }] # rule # [{

    The learning rate at step `t` is `lr` with `schedule = constant`, and
    `lr · d_model^-0.5 · min(t^-0.5, t · warmup^-1.5)` with `schedule = noam`
    (the schedule of the Transformer paper, scaled by `lr`).

    Shape rules: `grad` has the parameter's type; `step` is `tensor<i64>`.
  }];
  let assemblyFormat = [{
    $parameter `,` $grad `,` $step attr-dict `:` type($grad)
  }];
  let hasVerifier = 1;
}

def Tfm_SGDUpdateOp : Tfm_OptimizerOp<"sgd_update", [{
    `p -= lr_t · (grad + weight_decay · p)`, as torch.optim.SGD without
    momentum.

    ```mlir
    tfm.sgd_update "fc.weight", %g, %t {lr = 1.0e-01} : tensor<4x8xf32>
    ```
  }]> {
  let summary = "a stochastic gradient descent step on one parameter";
  let arguments = (ins StrAttr:$parameter, Tfm_FloatTensor:$grad,
                       Tfm_StepTensor:$step, F64Attr:$lr,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       DefaultValuedAttr<Tfm_LRSchedule,
                           "::mlir::tfm::LRSchedule::constant">:$schedule,
                       DefaultValuedAttr<I64Attr, "1">:$d_model,
                       DefaultValuedAttr<I64Attr, "1">:$warmup);
}

def Tfm_AdamUpdateOp : Tfm_OptimizerOp<"adam_update", [{
    with `g = grad + weight_decay · p` (torch.optim.Adam's L2 penalty),
    `m = β1·m + (1-β1)·g`, `v = β2·v + (1-β2)·g²`, and
    `p -= lr_t · (m / (1-β1^t)) / (sqrt(v / (1-β2^t)) + eps)`. The moments
    `m` and `v` are session state of their own, zero at the start. With
    `sharded` (`tfmc --shard-optimizer`), the runtime keeps them rather
    than the session state, each of N processes its 1/N of them, and each
    process updates its part of the parameter before they exchange their
    parts; in one process the op is the same update.

    ```mlir
    tfm.adam_update "fc.weight", %g, %t {lr = 1.0e-03} : tensor<4x8xf32>
    ```
  }]> {
  let summary = "an Adam step on one parameter";
  let arguments = (ins StrAttr:$parameter, Tfm_FloatTensor:$grad,
                       Tfm_StepTensor:$step, F64Attr:$lr,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1e-8">:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       DefaultValuedAttr<Tfm_LRSchedule,
                           "::mlir::tfm::LRSchedule::constant">:$schedule,
                       DefaultValuedAttr<I64Attr, "1">:$d_model,
                       DefaultValuedAttr<I64Attr, "1">:$warmup,
                       UnitAttr:$sharded);
}

//===----------------------------------------------------------------------===//
// Data-parallel training: gradients averaged across processes
//===----------------------------------------------------------------------===//

def Tfm_Collective : Resource<"::mlir::tfm::CollectiveResource">;

def Tfm_AllReduceStartOp : Tfm_Op<"all_reduce_start",
    [MemoryEffects<[MemRead<Tfm_Collective>, MemWrite<Tfm_Collective>]>,
     AllTypesMatch<["input", "result"]>]> {
  let summary = "begins averaging a tensor across the processes of a run";
  let description = [{
    Hands `input` to the average across the processes of a data-parallel
    run, weighted by each process's `weight`: the matching
    `tfm.all_reduce_wait` returns `Σ_r weight_r · input_r / Σ_r weight_r`
    (zeros where the weights sum to 0). In one process both ops return
    `input`. The tensors of one `bucket` travel together, once the last of
    them has started, so a training step starts each gradient as soon as it
    is computed and the exchange overlaps the rest of the backward pass
    (`tfm-autodiff` places them). The result is the tensor in flight: only
    the wait reads it.

    Shape rules: `result` has the type of `input`, an f32 tensor; `weight`
    is a `tensor<f32>`.

    ```mlir
    %p = tfm.all_reduce_start %g, %n {bucket = 1 : i64}
        : tensor<64x64xf32>, tensor<f32>
    %r = tfm.all_reduce_wait %p {bucket = 1 : i64} : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$weight,
                       I64Attr:$bucket);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def Tfm_AllReduceWaitOp : Tfm_Op<"all_reduce_wait",
    [MemoryEffects<[MemRead<Tfm_Collective>, MemWrite<Tfm_Collective>]>,
     AllTypesMatch<["pending", "result"]>]> {
  let summary = "waits for the average that tfm.all_reduce_start began";
  let description = [{
    Returns the weighted average across processes of the tensor that the
    `tfm.all_reduce_start` defining `pending` handed over.

    Shape rules: `result` has the type of `pending`, which a
    `tfm.all_reduce_start` of the same `bucket` defines.
  }];
  let arguments = (ins Tfm_FloatTensor:$pending, I64Attr:$bucket);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$pending attr-dict `:` type($pending)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Generation: the caches of incremental decoding
//===----------------------------------------------------------------------===//

// What tfm.cache_update reads and writes: the session's generation caches,
// which persist from one decoding step to the next.
def Tfm_GenerationCache : Resource<"::mlir::tfm::GenerationCacheResource">;

def Tfm_CacheUpdateOp : Tfm_Op<"cache_update",
    [MemoryEffects<[MemRead<Tfm_GenerationCache>,
                    MemWrite<Tfm_GenerationCache>]>]> {
  let summary = "writes a chunk of keys or values into a generation cache";
  let description = [{
    The session keeps a cache named `name` of the result's type, zero when
    the session starts. This op writes `value` into it along `axis`, at
    positions `[position, position + value.shape[axis])`, and returns the
    whole cache after the write. `tfm-derive-kv-cache` makes one per key and
    value of each causal self-attention, so that a decoding step computes
    the projections of its new tokens only and attends over the cache.

    A position outside `[0, cache.shape[axis] - value.shape[axis]]` is an
    error at run time. With `source`, the cache is one of the source's
    (see `tfm.cache_read`).

    Shape rules: `value` and the result have the same rank and element
    type, and agree on every dimension except `axis`, where the value's is
    at most the cache's; `position` is `tensor<i64>`.

    ```mlir
    %k = tfm.cache_update "layer0.key", %new, %pos {axis = 2 : i64}
        : (tensor<1x4x1x8xf32>, tensor<i64>) -> tensor<1x4x64x8xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Tfm_FloatTensor:$value,
                       Tfm_StepTensor:$position, I64Attr:$axis,
                       UnitAttr:$source);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $name `,` $value `,` $position (`source` $source^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfm_CacheReadOp : Tfm_Op<"cache_read",
    [MemoryEffects<[MemRead<Tfm_GenerationCache>]>]> {
  let summary = "reads a generation cache";
  let description = [{
    The session's cache `name` as the last `tfm.cache_update` of it left it
    (zeros before any). With `source`, the cache holds what an
    encoder-decoder's decoding steps read of the source: the
    cross-attention keys and values that `@encode` computes once per
    source, which a beam search does not reorder (every beam has the same
    source). `tfm-derive-kv-cache` makes them.

    ```mlir
    %k = tfm.cache_read "source0" source : tensor<1x4x8x16xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, UnitAttr:$source);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$name (`source` $source^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Ops on buffers: what a backend's lowering emits
//===----------------------------------------------------------------------===//

def Tfm_KernelCallOp : Op<Tfm_Dialect, "kernel_call",
    [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "calls a runtime kernel on buffers";
  let description = [{
    Runs the kernel `kernel` describes through the runtime the model is
    loaded into (`host`, the entry's first argument), on dense buffers.
    `slots` gives each buffer's argument position (absent positions are
    NULL, as tfm/abi.h allows for optional arguments), and `offsets` an
    element offset into each buffer. The result is the kernel's status: 0 on
    success. With `fallback`, the code that follows computes the kernel
    itself when the status is `TFM_ABI_STATUS_KERNEL_DECLINED`, so the
    runtime may decline it (a GPU without its GEMM library).
    `tfm-lower-kernel-calls` turns each call into a call through
    `host->run_kernel` and collects the descriptors into the module's
    `tfm.kernels` table, and their flags into `tfm.kernel_flags`.

    ```mlir
    %rc = tfm.kernel_call %host, #tfm.kernel<kind = linear, dtype = f32,
            params = array<i64: 6, 8, 4, 1, 2, 0, 1>>
            (%x, %w, %b, %y) {slots = array<i64: 0, 1, 2, 4>}
            : memref<6x8xf32>, memref<4x8xf32>, memref<4xf32>, memref<6x4xf32>
    ```
  }];
  // `host` is an !llvm.ptr; AnyType keeps the LLVM dialect out of this one.
  let arguments = (ins AnyType:$host, Tfm_KernelAttr:$kernel,
                       Variadic<AnyMemRef>:$args,
                       OptionalAttr<DenseI64ArrayAttr>:$slots,
                       OptionalAttr<DenseI64ArrayAttr>:$offsets,
                       UnitAttr:$fallback);
  let results = (outs I32:$status);
  let assemblyFormat = [{
    $host `,` $kernel `(` $args `)` attr-dict `:` type($host) `,` type($args)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The argument position of buffer `i`.
    int64_t getSlot(unsigned i) {
      return getSlots() ? (*getSlots())[i] : int64_t(i);
    }
    /// The element offset into buffer `i`.
    int64_t getOffset(unsigned i) {
      return getOffsets() ? (*getOffsets())[i] : 0;
    }
  }];
}

#endif // TFM_IR_TFMOPS_TD
