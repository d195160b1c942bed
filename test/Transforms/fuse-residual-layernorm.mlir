// RUN: tfm-opt %s -split-input-file --tfm-fuse-residual-layernorm=remarks=true -verify-diagnostics | FileCheck %s
// RUN: %python %S/Inputs/check_pass_equivalence.py %tfm_opt_bin %tfmc_bin --tfm-fuse-residual-layernorm %s %t | FileCheck %s --check-prefix=EQUIV
// EQUIV: functions equivalent after --tfm-fuse-residual-layernorm, also compiled

// Tests that LayerNorm spelled out as exporters do at opset 13 (ReduceMean,
// Sub, Pow, ReduceMean, Add eps, Sqrt, Div, Mul, Add) over a residual sum
// becomes one add_layer_norm (post-LN: the sum has no other reader).
// CHECK-LABEL: func.func @decomposed_post_ln
// CHECK-SAME: (%[[X:.+]]: tensor<2x4xf32>, %[[R:.+]]: tensor<2x4xf32>)
// CHECK: %[[Y:.+]] = tfm.add_layer_norm %[[X]], %[[R]], %{{.+}}, %{{.+}} {axis = 1 : i64, epsilon = 9.9999997473787516E-6 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: return %[[Y]]
func.func @decomposed_post_ln(%x: tensor<2x4xf32>, %r: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %two = arith.constant dense<2.0> : tensor<f32>
  %eps = arith.constant dense<9.99999974e-06> : tensor<f32>
  %g = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %b = arith.constant dense<[0.5, 0.5, 0.5, 0.5]> : tensor<4xf32>
  %s = tfm.add %x, %r : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %m = tfm.reduce mean %s axes = [-1] keepdims : tensor<2x4xf32> -> tensor<2x1xf32>
  %d = tfm.sub %s, %m : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %p = tfm.pow %d, %two : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %v = tfm.reduce mean %p axes = [-1] keepdims : tensor<2x4xf32> -> tensor<2x1xf32>
  %ve = tfm.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %sd = math.sqrt %ve : tensor<2x1xf32>
  %n = tfm.div %d, %sd : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %sc = tfm.mul %n, %g : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // expected-remark@+1 {{tfm-fuse-residual-layernorm: fused}}
  %y = tfm.add %sc, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Tests that a pre-LN residual stream, where the sum also feeds the next
// residual, keeps the sum as the fused op's second result.
// CHECK-LABEL: func.func @pre_ln
// CHECK: %[[N:.+]], %[[SUM:.+]] = tfm.add_layer_norm %arg0, %arg1, %{{.+}} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK: tfm.add %[[SUM]], %[[N]]
func.func @pre_ln(%x: tensor<2x4xf32>, %f: tensor<2x4xf32>, %g: tensor<4xf32>) -> tensor<2x4xf32> {
  %s = tfm.add %x, %f : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  // expected-remark@+1 {{tfm-fuse-residual-layernorm: fused}}
  %n = tfm.layer_norm %s, %g : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %next = tfm.add %s, %n : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %next : tensor<2x4xf32>
}

// -----

// Tests that token + position embeddings followed by LN fuse, with the
// position table broadcast over the batch.
// CHECK-LABEL: func.func @embeddings
// CHECK: tfm.add_layer_norm %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
func.func @embeddings(%tok: tensor<2x3x4xf32>, %pos: tensor<3x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<2x3x4xf32> {
  %s = tfm.add %tok, %pos : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  // expected-remark@+1 {{tfm-fuse-residual-layernorm: fused}}
  %n = tfm.layer_norm %s, %g, %b : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return %n : tensor<2x3x4xf32>
}

// -----

// Tests that a decomposed norm over a leading axis, which tfm.layer_norm does
// not support, is a reported miss and stays as it was.
// CHECK-LABEL: func.func @leading_axis
// CHECK-NOT: tfm.layer_norm
// CHECK-NOT: tfm.add_layer_norm
func.func @leading_axis(%s: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %two = arith.constant dense<2.0> : tensor<f32>
  %eps = arith.constant dense<1.0e-05> : tensor<f32>
  // expected-remark@+1 {{tfm-fuse-residual-layernorm: missed: a decomposed layer norm was not recognized: normalizes over axes that are not the trailing dimensions, which tfm.layer_norm does not support}}
  %m = tfm.reduce mean %s axes = [0] keepdims : tensor<2x4xf32> -> tensor<1x4xf32>
  %d = tfm.sub %s, %m : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  %p = tfm.pow %d, %two : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %v = tfm.reduce mean %p axes = [0] keepdims : tensor<2x4xf32> -> tensor<1x4xf32>
  %ve = tfm.add %v, %eps : (tensor<1x4xf32>, tensor<f32>) -> tensor<1x4xf32>
  %sd = math.sqrt %ve : tensor<1x4xf32>
  %n = tfm.div %d, %sd : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  return %n : tensor<2x4xf32>
}

// -----

// Tests that a residual sum read before the layer norm cannot be produced by
// the fused op: a reported miss, and the graph is unchanged.
// CHECK-LABEL: func.func @early_reader
// CHECK: tfm.add
// CHECK: tfm.layer_norm
// CHECK-NOT: tfm.add_layer_norm
func.func @early_reader(%x: tensor<2x4xf32>, %f: tensor<2x4xf32>, %g: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %s = tfm.add %x, %f : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %early = tfm.relu %s : tensor<2x4xf32>
  // expected-remark@+1 {{tfm-fuse-residual-layernorm: missed: the residual sum has a reader before the layer norm, so it cannot be computed by the fused op}}
  %n = tfm.layer_norm %s, %g : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %early, %n : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Tests that a sum that reaches a layer norm through a transpose (Conformer's
// convolution module normalizes the time-major residual stream after moving
// it back to batch-major) is a reported miss, not a silent one.
// CHECK-LABEL: func.func @sum_through_transpose
// CHECK: tfm.layer_norm
func.func @sum_through_transpose(%x: tensor<3x2x4xf32>, %r: tensor<3x2x4xf32>) -> tensor<2x3x4xf32> {
  %g = arith.constant dense<1.0> : tensor<4xf32>
  %s = tfm.add %x, %r : (tensor<3x2x4xf32>, tensor<3x2x4xf32>) -> tensor<3x2x4xf32>
  %t = tfm.transpose %s permutation = [1, 0, 2] : tensor<3x2x4xf32> -> tensor<2x3x4xf32>
  // expected-remark@+1 {{tfm-fuse-residual-layernorm: missed: the sum reaches the layer norm through a tfm.transpose, which the fused op cannot see through}}
  %y = tfm.layer_norm %t, %g {epsilon = 1.0e-05 : f64} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}
