// RUN: tfm-opt %s -split-input-file --tfm-fuse-quantized-linear=remarks=true -verify-diagnostics | FileCheck %s
// RUN: %python %S/Inputs/check_pass_equivalence.py %tfm_opt_bin %tfmc_bin --tfm-fuse-quantized-linear %s %t | FileCheck %s --check-prefix=EQUIV
// EQUIV: functions equivalent after --tfm-fuse-quantized-linear, also compiled

// Tests that QDQ's MatMul (an int8 weight [K, N] per output column, the
// input through a QuantizeLinear/DequantizeLinear pair) becomes one
// quantized linear: the weight transposed at compile time, the input
// quantized statically by its pair's scale and zero point.
// CHECK-LABEL: func.func @qdq_matmul
// CHECK: %[[W:.+]] = arith.constant dense<{{\[}}[1, 3, 5], [-2, -4, -6]]> : tensor<2x3xi8>
// CHECK: tfm.quantized_linear %arg0, %[[W]] scale %{{.+}} input_scale %{{.+}} input_zero_point %{{.+}} input_quantization = static : (tensor<4x3xf32>, tensor<2x3xi8>, tensor<2xf32>, tensor<f32>, tensor<ui8>) -> tensor<4x2xf32>
// CHECK-NOT: tfm.matmul
func.func @qdq_matmul(%x: tensor<4x3xf32>) -> tensor<4x2xf32> {
  %xs = arith.constant dense<0.05> : tensor<f32>
  %xz = arith.constant dense<128> : tensor<ui8>
  %w = arith.constant dense<[[1, -2], [3, -4], [5, -6]]> : tensor<3x2xi8>
  %ws = arith.constant dense<[0.1, 0.2]> : tensor<2xf32>
  %q = tfm.quantize %x, %xs, %xz : (tensor<4x3xf32>, tensor<f32>, tensor<ui8>) -> tensor<4x3xui8>
  %d = tfm.dequantize %q, %xs, %xz : (tensor<4x3xui8>, tensor<f32>, tensor<ui8>) -> tensor<4x3xf32>
  %wd = tfm.dequantize %w, %ws axis = 1 : (tensor<3x2xi8>, tensor<2xf32>) -> tensor<3x2xf32>
  // expected-remark@+1 {{tfm-fuse-quantized-linear: fused}}
  %y = tfm.matmul %d, %wd : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// Tests that a linear of a blocked uint4 weight [N, K] with zero points (as
// MatMulNBits imports it), its bias kept, reads the weight as it is.
// CHECK-LABEL: func.func @blocked_uint4
// CHECK: tfm.quantized_linear %arg0, %{{.+}} scale %{{.+}} zero_point %{{.+}} bias %{{.+}} block_size = 16 : (tensor<2x32xf32>, tensor<2x32xui4>, tensor<2x2xf32>, tensor<2x2xui4>, tensor<2xf32>) -> tensor<2x2xf32>
// CHECK-NOT: tfm.dequantize
func.func @blocked_uint4(%x: tensor<2x32xf32>) -> tensor<2x2xf32> {
  %w = arith.constant dense<[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
                             [3, 3, 3, 3, 9, 9, 9, 9, 0, 0, 0, 0, 15, 15, 15, 15, 1, 2, 1, 2, 1, 2, 1, 2, 7, 8, 7, 8, 7, 8, 7, 8]]> : tensor<2x32xui4>
  %s = arith.constant dense<[[0.1, 0.2], [0.3, 0.05]]> : tensor<2x2xf32>
  %z = arith.constant dense<[[8, 7], [0, 15]]> : tensor<2x2xui4>
  %b = arith.constant dense<[1.0, -1.0]> : tensor<2xf32>
  %wd = tfm.dequantize %w, %s, %z block_size = 16 : (tensor<2x32xui4>, tensor<2x2xf32>, tensor<2x2xui4>) -> tensor<2x32xf32>
  // expected-remark@+1 {{tfm-fuse-quantized-linear: fused}}
  %y = tfm.linear %x, %wd, %b : (tensor<2x32xf32>, tensor<2x32xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// -----

// Tests that quantize_dynamic's QOperator form (DynamicQuantizeLinear,
// MatMulInteger, Cast, Mul of the scales, Mul) becomes one quantized linear
// with its input quantized dynamically; the weight's zero point of zeros
// goes.
// CHECK-LABEL: func.func @dynamic
// CHECK: tfm.quantized_linear %arg0, %{{.+}} scale %{{.+}} input_quantization = dynamic : (tensor<2x3x4xf32>, tensor<2x4xi8>, tensor<2xf32>) -> tensor<2x3x2xf32>
// CHECK-NOT: tfm.matmul_integer
func.func @dynamic(%x: tensor<2x3x4xf32>) -> tensor<2x3x2xf32> {
  %w = arith.constant dense<[[1, -2], [3, -4], [5, -6], [127, -127]]> : tensor<4x2xi8>
  %wz = arith.constant dense<0> : tensor<2xi8>
  %ws = arith.constant dense<[0.01, 0.02]> : tensor<2xf32>
  %q, %s, %z = tfm.dynamic_quantize %x : tensor<2x3x4xf32> -> (tensor<2x3x4xui8>, tensor<f32>, tensor<ui8>)
  // expected-remark@+1 {{tfm-fuse-quantized-linear: fused}}
  %acc = tfm.matmul_integer %q, %w lhs_zero_point %z rhs_zero_point %wz : (tensor<2x3x4xui8>, tensor<4x2xi8>, tensor<ui8>, tensor<2xi8>) -> tensor<2x3x2xi32>
  %f = tfm.cast %acc : tensor<2x3x2xi32> -> tensor<2x3x2xf32>
  %sc = tfm.mul %s, %ws : (tensor<f32>, tensor<2xf32>) -> tensor<2xf32>
  %y = tfm.mul %f, %sc : (tensor<2x3x2xf32>, tensor<2xf32>) -> tensor<2x3x2xf32>
  return %y : tensor<2x3x2xf32>
}

// -----

// Tests that a weight scaled per input feature (along K) is a miss that
// says why: a linear's epilogue scales its output features.
// CHECK-LABEL: func.func @per_input_feature
// CHECK: tfm.matmul
func.func @per_input_feature(%x: tensor<4x3xf32>) -> tensor<4x2xf32> {
  %w = arith.constant dense<[[1, -2], [3, -4], [5, -6]]> : tensor<3x2xi8>
  %ws = arith.constant dense<[0.1, 0.2, 0.3]> : tensor<3xf32>
  %wd = tfm.dequantize %w, %ws axis = 0 : (tensor<3x2xi8>, tensor<3xf32>) -> tensor<3x2xf32>
  // expected-remark@+1 {{tfm-fuse-quantized-linear: missed: the weight's scale is per input feature (along K), which a linear's epilogue cannot apply}}
  %y = tfm.matmul %x, %wd : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// Tests that an integer product of a static uint8 input is a miss with its
// reason.
// CHECK-LABEL: func.func @static_integer
// CHECK: tfm.matmul_integer
func.func @static_integer(%a: tensor<4x3xui8>) -> tensor<4x2xi32> {
  %w = arith.constant dense<[[1, -2], [3, -4], [5, -6]]> : tensor<3x2xi8>
  // expected-remark@+1 {{tfm-fuse-quantized-linear: missed: the input is not dynamically quantized (a static uint8 input multiplies as integers)}}
  %y = tfm.matmul_integer %a, %w : (tensor<4x3xui8>, tensor<3x2xi8>) -> tensor<4x2xi32>
  return %y : tensor<4x2xi32>
}
