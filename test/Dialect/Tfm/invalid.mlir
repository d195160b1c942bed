// RUN: tfm-opt %s -split-input-file -verify-diagnostics

// Tests that a dynamic dimension is rejected and named.
func.func @dynamic_dim(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error@+1 {{operand #0 has a dynamic dimension at index 0 in 'tensor<?x4xf32>'; tfm requires static shapes}}
  %0 = tfm.relu %x : tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// Tests that matmul rejects rank-1 operands.
func.func @matmul_rank(%a: tensor<4xf32>, %b: tensor<4x4xf32>) {
  // expected-error@+1 {{operands must have rank >= 2, got lhs 'tensor<4xf32>' and rhs 'tensor<4x4xf32>'}}
  %0 = tfm.matmul %a, %b : (tensor<4xf32>, tensor<4x4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that matmul names both contracting sizes when they differ.
func.func @matmul_contracting(%a: tensor<2x3x4xf32>, %b: tensor<2x5x6xf32>) {
  // expected-error@+1 {{contracting dimensions differ: lhs 'tensor<2x3x4xf32>' has K = 4, rhs 'tensor<2x5x6xf32>' has K = 5}}
  %0 = tfm.matmul %a, %b : (tensor<2x3x4xf32>, tensor<2x5x6xf32>) -> tensor<2x3x6xf32>
  return
}

// -----

// Tests that matmul batch dimensions must broadcast.
func.func @matmul_batch(%a: tensor<2x3x4xf32>, %b: tensor<3x4x6xf32>) {
  // expected-error@+1 {{shapes of 'lhs batch' [2] and 'rhs batch' [3] do not broadcast: 2 vs 3 at result dimension 0}}
  %0 = tfm.matmul %a, %b : (tensor<2x3x4xf32>, tensor<3x4x6xf32>) -> tensor<2x3x6xf32>
  return
}

// -----

// Tests that matmul operands share an element type.
func.func @matmul_element_type(%a: tensor<3x4xf32>, %b: tensor<4x6xbf16>) {
  // expected-error@+1 {{operand 'rhs' has element type 'bf16' but 'lhs' has 'f32'}}
  %0 = tfm.matmul %a, %b : (tensor<3x4xf32>, tensor<4x6xbf16>) -> tensor<3x6xf32>
  return
}

// -----

// Tests that a result type that disagrees with the inferred one is rejected.
func.func @matmul_result(%a: tensor<3x4xf32>, %b: tensor<4x6xf32>) {
  // expected-error@+1 {{result #0 has type 'tensor<3x7xf32>' but the operands imply 'tensor<3x6xf32>'}}
  %0 = tfm.matmul %a, %b : (tensor<3x4xf32>, tensor<4x6xf32>) -> tensor<3x7xf32>
  return
}

// -----

// Tests that linear's input must have rank >= 1.
func.func @linear_input_rank(%x: tensor<f32>, %w: tensor<4x1xf32>) {
  // expected-error@+1 {{'input' must have rank >= 1, got 'tensor<f32>'}}
  %0 = tfm.linear %x, %w : (tensor<f32>, tensor<4x1xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that linear's weight must be rank 2.
func.func @linear_weight_rank(%x: tensor<2x4xf32>, %w: tensor<4xf32>) {
  // expected-error@+1 {{'weight' must be [N, K] (rank 2), got 'tensor<4xf32>'}}
  %0 = tfm.linear %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that linear's weight must match the input features.
func.func @linear_weight_k(%x: tensor<2x4xf32>, %w: tensor<8x5xf32>) {
  // expected-error@+1 {{'weight' 'tensor<8x5xf32>' must be [N, 4] to match the last dimension of 'input' 'tensor<2x4xf32>'}}
  %0 = tfm.linear %x, %w : (tensor<2x4xf32>, tensor<8x5xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that linear's bias must have the output features.
func.func @linear_bias(%x: tensor<2x4xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>) {
  // expected-error@+1 {{'bias' 'tensor<4xf32>' must be [8], the output features of 'weight'}}
  %0 = tfm.linear %x, %w, %b : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that an unknown activation keyword is rejected.
func.func @linear_activation(%x: tensor<2x4xf32>, %w: tensor<8x4xf32>) {
  // expected-error@+1 {{expected string or keyword containing one of the following enum values for attribute 'activation' [none, relu, gelu, gelu_tanh, silu]}}
  %0 = tfm.linear %x, %w activation = mish : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that binary ops reject shapes that do not broadcast.
func.func @add_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error@+1 {{shapes of 'lhs' [2, 3] and 'rhs' [4] do not broadcast: 3 vs 4 at result dimension 1}}
  %0 = tfm.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that binary ops reject mixed element types.
func.func @mul_element_type(%a: tensor<3xf32>, %b: tensor<3xf16>) {
  // expected-error@+1 {{operand 'rhs' has element type 'f16' but 'lhs' has 'f32'}}
  %0 = tfm.mul %a, %b : (tensor<3xf32>, tensor<3xf16>) -> tensor<3xf32>
  return
}

// -----

// Tests that a float op rejects an integer tensor.
func.func @relu_integer(%a: tensor<3xi64>) {
  // expected-error@+1 {{operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit float values, but got 'tensor<3xi64>'}}
  %0 = tfm.relu %a : tensor<3xi64>
  return
}

// -----

// Tests that softmax rejects an axis outside the rank.
func.func @softmax_axis(%a: tensor<2x3xf32>) {
  // expected-error@+1 {{'axis' = 2 is out of range [-2, 2) for rank 2}}
  %0 = tfm.softmax %a axis = 2 : tensor<2x3xf32>
  return
}

// -----

// Tests that softmax_grad rejects an axis outside the rank, and operands of
// two types.
func.func @softmax_grad_axis(%y: tensor<2x3xf32>, %dy: tensor<2x3xf32>) {
  // expected-error@+1 {{'axis' = 2 is out of range [-2, 2) for rank 2}}
  %0 = tfm.softmax_grad %y, %dy axis = 2 : tensor<2x3xf32>
  return
}

// -----

func.func @softmax_grad_types(%y: tensor<2x3xf32>, %dy: tensor<2x4xf32>) {
  // expected-error@+1 {{requires the same type for all operands and results}}
  %0 = "tfm.softmax_grad"(%y, %dy) : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that layer_norm rejects an axis outside the rank.
func.func @layer_norm_axis(%x: tensor<2x4xf32>, %g: tensor<4xf32>) {
  // expected-error@+1 {{'axis' = -3 is out of range [-2, 2) for rank 2}}
  %0 = tfm.layer_norm %x, %g {axis = -3 : i64} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that layer_norm needs a positive epsilon.
func.func @layer_norm_epsilon(%x: tensor<2x4xf32>, %g: tensor<4xf32>) {
  // expected-error@+1 {{'epsilon' must be positive, got 0}}
  %0 = tfm.layer_norm %x, %g {epsilon = 0.0 : f64} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that layer_norm's scale must have the normalized shape.
func.func @layer_norm_scale(%x: tensor<2x4xf32>, %g: tensor<2x4xf32>) {
  // expected-error@+1 {{'scale' 'tensor<2x4xf32>' must have the normalized shape [4] of 'input' 'tensor<2x4xf32>' from axis 1}}
  %0 = tfm.layer_norm %x, %g : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that layer_norm's bias must have the normalized shape.
func.func @layer_norm_bias(%x: tensor<2x4xf32>, %g: tensor<4xf32>, %b: tensor<3xf32>) {
  // expected-error@+1 {{'bias' 'tensor<3xf32>' must have the normalized shape [4] of 'input' 'tensor<2x4xf32>' from axis 1}}
  %0 = tfm.layer_norm %x, %g, %b : (tensor<2x4xf32>, tensor<4xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that embedding needs a rank-2 table.
func.func @embedding_table(%t: tensor<10xf32>, %i: tensor<3xi64>) {
  // expected-error@+1 {{'table' must be [V, D] (rank 2), got 'tensor<10xf32>'}}
  %0 = tfm.embedding %t, %i : (tensor<10xf32>, tensor<3xi64>) -> tensor<3xf32>
  return
}

// -----

// Tests that embedding needs integer indices.
func.func @embedding_indices(%t: tensor<10x4xf32>, %i: tensor<3xf32>) {
  // expected-error@+1 {{operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<3xf32>'}}
  %0 = tfm.embedding %t, %i : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return
}

// -----

// Tests that positional_encoding produces a rank-2 table.
func.func @positional_encoding_rank() {
  // expected-error@+1 {{result must be [S, D] (rank 2), got 'tensor<2x8x16xf32>'}}
  %0 = tfm.positional_encoding : tensor<2x8x16xf32>
  return
}

// -----

// Tests that positional_encoding needs an even model dimension.
func.func @positional_encoding_odd() {
  // expected-error@+1 {{model dimension D = 15 must be even (sin and cos alternate)}}
  %0 = tfm.positional_encoding : tensor<8x15xf32>
  return
}

// -----

// Tests that transpose's permutation must have one entry per dimension.
func.func @transpose_size(%x: tensor<2x3x4xf32>) {
  // expected-error@+1 {{'permutation' [1, 0] has 2 entries but 'input' 'tensor<2x3x4xf32>' has rank 3}}
  %0 = tfm.transpose %x permutation = [1, 0] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  return
}

// -----

// Tests that transpose's permutation must be a permutation.
func.func @transpose_repeat(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{'permutation' [0, 0] is not a permutation of [0, 2)}}
  %0 = tfm.transpose %x permutation = [0, 0] : tensor<2x3xf32> -> tensor<2x2xf32>
  return
}

// -----

// Tests that reshape keeps the element count.
func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{input 'tensor<2x3xf32>' has 6 elements but result 'tensor<7xf32>' has 7}}
  %0 = tfm.reshape %x : tensor<2x3xf32> -> tensor<7xf32>
  return
}

// -----

// Tests that reshape keeps the element type.
func.func @reshape_type(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{result element type 'f16' differs from the input's 'f32'}}
  %0 = tfm.reshape %x : tensor<2x3xf32> -> tensor<6xf16>
  return
}

// -----

// Tests that concat needs at least one input.
func.func @concat_empty() {
  // expected-error@+1 {{needs at least one input}}
  %0 = tfm.concat axis = 0 : () -> tensor<1xf32>
  return
}

// -----

// Tests that concat inputs share a rank.
func.func @concat_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error@+1 {{'inputs[1]' 'tensor<3xf32>' has rank 1 but 'inputs[0]' 'tensor<2x3xf32>' has rank 2}}
  %0 = tfm.concat %a, %b axis = 0 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<5x3xf32>
  return
}

// -----

// Tests that concat inputs agree off the concatenation axis.
func.func @concat_dims(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error@+1 {{'inputs[1]' 'tensor<2x4xf32>' differs from 'inputs[0]' 'tensor<2x3xf32>' in dimension 1 (4 vs 3), which is not the concatenation axis 0}}
  %0 = tfm.concat %a, %b axis = 0 : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

// Tests that split sizes must add up to the dimension.
func.func @split_sum(%x: tensor<2x10xf32>) {
  // expected-error@+1 {{'sizes' [4, 4] add up to 8 but 'input' 'tensor<2x10xf32>' has 10 along axis 1}}
  %0:2 = tfm.split %x axis = 1 sizes = [4, 4] : tensor<2x10xf32> -> tensor<2x4xf32>, tensor<2x4xf32>
  return
}

// -----

// Tests that split sizes must not be negative.
func.func @split_negative(%x: tensor<2x10xf32>) {
  // expected-error@+1 {{'sizes' [11, -1] must not be negative}}
  %0:2 = tfm.split %x axis = 1 sizes = [11, -1] : tensor<2x10xf32> -> tensor<2x11xf32>, tensor<2x0xf32>
  return
}

// -----

// Tests that dropout's rate must be in [0, 1).
func.func @dropout_rate(%x: tensor<4xf32>) {
  // expected-error@+1 {{'rate' must be in [0, 1), got 1}}
  %0 = tfm.dropout %x training {rate = 1.0 : f64} : tensor<4xf32>
  return
}

// -----

// Tests that attention operands share one rank.
func.func @attention_rank(%q: tensor<2x8x16xf32>, %k: tensor<8x16xf32>, %v: tensor<8x16xf32>) {
  // expected-error@+1 {{'query', 'key' and 'value' must have one rank >= 2, got 'tensor<2x8x16xf32>', 'tensor<8x16xf32>' and 'tensor<8x16xf32>'}}
  %0 = tfm.attention %q, %k, %v : (tensor<2x8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that attention operands share batch dimensions.
func.func @attention_batch(%q: tensor<2x8x16xf32>, %k: tensor<3x8x16xf32>, %v: tensor<3x8x16xf32>) {
  // expected-error@+1 {{batch dimensions differ: query 'tensor<2x8x16xf32>', key 'tensor<3x8x16xf32>', value 'tensor<3x8x16xf32>'}}
  %0 = tfm.attention %q, %k, %v : (tensor<2x8x16xf32>, tensor<3x8x16xf32>, tensor<3x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that query and key share the head dimension.
func.func @attention_head(%q: tensor<8x16xf32>, %k: tensor<8x32xf32>, %v: tensor<8x16xf32>) {
  // expected-error@+1 {{head dimension of 'query' (16) differs from that of 'key' (32)}}
  %0 = tfm.attention %q, %k, %v : (tensor<8x16xf32>, tensor<8x32xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

// Tests that key and value have the same number of positions.
func.func @attention_positions(%q: tensor<8x16xf32>, %k: tensor<6x16xf32>, %v: tensor<7x16xf32>) {
  // expected-error@+1 {{'key' has 6 positions but 'value' has 7}}
  %0 = tfm.attention %q, %k, %v : (tensor<8x16xf32>, tensor<6x16xf32>, tensor<7x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

// Tests that the attention scale must be positive.
func.func @attention_scale(%q: tensor<8x16xf32>, %k: tensor<8x16xf32>, %v: tensor<8x16xf32>) {
  // expected-error@+1 {{'scale' must be positive, got -1}}
  %0 = tfm.attention %q, %k, %v {scale = -1.0 : f64} : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

// Tests that the attention's gradient takes its shape rules.
func.func @attention_grad_positions(%q: tensor<8x16xf32>, %k: tensor<6x16xf32>, %v: tensor<7x16xf32>, %o: tensor<8x16xf32>) {
  // expected-error@+1 {{'key' has 6 positions but 'value' has 7}}
  %0:3 = tfm.attention_grad %q, %k, %v, %o, %o : (tensor<8x16xf32>, tensor<6x16xf32>, tensor<7x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<6x16xf32>, tensor<7x16xf32>)
  return
}

// -----

// Tests that the attention's gradient takes the gradient of its result.
func.func @attention_grad_result(%q: tensor<8x16xf32>, %k: tensor<6x16xf32>, %v: tensor<6x4xf32>, %o: tensor<8x4xf32>, %g: tensor<8x16xf32>) {
  // expected-error@+1 {{'grad' 'tensor<8x16xf32>' must have the attention's result type 'tensor<8x4xf32>'}}
  %0:3 = tfm.attention_grad %q, %k, %v, %o, %g : (tensor<8x16xf32>, tensor<6x16xf32>, tensor<6x4xf32>, tensor<8x4xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<6x16xf32>, tensor<6x4xf32>)
  return
}

// -----

// Tests that an attention mask must broadcast to the scores.
func.func @attention_mask_shape(%q: tensor<2x8x16xf32>, %k: tensor<2x6x16xf32>, %v: tensor<2x6x16xf32>, %m: tensor<8x8xi1>) {
  // expected-error@+1 {{'mask' 'tensor<8x8xi1>' does not broadcast to the scores' shape [2, 8, 6]}}
  %0 = tfm.attention %q, %k, %v, mask %m : (tensor<2x8x16xf32>, tensor<2x6x16xf32>, tensor<2x6x16xf32>, tensor<8x8xi1>) -> tensor<2x8x16xf32>
  return
}

// -----

// Tests that an additive mask matches the scores' element type.
func.func @attention_mask_type(%q: tensor<8x16xf32>, %k: tensor<8x16xf32>, %v: tensor<8x16xf32>, %m: tensor<8x8xf16>) {
  // expected-error@+1 {{additive 'mask' has element type 'f16' but the scores have 'f32'}}
  %0 = tfm.attention %q, %k, %v, mask %m : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x8xf16>) -> tensor<8x16xf32>
  return
}

// -----

// Tests that cross_entropy's labels drop exactly the class axis.
func.func @cross_entropy_labels(%l: tensor<2x8x10xf32>, %y: tensor<2x10xi64>) {
  // expected-error@+1 {{'labels' 'tensor<2x10xi64>' must have the shape [2, 8] of 'logits' 'tensor<2x8x10xf32>' without its class axis}}
  %0 = tfm.cross_entropy %l, %y : (tensor<2x8x10xf32>, tensor<2x10xi64>) -> tensor<f32>
  return
}

// -----

// Tests that label smoothing must be in [0, 1].
func.func @cross_entropy_smoothing(%l: tensor<8x10xf32>, %y: tensor<8xi64>) {
  // expected-error@+1 {{'label_smoothing' must be in [0, 1], got 1.5}}
  %0 = tfm.cross_entropy %l, %y {label_smoothing = 1.5 : f64} : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<f32>
  return
}

// -----

// Tests that qkv_projection has two or three parts.
func.func @qkv_parts(%x: tensor<2x16xf32>, %w: tensor<64x16xf32>) {
  // expected-error@+1 {{'sizes' [16, 16, 16, 16] must have 3 entries (Q, K, V) or 2 (K, V)}}
  %0:4 = tfm.qkv_projection %x, %w sizes = [16, 16, 16, 16] : (tensor<2x16xf32>, tensor<64x16xf32>) -> (tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>)
  return
}

// -----

// Tests that a gated linear's packed projection splits into two halves.
func.func @gated_linear_odd(%x: tensor<2x16xf32>, %w: tensor<47x16xf32>) {
  // expected-error@+1 {{'weight' 'tensor<47x16xf32>' has 47 output features, which do not split into a gate and an up projection of equal width}}
  %0 = tfm.gated_linear %x, %w activation = silu : (tensor<2x16xf32>, tensor<47x16xf32>) -> tensor<2x23xf32>
  return
}

// -----

// Tests that a gated linear's result is half the packed projection.
func.func @gated_linear_width(%x: tensor<2x16xf32>, %w: tensor<48x16xf32>) {
  // expected-error@+1 {{result #0 has type 'tensor<2x48xf32>' but the operands imply 'tensor<2x24xf32>'}}
  %0 = tfm.gated_linear %x, %w activation = silu : (tensor<2x16xf32>, tensor<48x16xf32>) -> tensor<2x48xf32>
  return
}

// -----

// Tests that qkv_projection's sizes add up to the weight's rows.
func.func @qkv_sizes(%x: tensor<2x16xf32>, %w: tensor<48x16xf32>) {
  // expected-error@+1 {{'weight' 'tensor<48x16xf32>' has 48 output features but 'sizes' [16, 16, 8] add up to 40}}
  %0:3 = tfm.qkv_projection %x, %w sizes = [16, 16, 8] : (tensor<2x16xf32>, tensor<48x16xf32>) -> (tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x8xf32>)
  return
}

// -----

// Tests that a mask kind other than none needs a mask.
func.func @masked_softmax_missing_mask(%s: tensor<4x4xf32>) {
  // expected-error@+1 {{mask_kind is 'additive' but there is no 'mask' operand}}
  %0 = tfm.masked_softmax %s mask_kind = additive : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

// Tests that the mask kind agrees with the mask's element type.
func.func @masked_softmax_kind(%s: tensor<4x4xf32>, %m: tensor<4x4xi1>) {
  // expected-error@+1 {{mask_kind is 'additive' but the 'mask' of type 'tensor<4x4xi1>' is boolean}}
  %0 = tfm.masked_softmax %s, mask %m mask_kind = additive : (tensor<4x4xf32>, tensor<4x4xi1>) -> tensor<4x4xf32>
  return
}

// -----

// Tests that a causal masked softmax needs two dimensions.
func.func @masked_softmax_causal(%s: tensor<4xf32>) {
  // expected-error@+1 {{'input' 'tensor<4xf32>' must have rank >= 2 with 'causal'}}
  %0 = tfm.masked_softmax %s causal : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that a masked softmax's mask must broadcast to the input.
func.func @masked_softmax_mask_shape(%s: tensor<2x4x4xf32>, %m: tensor<3x4xf32>) {
  // expected-error@+1 {{'mask' 'tensor<3x4xf32>' does not broadcast to the scores' shape [2, 4, 4]}}
  %0 = tfm.masked_softmax %s, mask %m mask_kind = additive : (tensor<2x4x4xf32>, tensor<3x4xf32>) -> tensor<2x4x4xf32>
  return
}

// -----

// Tests that add_layer_norm's input and residual must broadcast.
func.func @add_layer_norm_residual(%x: tensor<2x4xf32>, %r: tensor<3x4xf32>, %g: tensor<4xf32>) {
  // expected-error@+1 {{shapes of 'input' [2, 4] and 'residual' [3, 4] do not broadcast: 2 vs 3 at result dimension 0}}
  %0 = tfm.add_layer_norm %x, %r, %g : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that add_layer_norm's sum result has the sum's type.
func.func @add_layer_norm_sum(%x: tensor<2x4xf32>, %r: tensor<4xf32>, %g: tensor<4xf32>) {
  // expected-error@+1 {{result #1 has type 'tensor<4xf32>' but the operands imply 'tensor<2x4xf32>'}}
  %0:2 = tfm.add_layer_norm %x, %r, %g : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>)
  return
}

// -----

// Tests that split has one result per size.
func.func @split_results(%x: tensor<2x10xf32>) {
  // expected-error@+1 {{has 1 results but its operands imply 2}}
  %0 = tfm.split %x axis = 1 sizes = [4, 6] : tensor<2x10xf32> -> tensor<2x4xf32>
  return
}

// -----

// Tests that cross_entropy's labels must be integers.
func.func @cross_entropy_label_type(%l: tensor<8x10xf32>, %y: tensor<8xf32>) {
  // expected-error@+1 {{operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<8xf32>'}}
  %0 = tfm.cross_entropy %l, %y : (tensor<8x10xf32>, tensor<8xf32>) -> tensor<f32>
  return
}

// -----

// Tests that sub rejects shapes that do not broadcast.
func.func @sub_broadcast(%a: tensor<2x3xf32>, %b: tensor<2xf32>) {
  // expected-error@+1 {{shapes of 'lhs' [2, 3] and 'rhs' [2] do not broadcast: 3 vs 2 at result dimension 1}}
  %0 = tfm.sub %a, %b : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that div's declared result must be the broadcast shape.
func.func @div_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error@+1 {{result #0 has type 'tensor<3xf32>' but the operands imply 'tensor<2x3xf32>'}}
  %0 = tfm.div %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

// Tests that gelu accepts only the two known approximations.
func.func @gelu_approximation(%x: tensor<4xf32>) {
  // expected-error@+1 {{expected string or keyword containing one of the following enum values for attribute 'approximate' [none, tanh]}}
  %0 = tfm.gelu %x approximate = sigmoid : tensor<4xf32>
  return
}

// -----

// Tests that dropout keeps its input's type.
func.func @dropout_type(%x: tensor<4xf32>) {
  // expected-error@+1 {{failed to verify that all of {input, result} have same type}}
  %0 = "tfm.dropout"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// Tests that compare operands share an element type.
func.func @compare_types(%a: tensor<4xf32>, %b: tensor<4xi64>) {
  // expected-error@+1 {{operand 'rhs' has element type 'i64' but 'lhs' has 'f32'}}
  %0 = tfm.compare eq, %a, %b : (tensor<4xf32>, tensor<4xi64>) -> tensor<4xi1>
  return
}

// -----

// Tests that select's condition must broadcast with the values.
func.func @select_shape(%c: tensor<3xi1>, %a: tensor<2x4xf32>, %b: tensor<4xf32>) {
  // expected-error@+1 {{shapes of 'condition' [3] and 'values' [2, 4] do not broadcast: 3 vs 4 at result dimension 1}}
  %0 = tfm.select %c, %a, %b : (tensor<3xi1>, tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that cast keeps the shape.
func.func @cast_shape(%a: tensor<4xf32>) {
  // expected-error@+1 {{result 'tensor<5xi64>' must have the shape of the input 'tensor<4xf32>'}}
  %0 = tfm.cast %a : tensor<4xf32> -> tensor<5xi64>
  return
}

// -----

// Tests that broadcast needs a broadcastable input.
func.func @broadcast_shape(%a: tensor<3xf32>) {
  // expected-error@+1 {{input 'tensor<3xf32>' does not broadcast to 'tensor<2x4xf32>'}}
  %0 = tfm.broadcast %a : tensor<3xf32> -> tensor<2x4xf32>
  return
}

// -----

// Tests that slice reads only inside the input.
func.func @slice_bounds(%a: tensor<4x8xf32>) {
  // expected-error@+1 {{dimension 1 reads indices 6 to 9, outside [0, 8) of 'input' 'tensor<4x8xf32>'}}
  %0 = tfm.slice %a starts = [0, 6] sizes = [4, 4] steps = [1, 1] : tensor<4x8xf32> -> tensor<4x4xf32>
  return
}

// -----

// Tests that slice steps are non-zero.
func.func @slice_step(%a: tensor<4xf32>) {
  // expected-error@+1 {{'steps' [0] has a zero step in dimension 0}}
  %0 = tfm.slice %a starts = [0] sizes = [2] steps = [0] : tensor<4xf32> -> tensor<2xf32>
  return
}

// -----

// Tests that gather's axis is in range.
func.func @gather_axis(%a: tensor<4x8xf32>, %i: tensor<2xi64>) {
  // expected-error@+1 {{'axis' = 2 is out of range [-2, 2) for rank 2}}
  %0 = tfm.gather %a, %i axis = 2 : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<4x2xf32>
  return
}

// -----

// Tests that reduce rejects repeated axes.
func.func @reduce_axes(%a: tensor<4x8xf32>) {
  // expected-error@+1 {{'axes' [1, -1] names dimension 1 twice}}
  %0 = tfm.reduce sum %a axes = [1, -1] : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that a mean reduction needs floats.
func.func @reduce_mean_int(%a: tensor<4xi64>) {
  // expected-error@+1 {{'mean' needs a float tensor, got 'tensor<4xi64>'}}
  %0 = tfm.reduce mean %a axes = [0] : tensor<4xi64> -> tensor<i64>
  return
}

// -----

// Tests that layer_norm_grad wants a scale of the normalized shape.
func.func @layer_norm_grad_scale(%x: tensor<2x8xf32>, %g: tensor<4xf32>) -> tensor<2x8xf32> {
  // expected-error@+1 {{'scale' 'tensor<4xf32>' must have the normalized shape of 'tensor<2x8xf32>'}}
  %dx, %dg, %db = tfm.layer_norm_grad %x, %g, %x : (tensor<2x8xf32>, tensor<4xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<4xf32>, tensor<4xf32>)
  return %dx : tensor<2x8xf32>
}

// -----

// Tests that layer_norm_grad wants the gradient in the input's type.
func.func @layer_norm_grad_grad(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %dy: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error@+1 {{'grad' 'tensor<8xf32>' must have the input's type 'tensor<2x8xf32>'}}
  %dx, %dg, %db = tfm.layer_norm_grad %x, %g, %dy : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %dx : tensor<2x8xf32>
}

// -----

// Tests that a kernel descriptor longer than the ABI's is refused.
func.func @kernel_too_many_params(%host: !llvm.ptr, %x: memref<4xf32>) -> i32 {
  // expected-error@+1 {{kernel sgd has more params, fparams or strides than tfm/abi.h holds (8, 2, 12)}}
  %rc = tfm.kernel_call %host, <kind = sgd, dtype = f32, params = [1, 2, 3, 4, 5, 6, 7, 8, 9]>(%x) : !llvm.ptr, memref<4xf32>
  return %rc : i32
}

// -----

// Tests that only LINEAR computes in bf16.
func.func @kernel_bf16(%host: !llvm.ptr, %x: memref<4xf32>) -> i32 {
  // expected-error@+1 {{kernel sgd computes in f32, not 'bf16'}}
  %rc = tfm.kernel_call %host, <kind = sgd, dtype = bf16, params = [4]>(%x) : !llvm.ptr, memref<4xf32>
  return %rc : i32
}

// -----

// Tests that kernels take dense buffers.
func.func @kernel_strided(%host: !llvm.ptr, %x: memref<4xf32, strided<[2]>>) -> i32 {
  // expected-error@+1 {{buffer 0 of type 'memref<4xf32, strided<[2]>>' is not dense; kernels take dense buffers (strides go in the descriptor)}}
  %rc = tfm.kernel_call %host, <kind = sgd, dtype = f32, params = [4]>(%x) : !llvm.ptr, memref<4xf32, strided<[2]>>
  return %rc : i32
}

// -----

// Tests that argument slots increase and fit the ABI.
func.func @kernel_slots(%host: !llvm.ptr, %x: memref<4xf32>) -> i32 {
  // expected-error@+1 {{slots must increase and stay below 8; slot 9 of buffer 0 does not}}
  %rc = tfm.kernel_call %host, <kind = sgd, dtype = f32, params = [4]>(%x) {slots = array<i64: 9>} : !llvm.ptr, memref<4xf32>
  return %rc : i32
}

// -----

// Tests that a plan has one entry per result.
func.func @plan_length(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tfm.plan' has 2 entries for 1 results}}
  %y = tfm.relu %x {tfm.plan = [#tfm.inline, #tfm.inline]} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that a view names an operand the op has.
func.func @plan_view_operand(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{result #0 is a view of operand 3, which the op does not have}}
  %y = tfm.relu %x {tfm.plan = [#tfm.view<operand = 3, offset = 0, strides = [1]>]} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that a view names exactly one source.
func.func @plan_view_source(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{a view names exactly one operand or one result}}
  %y = tfm.relu %x {tfm.plan = [#tfm.view<offset = 0, strides = [1]>]} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that arena offsets keep the ABI's alignment.
func.func @plan_alignment(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{arena offset 4 is not a non-negative multiple of 64}}
  %y = tfm.relu %x {tfm.plan = [#tfm.arena<offset = 4>]} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that the module's tables hold their typed attributes.
// expected-error@+1 {{'tfm.kernels' holds 3 : i64, which is not #tfm.kernel}}
module attributes {tfm.kernels = [3]} {
}

// -----

// Tests that only a parameter starts from the weights.
// expected-error@+1 {{state slot 'm': only a parameter starts from the weights}}
module attributes {tfm.states = [#tfm.state_slot<name = "m", kind = adam_m, type = tensor<4xf32>, offset = 0, init_offset = 0>]} {
}

// -----

// Tests that conv2d's groups must divide both channel counts.
func.func @conv2d_group(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>) {
  // expected-error@+1 {{'group' 3 must divide the input channels 4 and the output channels 6}}
  %0 = tfm.conv2d %x, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] group = 3 : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

// Tests that conv2d's weight holds C / group input channels.
func.func @conv2d_weight_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error@+1 {{'weight' 'tensor<6x4x3x3xf32>' must have 2 input channels per group (4 / group 2)}}
  %0 = tfm.conv2d %x, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] group = 2 : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

// Tests that conv2d's window must fit in the padded input.
func.func @conv2d_window(%x: tensor<1x1x2x8xf32>, %w: tensor<1x1x3x3xf32>) {
  // expected-error@+1 {{the kernel window 3 is larger than the padded height 2}}
  %0 = tfm.conv2d %x, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] group = 1 : (tensor<1x1x2x8xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x1x6xf32>
  return
}

// -----

// Tests that conv2d's pads are four non-negative values.
func.func @conv2d_pads(%x: tensor<1x1x8x8xf32>, %w: tensor<1x1x3x3xf32>) {
  // expected-error@+1 {{'pads' must not be negative, got [0, -1, 0, 0]}}
  %0 = tfm.conv2d %x, %w strides = [1, 1] pads = [0, -1, 0, 0] dilations = [1, 1] group = 1 : (tensor<1x1x8x8xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x6x6xf32>
  return
}

// -----

// Tests that conv2d's kernel is not empty.
func.func @conv2d_empty_kernel(%x: tensor<1x1x8x8xf32>, %w: tensor<1x1x0x3xf32>) {
  // expected-error@+1 {{'weight' 'tensor<1x1x0x3xf32>' has an empty kernel}}
  %0 = tfm.conv2d %x, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] group = 1 : (tensor<1x1x8x8xf32>, tensor<1x1x0x3xf32>) -> tensor<1x1x9x6xf32>
  return
}

// -----

// Tests that scatter_nd's updates have indices.shape[:-1] + input.shape[k:].
func.func @scatter_nd_updates(%c: tensor<2x8x4xf32>, %p: tensor<2x1x2xi64>, %u: tensor<2x4xf32>) {
  // expected-error@+1 {{'updates' must have shape [2, 1, 4] (indices.shape[:-1] + input.shape[k:]), got 'tensor<2x4xf32>'}}
  %0 = tfm.scatter_nd %c, %p, %u reduction = none : (tensor<2x8x4xf32>, tensor<2x1x2xi64>, tensor<2x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

// Tests that scatter_nd's index tuples are no longer than input's rank.
func.func @scatter_nd_tuple(%c: tensor<8xf32>, %p: tensor<1x2xi64>, %u: tensor<1xf32>) {
  // expected-error@+1 {{the last dimension of 'indices' (2) must lie in [1, 1], the rank of 'input'}}
  %0 = tfm.scatter_nd %c, %p, %u reduction = add : (tensor<8xf32>, tensor<1x2xi64>, tensor<1xf32>) -> tensor<8xf32>
  return
}

// -----

// Tests that top_k's k fits its axis.
func.func @top_k_k(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{'k' = 4 must lie in [0, 3], the size of the axis}}
  %v, %i = tfm.top_k %x k = 4 axis = 1 : tensor<2x3xf32> -> tensor<2x4xf32>, tensor<2x4xi64>
  return
}

// -----

// Tests that a cache update's value fits its cache.
func.func @cache_update_fit(%k: tensor<1x4x2x8xf32>, %p: tensor<i64>) {
  // expected-error@+1 {{'value' 'tensor<1x4x2x8xf32>' does not fit the cache 'tensor<1x4x64x4xf32>' at dimension 3}}
  %0 = tfm.cache_update "k", %k, %p {axis = 2 : i64} : (tensor<1x4x2x8xf32>, tensor<i64>) -> tensor<1x4x64x4xf32>
  return
}

// -----

// Tests that a cache update's axis is one of the cache's.
func.func @cache_update_axis(%k: tensor<1x4x2x8xf32>, %p: tensor<i64>) {
  // expected-error@+1 {{'axis' 4 is not an axis of 'tensor<1x4x64x8xf32>'}}
  %0 = tfm.cache_update "k", %k, %p {axis = 4 : i64} : (tensor<1x4x2x8xf32>, tensor<i64>) -> tensor<1x4x64x8xf32>
  return
}

// -----

// Tests that a GEMM's two operands are both f32 or both its 16-bit type.
func.func @kernel_mixed_operands(%host: !llvm.ptr, %x: memref<2x4xbf16>, %w: memref<3x4xf32>, %y: memref<2x3xf32>) -> i32 {
  // expected-error@+1 {{multiplies operands of type 'f32'; a GEMM's two operands are both f32 or both 'bf16'}}
  %rc = tfm.kernel_call %host, <kind = linear, dtype = bf16, params = [2, 4, 3, 0, 0, 0, 1]>(%x, %w, %y) {slots = array<i64: 0, 1, 4>} : !llvm.ptr, memref<2x4xbf16>, memref<3x4xf32>, memref<2x3xf32>
  return %rc : i32
}

// -----

// Tests that 16-bit operands are of the type the GEMM multiplies in.
func.func @kernel_other_narrow_type(%host: !llvm.ptr, %x: memref<2x4xf16>, %w: memref<3x4xf16>, %y: memref<2x3xf32>) -> i32 {
  // expected-error@+1 {{multiplies operands of type 'f16'; a GEMM's two operands are both f32 or both 'bf16'}}
  %rc = tfm.kernel_call %host, <kind = linear, dtype = bf16, params = [2, 4, 3, 0, 0, 0, 1]>(%x, %w, %y) {slots = array<i64: 0, 1, 4>} : !llvm.ptr, memref<2x4xf16>, memref<3x4xf16>, memref<2x3xf32>
  return %rc : i32
}

// -----

// Tests that a wait names the start it waits on.
func.func @all_reduce_wait_without_start(%g: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{waits on a value no tfm.all_reduce_start defines}}
  %r = tfm.all_reduce_wait %g {bucket = 1 : i64} : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Tests that a wait is in its start's bucket.
func.func @all_reduce_other_bucket(%g: tensor<4xf32>, %n: tensor<f32>) -> tensor<4xf32> {
  %p = tfm.all_reduce_start %g, %n {bucket = 1 : i64} : tensor<4xf32>, tensor<f32>
  // expected-error@+1 {{waits in bucket 2 on a start in bucket 1}}
  %r = tfm.all_reduce_wait %p {bucket = 2 : i64} : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Tests that a process's weight is one f32.
func.func @all_reduce_weight_shape(%g: tensor<4xf32>, %n: tensor<2xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'weight' must be a tensor<f32>, got 'tensor<2xf32>'}}
  %p = tfm.all_reduce_start %g, %n {bucket = 1 : i64} : tensor<4xf32>, tensor<2xf32>
  return %p : tensor<4xf32>
}

// -----

// Tests that a per-axis scale of the wrong length is named with the size
// it must have.
func.func @quantize_axis_scale(%x: tensor<4x8xf32>, %s: tensor<8xf32>) {
  // expected-error@+1 {{a per-axis 'scale' must be [4], the size of input 'tensor<4x8xf32>' along axis 0, got 'tensor<8xf32>'}}
  %0 = tfm.quantize %x, %s axis = 0 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi8>
  return
}

// -----

// Tests that a zero point must hold the quantized type.
func.func @quantize_zero_point_type(%x: tensor<4x8xf32>, %s: tensor<f32>, %z: tensor<i8>) {
  // expected-error@+1 {{'zero_point' 'tensor<i8>' must hold 'ui8', the element type of the quantized values}}
  %0 = tfm.quantize %x, %s, %z : (tensor<4x8xf32>, tensor<f32>, tensor<i8>) -> tensor<4x8xui8>
  return
}

// -----

// Tests that a blocked scale must cover the blocks.
func.func @dequantize_blocks(%q: tensor<4x64xi4>, %s: tensor<4x3xf32>) {
  // expected-error@+1 {{a blocked 'scale' must be [4, 2]: input 'tensor<4x64xi4>' in blocks of 32 along axis 1, got 'tensor<4x3xf32>'}}
  %0 = tfm.dequantize %q, %s block_size = 32 : (tensor<4x64xi4>, tensor<4x3xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that an i32 (a quantized bias) takes no zero point.
func.func @dequantize_i32_zero_point(%q: tensor<4xi32>, %s: tensor<f32>, %z: tensor<i8>) {
  // expected-error@+1 {{an i32 'input' (a quantized bias) takes no 'zero_point'}}
  %0 = tfm.dequantize %q, %s, %z : (tensor<4xi32>, tensor<f32>, tensor<i8>) -> tensor<4xf32>
  return
}

// -----

// Tests that an integer matmul's right zero point is one per column.
func.func @matmul_integer_zero_point(%a: tensor<8x16xui8>, %b: tensor<16x4xi8>, %z: tensor<16xi8>) {
  // expected-error@+1 {{'rhs_zero_point' 'tensor<16xi8>' must be rank 0 or broadcast to [1, 4], its operand's shape with the contracted size 1}}
  %0 = tfm.matmul_integer %a, %b rhs_zero_point %z : (tensor<8x16xui8>, tensor<16x4xi8>, tensor<16xi8>) -> tensor<8x4xi32>
  return
}

// -----

// Tests that a quantized linear's static input needs its scale.
func.func @quantized_linear_static(%x: tensor<2x64xf32>, %w: tensor<8x64xi8>, %s: tensor<8xf32>) {
  // expected-error@+1 {{'input_scale' and 'input_zero_point' are given exactly when 'input_quantization' is static}}
  %0 = tfm.quantized_linear %x, %w scale %s input_quantization = static : (tensor<2x64xf32>, tensor<8x64xi8>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that a blocked input needs the weight's blocks, whole along K.
func.func @quantized_linear_blocked(%x: tensor<2x64xf32>, %w: tensor<8x64xi8>, %s: tensor<8xf32>) {
  // expected-error@+1 {{a blocked quantization of the input needs the weight's 'block_size', dividing K = 64; got 0}}
  %0 = tfm.quantized_linear %x, %w scale %s input_quantization = blocked : (tensor<2x64xf32>, tensor<8x64xi8>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}
