// RUN: tfm-opt %s -split-input-file --tfm-fuse-attention=remarks=true -verify-diagnostics | FileCheck %s
// RUN: %python %S/Inputs/check_pass_equivalence.py %tfm_opt_bin %tfmc_bin --tfm-fuse-attention %s %t | FileCheck %s --check-prefix=EQUIV
// EQUIV: functions equivalent after --tfm-fuse-attention, also compiled
// RUN: tfm-opt %s -split-input-file --tfm-fuse-attention=target=cpu | FileCheck %s --check-prefix=SPLIT
// RUN: %python %S/Inputs/check_pass_equivalence.py %tfm_opt_bin %tfmc_bin --tfm-fuse-attention=target=cpu %s %t.cpu | FileCheck %s --check-prefix=EQUIV-CPU
// EQUIV-CPU: functions equivalent after --tfm-fuse-attention=target=cpu, also compiled

// Tests that kᵀ made by a transpose folds into the key's transpose, and
// that the mask and the scale move onto the attention.
// CHECK-LABEL: func.func @transposed_key
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x8xf32>, %[[X:.+]]: tensor<4x2x8xf32>, %[[V:.+]]: tensor<2x4x8xf32>, %[[M:.+]]: tensor<2x1x4xf32>)
// CHECK: %[[K:.+]] = tfm.transpose %[[X]] permutation = [1, 0, 2] : tensor<4x2x8xf32> -> tensor<2x4x8xf32>
// CHECK: tfm.attention %[[Q]], %[[K]], %[[V]], mask %[[M]] {scale = 5.000000e-01 : f64}
// CHECK-NOT: tfm.matmul
// CHECK-NOT: tfm.masked_softmax
func.func @transposed_key(%q: tensor<2x4x8xf32>, %x: tensor<4x2x8xf32>, %v: tensor<2x4x8xf32>, %m: tensor<2x1x4xf32>) -> tensor<2x4x8xf32> {
  %kt = tfm.transpose %x permutation = [1, 2, 0] : tensor<4x2x8xf32> -> tensor<2x8x4xf32>
  %s = tfm.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  // expected-remark@+1 {{tfm-fuse-attention: fused}}
  %p = tfm.masked_softmax %s, mask %m mask_kind = additive {scale = 0.5} : (tensor<2x4x4xf32>, tensor<2x1x4xf32>) -> tensor<2x4x4xf32>
  %o = tfm.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// Tests that a key read transposed by the matmul is the key itself, that
// causal and a boolean mask carry over, and that a value computed after the
// softmax is still in scope.
// CHECK-LABEL: func.func @transpose_rhs_causal
// CHECK: %[[V:.+]] = tfm.relu %arg2
// CHECK: tfm.attention %arg0, %arg1, %[[V]], mask %arg3 causal {scale = 2.500000e-01 : f64}
func.func @transpose_rhs_causal(%q: tensor<3x8xf32>, %k: tensor<5x8xf32>, %w: tensor<5x2xf32>, %m: tensor<3x5xi1>) -> tensor<3x2xf32> {
  %s = tfm.matmul %q, %k transpose_rhs : (tensor<3x8xf32>, tensor<5x8xf32>) -> tensor<3x5xf32>
  // expected-remark@+1 {{tfm-fuse-attention: fused}}
  %p = tfm.masked_softmax %s, mask %m mask_kind = boolean causal {scale = 0.25} : (tensor<3x5xf32>, tensor<3x5xi1>) -> tensor<3x5xf32>
  %v = tfm.relu %w : tensor<5x2xf32>
  %o = tfm.matmul %p, %v : (tensor<3x5xf32>, tensor<5x2xf32>) -> tensor<3x2xf32>
  return %o : tensor<3x2xf32>
}

// -----

// Tests that probabilities another op reads (a backward pass, or an output)
// stay a softmax.
// CHECK-LABEL: func.func @probabilities_read_twice
// CHECK: tfm.masked_softmax
// CHECK-NOT: tfm.attention
func.func @probabilities_read_twice(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x4xf32>) {
  %s = tfm.matmul %q, %k transpose_rhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
  // expected-remark@+1 {{tfm-fuse-attention: missed: the probabilities have other readers (a backward pass)}}
  %p = tfm.masked_softmax %s {scale = 0.25} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %o = tfm.matmul %p, %v : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %o, %p : tensor<4x8xf32>, tensor<4x4xf32>
}

// -----

// Tests that a key shared by every batch row (broadcast) is not fused:
// tfm.attention takes equal batch dimensions.
// CHECK-LABEL: func.func @broadcast_key
// CHECK-NOT: tfm.attention
func.func @broadcast_key(%q: tensor<2x4x8xf32>, %kt: tensor<8x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %s = tfm.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
  // expected-remark@+1 {{tfm-fuse-attention: missed: the query, key and value batch dimensions differ}}
  %p = tfm.masked_softmax %s : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %o = tfm.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// Tests that with the CPU's layout rules, PyTorch's sequence-first heads
// (each projection [S, B, H·D] reshaped to [S, B·H, D]) become two batch
// dimensions B and H, read in place, and that a mask per group splits with
// them. Without a target nothing splits.
// CHECK-LABEL: func.func @merged_heads
// CHECK: tfm.attention {{.*}} -> tensor<6x4x2xf32>
// SPLIT-LABEL: func.func @merged_heads
// SPLIT: %[[M:.+]] = tfm.reshape %arg3 : tensor<6x4x4xf32> -> tensor<2x3x4x4xf32>
// SPLIT: %[[RQ:.+]] = tfm.reshape %arg0 : tensor<4x2x6xf32> -> tensor<4x2x3x2xf32>
// SPLIT: %[[Q:.+]] = tfm.transpose %[[RQ]] permutation = [1, 2, 0, 3] : tensor<4x2x3x2xf32> -> tensor<2x3x4x2xf32>
// SPLIT: %[[RK:.+]] = tfm.reshape %arg1 : tensor<4x2x6xf32> -> tensor<4x2x3x2xf32>
// SPLIT: %[[K:.+]] = tfm.transpose %[[RK]] permutation = [1, 2, 0, 3]
// SPLIT: %[[RV:.+]] = tfm.reshape %arg2 : tensor<4x2x6xf32> -> tensor<4x2x3x2xf32>
// SPLIT: %[[V:.+]] = tfm.transpose %[[RV]] permutation = [1, 2, 0, 3]
// SPLIT: %[[A:.+]] = tfm.attention %[[Q]], %[[K]], %[[V]], mask %[[M]] {scale = 5.000000e-01 : f64} : {{.*}} -> tensor<2x3x4x2xf32>
// SPLIT: %[[T:.+]] = tfm.transpose %[[A]] permutation = [2, 0, 1, 3] : tensor<2x3x4x2xf32> -> tensor<4x2x3x2xf32>
// SPLIT: tfm.reshape %[[T]]
// SPLIT-NOT: tensor<6x4x2xf32>
func.func @merged_heads(%xq: tensor<4x2x6xf32>, %xk: tensor<4x2x6xf32>, %xv: tensor<4x2x6xf32>, %m: tensor<6x4x4xf32>) -> tensor<8x6xf32> {
  %rq = tfm.reshape %xq : tensor<4x2x6xf32> -> tensor<4x6x2xf32>
  %q = tfm.transpose %rq permutation = [1, 0, 2] : tensor<4x6x2xf32> -> tensor<6x4x2xf32>
  %rk = tfm.reshape %xk : tensor<4x2x6xf32> -> tensor<4x6x2xf32>
  %kt = tfm.transpose %rk permutation = [1, 2, 0] : tensor<4x6x2xf32> -> tensor<6x2x4xf32>
  %rv = tfm.reshape %xv : tensor<4x2x6xf32> -> tensor<4x6x2xf32>
  %v = tfm.transpose %rv permutation = [1, 0, 2] : tensor<4x6x2xf32> -> tensor<6x4x2xf32>
  %s = tfm.matmul %q, %kt : (tensor<6x4x2xf32>, tensor<6x2x4xf32>) -> tensor<6x4x4xf32>
  // expected-remark@+1 {{tfm-fuse-attention: fused}}
  %p = tfm.masked_softmax %s, mask %m mask_kind = additive {scale = 0.5} : (tensor<6x4x4xf32>, tensor<6x4x4xf32>) -> tensor<6x4x4xf32>
  %o = tfm.matmul %p, %v : (tensor<6x4x4xf32>, tensor<6x4x2xf32>) -> tensor<6x4x2xf32>
  %t = tfm.transpose %o permutation = [1, 0, 2] : tensor<6x4x2xf32> -> tensor<4x6x2xf32>
  %r = tfm.reshape %t : tensor<4x6x2xf32> -> tensor<8x6xf32>
  return %r : tensor<8x6xf32>
}

// -----

// Tests that a causal attention with a mask broadcast over the groups
// splits and keeps the mask as it is, and that one batch row (the merged
// dimension is then a view already) does not split.
// SPLIT-LABEL: func.func @merged_heads_causal
// SPLIT: tfm.attention {{.*}}, mask %arg3 causal {{.*}} -> tensor<2x3x4x2xf32>
// SPLIT-LABEL: func.func @one_batch_row
// SPLIT: tfm.attention {{.*}} -> tensor<3x4x2xf32>
func.func @merged_heads_causal(%xq: tensor<4x2x6xf32>, %xk: tensor<4x2x6xf32>, %xv: tensor<4x2x6xf32>, %m: tensor<1x4x4xf32>) -> tensor<4x6x2xf32> {
  %rq = tfm.reshape %xq : tensor<4x2x6xf32> -> tensor<4x6x2xf32>
  %q = tfm.transpose %rq permutation = [1, 0, 2] : tensor<4x6x2xf32> -> tensor<6x4x2xf32>
  %rk = tfm.reshape %xk : tensor<4x2x6xf32> -> tensor<4x6x2xf32>
  %kt = tfm.transpose %rk permutation = [1, 2, 0] : tensor<4x6x2xf32> -> tensor<6x2x4xf32>
  %rv = tfm.reshape %xv : tensor<4x2x6xf32> -> tensor<4x6x2xf32>
  %v = tfm.transpose %rv permutation = [1, 0, 2] : tensor<4x6x2xf32> -> tensor<6x4x2xf32>
  %s = tfm.matmul %q, %kt : (tensor<6x4x2xf32>, tensor<6x2x4xf32>) -> tensor<6x4x4xf32>
  // expected-remark@+1 {{tfm-fuse-attention: fused}}
  %p = tfm.masked_softmax %s, mask %m mask_kind = additive causal {scale = 0.5} : (tensor<6x4x4xf32>, tensor<1x4x4xf32>) -> tensor<6x4x4xf32>
  %o = tfm.matmul %p, %v : (tensor<6x4x4xf32>, tensor<6x4x2xf32>) -> tensor<6x4x2xf32>
  %t = tfm.transpose %o permutation = [1, 0, 2] : tensor<6x4x2xf32> -> tensor<4x6x2xf32>
  return %t : tensor<4x6x2xf32>
}
func.func @one_batch_row(%xq: tensor<4x1x6xf32>, %xk: tensor<4x1x6xf32>, %xv: tensor<4x1x6xf32>) -> tensor<4x3x2xf32> {
  %rq = tfm.reshape %xq : tensor<4x1x6xf32> -> tensor<4x3x2xf32>
  %q = tfm.transpose %rq permutation = [1, 0, 2] : tensor<4x3x2xf32> -> tensor<3x4x2xf32>
  %rk = tfm.reshape %xk : tensor<4x1x6xf32> -> tensor<4x3x2xf32>
  %kt = tfm.transpose %rk permutation = [1, 2, 0] : tensor<4x3x2xf32> -> tensor<3x2x4xf32>
  %rv = tfm.reshape %xv : tensor<4x1x6xf32> -> tensor<4x3x2xf32>
  %v = tfm.transpose %rv permutation = [1, 0, 2] : tensor<4x3x2xf32> -> tensor<3x4x2xf32>
  %s = tfm.matmul %q, %kt : (tensor<3x4x2xf32>, tensor<3x2x4xf32>) -> tensor<3x4x4xf32>
  // expected-remark@+1 {{tfm-fuse-attention: fused}}
  %p = tfm.masked_softmax %s {scale = 0.5} : (tensor<3x4x4xf32>) -> tensor<3x4x4xf32>
  %o = tfm.matmul %p, %v : (tensor<3x4x4xf32>, tensor<3x4x2xf32>) -> tensor<3x4x2xf32>
  %t = tfm.transpose %o permutation = [1, 0, 2] : tensor<3x4x2xf32> -> tensor<4x3x2xf32>
  return %t : tensor<4x3x2xf32>
}
