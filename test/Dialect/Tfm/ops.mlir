// RUN: tfm-opt %s | tfm-opt | FileCheck %s
// RUN: tfm-opt %s --mlir-print-op-generic | tfm-opt | FileCheck %s

// Tests that matmul round-trips with and without transpose flags and with
// broadcast batch dimensions.
// CHECK-LABEL: func.func @matmul
func.func @matmul(%a: tensor<2x4x8x16xf32>, %b: tensor<2x4x8x16xf32>, %c: tensor<16x5xf32>)
    -> (tensor<2x4x8x8xf32>, tensor<2x4x16x16xf32>, tensor<2x4x8x5xf32>) {
  // CHECK: tfm.matmul %{{.+}}, %{{.+}} transpose_rhs : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %0 = tfm.matmul %a, %b transpose_rhs : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: tfm.matmul %{{.+}}, %{{.+}} transpose_lhs : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %1 = tfm.matmul %a, %b transpose_lhs : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  // CHECK: tfm.matmul %{{.+}}, %{{.+}} : (tensor<2x4x8x16xf32>, tensor<16x5xf32>) -> tensor<2x4x8x5xf32>
  %2 = tfm.matmul %a, %c : (tensor<2x4x8x16xf32>, tensor<16x5xf32>) -> tensor<2x4x8x5xf32>
  return %0, %1, %2 : tensor<2x4x8x8xf32>, tensor<2x4x16x16xf32>, tensor<2x4x8x5xf32>
}

// Tests that linear round-trips with and without bias and activation, in
// every float element type.
// CHECK-LABEL: func.func @linear
func.func @linear(%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>,
                  %xh: tensor<8x16xbf16>, %wh: tensor<4x16xbf16>, %xf: tensor<16xf16>, %wf: tensor<4x16xf16>)
    -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<8x4xbf16>, tensor<4xf16>) {
  // CHECK: tfm.linear %{{.+}}, %{{.+}}, %{{.+}} activation = gelu : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %0 = tfm.linear %x, %w, %b activation = gelu : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  // CHECK: tfm.linear %{{.+}}, %{{.+}}, %{{.+}} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %1 = tfm.linear %x, %w, %b : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  // CHECK: tfm.linear %{{.+}}, %{{.+}} activation = relu : (tensor<8x16xbf16>, tensor<4x16xbf16>) -> tensor<8x4xbf16>
  %2 = tfm.linear %xh, %wh activation = relu : (tensor<8x16xbf16>, tensor<4x16xbf16>) -> tensor<8x4xbf16>
  // CHECK: tfm.linear %{{.+}}, %{{.+}} activation = gelu_tanh : (tensor<16xf16>, tensor<4x16xf16>) -> tensor<4xf16>
  %3 = tfm.linear %xf, %wf activation = gelu_tanh : (tensor<16xf16>, tensor<4x16xf16>) -> tensor<4xf16>
  return %0, %1, %2, %3 : tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<8x4xbf16>, tensor<4xf16>
}

// Tests that the four broadcasting binary ops round-trip, on floats and
// integers.
// CHECK-LABEL: func.func @binary
func.func @binary(%x: tensor<2x8x16xf32>, %y: tensor<16xf32>, %i: tensor<4xi64>, %j: tensor<1xi64>)
    -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<4xi64>) {
  // CHECK: tfm.add %{{.+}}, %{{.+}} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %0 = tfm.add %x, %y : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: tfm.sub %{{.+}}, %{{.+}} : (tensor<16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %1 = tfm.sub %y, %x : (tensor<16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: tfm.mul
  %2 = tfm.mul %x, %x : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: tfm.div
  %3 = tfm.div %x, %y : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: tfm.add %{{.+}}, %{{.+}} : (tensor<4xi64>, tensor<1xi64>) -> tensor<4xi64>
  %4 = tfm.add %i, %j : (tensor<4xi64>, tensor<1xi64>) -> tensor<4xi64>
  return %0, %1, %2, %3, %4 : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<4xi64>
}

// Tests that the activations, softmax and dropout round-trip with their
// attributes.
// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<2x16xf32>) -> (tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>) {
  // CHECK: tfm.relu %{{.+}} : tensor<2x16xf32>
  %0 = tfm.relu %x : tensor<2x16xf32>
  // CHECK: tfm.gelu %{{.+}} : tensor<2x16xf32>
  %1 = tfm.gelu %x : tensor<2x16xf32>
  // CHECK: tfm.gelu %{{.+}} approximate = tanh : tensor<2x16xf32>
  %2 = tfm.gelu %x approximate = tanh : tensor<2x16xf32>
  // CHECK: tfm.softmax %{{.+}} : tensor<2x16xf32>
  %3 = tfm.softmax %x : tensor<2x16xf32>
  // CHECK: tfm.softmax %{{.+}} axis = 0 : tensor<2x16xf32>
  %4 = tfm.softmax %x axis = 0 : tensor<2x16xf32>
  // CHECK: tfm.dropout %{{.+}} training {rate = 2.500000e-01 : f64, seed = 7 : i64} : tensor<2x16xf32>
  %5 = tfm.dropout %x training {rate = 0.25 : f64, seed = 7 : i64} : tensor<2x16xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>
}

// Tests that layer_norm round-trips with one and several normalized
// dimensions, with and without bias, and as RMSNorm.
// CHECK-LABEL: func.func @layer_norm
func.func @layer_norm(%x: tensor<2x8x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>, %g2: tensor<8x16xf32>)
    -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  // CHECK: tfm.layer_norm %{{.+}}, %{{.+}}, %{{.+}} {epsilon = 9.9999999999999995E-7 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %0 = tfm.layer_norm %x, %g, %b {epsilon = 1.0e-6 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: tfm.layer_norm %{{.+}}, %{{.+}} {axis = 1 : i64} : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
  %1 = tfm.layer_norm %x, %g2 {axis = 1 : i64} : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: tfm.layer_norm %{{.+}}, %{{.+}} {epsilon = 9.9999999999999995E-7 : f64, rms} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %2 = tfm.layer_norm %x, %g {epsilon = 1.0e-6 : f64, rms} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return %0, %1, %2 : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// Tests that embedding and positional_encoding round-trip.
// CHECK-LABEL: func.func @embeddings
func.func @embeddings(%t: tensor<100x16xf32>, %ids: tensor<2x8xi64>, %ids32: tensor<8xi32>)
    -> (tensor<2x8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  // CHECK: tfm.embedding %{{.+}}, %{{.+}} : (tensor<100x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  %0 = tfm.embedding %t, %ids : (tensor<100x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  // CHECK: tfm.embedding %{{.+}}, %{{.+}} : (tensor<100x16xf32>, tensor<8xi32>) -> tensor<8x16xf32>
  %1 = tfm.embedding %t, %ids32 : (tensor<100x16xf32>, tensor<8xi32>) -> tensor<8x16xf32>
  // CHECK: tfm.positional_encoding : tensor<8x16xf32>
  %2 = tfm.positional_encoding : tensor<8x16xf32>
  return %0, %1, %2 : tensor<2x8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}

// Tests that the data-movement ops round-trip, on floats, indices and masks.
// CHECK-LABEL: func.func @data_movement
func.func @data_movement(%x: tensor<2x8x64xf32>, %m: tensor<2x8xi1>, %i: tensor<3xi64>)
    -> (tensor<2x8x4x16xf32>, tensor<2x4x8x16xf32>, tensor<8x2xi1>, tensor<2x8x128xf32>, tensor<6xi64>,
        tensor<2x8x16xf32>, tensor<2x8x48xf32>) {
  // CHECK: tfm.reshape %{{.+}} : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  %0 = tfm.reshape %x : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  // CHECK: tfm.transpose %{{.+}} permutation = [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %1 = tfm.transpose %0 permutation = [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  // CHECK: tfm.transpose %{{.+}} permutation = [1, 0] : tensor<2x8xi1> -> tensor<8x2xi1>
  %2 = tfm.transpose %m permutation = [1, 0] : tensor<2x8xi1> -> tensor<8x2xi1>
  // CHECK: tfm.concat %{{.+}}, %{{.+}} axis = -1 : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x128xf32>
  %3 = tfm.concat %x, %x axis = -1 : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x128xf32>
  // CHECK: tfm.concat %{{.+}}, %{{.+}} axis = 0 : (tensor<3xi64>, tensor<3xi64>) -> tensor<6xi64>
  %4 = tfm.concat %i, %i axis = 0 : (tensor<3xi64>, tensor<3xi64>) -> tensor<6xi64>
  // CHECK: tfm.split %{{.+}} axis = 2 sizes = [16, 48] : tensor<2x8x64xf32> -> tensor<2x8x16xf32>, tensor<2x8x48xf32>
  %5:2 = tfm.split %x axis = 2 sizes = [16, 48] : tensor<2x8x64xf32> -> tensor<2x8x16xf32>, tensor<2x8x48xf32>
  return %0, %1, %2, %3, %4, %5#0, %5#1 : tensor<2x8x4x16xf32>, tensor<2x4x8x16xf32>, tensor<8x2xi1>, tensor<2x8x128xf32>, tensor<6xi64>,
        tensor<2x8x16xf32>, tensor<2x8x48xf32>
}

// Tests that attention round-trips without a mask, with a boolean and an
// additive mask, with causal and with an explicit scale.
// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x6x16xf32>, %v: tensor<2x4x6x32xf32>,
                     %bm: tensor<2x1x1x6xi1>, %am: tensor<8x6xf32>)
    -> (tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>) {
  // CHECK: tfm.attention %{{.+}}, %{{.+}}, %{{.+}} : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x32xf32>) -> tensor<2x4x8x32xf32>
  %0 = tfm.attention %q, %k, %v : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x32xf32>) -> tensor<2x4x8x32xf32>
  // CHECK: tfm.attention %{{.+}}, %{{.+}}, %{{.+}}, mask %{{.+}} causal : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x32xf32>, tensor<2x1x1x6xi1>) -> tensor<2x4x8x32xf32>
  %1 = tfm.attention %q, %k, %v, mask %bm causal : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x32xf32>, tensor<2x1x1x6xi1>) -> tensor<2x4x8x32xf32>
  // CHECK: tfm.attention %{{.+}}, %{{.+}}, %{{.+}}, mask %{{.+}} {scale = 5.000000e-01 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x32xf32>, tensor<8x6xf32>) -> tensor<2x4x8x32xf32>
  %2 = tfm.attention %q, %k, %v, mask %am {scale = 0.5 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x32xf32>, tensor<8x6xf32>) -> tensor<2x4x8x32xf32>
  return %0, %1, %2 : tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>
}

// Tests that cross_entropy round-trips with its defaults and with label
// smoothing and an ignore index.
// CHECK-LABEL: func.func @cross_entropy
func.func @cross_entropy(%l: tensor<2x8x100xf32>, %y: tensor<2x8xi64>) -> (tensor<f32>, tensor<f32>) {
  // CHECK: tfm.cross_entropy %{{.+}}, %{{.+}} : (tensor<2x8x100xf32>, tensor<2x8xi64>) -> tensor<f32>
  %0 = tfm.cross_entropy %l, %y : (tensor<2x8x100xf32>, tensor<2x8xi64>) -> tensor<f32>
  // CHECK: tfm.cross_entropy %{{.+}}, %{{.+}} {ignore_index = 0 : i64, label_smoothing = 1.000000e-01 : f64}
  %1 = tfm.cross_entropy %l, %y {ignore_index = 0 : i64, label_smoothing = 0.1 : f64} : (tensor<2x8x100xf32>, tensor<2x8xi64>) -> tensor<f32>
  return %0, %1 : tensor<f32>, tensor<f32>
}

// Tests that the fused ops round-trip in each of their forms.
// CHECK-LABEL: func.func @fused
func.func @fused(%x: tensor<2x8x16xf32>, %w: tensor<48x16xf32>, %b: tensor<48xf32>, %wkv: tensor<32x16xf32>,
                 %s: tensor<2x4x8x8xf32>, %am: tensor<2x1x1x8xf32>, %bm: tensor<8x8xi1>, %g: tensor<16xf32>, %beta: tensor<16xf32>)
    -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  // CHECK: tfm.qkv_projection %{{.+}}, %{{.+}}, %{{.+}} sizes = [16, 16, 16] : (tensor<2x8x16xf32>, tensor<48x16xf32>, tensor<48xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %q, %k, %v = tfm.qkv_projection %x, %w, %b sizes = [16, 16, 16] : (tensor<2x8x16xf32>, tensor<48x16xf32>, tensor<48xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  // CHECK: tfm.qkv_projection %{{.+}}, %{{.+}} sizes = [16, 16] : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %k2, %v2 = tfm.qkv_projection %x, %wkv sizes = [16, 16] : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  // CHECK: tfm.gated_linear %{{.+}}, %{{.+}} activation = silu : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  %glu = tfm.gated_linear %x, %wkv activation = silu : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: tfm.gated_linear %{{.+}}, %{{.+}}, %{{.+}} activation = gelu_tanh : (tensor<2x8x16xf32>, tensor<48x16xf32>, tensor<48xf32>) -> tensor<2x8x24xf32>
  %geglu = tfm.gated_linear %x, %w, %b activation = gelu_tanh : (tensor<2x8x16xf32>, tensor<48x16xf32>, tensor<48xf32>) -> tensor<2x8x24xf32>
  // CHECK: tfm.masked_softmax %{{.+}}, mask %{{.+}} mask_kind = additive causal {scale = 2.500000e-01 : f64} : (tensor<2x4x8x8xf32>, tensor<2x1x1x8xf32>) -> tensor<2x4x8x8xf32>
  %p0 = tfm.masked_softmax %s, mask %am mask_kind = additive causal {scale = 0.25 : f64} : (tensor<2x4x8x8xf32>, tensor<2x1x1x8xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: tfm.masked_softmax %{{.+}}, mask %{{.+}} mask_kind = boolean : (tensor<2x4x8x8xf32>, tensor<8x8xi1>) -> tensor<2x4x8x8xf32>
  %p1 = tfm.masked_softmax %s, mask %bm mask_kind = boolean : (tensor<2x4x8x8xf32>, tensor<8x8xi1>) -> tensor<2x4x8x8xf32>
  // CHECK: tfm.masked_softmax %{{.+}} causal {scale = 1.250000e-01 : f64} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p2 = tfm.masked_softmax %s causal {scale = 0.125 : f64} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: tfm.add_layer_norm %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %n0 = tfm.add_layer_norm %q, %k, %g, %beta : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: tfm.add_layer_norm %{{.+}}, %{{.+}}, %{{.+}} {epsilon = 9.9999999999999998E-13 : f64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %n1, %sum = tfm.add_layer_norm %n0, %v, %g {epsilon = 1.0e-12 : f64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  return %k2, %v2, %p0, %p1, %p2, %n1, %sum : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// Tests that pow, max and min round-trip with broadcasting.
// CHECK-LABEL: func.func @more_binary
func.func @more_binary(%x: tensor<2x4xf32>, %y: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  // CHECK: tfm.pow %{{.+}}, %{{.+}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %0 = tfm.pow %x, %y : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // CHECK: tfm.max
  %1 = tfm.max %x, %y : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // CHECK: tfm.min
  %2 = tfm.min %y, %x : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0, %1, %2 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// Tests that compare, select, cast and broadcast round-trip.
// CHECK-LABEL: func.func @select_cast
func.func @select_cast(%x: tensor<2x4xf32>, %y: tensor<4xf32>, %i: tensor<2x4xi64>)
    -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<3x2x4xf32>) {
  // CHECK: %[[C:.+]] = tfm.compare lt, %{{.+}}, %{{.+}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xi1>
  %c = tfm.compare lt, %x, %y : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xi1>
  // CHECK: tfm.select %[[C]], %{{.+}}, %{{.+}} : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %0 = tfm.select %c, %x, %y : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // CHECK: tfm.cast %{{.+}} : tensor<2x4xi64> -> tensor<2x4xf32>
  %1 = tfm.cast %i : tensor<2x4xi64> -> tensor<2x4xf32>
  // CHECK: tfm.broadcast %{{.+}} : tensor<2x4xf32> -> tensor<3x2x4xf32>
  %2 = tfm.broadcast %x : tensor<2x4xf32> -> tensor<3x2x4xf32>
  return %0, %1, %2 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<3x2x4xf32>
}

// Tests that slice, gather and reduce round-trip.
// CHECK-LABEL: func.func @indexing
func.func @indexing(%x: tensor<4x8xf32>, %i: tensor<3xi64>, %s: tensor<i64>)
    -> (tensor<2x3xf32>, tensor<4x3xf32>, tensor<8xf32>, tensor<4x1xf32>, tensor<f32>) {
  // CHECK: tfm.slice %{{.+}} starts = [3, 0] sizes = [2, 3] steps = [-2, 3] : tensor<4x8xf32> -> tensor<2x3xf32>
  %0 = tfm.slice %x starts = [3, 0] sizes = [2, 3] steps = [-2, 3] : tensor<4x8xf32> -> tensor<2x3xf32>
  // CHECK: tfm.gather %{{.+}}, %{{.+}} axis = 1 : (tensor<4x8xf32>, tensor<3xi64>) -> tensor<4x3xf32>
  %1 = tfm.gather %x, %i axis = 1 : (tensor<4x8xf32>, tensor<3xi64>) -> tensor<4x3xf32>
  // CHECK: tfm.gather %{{.+}}, %{{.+}} axis = 0 : (tensor<4x8xf32>, tensor<i64>) -> tensor<8xf32>
  %2 = tfm.gather %x, %s axis = 0 : (tensor<4x8xf32>, tensor<i64>) -> tensor<8xf32>
  // CHECK: tfm.reduce mean %{{.+}} axes = [-1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  %3 = tfm.reduce mean %x axes = [-1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
  // CHECK: tfm.reduce max %{{.+}} axes = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %4 = tfm.reduce max %x axes = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<4x3xf32>, tensor<8xf32>, tensor<4x1xf32>, tensor<f32>
}

// Tests that scatter_nd round-trips with each reduction.
// CHECK-LABEL: func.func @scatter
func.func @scatter(%c: tensor<2x8x4xf32>, %p: tensor<2x1x2xi64>, %u: tensor<2x1x4xf32>,
                   %r: tensor<3x1xi32>, %s: tensor<3x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>) {
  // CHECK: tfm.scatter_nd %{{.+}}, %{{.+}}, %{{.+}} reduction = none : (tensor<2x8x4xf32>, tensor<2x1x2xi64>, tensor<2x1x4xf32>) -> tensor<2x8x4xf32>
  %0 = tfm.scatter_nd %c, %p, %u reduction = none : (tensor<2x8x4xf32>, tensor<2x1x2xi64>, tensor<2x1x4xf32>) -> tensor<2x8x4xf32>
  // CHECK: tfm.scatter_nd %{{.+}}, %{{.+}}, %{{.+}} reduction = max : (tensor<2x8x4xf32>, tensor<3x1xi32>, tensor<3x8x4xf32>) -> tensor<2x8x4xf32>
  %1 = tfm.scatter_nd %c, %r, %s reduction = max : (tensor<2x8x4xf32>, tensor<3x1xi32>, tensor<3x8x4xf32>) -> tensor<2x8x4xf32>
  return %0, %1 : tensor<2x8x4xf32>, tensor<2x8x4xf32>
}

// Tests that top_k round-trips, largest and smallest.
// CHECK-LABEL: func.func @top_k
func.func @top_k(%x: tensor<2x9xf32>) -> (tensor<2x4xf32>, tensor<2x4xi64>, tensor<1x9xf32>, tensor<1x9xi64>) {
  // CHECK: tfm.top_k %{{.+}} k = 4 axis = -1 : tensor<2x9xf32> -> tensor<2x4xf32>, tensor<2x4xi64>
  %v, %i = tfm.top_k %x k = 4 axis = -1 : tensor<2x9xf32> -> tensor<2x4xf32>, tensor<2x4xi64>
  // CHECK: tfm.top_k %{{.+}} k = 1 axis = 0 smallest : tensor<2x9xf32> -> tensor<1x9xf32>, tensor<1x9xi64>
  %s, %j = tfm.top_k %x k = 1 axis = 0 smallest : tensor<2x9xf32> -> tensor<1x9xf32>, tensor<1x9xi64>
  return %v, %i, %s, %j : tensor<2x4xf32>, tensor<2x4xi64>, tensor<1x9xf32>, tensor<1x9xi64>
}

// Tests that the training ops round-trip: parameters and the step count,
// the backward ops the gradient rules build, and the optimizer updates.
// CHECK-LABEL: func.func @training
func.func @training(%x: tensor<2x8x16xf32>, %dy: tensor<2x8x16xf32>, %ids: tensor<2x8xi64>, %g: tensor<f32>)
    -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<2x8x16xf32>, tensor<100x16xf32>) {
  // CHECK: tfm.next_step : tensor<i64>
  %t = tfm.next_step : tensor<i64>
  // CHECK: tfm.process_rank : tensor<i64>
  %rank = tfm.process_rank : tensor<i64>
  // CHECK: tfm.parameter "ln.weight" {initial_value = dense<1.000000e+00> : tensor<16xf32>} : tensor<16xf32>
  %w = tfm.parameter "ln.weight" {initial_value = dense<1.0> : tensor<16xf32>} : tensor<16xf32>
  // CHECK: tfm.layer_norm_grad %{{.+}}, %{{.+}}, %{{.+}} {axis = 2 : i64, epsilon = 5.000000e-01 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  %dx, %dw, %db = tfm.layer_norm_grad %x, %w, %dy {axis = 2 : i64, epsilon = 5.0e-01 : f64}
      : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
  // CHECK: tfm.cross_entropy_grad %{{.+}}, %{{.+}}, %{{.+}} {label_smoothing = 1.000000e-01 : f64} : (tensor<2x8x16xf32>, tensor<2x8xi64>, tensor<f32>) -> tensor<2x8x16xf32>
  %dl = tfm.cross_entropy_grad %x, %ids, %g {label_smoothing = 1.0e-01 : f64}
      : (tensor<2x8x16xf32>, tensor<2x8xi64>, tensor<f32>) -> tensor<2x8x16xf32>
  // CHECK: tfm.embedding_grad %{{.+}}, %{{.+}} : (tensor<2x8x16xf32>, tensor<2x8xi64>) -> tensor<100x16xf32>
  %de = tfm.embedding_grad %dy, %ids : (tensor<2x8x16xf32>, tensor<2x8xi64>) -> tensor<100x16xf32>
  // CHECK: tfm.sgd_update "ln.weight", %{{.+}}, %{{.+}} {lr = 1.000000e-01 : f64} : tensor<16xf32>
  tfm.sgd_update "ln.weight", %dw, %t {lr = 1.0e-01 : f64} : tensor<16xf32>
  // CHECK: tfm.adam_update "ln.weight", %{{.+}}, %{{.+}} {{{.*}}lr = 1.000000e-03 : f64{{.*}}} : tensor<16xf32>
  tfm.adam_update "ln.weight", %dw, %t {lr = 1.0e-03 : f64} : tensor<16xf32>
  // CHECK: tfm.adam_update "ln.weight", %{{.+}}, %{{.+}} {lr = 1.000000e-03 : f64, sharded} : tensor<16xf32>
  tfm.adam_update "ln.weight", %dw, %t {lr = 1.0e-03 : f64, sharded} : tensor<16xf32>
  return %dx, %dw, %db, %dl, %de : tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<2x8x16xf32>, tensor<100x16xf32>
}

// Tests that the data-parallel average round-trips: a start and its wait.
// CHECK-LABEL: func.func @all_reduce
func.func @all_reduce(%g: tensor<4x8xf32>, %n: tensor<f32>) -> tensor<4x8xf32> {
  // CHECK: %[[P:.+]] = tfm.all_reduce_start %{{.+}}, %{{.+}} {bucket = 2 : i64} : tensor<4x8xf32>, tensor<f32>
  %p = tfm.all_reduce_start %g, %n {bucket = 2 : i64} : tensor<4x8xf32>, tensor<f32>
  // CHECK: tfm.all_reduce_wait %[[P]] {bucket = 2 : i64} : tensor<4x8xf32>
  %r = tfm.all_reduce_wait %p {bucket = 2 : i64} : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// Tests that the memory plan's attributes round-trip on the ops that carry
// them, and the module's typed tables.
// CHECK: module attributes {tfm.checks = [#tfm.index_check<op = "node 'g' (Gather)", tensor = "input 'ids'", input = 0, lower = -8, upper = 8>], tfm.entries = [#tfm.entry<name = "infer", symbol = @__tfm_entry_infer, inputs = [#tfm.tensor_desc<name = "x", type = tensor<4xf32>>], outputs = [], arena_bytes = 64>], tfm.kernels = [#tfm.kernel<kind = linear, dtype = bf16, params = [6, 8, 4, 1, 2, 0, 1]>], tfm.states = [#tfm.state_slot<name = "w", kind = parameter, type = tensor<4xf32>, offset = 0, init_offset = 64>, #tfm.state_slot<name = "step", kind = step, type = tensor<i64>, offset = 64>]}
module attributes {
  tfm.checks = [#tfm.index_check<op = "node 'g' (Gather)", tensor = "input 'ids'", input = 0, lower = -8, upper = 8>],
  tfm.entries = [#tfm.entry<name = "infer", symbol = @__tfm_entry_infer, inputs = [#tfm.tensor_desc<name = "x", type = tensor<4xf32>>], outputs = [], arena_bytes = 64>],
  tfm.kernels = [#tfm.kernel<kind = linear, dtype = bf16, params = [6, 8, 4, 1, 2, 0, 1]>],
  tfm.states = [#tfm.state_slot<name = "w", kind = parameter, type = tensor<4xf32>, offset = 0, init_offset = 64>,
                #tfm.state_slot<name = "step", kind = step, type = tensor<i64>, offset = 64>]} {
  // CHECK-LABEL: func.func @planned
  func.func @planned(%x: tensor<4x4xf32>) -> tensor<16xf32> {
    // CHECK: tfm.relu %{{.+}} {tfm.plan = [#tfm.arena<offset = 64, bytes = 128, strides = [1, 4], reuses = 0>]}
    %a = tfm.relu %x {tfm.plan = [#tfm.arena<offset = 64, bytes = 128, strides = [1, 4], reuses = 0>]} : tensor<4x4xf32>
    // CHECK: tfm.reshape %{{.+}} {tfm.plan = [#tfm.view<operand = 0, offset = 0, strides = [1]>]}
    %b = tfm.reshape %a {tfm.plan = [#tfm.view<operand = 0, offset = 0, strides = [1]>]} : tensor<4x4xf32> -> tensor<16xf32>
    // CHECK: tfm.compare gt, {{.*}}{tfm.plan = [#tfm.inline]}
    %c = tfm.compare gt, %b, %b {tfm.plan = [#tfm.inline]} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xi1>
    // CHECK: tfm.select {{.*}}{tfm.plan = [#tfm.output<index = 0>]}
    %d = tfm.select %c, %b, %b {tfm.plan = [#tfm.output<index = 0>]} : (tensor<16xi1>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    return %d : tensor<16xf32>
  }

  // Tests that a kernel call round-trips with absent arguments and offsets.
  // CHECK-LABEL: func.func @kernel_call
  func.func @kernel_call(%host: !llvm.ptr, %x: memref<6x8xf32>, %w: memref<8x8xf32>, %y: memref<6x4xf32>) -> i32 {
    // CHECK: %{{.+}} = tfm.kernel_call %{{.+}}, <kind = linear, dtype = f32, params = [6, 8, 4, 0, 1, 0, 1]>(%{{.+}}, %{{.+}}, %{{.+}}) {offsets = array<i64: 0, 32, 0>, slots = array<i64: 0, 1, 4>} : !llvm.ptr, memref<6x8xf32>, memref<8x8xf32>, memref<6x4xf32>
    %rc = tfm.kernel_call %host, <kind = linear, dtype = f32, params = [6, 8, 4, 0, 1, 0, 1]>(%x, %w, %y) {slots = array<i64: 0, 1, 4>, offsets = array<i64: 0, 32, 0>} : !llvm.ptr, memref<6x8xf32>, memref<8x8xf32>, memref<6x4xf32>
    return %rc : i32
  }
}

// Tests that conv2d round-trips with and without bias, grouped and dilated.
// CHECK-LABEL: func.func @conv2d
func.func @conv2d(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6xf32>)
    -> (tensor<1x6x4x4xf32>, tensor<1x6x4x4xf32>) {
  // CHECK: tfm.conv2d %{{.+}}, %{{.+}}, %{{.+}} strides = [2, 2] pads = [1, 1, 1, 1] dilations = [1, 1] group = 2 : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x4x4xf32>
  %0 = tfm.conv2d %x, %w, %b strides = [2, 2] pads = [1, 1, 1, 1] dilations = [1, 1] group = 2 : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x4x4xf32>
  // CHECK: tfm.conv2d %{{.+}}, %{{.+}} strides = [1, 1] pads = [0, 0, 0, 0] dilations = [2, 2] group = 2 : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x4x4xf32>
  %1 = tfm.conv2d %x, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [2, 2] group = 2 : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x4x4xf32>
  return %0, %1 : tensor<1x6x4x4xf32>, tensor<1x6x4x4xf32>
}

// Tests that a cache update round-trips.
// CHECK-LABEL: func.func @cache_update
// CHECK: tfm.cache_update "attention0.keys", %{{.+}}, %{{.+}} {axis = 2 : i64} : (tensor<1x4x1x8xf32>, tensor<i64>) -> tensor<1x4x64x8xf32>
func.func @cache_update(%k: tensor<1x4x1x8xf32>, %p: tensor<i64>) -> tensor<1x4x64x8xf32> {
  %0 = tfm.cache_update "attention0.keys", %k, %p {axis = 2 : i64} : (tensor<1x4x1x8xf32>, tensor<i64>) -> tensor<1x4x64x8xf32>
  return %0 : tensor<1x4x64x8xf32>
}

// Tests that the quantization ops round-trip at every granularity: one
// scale, one per index of an axis, one per block along it.
// CHECK-LABEL: func.func @quantization
func.func @quantization(%x: tensor<4x64xf32>, %s: tensor<f32>, %sa: tensor<4xf32>,
                        %za: tensor<4xi8>, %sb: tensor<4x2xf32>, %zb: tensor<4x2xui4>,
                        %q4: tensor<4x64xui4>, %b: tensor<4xi32>)
    -> (tensor<4x64xui8>, tensor<4x64xi8>, tensor<4x64xf32>, tensor<4xf32>) {
  // CHECK: tfm.quantize %{{.+}}, %{{.+}} : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xui8>
  %0 = tfm.quantize %x, %s : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xui8>
  // CHECK: tfm.quantize %{{.+}}, %{{.+}}, %{{.+}} axis = 0 : (tensor<4x64xf32>, tensor<4xf32>, tensor<4xi8>) -> tensor<4x64xi8>
  %1 = tfm.quantize %x, %sa, %za axis = 0 : (tensor<4x64xf32>, tensor<4xf32>, tensor<4xi8>) -> tensor<4x64xi8>
  // CHECK: tfm.dequantize %{{.+}}, %{{.+}}, %{{.+}} block_size = 32 : (tensor<4x64xui4>, tensor<4x2xf32>, tensor<4x2xui4>) -> tensor<4x64xf32>
  %2 = tfm.dequantize %q4, %sb, %zb block_size = 32 : (tensor<4x64xui4>, tensor<4x2xf32>, tensor<4x2xui4>) -> tensor<4x64xf32>
  // CHECK: tfm.dequantize %{{.+}}, %{{.+}} axis = 0 : (tensor<4xi32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = tfm.dequantize %b, %sa axis = 0 : (tensor<4xi32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2, %3 : tensor<4x64xui8>, tensor<4x64xi8>, tensor<4x64xf32>, tensor<4xf32>
}

// Tests that the integer matmul, the dynamic quantization and the
// quantized linear round-trip.
// CHECK-LABEL: func.func @quantized_matmuls
func.func @quantized_matmuls(%x: tensor<2x8x64xf32>, %w: tensor<128x64xi8>, %s: tensor<128xf32>,
                             %bias: tensor<128xf32>, %w4: tensor<128x64xui4>,
                             %s4: tensor<128x2xf32>, %z4: tensor<128x2xui4>, %wt: tensor<64x128xi8>)
    -> (tensor<2x8x128xi32>, tensor<2x8x128xf32>, tensor<2x8x128xf32>) {
  // CHECK: tfm.dynamic_quantize %{{.+}} : tensor<2x8x64xf32> -> (tensor<2x8x64xui8>, tensor<f32>, tensor<ui8>)
  %q, %qs, %qz = tfm.dynamic_quantize %x : tensor<2x8x64xf32> -> (tensor<2x8x64xui8>, tensor<f32>, tensor<ui8>)
  // CHECK: tfm.matmul_integer %{{.+}}, %{{.+}} lhs_zero_point %{{.+}} : (tensor<2x8x64xui8>, tensor<64x128xi8>, tensor<ui8>) -> tensor<2x8x128xi32>
  %0 = tfm.matmul_integer %q, %wt lhs_zero_point %qz : (tensor<2x8x64xui8>, tensor<64x128xi8>, tensor<ui8>) -> tensor<2x8x128xi32>
  // CHECK: tfm.quantized_linear %{{.+}}, %{{.+}} scale %{{.+}} bias %{{.+}} input_quantization = dynamic activation = gelu : (tensor<2x8x64xf32>, tensor<128x64xi8>, tensor<128xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
  %1 = tfm.quantized_linear %x, %w scale %s bias %bias input_quantization = dynamic activation = gelu : (tensor<2x8x64xf32>, tensor<128x64xi8>, tensor<128xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
  // CHECK: tfm.quantized_linear %{{.+}}, %{{.+}} scale %{{.+}} zero_point %{{.+}} block_size = 32 : (tensor<2x8x64xf32>, tensor<128x64xui4>, tensor<128x2xf32>, tensor<128x2xui4>) -> tensor<2x8x128xf32>
  %2 = tfm.quantized_linear %x, %w4 scale %s4 zero_point %z4 block_size = 32 : (tensor<2x8x64xf32>, tensor<128x64xui4>, tensor<128x2xf32>, tensor<128x2xui4>) -> tensor<2x8x128xf32>
  // CHECK: tfm.quantized_linear %{{.+}}, %{{.+}} scale %{{.+}} zero_point %{{.+}} input_quantization = blocked block_size = 32 : (tensor<2x8x64xf32>, tensor<128x64xui4>, tensor<128x2xf32>, tensor<128x2xui4>) -> tensor<2x8x128xf32>
  %3 = tfm.quantized_linear %x, %w4 scale %s4 zero_point %z4 input_quantization = blocked block_size = 32 : (tensor<2x8x64xf32>, tensor<128x64xui4>, tensor<128x2xf32>, tensor<128x2xui4>) -> tensor<2x8x128xf32>
  return %0, %1, %2 : tensor<2x8x128xi32>, tensor<2x8x128xf32>, tensor<2x8x128xf32>
}
