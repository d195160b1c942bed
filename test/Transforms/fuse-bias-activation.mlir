// RUN: tfm-opt %s -split-input-file --tfm-fuse-bias-activation=remarks=true -verify-diagnostics | FileCheck %s
// RUN: %python %S/Inputs/check_pass_equivalence.py %tfm_opt_bin %tfmc_bin --tfm-fuse-bias-activation %s %t | FileCheck %s --check-prefix=EQUIV
// EQUIV: functions equivalent after --tfm-fuse-bias-activation, also compiled

// Tests that matmul by a constant + bias + relu becomes one linear with the
// weight transposed at compile time.
// CHECK-LABEL: func.func @matmul_bias_relu
// CHECK: %[[W:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 3.000000e+00], [2.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK: tfm.linear %arg0, %[[W]], %{{.+}} activation = relu
// CHECK-NOT: tfm.relu
func.func @matmul_bias_relu(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %w = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %b = arith.constant dense<[0.5, -0.5]> : tensor<2xf32>
  %m = tfm.matmul %x, %w : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  %a = tfm.add %b, %m : (tensor<2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  // expected-remark@+1 {{tfm-fuse-bias-activation: fused}}
  %r = tfm.relu %a : tensor<3x2xf32>
  return %r : tensor<3x2xf32>
}

// -----

// Tests that GELU written with Erf (the exact form) folds into the linear.
// CHECK-LABEL: func.func @gelu_erf
// CHECK: tfm.linear %arg0, %{{.+}}, %{{.+}} activation = gelu :
// CHECK-NOT: math.erf
func.func @gelu_erf(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %w = arith.constant dense<1.0> : tensor<2x2xf32>
  %b = arith.constant dense<0.0> : tensor<2xf32>
  %sqrt2 = arith.constant dense<1.41421354> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %half = arith.constant dense<0.5> : tensor<f32>
  %y = tfm.linear %x, %w, %b : (tensor<3x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %0 = tfm.div %y, %sqrt2 : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  %1 = math.erf %0 : tensor<3x2xf32>
  %2 = tfm.add %1, %one : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  %3 = tfm.mul %y, %2 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  // expected-remark@+1 {{tfm-fuse-bias-activation: fused}}
  %4 = tfm.mul %3, %half : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  return %4 : tensor<3x2xf32>
}

// -----

// Tests that GELU in its tanh form folds into the linear as gelu_tanh.
// CHECK-LABEL: func.func @gelu_tanh
// CHECK: tfm.linear %arg0, %{{.+}}, %{{.+}} activation = gelu_tanh :
// CHECK-NOT: math.tanh
func.func @gelu_tanh(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %w = arith.constant dense<1.0> : tensor<2x2xf32>
  %b = arith.constant dense<0.0> : tensor<2xf32>
  %c1 = arith.constant dense<0.0447149985> : tensor<f32>
  %c2 = arith.constant dense<0.797884583> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %half = arith.constant dense<0.5> : tensor<f32>
  %y = tfm.linear %x, %w, %b : (tensor<3x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %sq = tfm.mul %y, %y : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %cube = tfm.mul %y, %sq : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %t0 = tfm.mul %c1, %cube : (tensor<f32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %t1 = tfm.add %y, %t0 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %t2 = tfm.mul %c2, %t1 : (tensor<f32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %t3 = math.tanh %t2 : tensor<3x2xf32>
  %t4 = tfm.add %one, %t3 : (tensor<f32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %t5 = tfm.mul %y, %t4 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  // expected-remark@+1 {{tfm-fuse-bias-activation: fused}}
  %t6 = tfm.mul %half, %t5 : (tensor<f32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  return %t6 : tensor<3x2xf32>
}

// -----

// Tests that an activation whose linear output has another reader stays
// apart: a reported miss.
// CHECK-LABEL: func.func @shared_linear
// CHECK: tfm.relu
func.func @shared_linear(%x: tensor<3x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>) {
  %w = arith.constant dense<1.0> : tensor<2x2xf32>
  %y = tfm.linear %x, %w : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  // expected-remark@+1 {{tfm-fuse-bias-activation: missed: the linear's output has other users, which need it before the activation}}
  %r = tfm.relu %y : tensor<3x2xf32>
  return %r, %y : tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// Tests that a relu of something other than a linear is a reported miss.
// CHECK-LABEL: func.func @not_linear
// CHECK: tfm.relu
func.func @not_linear(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {
  // expected-remark@+1 {{tfm-fuse-bias-activation: missed: the input is not a linear}}
  %r = tfm.relu %x : tensor<3x2xf32>
  return %r : tensor<3x2xf32>
}

// -----

// Tests GPT-2's gelu_new (tanh, x³ by pow) on a linear viewed back to 3-D:
// the activation moves into the linear and the view follows it.
// CHECK-LABEL: func.func @gelu_new_through_view
// CHECK: %[[L:.+]] = tfm.linear %{{.+}}, %{{.+}}, %{{.+}} activation = gelu_tanh
// CHECK: tfm.reshape %[[L]] : tensor<6x4xf32> -> tensor<2x3x4xf32>
// CHECK-NOT: math.tanh
func.func @gelu_new_through_view(%x: tensor<6x2xf32>) -> tensor<2x3x4xf32> {
  %w = arith.constant dense<[[1.0, -1.0], [0.5, 2.0], [-1.5, 0.25], [0.0, 1.0]]> : tensor<4x2xf32>
  %b = arith.constant dense<[0.1, -0.2, 0.3, 0.0]> : tensor<4xf32>
  %half = arith.constant dense<0.5> : tensor<f32>
  %three = arith.constant dense<3.0> : tensor<f32>
  %k = arith.constant dense<0.044715> : tensor<f32>
  %s = arith.constant dense<0.797884583> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %y = tfm.linear %x, %w, %b : (tensor<6x2xf32>, tensor<4x2xf32>, tensor<4xf32>) -> tensor<6x4xf32>
  %v = tfm.reshape %y : tensor<6x4xf32> -> tensor<2x3x4xf32>
  %h = tfm.mul %v, %half : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %c = tfm.pow %v, %three : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %kc = tfm.mul %c, %k : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %in = tfm.add %v, %kc : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %sc = tfm.mul %in, %s : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %t = math.tanh %sc : tensor<2x3x4xf32>
  %t1 = tfm.add %t, %one : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  // expected-remark@+1 {{tfm-fuse-bias-activation: fused}}
  %g = tfm.mul %h, %t1 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %g : tensor<2x3x4xf32>
}

// -----

// Tests that SiLU, x·sigmoid(x) with the sigmoid as 1 / (1 + exp(-x)),
// becomes the linear's activation.
// CHECK-LABEL: func.func @silu
// CHECK: tfm.linear %{{.+}}, %{{.+}}, %{{.+}} activation = silu
// CHECK-NOT: math.exp
func.func @silu(%x: tensor<3x2xf32>) -> tensor<3x4xf32> {
  %w = arith.constant dense<[[1.0, -1.0], [0.5, 2.0], [-1.5, 0.25], [0.0, 1.0]]> : tensor<4x2xf32>
  %b = arith.constant dense<[0.1, -0.2, 0.3, 0.0]> : tensor<4xf32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %y = tfm.linear %x, %w, %b : (tensor<3x2xf32>, tensor<4x2xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %n = arith.negf %y : tensor<3x4xf32>
  %e = math.exp %n : tensor<3x4xf32>
  %d = tfm.add %one, %e : (tensor<f32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %s = tfm.div %one, %d : (tensor<f32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  // expected-remark@+1 {{tfm-fuse-bias-activation: fused}}
  %r = tfm.mul %y, %s : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}

// -----

// Tests that SiLU of something other than a linear (Conformer's convolution
// module) is a reported miss, and that x·sigmoid(y) is no SiLU.
// CHECK-LABEL: func.func @silu_not_linear
// CHECK: math.exp
func.func @silu_not_linear(%x: tensor<3x4xf32>, %z: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %one = arith.constant dense<1.0> : tensor<f32>
  %n = arith.negf %x : tensor<3x4xf32>
  %e = math.exp %n : tensor<3x4xf32>
  %d = tfm.add %one, %e : (tensor<f32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %s = tfm.div %one, %d : (tensor<f32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  // expected-remark@+1 {{tfm-fuse-bias-activation: missed: the input is not a linear}}
  %r = tfm.mul %x, %s : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %r2 = tfm.mul %z, %s : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %r, %r2 : tensor<3x4xf32>, tensor<3x4xf32>
}

// -----

// Tests a training graph's linear: the exporter's matmul by the transpose of
// a weight that is not a constant (a parameter; an argument here) is a
// linear reading the weight as it is, and a bias that is not a constant
// (with leading 1s) and the relu fold into it.
// CHECK-LABEL: func.func @weight_not_constant
// CHECK: %[[B:.+]] = tfm.reshape %arg2 : tensor<1x1x5xf32> -> tensor<5xf32>
// CHECK: tfm.linear %arg0, %arg1, %[[B]] activation = relu : (tensor<2x3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
// CHECK-NOT: tfm.transpose
// CHECK-NOT: tfm.matmul
func.func @weight_not_constant(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>, %b: tensor<1x1x5xf32>) -> tensor<2x3x5xf32> {
  %t = tfm.transpose %w permutation = [1, 0] : tensor<5x4xf32> -> tensor<4x5xf32>
  %m = tfm.matmul %x, %t : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %a = tfm.add %m, %b : (tensor<2x3x5xf32>, tensor<1x1x5xf32>) -> tensor<2x3x5xf32>
  // expected-remark@+1 {{tfm-fuse-bias-activation: fused}}
  %r = tfm.relu %a : tensor<2x3x5xf32>
  return %r : tensor<2x3x5xf32>
}

// -----

// Tests that a weight in [K, N] order that is not a constant stays a
// matmul, since a linear would need it copied transposed, and that the
// relu's miss says so.
// CHECK-LABEL: func.func @weight_not_constant_untransposed
// CHECK: tfm.matmul
// CHECK: tfm.relu
func.func @weight_not_constant_untransposed(%x: tensor<3x4xf32>, %w: tensor<4x5xf32>, %b: tensor<5xf32>) -> tensor<3x5xf32> {
  %m = tfm.matmul %x, %w : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  %a = tfm.add %b, %m : (tensor<5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  // expected-remark@+1 {{tfm-fuse-bias-activation: missed: the input is a matmul that is not a linear (its weight is neither a constant nor transposed)}}
  %r = tfm.relu %a : tensor<3x5xf32>
  return %r : tensor<3x5xf32>
}

// -----

// Tests that a quantized linear takes its bias and activation as a float
// linear does.
// CHECK-LABEL: func.func @quantized_bias_gelu
// CHECK: tfm.quantized_linear %arg0, %{{.+}} scale %{{.+}} bias %{{.+}} input_quantization = dynamic activation = gelu :
// CHECK-NOT: math.erf
func.func @quantized_bias_gelu(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %w = arith.constant dense<[[1, -2], [3, 4]]> : tensor<2x2xi8>
  %s = arith.constant dense<[0.1, 0.2]> : tensor<2xf32>
  %b = arith.constant dense<[0.5, -0.5]> : tensor<2xf32>
  %sqrt2 = arith.constant dense<1.41421354> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %half = arith.constant dense<0.5> : tensor<f32>
  %l = tfm.quantized_linear %x, %w scale %s input_quantization = dynamic : (tensor<3x2xf32>, tensor<2x2xi8>, tensor<2xf32>) -> tensor<3x2xf32>
  %a = tfm.add %l, %b : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %d = tfm.div %a, %sqrt2 : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  %e = math.erf %d : tensor<3x2xf32>
  %p = tfm.add %e, %one : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  %m = tfm.mul %a, %p : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  // expected-remark@+1 {{tfm-fuse-bias-activation: fused}}
  %g = tfm.mul %m, %half : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  return %g : tensor<3x2xf32>
}
