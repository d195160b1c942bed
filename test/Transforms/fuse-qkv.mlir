// RUN: tfm-opt %s -split-input-file --tfm-fuse-qkv=remarks=true -verify-diagnostics | FileCheck %s
// RUN: %python %S/Inputs/check_pass_equivalence.py %tfm_opt_bin %tfmc_bin --tfm-fuse-qkv %s %t | FileCheck %s --check-prefix=EQUIV
// EQUIV: functions equivalent after --tfm-fuse-qkv, also compiled

// Tests that three linears over one input, in any order and with biases,
// become one qkv_projection over the concatenated weights.
// CHECK-LABEL: func.func @separate
// CHECK-SAME: (%[[X:.+]]: tensor<2x4xf32>)
// CHECK: %[[W:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], [2.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], [3.000000e+00
// CHECK: %[[R:.+]]:3 = tfm.qkv_projection %[[X]], %[[W]], %{{.+}} sizes = [2, 2, 2]
// CHECK: return %[[R]]#1, %[[R]]#0, %[[R]]#2
func.func @separate(%x: tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) {
  %wq = arith.constant dense<[[1.0, 0.0, 0.0, 0.0], [2.0, 0.0, 0.0, 0.0]]> : tensor<2x4xf32>
  %wk = arith.constant dense<[[3.0, 0.0, 0.0, 0.0], [4.0, 0.0, 0.0, 0.0]]> : tensor<2x4xf32>
  %wv = arith.constant dense<[[5.0, 0.0, 0.0, 0.0], [6.0, 0.0, 0.0, 0.0]]> : tensor<2x4xf32>
  %b = arith.constant dense<[0.5, 0.25]> : tensor<2xf32>
  // expected-remark@+1 {{tfm-fuse-qkv: fused}}
  %q = tfm.linear %x, %wq, %b : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %k = tfm.linear %x, %wk : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x2xf32>
  %v = tfm.linear %x, %wv, %b : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  return %k, %q, %v : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>
}

// -----

// Tests that matmuls by constant weights plus bias adds (the opset 13 export
// of nn.Linear on 3-D inputs) fuse as well.
// CHECK-LABEL: func.func @matmul_form
// CHECK: tfm.qkv_projection %{{.+}}, %{{.+}}, %{{.+}} sizes = [4, 4, 4] : (tensor<1x3x4xf32>, tensor<12x4xf32>, tensor<12xf32>)
// CHECK-NOT: tfm.matmul
func.func @matmul_form(%x: tensor<1x3x4xf32>) -> (tensor<1x3x4xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32>) {
  %w = arith.constant dense<0.5> : tensor<4x4xf32>
  %b = arith.constant dense<1.0> : tensor<4xf32>
  %0 = tfm.matmul %x, %w : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32>
  // expected-remark@+1 {{tfm-fuse-qkv: fused}}
  %q = tfm.add %b, %0 : (tensor<4xf32>, tensor<1x3x4xf32>) -> tensor<1x3x4xf32>
  %1 = tfm.matmul %x, %w : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32>
  %k = tfm.add %1, %b : (tensor<1x3x4xf32>, tensor<4xf32>) -> tensor<1x3x4xf32>
  %2 = tfm.matmul %x, %w : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32>
  %v = tfm.add %2, %b : (tensor<1x3x4xf32>, tensor<4xf32>) -> tensor<1x3x4xf32>
  return %q, %k, %v : tensor<1x3x4xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32>
}

// -----

// Tests that a packed projection sliced in three (nn.MultiheadAttention)
// becomes a qkv_projection with the same weight.
// CHECK-LABEL: func.func @packed_slices
// CHECK: %[[R:.+]]:3 = tfm.qkv_projection %{{.+}}, %{{.+}}, %{{.+}} sizes = [2, 2, 2]
// CHECK-NOT: tfm.slice
// CHECK: return %[[R]]#0, %[[R]]#1, %[[R]]#2
func.func @packed_slices(%x: tensor<3x4xf32>, %w: tensor<6x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>) {
  %wc = arith.constant dense<1.0> : tensor<6x4xf32>
  %b = arith.constant dense<0.0> : tensor<6xf32>
  // expected-remark@+1 {{tfm-fuse-qkv: fused}}
  %y = tfm.linear %x, %wc, %b : (tensor<3x4xf32>, tensor<6x4xf32>, tensor<6xf32>) -> tensor<3x6xf32>
  %v = tfm.slice %y starts = [0, 4] sizes = [3, 2] steps = [1, 1] : tensor<3x6xf32> -> tensor<3x2xf32>
  %q = tfm.slice %y starts = [0, 0] sizes = [3, 2] steps = [1, 1] : tensor<3x6xf32> -> tensor<3x2xf32>
  %k = tfm.slice %y starts = [0, 2] sizes = [3, 2] steps = [1, 1] : tensor<3x6xf32> -> tensor<3x2xf32>
  return %q, %k, %v : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// Tests that cross-attention's K and V, from the encoder memory, fuse in two.
// CHECK-LABEL: func.func @cross_kv
// CHECK: tfm.linear %{{.+}}, %{{.+}} : (tensor<3x4xf32>
// CHECK: tfm.qkv_projection %{{.+}}, %{{.+}} sizes = [2, 2] : (tensor<5x4xf32>
func.func @cross_kv(%dec: tensor<3x4xf32>, %mem: tensor<5x4xf32>) -> (tensor<3x2xf32>, tensor<5x2xf32>, tensor<5x2xf32>) {
  %w = arith.constant dense<1.0> : tensor<2x4xf32>
  %q = tfm.linear %dec, %w : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  // expected-remark@+1 {{tfm-fuse-qkv: fused}}
  %k = tfm.linear %mem, %w : (tensor<5x4xf32>, tensor<2x4xf32>) -> tensor<5x2xf32>
  %v = tfm.linear %mem, %w : (tensor<5x4xf32>, tensor<2x4xf32>) -> tensor<5x2xf32>
  return %q, %k, %v : tensor<3x2xf32>, tensor<5x2xf32>, tensor<5x2xf32>
}

// -----

// Tests that projections of different inputs stay apart: nothing to fuse.
// CHECK-LABEL: func.func @different_inputs
// CHECK-COUNT-3: tfm.linear
// CHECK-NOT: tfm.qkv_projection
func.func @different_inputs(%a: tensor<3x4xf32>, %b: tensor<3x4xf32>, %c: tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>) {
  %w = arith.constant dense<1.0> : tensor<2x4xf32>
  %q = tfm.linear %a, %w : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  %k = tfm.linear %b, %w : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  %v = tfm.linear %c, %w : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  return %q, %k, %v : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// Tests that four projections of one input are a reported miss.
// CHECK-LABEL: func.func @four_projections
// CHECK-NOT: tfm.qkv_projection
func.func @four_projections(%x: tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>) {
  %w = arith.constant dense<1.0> : tensor<2x4xf32>
  // expected-remark@+1 {{tfm-fuse-qkv: missed: 4 projections read the same input; cannot tell which are one attention's Q, K and V}}
  %0 = tfm.linear %x, %w : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  %1 = tfm.linear %x, %w : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  %2 = tfm.linear %x, %w : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  %3 = tfm.linear %x, %w : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  return %0, %1, %2, %3 : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// Tests that a packed projection whose slices overlap is a reported miss.
// CHECK-LABEL: func.func @overlapping_slices
// CHECK-NOT: tfm.qkv_projection
func.func @overlapping_slices(%x: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %w = arith.constant dense<1.0> : tensor<6x4xf32>
  // expected-remark@+1 {{tfm-fuse-qkv: missed: the slices do not tile the packed projection}}
  %y = tfm.linear %x, %w : (tensor<3x4xf32>, tensor<6x4xf32>) -> tensor<3x6xf32>
  %a = tfm.slice %y starts = [0, 0] sizes = [3, 4] steps = [1, 1] : tensor<3x6xf32> -> tensor<3x4xf32>
  %b = tfm.slice %y starts = [0, 2] sizes = [3, 4] steps = [1, 1] : tensor<3x6xf32> -> tensor<3x4xf32>
  return %a, %b : tensor<3x4xf32>, tensor<3x4xf32>
}

// -----

// Tests the reshape-and-gather form of a packed projection (newer
// nn.MultiheadAttention exports): the parts become qkv_projection results.
// CHECK-LABEL: func.func @packed_gather
// CHECK: %[[R:.+]]:3 = tfm.qkv_projection %arg0, %{{.+}}, %{{.+}} sizes = [2, 2, 2]
// CHECK-NOT: tfm.gather
// CHECK: return
func.func @packed_gather(%x: tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>) {
  %w = arith.constant dense<[[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]]> : tensor<6x4xf32>
  %b = arith.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]> : tensor<6xf32>
  %i0 = arith.constant dense<0> : tensor<i64>
  %i1 = arith.constant dense<1> : tensor<i64>
  %i2 = arith.constant dense<2> : tensor<i64>
  // expected-remark@+1 {{tfm-fuse-qkv: fused}}
  %y = tfm.linear %x, %w, %b : (tensor<3x4xf32>, tensor<6x4xf32>, tensor<6xf32>) -> tensor<3x6xf32>
  %r = tfm.reshape %y : tensor<3x6xf32> -> tensor<3x3x2xf32>
  %t = tfm.transpose %r permutation = [1, 0, 2] : tensor<3x3x2xf32> -> tensor<3x3x2xf32>
  %q = tfm.gather %t, %i0 axis = 0 : (tensor<3x3x2xf32>, tensor<i64>) -> tensor<3x2xf32>
  %v = tfm.gather %t, %i2 axis = 0 : (tensor<3x3x2xf32>, tensor<i64>) -> tensor<3x2xf32>
  %k = tfm.gather %t, %i1 axis = 0 : (tensor<3x3x2xf32>, tensor<i64>) -> tensor<3x2xf32>
  return %q, %k, %v : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// Tests that gathered parts that interleave the packed columns are a
// reported miss: no qkv_projection can produce them.
// CHECK-LABEL: func.func @interleaved_gather
// CHECK-NOT: tfm.qkv_projection
func.func @interleaved_gather(%x: tensor<3x4xf32>) -> (tensor<3x3xf32>, tensor<3x3xf32>) {
  %w = arith.constant dense<1.0> : tensor<6x4xf32>
  %i0 = arith.constant dense<0> : tensor<i64>
  %i1 = arith.constant dense<1> : tensor<i64>
  // expected-remark@+1 {{tfm-fuse-qkv: missed: a gathered part is not one consecutive slice of the packed projection}}
  %y = tfm.linear %x, %w : (tensor<3x4xf32>, tensor<6x4xf32>) -> tensor<3x6xf32>
  %r = tfm.reshape %y : tensor<3x6xf32> -> tensor<3x3x2xf32>
  %t = tfm.transpose %r permutation = [2, 0, 1] : tensor<3x3x2xf32> -> tensor<2x3x3xf32>
  %a = tfm.gather %t, %i0 axis = 0 : (tensor<2x3x3xf32>, tensor<i64>) -> tensor<3x3xf32>
  %b = tfm.gather %t, %i1 axis = 0 : (tensor<2x3x3xf32>, tensor<i64>) -> tensor<3x3xf32>
  return %a, %b : tensor<3x3xf32>, tensor<3x3xf32>
}

// -----

// Tests that the packed K/V projections of two decoder layers, which read
// the same encoder memory, fuse each on its own rather than together.
// CHECK-LABEL: func.func @two_layers_same_memory
// CHECK-COUNT-2: tfm.qkv_projection %arg0, %{{.+}} sizes = [2, 2] : (tensor<5x4xf32>, tensor<4x4xf32>)
// CHECK-NOT: tfm.slice
func.func @two_layers_same_memory(%mem: tensor<5x4xf32>) -> (tensor<5x2xf32>, tensor<5x2xf32>, tensor<5x2xf32>, tensor<5x2xf32>) {
  %w1 = arith.constant dense<1.0> : tensor<4x4xf32>
  %w2 = arith.constant dense<2.0> : tensor<4x4xf32>
  // expected-remark@+1 {{tfm-fuse-qkv: fused}}
  %kv1 = tfm.linear %mem, %w1 : (tensor<5x4xf32>, tensor<4x4xf32>) -> tensor<5x4xf32>
  %k1 = tfm.slice %kv1 starts = [0, 0] sizes = [5, 2] steps = [1, 1] : tensor<5x4xf32> -> tensor<5x2xf32>
  %v1 = tfm.slice %kv1 starts = [0, 2] sizes = [5, 2] steps = [1, 1] : tensor<5x4xf32> -> tensor<5x2xf32>
  // expected-remark@+1 {{tfm-fuse-qkv: fused}}
  %kv2 = tfm.linear %mem, %w2 : (tensor<5x4xf32>, tensor<4x4xf32>) -> tensor<5x4xf32>
  %k2 = tfm.slice %kv2 starts = [0, 0] sizes = [5, 2] steps = [1, 1] : tensor<5x4xf32> -> tensor<5x2xf32>
  %v2 = tfm.slice %kv2 starts = [0, 2] sizes = [5, 2] steps = [1, 1] : tensor<5x4xf32> -> tensor<5x2xf32>
  return %k1, %v1, %k2, %v2 : tensor<5x2xf32>, tensor<5x2xf32>, tensor<5x2xf32>, tensor<5x2xf32>
}

// -----

// Tests GPT-2's Conv1D form: the packed projection on a 2-D view of x,
// viewed back to 3-D, then split in three along the last axis.
// CHECK-LABEL: func.func @conv1d_split
// CHECK: %[[R:.+]]:3 = tfm.qkv_projection %{{.+}}, %{{.+}}, %{{.+}} sizes = [2, 2, 2] : (tensor<6x4xf32>
// CHECK-NOT: tfm.split
// CHECK: tfm.reshape %[[R]]#0 : tensor<6x2xf32> -> tensor<2x3x2xf32>
func.func @conv1d_split(%x: tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>) {
  %w = arith.constant dense<[[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]]> : tensor<6x4xf32>
  %b = arith.constant dense<[0.5, 1.0, 1.5, 2.0, 2.5, 3.0]> : tensor<6xf32>
  %x2 = tfm.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  // expected-remark@+1 {{tfm-fuse-qkv: fused}}
  %y = tfm.linear %x2, %w, %b : (tensor<6x4xf32>, tensor<6x4xf32>, tensor<6xf32>) -> tensor<6x6xf32>
  %y3 = tfm.reshape %y : tensor<6x6xf32> -> tensor<2x3x6xf32>
  %p:3 = tfm.split %y3 axis = 2 sizes = [2, 2, 2] : tensor<2x3x6xf32> -> tensor<2x3x2xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>
  return %p#0, %p#1, %p#2 : tensor<2x3x2xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>
}

// -----

// Tests that a view that changes the last axis before the split stays
// apart: the parts would not be column blocks of the projection.
// CHECK-LABEL: func.func @conv1d_split_other_view
// CHECK: tfm.split
// CHECK-NOT: tfm.qkv_projection
func.func @conv1d_split_other_view(%x: tensor<6x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %w = arith.constant dense<1.0> : tensor<6x4xf32>
  %y = tfm.linear %x, %w : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x6xf32>
  %y3 = tfm.reshape %y : tensor<6x6xf32> -> tensor<3x12xf32>
  %p:3 = tfm.split %y3 axis = 1 sizes = [4, 4, 4] : tensor<3x12xf32> -> tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
  return %p#0, %p#1, %p#2 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// -----

// Tests grouped-query attention's projections (Q wider than K and V), as
// matmuls by transposed constant weights: all three become linears before
// any group forms, so the group is the three, whichever the driver visits
// first.
// CHECK-LABEL: func.func @gqa_widths
// CHECK: tfm.qkv_projection %arg0, %{{.+}} sizes = [8, 4, 4] : (tensor<2x3x4xf32>, tensor<16x4xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>)
// CHECK-NOT: tfm.matmul
func.func @gqa_widths(%x: tensor<2x3x4xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %wq = arith.constant dense<0.5> : tensor<4x8xf32>
  %wk = arith.constant dense<0.25> : tensor<4x4xf32>
  %wv = arith.constant dense<-0.5> : tensor<4x4xf32>
  // expected-remark@+1 {{tfm-fuse-qkv: fused}}
  %q = tfm.matmul %x, %wq : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
  %k = tfm.matmul %x, %wk : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %v = tfm.matmul %x, %wv : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  return %q, %k, %v : tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// -----

// Tests a training graph's projections: matmuls by transposed weights that
// are not constants (parameters; arguments here) become linears of the
// weights, which cannot be packed at compile time, a reported miss; the
// two projections of a gated MLP beside them (not split into heads) are
// not a site.
// CHECK-LABEL: func.func @weights_not_constant
// CHECK-COUNT-5: tfm.linear
// CHECK-NOT: tfm.qkv_projection
func.func @weights_not_constant(%x: tensor<2x3x4xf32>, %wq: tensor<4x4xf32>, %wk: tensor<4x4xf32>, %wv: tensor<4x4xf32>, %wg: tensor<6x4xf32>, %wu: tensor<6x4xf32>) -> (tensor<2x3x2x2xf32>, tensor<2x3x2x2xf32>, tensor<2x3x2x2xf32>, tensor<2x3x6xf32>) {
  %tq = tfm.transpose %wq permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %tk = tfm.transpose %wk permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %tv = tfm.transpose %wv permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  // expected-remark@+1 {{tfm-fuse-qkv: missed: a projection's weight is not a constant (a training graph's parameter), so the projections cannot be packed at compile time}}
  %q = tfm.matmul %x, %tq : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %k = tfm.matmul %x, %tk : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %v = tfm.matmul %x, %tv : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %q4 = tfm.reshape %q : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
  %k4 = tfm.reshape %k : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
  %v4 = tfm.reshape %v : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
  %y = tfm.add %q, %v : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %tg = tfm.transpose %wg permutation = [1, 0] : tensor<6x4xf32> -> tensor<4x6xf32>
  %tu = tfm.transpose %wu permutation = [1, 0] : tensor<6x4xf32> -> tensor<4x6xf32>
  %g = tfm.matmul %y, %tg : (tensor<2x3x4xf32>, tensor<4x6xf32>) -> tensor<2x3x6xf32>
  %u = tfm.matmul %y, %tu : (tensor<2x3x4xf32>, tensor<4x6xf32>) -> tensor<2x3x6xf32>
  %r = tfm.relu %g : tensor<2x3x6xf32>
  %p = tfm.mul %r, %u : (tensor<2x3x6xf32>, tensor<2x3x6xf32>) -> tensor<2x3x6xf32>
  return %q4, %k4, %v4, %p : tensor<2x3x2x2xf32>, tensor<2x3x2x2xf32>, tensor<2x3x2x2xf32>, tensor<2x3x6xf32>
}
