// RUN: tfm-opt %s -split-input-file --tfm-fuse-residual-layernorm=remarks=true -verify-diagnostics | FileCheck %s
// RUN: %python %S/Inputs/check_pass_equivalence.py %tfm_opt_bin %tfmc_bin --tfm-fuse-residual-layernorm %s %t | FileCheck %s --check-prefix=EQUIV
// EQUIV: functions equivalent after --tfm-fuse-residual-layernorm, also compiled

// Tests that RMSNorm as Llama's reference code is exported at opset 17
// (Pow, ReduceMean, Add eps, Sqrt, Reciprocal as a Div of one, Mul, then
// the weight's Mul on the left) over a pre-norm residual stream becomes one
// add_layer_norm {rms} that also returns the sum.
// CHECK-LABEL: func.func @llama_pre_norm
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>, %[[F:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[Y:.+]], %[[S:.+]] = tfm.add_layer_norm %[[X]], %[[F]], %{{.+}} {axis = 2 : i64, epsilon = 9.9999999747524271E-7 : f64, rms} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>)
// CHECK-NEXT: %[[NEXT:.+]] = tfm.add %[[S]], %[[Y]]
// CHECK-NEXT: return %[[NEXT]]
func.func @llama_pre_norm(%x: tensor<2x3x4xf32>, %f: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %one = arith.constant dense<1.0> : tensor<f32>
  %two = arith.constant dense<2.0> : tensor<f32>
  %eps = arith.constant dense<9.99999997e-07> : tensor<f32>
  %w = arith.constant dense<[1.5, 0.5, 2.0, 1.0]> : tensor<4xf32>
  %s = tfm.add %x, %f : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %p = tfm.pow %s, %two : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %v = tfm.reduce mean %p axes = [-1] keepdims : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
  %ve = tfm.add %v, %eps : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %rt = math.sqrt %ve : tensor<2x3x1xf32>
  %inv = tfm.div %one, %rt : (tensor<f32>, tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %n = tfm.mul %s, %inv : (tensor<2x3x4xf32>, tensor<2x3x1xf32>) -> tensor<2x3x4xf32>
  // expected-remark@+1 {{tfm-fuse-residual-rmsnorm: fused}}
  %y = tfm.mul %w, %n : (tensor<4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %next = tfm.add %s, %y : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %next : tensor<2x3x4xf32>
}

// -----

// Tests the other spellings: the square as x · x, eps on the left, the
// reciprocal root on the left of the product. Without a
// residual add it is an RMSNorm but not a site, so no remark.
// CHECK-LABEL: func.func @square_and_rsqrt
// CHECK-SAME: (%[[X:.+]]: tensor<3x8xf32>)
// CHECK: %[[Y:.+]] = tfm.layer_norm %[[X]], %{{.+}} {axis = 1 : i64, epsilon = 9.9999997473787516E-6 : f64, rms} : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @square_and_rsqrt(%x: tensor<3x8xf32>) -> tensor<3x8xf32> {
  %eps = arith.constant dense<9.99999974e-06> : tensor<f32>
  %w = arith.constant dense<[1.0, 2.0, 3.0, 4.0, 0.5, 0.25, 1.0, 2.0]> : tensor<8xf32>
  %q = tfm.mul %x, %x : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %v = tfm.reduce mean %q axes = [1] keepdims : tensor<3x8xf32> -> tensor<3x1xf32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %ve = tfm.add %eps, %v : (tensor<f32>, tensor<3x1xf32>) -> tensor<3x1xf32>
  %rt = math.sqrt %ve : tensor<3x1xf32>
  %inv = tfm.div %one, %rt : (tensor<f32>, tensor<3x1xf32>) -> tensor<3x1xf32>
  %n = tfm.mul %inv, %x : (tensor<3x1xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %y = tfm.mul %n, %w : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  return %y : tensor<3x8xf32>
}

// -----

// Tests x / sqrt(mean(x²) + eps) after a post-norm residual add, with a
// bias (which RMSNorm allows, though Llama has none).
// CHECK-LABEL: func.func @quotient_post_norm
// CHECK: %[[Y:.+]] = tfm.add_layer_norm %arg0, %arg1, %{{.+}}, %{{.+}} {axis = 1 : i64, epsilon = 0.0010000000474974513 : f64, rms} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: return %[[Y]]
func.func @quotient_post_norm(%x: tensor<2x4xf32>, %r: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %two = arith.constant dense<2.0> : tensor<f32>
  %eps = arith.constant dense<1.0e-03> : tensor<f32>
  %w = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %b = arith.constant dense<[0.5, -0.5, 0.25, 0.0]> : tensor<4xf32>
  %s = tfm.add %x, %r : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %p = tfm.pow %s, %two : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %v = tfm.reduce mean %p axes = [-1] keepdims : tensor<2x4xf32> -> tensor<2x1xf32>
  %ve = tfm.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %rt = math.sqrt %ve : tensor<2x1xf32>
  %n = tfm.div %s, %rt : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %sc = tfm.mul %n, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // expected-remark@+1 {{tfm-fuse-residual-rmsnorm: fused}}
  %y = tfm.add %sc, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Tests that an RMSNorm over a leading axis, which tfm.layer_norm cannot
// express, is reported as missed with the pattern's reason, and left as
// it was.
// CHECK-LABEL: func.func @leading_axis
// CHECK-NOT: tfm.layer_norm
// CHECK: math.sqrt
func.func @leading_axis(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %one = arith.constant dense<1.0> : tensor<f32>
  %two = arith.constant dense<2.0> : tensor<f32>
  %eps = arith.constant dense<1.0e-05> : tensor<f32>
  %p = tfm.pow %x, %two : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  // expected-remark@+1 {{tfm-fuse-residual-rmsnorm: missed: a decomposed RMSNorm was not recognized: the root mean square is over axes that are not the trailing dimensions}}
  %v = tfm.reduce mean %p axes = [0] keepdims : tensor<4x3xf32> -> tensor<1x3xf32>
  %ve = tfm.add %v, %eps : (tensor<1x3xf32>, tensor<f32>) -> tensor<1x3xf32>
  %rt = math.sqrt %ve : tensor<1x3xf32>
  %inv = tfm.div %one, %rt : (tensor<f32>, tensor<1x3xf32>) -> tensor<1x3xf32>
  %n = tfm.mul %x, %inv : (tensor<4x3xf32>, tensor<1x3xf32>) -> tensor<4x3xf32>
  return %n : tensor<4x3xf32>
}

// -----

// Tests that a mean of squares with no root over it (a squared-error loss)
// is neither rewritten nor reported.
// CHECK-LABEL: func.func @mean_square_error
// CHECK-NOT: tfm.layer_norm
// CHECK: tfm.reduce mean
func.func @mean_square_error(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x1xf32> {
  %two = arith.constant dense<2.0> : tensor<f32>
  %eps = arith.constant dense<1.0e-05> : tensor<f32>
  %d = tfm.sub %a, %b : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %p = tfm.pow %d, %two : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %v = tfm.reduce mean %p axes = [-1] keepdims : tensor<2x4xf32> -> tensor<2x1xf32>
  %ve = tfm.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  return %ve : tensor<2x1xf32>
}
