// RUN: tfm-opt %s -split-input-file --tfm-fuse-grouped-query=remarks=true -verify-diagnostics | FileCheck %s
// RUN: %python %S/Inputs/check_pass_equivalence.py %tfm_opt_bin %tfmc_bin --tfm-fuse-grouped-query %s %t | FileCheck %s --check-prefix=EQUIV
// EQUIV: functions equivalent after --tfm-fuse-grouped-query
// RUN: tfm-opt %s -split-input-file --tfm-fuse-grouped-query --tfm-fuse-attention | FileCheck %s --check-prefix=ATTN
// RUN: %python %S/Inputs/check_pass_equivalence.py %tfm_opt_bin %tfmc_bin "--pass-pipeline=builtin.module(func.func(tfm-fuse-grouped-query,tfm-fuse-attention))" %s %t.attn | FileCheck %s --check-prefix=EQUIV-ATTN
// EQUIV-ATTN: functions equivalent after --pass-pipeline

// Tests Llama's attention as exported: 4 query heads, 2 key and value heads
// each repeated twice by a reshape (Unsqueeze), an expand and a reshape, kᵀ
// transposed after the repeat, and a causal mask. The repeats go: the
// query splits its heads [2, 2], the keys and values gain a unit axis, and
// the keys are read transposed by the product instead.
// CHECK-LABEL: func.func @llama
// CHECK-SAME: (%[[Q:.+]]: tensor<1x4x8x16xf32>, %[[K:.+]]: tensor<1x2x8x16xf32>, %[[V:.+]]: tensor<1x2x8x16xf32>)
// CHECK-NOT: tfm.broadcast
// CHECK-DAG: %[[Q5:.+]] = tfm.reshape %[[Q]] : tensor<1x4x8x16xf32> -> tensor<1x2x2x8x16xf32>
// CHECK-DAG: %[[K5:.+]] = tfm.reshape %[[K]] : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
// CHECK-DAG: %[[V5:.+]] = tfm.reshape %[[V]] : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
// CHECK: %[[S:.+]] = tfm.matmul %[[Q5]], %[[K5]] transpose_rhs : (tensor<1x2x2x8x16xf32>, tensor<1x2x1x8x16xf32>) -> tensor<1x2x2x8x8xf32>
// CHECK: %[[P:.+]] = tfm.masked_softmax %[[S]] causal
// CHECK: %[[O:.+]] = tfm.matmul %[[P]], %[[V5]] : (tensor<1x2x2x8x8xf32>, tensor<1x2x1x8x16xf32>) -> tensor<1x2x2x8x16xf32>
// CHECK: tfm.reshape %[[O]] : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
// ATTN-LABEL: func.func @llama
// ATTN-SAME: (%[[Q:.+]]: tensor<1x4x8x16xf32>, %[[K:.+]]: tensor<1x2x8x16xf32>, %[[V:.+]]: tensor<1x2x8x16xf32>)
// ATTN: %[[A:.+]] = tfm.attention %[[Q]], %[[K]], %[[V]] causal {{.*}} : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32>
// ATTN: return %[[A]]
func.func @llama(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %k1 = tfm.reshape %k : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %k2 = tfm.broadcast %k1 : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %kr = tfm.reshape %k2 : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %v1 = tfm.reshape %v : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %v2 = tfm.broadcast %v1 : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %vr = tfm.reshape %v2 : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %kt = tfm.transpose %kr permutation = [0, 1, 3, 2] : tensor<1x4x8x16xf32> -> tensor<1x4x16x8xf32>
  %s = tfm.matmul %q, %kt : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  // expected-remark@+1 {{tfm-fuse-grouped-query: fused}}
  %p = tfm.masked_softmax %s causal {scale = 0.25 : f64} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %o = tfm.matmul %p, %vr : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

// Tests multi-query attention (one key head for 3 query heads) with a padding
// mask [B, 1, 1, Sk] that is the same for every head, and keys repeated
// before the product reads them transposed. The mask gains a unit axis for
// the groups.
// CHECK-LABEL: func.func @multi_query_padding
// CHECK: tfm.matmul {{.+}} transpose_rhs : (tensor<2x1x3x4x8xf32>, tensor<2x1x1x5x8xf32>) -> tensor<2x1x3x4x5xf32>
// CHECK: %[[M:.+]] = tfm.reshape %arg3 : tensor<2x1x1x5xf32> -> tensor<2x1x1x1x5xf32>
// CHECK: tfm.masked_softmax {{.+}}, mask %[[M]]
// ATTN-LABEL: func.func @multi_query_padding
// ATTN: tfm.attention %arg0, %arg1, %arg2, mask %arg3 {{.*}} : (tensor<2x3x4x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x6xf32>, tensor<2x1x1x5xf32>) -> tensor<2x3x4x6xf32>
func.func @multi_query_padding(%q: tensor<2x3x4x8xf32>, %k: tensor<2x1x5x8xf32>, %v: tensor<2x1x5x6xf32>, %m: tensor<2x1x1x5xf32>) -> tensor<2x3x4x6xf32> {
  %k1 = tfm.reshape %k : tensor<2x1x5x8xf32> -> tensor<2x1x1x5x8xf32>
  %k2 = tfm.broadcast %k1 : tensor<2x1x1x5x8xf32> -> tensor<2x1x3x5x8xf32>
  %kr = tfm.reshape %k2 : tensor<2x1x3x5x8xf32> -> tensor<2x3x5x8xf32>
  %v1 = tfm.reshape %v : tensor<2x1x5x6xf32> -> tensor<2x1x1x5x6xf32>
  %v2 = tfm.broadcast %v1 : tensor<2x1x1x5x6xf32> -> tensor<2x1x3x5x6xf32>
  %vr = tfm.reshape %v2 : tensor<2x1x3x5x6xf32> -> tensor<2x3x5x6xf32>
  %s = tfm.matmul %q, %kr transpose_rhs : (tensor<2x3x4x8xf32>, tensor<2x3x5x8xf32>) -> tensor<2x3x4x5xf32>
  // expected-remark@+1 {{tfm-fuse-grouped-query: fused}}
  %p = tfm.masked_softmax %s, mask %m mask_kind = additive {scale = 0.35 : f64} : (tensor<2x3x4x5xf32>, tensor<2x1x1x5xf32>) -> tensor<2x3x4x5xf32>
  %o = tfm.matmul %p, %vr : (tensor<2x3x4x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x4x6xf32>
  return %o : tensor<2x3x4x6xf32>
}

// -----

// Tests a mask of its own per query head (ALiBi's biases have one): it splits
// its heads as the scores do, and the attention takes it merged back.
// CHECK-LABEL: func.func @mask_per_head
// CHECK: tfm.reshape %arg3 : tensor<4x6x6xf32> -> tensor<2x2x6x6xf32>
// ATTN-LABEL: func.func @mask_per_head
// ATTN: tfm.attention %arg0, %arg1, %arg2, mask %arg3 {{.*}} : (tensor<4x6x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>, tensor<4x6x6xf32>) -> tensor<4x6x8xf32>
func.func @mask_per_head(%q: tensor<4x6x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>, %m: tensor<4x6x6xf32>) -> tensor<4x6x8xf32> {
  %k1 = tfm.reshape %k : tensor<2x6x8xf32> -> tensor<2x1x6x8xf32>
  %k2 = tfm.broadcast %k1 : tensor<2x1x6x8xf32> -> tensor<2x2x6x8xf32>
  %kr = tfm.reshape %k2 : tensor<2x2x6x8xf32> -> tensor<4x6x8xf32>
  %v1 = tfm.reshape %v : tensor<2x6x8xf32> -> tensor<2x1x6x8xf32>
  %v2 = tfm.broadcast %v1 : tensor<2x1x6x8xf32> -> tensor<2x2x6x8xf32>
  %vr = tfm.reshape %v2 : tensor<2x2x6x8xf32> -> tensor<4x6x8xf32>
  %s = tfm.matmul %q, %kr transpose_rhs : (tensor<4x6x8xf32>, tensor<4x6x8xf32>) -> tensor<4x6x6xf32>
  // expected-remark@+1 {{tfm-fuse-grouped-query: fused}}
  %p = tfm.masked_softmax %s, mask %m mask_kind = additive causal {scale = 0.35 : f64} : (tensor<4x6x6xf32>, tensor<4x6x6xf32>) -> tensor<4x6x6xf32>
  %o = tfm.matmul %p, %vr : (tensor<4x6x6xf32>, tensor<4x6x8xf32>) -> tensor<4x6x8xf32>
  return %o : tensor<4x6x8xf32>
}

// -----

// Tests that keys repeated where the values are not is reported, not
// silently left: the two would need different groupings.
// CHECK-LABEL: func.func @values_not_repeated
// CHECK: tfm.broadcast
func.func @values_not_repeated(%q: tensor<4x6x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<4x6x8xf32>) -> tensor<4x6x8xf32> {
  %k1 = tfm.reshape %k : tensor<2x6x8xf32> -> tensor<2x1x6x8xf32>
  %k2 = tfm.broadcast %k1 : tensor<2x1x6x8xf32> -> tensor<2x2x6x8xf32>
  %kr = tfm.reshape %k2 : tensor<2x2x6x8xf32> -> tensor<4x6x8xf32>
  %s = tfm.matmul %q, %kr transpose_rhs : (tensor<4x6x8xf32>, tensor<4x6x8xf32>) -> tensor<4x6x6xf32>
  // expected-remark@+1 {{tfm-fuse-grouped-query: missed: the values are not a repeat of fewer heads, as the keys are}}
  %p = tfm.masked_softmax %s {scale = 0.35 : f64} : (tensor<4x6x6xf32>) -> tensor<4x6x6xf32>
  %o = tfm.matmul %p, %v : (tensor<4x6x6xf32>, tensor<4x6x8xf32>) -> tensor<4x6x8xf32>
  return %o : tensor<4x6x8xf32>
}
