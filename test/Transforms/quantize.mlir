// RUN: tfm-opt %s -split-input-file --tfm-quantize="mode=int8 remarks=true" -verify-diagnostics | FileCheck %s --check-prefix=INT8
// RUN: tfm-opt %s -split-input-file --tfm-quantize="mode=int4 block-size=16" | FileCheck %s --check-prefix=INT4
// RUN: not tfm-opt %s -split-input-file --tfm-quantize="mode=int4 block-size=24" 2>&1 | FileCheck %s --check-prefix=BLOCK
// BLOCK: tfm-quantize: block-size 24 is not a multiple of 16

// The expected integers are worked by hand from the weights below.

// Tests int8: a matmul by a [K, N] weight becomes a quantized linear of
// the weight transposed to [N, K], symmetric per output feature with the
// scale max|w| / 127: column 0 (max 127) has scale 1, so 2.5 rounds to 2
// (to even) and -0.5 to 0; column 1 (max 254) has scale 2, so 1 / 2 = 0.5
// rounds to 0 and -3 / 2 = -1.5 to -2. The input is quantized at run time.
// INT8-LABEL: func.func @matmul_kn
// INT8-DAG: %[[W:.+]] = arith.constant dense<{{\[}}[127, -100, 2, 0], [127, 0, -2, 0]]> : tensor<2x4xi8>
// INT8-DAG: %[[S:.+]] = arith.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// INT8: tfm.quantized_linear %arg0, %[[W]] scale %[[S]] input_quantization = dynamic : (tensor<2x3x4xf32>, tensor<2x4xi8>, tensor<2xf32>) -> tensor<2x3x2xf32>
// INT8-NOT: tfm.matmul
// Tests int4 on the same weight, one block of K = 4 per feature: column 0
// spans [-100.4, 127], so s = 227.4 / 15 and the zero point
// round(100.4 / s) = round(6.62) = 7; 127 / s = 8.38 rounds to 8, + 7 = 15;
// -100.4 / s = -6.62 to -7, + 7 = 0; 2.5 / s = 0.16 to 0, + 7 = 7; -0.5 to
// 7. Column 1 spans [-3, 254]: s = 257 / 15 = 17.13, zero point
// round(0.18) = 0; 254 / s = 14.8 to 15, 1 to 0, -3 / s = -0.18 to 0.
// INT4-LABEL: func.func @matmul_kn
// INT4-DAG: %[[W:.+]] = arith.constant dense<{{\[}}[15, 0, 7, 7], [15, 0, 0, 0]]> : tensor<2x4xui4>
// INT4-DAG: %[[Z:.+]] = arith.constant dense<{{\[}}[7], [0]]> : tensor<2x1xui4>
// INT4-DAG: %[[S:.+]] = arith.constant dense<{{\[}}[1.516000e+01], [17.1333332]]> : tensor<2x1xf32>
// INT4: tfm.quantized_linear %arg0, %[[W]] scale %[[S]] zero_point %[[Z]] block_size = 16 : (tensor<2x3x4xf32>, tensor<2x4xui4>, tensor<2x1xf32>, tensor<2x1xui4>) -> tensor<2x3x2xf32>
func.func @matmul_kn(%x: tensor<2x3x4xf32>) -> tensor<2x3x2xf32> {
  %w = arith.constant dense<[[127.0, 254.0], [-100.4, 1.0], [2.5, -3.0], [-0.5, 0.0]]> : tensor<4x2xf32>
  // expected-remark@+1 {{tfm-quantize: fused}}
  %y = tfm.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x2xf32>) -> tensor<2x3x2xf32>
  return %y : tensor<2x3x2xf32>
}

// -----

// Tests that a linear keeps its bias and activation, and that int4 takes
// blocks of 16 along K with the last one short (K = 20): row 0's first
// block is 0..15 (s = 1, zero point 0, the values as they are), its second
// [-4, -3, -2.2, -1] (s = 4 / 15, zero point 15: -4 / s = -15, + 15 = 0;
// -3 / s = -11.25 to -11, + 15 = 4; -2.2 / s = -8.25 to -8, + 15 = 7). An all-zero
// row quantizes to zeros with scale 1.
// INT8-LABEL: func.func @linear_blocks
// INT8: tfm.quantized_linear %arg0, %{{.+}} scale %{{.+}} bias %arg1 input_quantization = dynamic activation = gelu
// INT4-LABEL: func.func @linear_blocks
// INT4-DAG: arith.constant dense<{{\[}}[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 4, 7, 11], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]]> : tensor<2x20xui4>
// INT4-DAG: arith.constant dense<{{\[}}[0, 15], [0, 0]]> : tensor<2x2xui4>
// INT4-DAG: arith.constant dense<{{\[}}[1.000000e+00, 0.266666681], [1.000000e+00, 1.000000e+00]]> : tensor<2x2xf32>
// INT4: tfm.quantized_linear %arg0, %{{.+}} scale %{{.+}} zero_point %{{.+}} bias %arg1 activation = gelu block_size = 16
func.func @linear_blocks(%x: tensor<3x20xf32>, %b: tensor<2xf32>) -> tensor<3x2xf32> {
  %w = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, -4.0, -3.0, -2.2, -1.0],
                             [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<2x20xf32>
  // expected-remark@+1 {{tfm-quantize: fused}}
  %y = tfm.linear %x, %w, %b activation = gelu : (tensor<3x20xf32>, tensor<2x20xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}

// -----

// Tests what stays float: a product of two computed values (attention's,
// no layer, so no remark), a batched product by a 3-D constant, a
// transposed input, a weight with NaN, and (int8 only) a bf16 input.
// INT8-LABEL: func.func @kept_float
// INT8-NOT: tfm.quantized_linear
// INT4-LABEL: func.func @kept_float
// INT4-COUNT-1: tfm.quantized_linear
// INT4-NOT: tfm.quantized_linear
func.func @kept_float(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %x8: tensor<4x8xf32>, %h: tensor<4x8xbf16>)
    -> (tensor<2x4x4xf32>, tensor<2x4x2xf32>, tensor<8x2xf32>, tensor<4x2xf32>, tensor<4x2xbf16>) {
  %s = tfm.matmul %q, %k transpose_rhs : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %w3 = arith.constant dense<0.5> : tensor<2x8x2xf32>
  // expected-remark@+1 {{tfm-quantize: missed: the weight is 3-D: a batched product by a constant, not a linear layer}}
  %b = tfm.matmul %q, %w3 : (tensor<2x4x8xf32>, tensor<2x8x2xf32>) -> tensor<2x4x2xf32>
  %w = arith.constant dense<0.25> : tensor<4x2xf32>
  // expected-remark@+1 {{tfm-quantize: missed: the input is transposed}}
  %t = tfm.matmul %x8, %w transpose_lhs : (tensor<4x8xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
  %nan = arith.constant dense<[[1.0, 0x7FC00000], [2.0, 3.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]> : tensor<8x2xf32>
  // expected-remark@+1 {{tfm-quantize: missed: the weight holds NaN or infinity}}
  %n = tfm.matmul %x8, %nan : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %wb = arith.constant dense<0.5> : tensor<8x2xbf16>
  // expected-remark@+1 {{tfm-quantize: missed: its input is bf16; int8 quantizes f32 inputs at run time}}
  %hb = tfm.matmul %h, %wb : (tensor<4x8xbf16>, tensor<8x2xbf16>) -> tensor<4x2xbf16>
  return %s, %b, %t, %n, %hb : tensor<2x4x4xf32>, tensor<2x4x2xf32>, tensor<8x2xf32>, tensor<4x2xf32>, tensor<4x2xbf16>
}
