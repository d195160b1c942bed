// RUN: tfm-opt %s -split-input-file --tfm-fuse-masked-softmax=remarks=true -verify-diagnostics | FileCheck %s
// RUN: %python %S/Inputs/check_pass_equivalence.py %tfm_opt_bin %tfmc_bin --tfm-fuse-masked-softmax %s %t | FileCheck %s --check-prefix=EQUIV
// EQUIV: functions equivalent after --tfm-fuse-masked-softmax, also compiled

// Tests that scores scaled by Div, plus a float mask, fuse with scale 1/c.
// CHECK-LABEL: func.func @div_additive
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x8xf32>, %[[K:.+]]: tensor<2x8x4xf32>, %[[M:.+]]: tensor<2x1x4xf32>)
// CHECK: %[[S:.+]] = tfm.matmul %[[Q]], %[[K]]
// CHECK: tfm.masked_softmax %[[S]], mask %[[M]] mask_kind = additive {scale = 5.000000e-01 : f64}
// CHECK-NOT: tfm.softmax
func.func @div_additive(%q: tensor<2x4x8xf32>, %k: tensor<2x8x4xf32>, %m: tensor<2x1x4xf32>) -> tensor<2x4x4xf32> {
  %c = arith.constant dense<2.0> : tensor<f32>
  %s = tfm.matmul %q, %k : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %t = tfm.div %s, %c : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %u = tfm.add %t, %m : (tensor<2x4x4xf32>, tensor<2x1x4xf32>) -> tensor<2x4x4xf32>
  // expected-remark@+1 {{tfm-fuse-masked-softmax: fused}}
  %p = tfm.softmax %u : tensor<2x4x4xf32>
  return %p : tensor<2x4x4xf32>
}

// -----

// Tests that a scale by Mul on q, before the product, moves onto the scores,
// and that a constant -inf upper triangle becomes the causal flag.
// CHECK-LABEL: func.func @mul_on_q_causal
// CHECK: %[[S:.+]] = tfm.matmul %arg0, %arg1 transpose_rhs
// CHECK: tfm.masked_softmax %[[S]] causal {scale = 2.500000e-01 : f64}
func.func @mul_on_q_causal(%q: tensor<3x8xf32>, %k: tensor<3x8xf32>) -> tensor<3x3xf32> {
  %c = arith.constant dense<0.25> : tensor<f32>
  %triu = arith.constant dense<[[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>
  %qs = tfm.mul %c, %q : (tensor<f32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %s = tfm.matmul %qs, %k transpose_rhs : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x3xf32>
  %u = tfm.add %triu, %s : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  // expected-remark@+1 {{tfm-fuse-masked-softmax: fused}}
  %p = tfm.softmax %u : tensor<3x3xf32>
  return %p : tensor<3x3xf32>
}

// -----

// Tests that masked_fill with a constant triangle (Where) is causal too.
// CHECK-LABEL: func.func @where_causal
// CHECK: tfm.masked_softmax %{{.+}} causal {scale = 5.000000e-01 : f64}
// CHECK-NOT: tfm.select
func.func @where_causal(%s: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %c = arith.constant dense<2.0> : tensor<f32>
  %upper = arith.constant dense<[[false, true], [false, false]]> : tensor<2x2xi1>
  %ninf = arith.constant dense<-1.0e9> : tensor<f32>
  %q = tfm.matmul %s, %s : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %t = tfm.div %q, %c : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  %u = tfm.select %upper, %ninf, %t : (tensor<2x2xi1>, tensor<f32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  // expected-remark@+1 {{tfm-fuse-masked-softmax: fused}}
  %p = tfm.softmax %u : tensor<2x2xf32>
  return %p : tensor<2x2xf32>
}

// -----

// Tests that a run-time boolean mask through Where fuses as a boolean mask,
// inverted because Where fills where the condition holds.
// CHECK-LABEL: func.func @where_padding
// CHECK: %[[KEEP:.+]] = tfm.compare eq, %arg1, %{{.+}}
// CHECK: tfm.masked_softmax %{{.+}}, mask %[[KEEP]] mask_kind = boolean
func.func @where_padding(%s: tensor<2x2xf32>, %pad: tensor<1x2xi1>) -> tensor<2x2xf32> {
  %ninf = arith.constant dense<0xFF800000> : tensor<f32>
  %q = tfm.matmul %s, %s : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %u = tfm.select %pad, %ninf, %q : (tensor<1x2xi1>, tensor<f32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  // expected-remark@+1 {{tfm-fuse-masked-softmax: fused}}
  %p = tfm.softmax %u : tensor<2x2xf32>
  return %p : tensor<2x2xf32>
}

// -----

// Tests that a padding mask computed from an attention_mask input, as BERT
// exports it, is an additive mask.
// CHECK-LABEL: func.func @padding_from_input
// CHECK: %[[B:.+]] = tfm.mul
// CHECK: tfm.masked_softmax %{{.+}}, mask %[[B]] mask_kind = additive {scale = 1.250000e-01 : f64}
func.func @padding_from_input(%s: tensor<2x2x4x4xf32>, %am: tensor<2x1x1x4xi64>) -> tensor<2x2x4x4xf32> {
  %one = arith.constant dense<1.0> : tensor<f32>
  %big = arith.constant dense<-10000.0> : tensor<f32>
  %c = arith.constant dense<8.0> : tensor<f32>
  %f = tfm.cast %am : tensor<2x1x1x4xi64> -> tensor<2x1x1x4xf32>
  %inv = tfm.sub %one, %f : (tensor<f32>, tensor<2x1x1x4xf32>) -> tensor<2x1x1x4xf32>
  %bias = tfm.mul %inv, %big : (tensor<2x1x1x4xf32>, tensor<f32>) -> tensor<2x1x1x4xf32>
  %q = tfm.matmul %s, %s : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %t = tfm.div %q, %c : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %u = tfm.add %t, %bias : (tensor<2x2x4x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x2x4x4xf32>
  // expected-remark@+1 {{tfm-fuse-masked-softmax: fused}}
  %p = tfm.softmax %u : tensor<2x2x4x4xf32>
  return %p : tensor<2x2x4x4xf32>
}

// -----

// Tests that a scaled softmax with no mask fuses.
// CHECK-LABEL: func.func @no_mask
// CHECK: tfm.masked_softmax %{{.+}} {scale = 5.000000e-01 : f64}
func.func @no_mask(%s: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %c = arith.constant dense<0.5> : tensor<f32>
  %q = tfm.matmul %s, %s : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %t = tfm.mul %q, %c : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  // expected-remark@+1 {{tfm-fuse-masked-softmax: fused}}
  %p = tfm.softmax %t : tensor<2x2xf32>
  return %p : tensor<2x2xf32>
}

// -----

// Tests that a mask that does not broadcast to the scores is a reported miss
// and the graph is left unchanged.
// CHECK-LABEL: func.func @mask_not_broadcastable
// CHECK: tfm.softmax
// CHECK-NOT: tfm.masked_softmax
func.func @mask_not_broadcastable(%s: tensor<2x2xf32>, %m: tensor<3x2x2xf32>) -> tensor<3x2x2xf32> {
  %q = tfm.matmul %s, %s : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %u = tfm.add %q, %m : (tensor<2x2xf32>, tensor<3x2x2xf32>) -> tensor<3x2x2xf32>
  // expected-remark@+1 {{tfm-fuse-masked-softmax: missed: the additive mask does not broadcast to the scores}}
  %p = tfm.softmax %u : tensor<3x2x2xf32>
  return %p : tensor<3x2x2xf32>
}

// -----

// Tests that a softmax that is not over attention scores is a reported miss.
// CHECK-LABEL: func.func @not_attention
// CHECK: tfm.softmax
func.func @not_attention(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  // expected-remark@+1 {{tfm-fuse-masked-softmax: missed: the softmax input is not (scaled, masked) attention scores q·kᵀ}}
  %p = tfm.softmax %x : tensor<2x5xf32>
  return %p : tensor<2x5xf32>
}

// -----

// Tests GPT-2's idiom: scores divided by a constant, a causal boolean
// triangle applied with where(causal, w, finfo.min), then an additive
// padding mask: one masked softmax, causal, with the additive mask.
// CHECK-LABEL: func.func @gpt2_where_then_add
// CHECK: %[[S:.+]] = tfm.matmul
// CHECK: tfm.masked_softmax %[[S]], mask %arg2 mask_kind = additive causal {scale = 2.500000e-01 : f64}
// CHECK-NOT: tfm.select
func.func @gpt2_where_then_add(%q: tensor<2x3x4xf32>, %k: tensor<2x4x3xf32>, %pad: tensor<2x1x3xf32>) -> tensor<2x3x3xf32> {
  %c = arith.constant dense<4.0> : tensor<f32>
  %tril = arith.constant dense<[[[true, false, false], [true, true, false], [true, true, true]]]> : tensor<1x3x3xi1>
  %min = arith.constant dense<-3.40282347E+38> : tensor<f32>
  %s = tfm.matmul %q, %k : (tensor<2x3x4xf32>, tensor<2x4x3xf32>) -> tensor<2x3x3xf32>
  %t = tfm.div %s, %c : (tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32>
  %w = tfm.select %tril, %t, %min : (tensor<1x3x3xi1>, tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32>
  %u = tfm.add %w, %pad : (tensor<2x3x3xf32>, tensor<2x1x3xf32>) -> tensor<2x3x3xf32>
  // expected-remark@+1 {{tfm-fuse-masked-softmax: fused}}
  %p = tfm.softmax %u : tensor<2x3x3xf32>
  return %p : tensor<2x3x3xf32>
}

// -----

// Tests the stabilized forms: softmax(w - max(w)), and the softmax written
// out as exp(w - max(w)) / sum(exp(w - max(w))).
// CHECK-LABEL: func.func @stable_softmax
// CHECK-COUNT-2: tfm.masked_softmax
// CHECK-NOT: tfm.reduce
// CHECK-NOT: math.exp
func.func @stable_softmax(%q: tensor<3x4xf32>, %k: tensor<4x3xf32>) -> (tensor<3x3xf32>, tensor<3x3xf32>) {
  %s = tfm.matmul %q, %k : (tensor<3x4xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>
  %m = tfm.reduce max %s axes = [-1] keepdims : tensor<3x3xf32> -> tensor<3x1xf32>
  %d = tfm.sub %s, %m : (tensor<3x3xf32>, tensor<3x1xf32>) -> tensor<3x3xf32>
  // expected-remark@+1 {{tfm-fuse-masked-softmax: fused}}
  %p = tfm.softmax %d : tensor<3x3xf32>
  %s2 = tfm.matmul %q, %k : (tensor<3x4xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>
  %m2 = tfm.reduce max %s2 axes = [1] keepdims : tensor<3x3xf32> -> tensor<3x1xf32>
  %d2 = tfm.sub %s2, %m2 : (tensor<3x3xf32>, tensor<3x1xf32>) -> tensor<3x3xf32>
  %e2 = math.exp %d2 : tensor<3x3xf32>
  %z2 = tfm.reduce sum %e2 axes = [-1] keepdims : tensor<3x3xf32> -> tensor<3x1xf32>
  // expected-remark@+1 {{tfm-fuse-masked-softmax: fused}}
  %p2 = tfm.div %e2, %z2 : (tensor<3x3xf32>, tensor<3x1xf32>) -> tensor<3x3xf32>
  return %p, %p2 : tensor<3x3xf32>, tensor<3x3xf32>
}

// -----

// Tests that exp / sum over another axis is not a softmax, and that a
// boolean mask that is not causal beside an additive one is reported: the
// fused op takes one mask.
// CHECK-LABEL: func.func @not_fused
// CHECK: tfm.softmax
// CHECK: tfm.div
func.func @not_fused(%q: tensor<3x4xf32>, %k: tensor<4x3xf32>, %b: tensor<3x3xi1>, %pad: tensor<1x3xf32>) -> (tensor<3x3xf32>, tensor<3x3xf32>) {
  %min = arith.constant dense<-1.0e+09> : tensor<f32>
  %s = tfm.matmul %q, %k : (tensor<3x4xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>
  %w = tfm.select %b, %s, %min : (tensor<3x3xi1>, tensor<3x3xf32>, tensor<f32>) -> tensor<3x3xf32>
  %u = tfm.add %w, %pad : (tensor<3x3xf32>, tensor<1x3xf32>) -> tensor<3x3xf32>
  // expected-remark@+1 {{tfm-fuse-masked-softmax: missed: the scores have both a boolean mask that is not causal and an additive one; the fused op takes one}}
  %p = tfm.softmax %u : tensor<3x3xf32>
  %e = math.exp %s : tensor<3x3xf32>
  %z = tfm.reduce sum %e axes = [0] keepdims : tensor<3x3xf32> -> tensor<1x3xf32>
  %p2 = tfm.div %e, %z : (tensor<3x3xf32>, tensor<1x3xf32>) -> tensor<3x3xf32>
  return %p, %p2 : tensor<3x3xf32>, tensor<3x3xf32>
}
