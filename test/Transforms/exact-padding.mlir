// RUN: tfm-opt %s -split-input-file --tfm-exact-padding -verify-diagnostics | FileCheck %s

// Tests a self-attention without a mask, in buckets of 2 and 4 for the
// sizes 1..4: bucket 2 serves 1 and 2 and bucket 4 serves 3 and 4, so both
// pad and both get a key mask over the padded keys, an argument the runtime
// fills. The attention weights are then zero on the padding, so p · x sums
// over it exactly. The output follows the symbol on axis 1.
// CHECK: module attributes {tfm.dynamic_entries = [#tfm.dynamic_entry<name = "infer", symbols = ["sequence"], min_sizes = [1], max_sizes = [4], inputs = [array<i64: -1, 0, -1>], outputs = [array<i64: -1, 0, -1>], key_masks = [0], buckets = [@infer.sequence2, @infer.sequence4], bucket_sizes = [2, 4]>]}
// CHECK-NOT: tfm.symbol_ranges
// CHECK-LABEL: func.func @infer.sequence2
// CHECK-SAME: %[[X:.+]]: tensor<1x2x8xf32> {tfm.symbols = ["", "sequence", ""]}, %[[MASK:.+]]: tensor<2xf32> {tfm.input_index = 1 : i64, tfm.name = "key_mask.sequence"}
// CHECK-NOT: tfm.bucket_of
// CHECK: %[[S:.+]] = tfm.matmul %[[X]], %[[X]] transpose_rhs
// CHECK: %[[P:.+]] = tfm.masked_softmax %[[S]], mask %[[MASK]] mask_kind = additive : (tensor<1x2x2xf32>, tensor<2xf32>) -> tensor<1x2x2xf32>
// CHECK: tfm.matmul %[[P]], %[[X]]
// CHECK-LABEL: func.func @infer.sequence4
// CHECK-SAME: tensor<4xf32> {tfm.input_index = 1 : i64, tfm.name = "key_mask.sequence"}
module attributes {tfm.symbol_ranges = {sequence = array<i64: 1, 4>}} {
  func.func @infer.sequence2(%x: tensor<1x2x8xf32> {tfm.symbols = ["", "sequence", ""]}) -> tensor<1x2x8xf32> attributes {tfm.bucket_of = "infer"} {
    %s = tfm.matmul %x, %x transpose_rhs : (tensor<1x2x8xf32>, tensor<1x2x8xf32>) -> tensor<1x2x2xf32>
    %p = tfm.softmax %s : tensor<1x2x2xf32>
    %o = tfm.matmul %p, %x : (tensor<1x2x2xf32>, tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
    return %o : tensor<1x2x8xf32>
  }
  func.func @infer.sequence4(%x: tensor<1x4x8xf32> {tfm.symbols = ["", "sequence", ""]}) -> tensor<1x4x8xf32> attributes {tfm.bucket_of = "infer"} {
    %s = tfm.matmul %x, %x transpose_rhs : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x4xf32>
    %p = tfm.softmax %s : tensor<1x4x4xf32>
    %o = tfm.matmul %p, %x : (tensor<1x4x4xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
    return %o : tensor<1x4x8xf32>
  }
}

// -----

// Tests that a causal softmax over two axes of the symbol needs no key
// mask (a row below n reads no key from n on), that a boolean mask input is
// combined with the key mask where one is needed, and that buckets serving
// only their own size (1 and 2 of 1..4) are left as they are.
// CHECK: key_masks = [0], buckets = [@f.s1, @f.s2, @f.s4], bucket_sizes = [1, 2, 4]
// CHECK-LABEL: func.func @f.s1
// CHECK-NOT: tfm.select
// CHECK-LABEL: func.func @f.s4
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<1x4xi1> {tfm.symbols = ["", "s"]}, %[[KEYS:[a-z0-9]+]]: tensor<4xf32>
// CHECK: tfm.masked_softmax %{{.+}} causal
// CHECK: %[[NEG:.+]] = arith.constant dense<0xFF800000> : tensor<f32>
// CHECK: %[[B:.+]] = tfm.select %[[M]], %[[KEYS]], %[[NEG]]
// CHECK: tfm.masked_softmax %{{.+}}, mask %[[B]] mask_kind = additive
module attributes {tfm.symbol_ranges = {s = array<i64: 1, 4>}} {
  func.func @f.s1(%x: tensor<1x1x4xf32> {tfm.symbols = ["", "s", ""]}, %m: tensor<1x1xi1> {tfm.symbols = ["", "s"]}) -> tensor<1x1x1xf32> attributes {tfm.bucket_of = "f"} {
    %s = tfm.matmul %x, %x transpose_rhs : (tensor<1x1x4xf32>, tensor<1x1x4xf32>) -> tensor<1x1x1xf32>
    %c = tfm.masked_softmax %s causal : (tensor<1x1x1xf32>) -> tensor<1x1x1xf32>
    %p = tfm.masked_softmax %s, mask %m mask_kind = boolean : (tensor<1x1x1xf32>, tensor<1x1xi1>) -> tensor<1x1x1xf32>
    %o = tfm.add %c, %p : (tensor<1x1x1xf32>, tensor<1x1x1xf32>) -> tensor<1x1x1xf32>
    return %o : tensor<1x1x1xf32>
  }
  func.func @f.s2(%x: tensor<1x2x4xf32> {tfm.symbols = ["", "s", ""]}, %m: tensor<1x2xi1> {tfm.symbols = ["", "s"]}) -> tensor<1x2x2xf32> attributes {tfm.bucket_of = "f"} {
    %s = tfm.matmul %x, %x transpose_rhs : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x2xf32>
    %c = tfm.masked_softmax %s causal : (tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
    %p = tfm.masked_softmax %s, mask %m mask_kind = boolean : (tensor<1x2x2xf32>, tensor<1x2xi1>) -> tensor<1x2x2xf32>
    %o = tfm.add %c, %p : (tensor<1x2x2xf32>, tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
    return %o : tensor<1x2x2xf32>
  }
  func.func @f.s4(%x: tensor<1x4x4xf32> {tfm.symbols = ["", "s", ""]}, %m: tensor<1x4xi1> {tfm.symbols = ["", "s"]}) -> tensor<1x4x4xf32> attributes {tfm.bucket_of = "f"} {
    %s = tfm.matmul %x, %x transpose_rhs : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
    %c = tfm.masked_softmax %s causal : (tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
    %p = tfm.masked_softmax %s, mask %m mask_kind = boolean : (tensor<1x4x4xf32>, tensor<1x4xi1>) -> tensor<1x4x4xf32>
    %o = tfm.add %c, %p : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
    return %o : tensor<1x4x4xf32>
  }
}

// -----

// Tests that a sum over the sequence is exact where a mask input (zero on
// the padding) is multiplied in, that the first row may be read (every size
// has it), and that a causal-only model needs no key mask at all.
// CHECK: outputs = [array<i64: -1, -1>, array<i64: -1, -1>], key_masks = []
// CHECK-LABEL: func.func @g.s4
// CHECK-SAME: (%{{.+}}: tensor<2x4x3xf32> {tfm.symbols = ["", "s", ""]}, %{{.+}}: tensor<2x4x1xf32> {tfm.symbols = ["", "s", ""]}) -> (tensor<2x3xf32>, tensor<2x3xf32>)
module attributes {tfm.symbol_ranges = {s = array<i64: 3, 4>}} {
  func.func @g.s4(%x: tensor<2x4x3xf32> {tfm.symbols = ["", "s", ""]}, %m: tensor<2x4x1xf32> {tfm.symbols = ["", "s", ""]}) -> (tensor<2x3xf32>, tensor<2x3xf32>) attributes {tfm.bucket_of = "g"} {
    %one = arith.constant dense<1.0> : tensor<3xf32>
    %h = tfm.add %x, %one : (tensor<2x4x3xf32>, tensor<3xf32>) -> tensor<2x4x3xf32>
    %z = tfm.mul %h, %m : (tensor<2x4x3xf32>, tensor<2x4x1xf32>) -> tensor<2x4x3xf32>
    %sum = tfm.reduce sum %z axes = [1] : tensor<2x4x3xf32> -> tensor<2x3xf32>
    %first = tfm.slice %h starts = [0, 0, 0] sizes = [2, 1, 3] steps = [1, 1, 1] : tensor<2x4x3xf32> -> tensor<2x1x3xf32>
    %cls = tfm.reshape %first : tensor<2x1x3xf32> -> tensor<2x3xf32>
    return %sum, %cls : tensor<2x3xf32>, tensor<2x3xf32>
  }
}

// -----

// Tests that a mean over the sequence is refused at its location.
module attributes {tfm.symbol_ranges = {s = array<i64: 1, 4>}} {
  func.func @h.s4(%x: tensor<2x4x3xf32> {tfm.symbols = ["", "s", ""]}) -> tensor<2x3xf32> attributes {tfm.bucket_of = "h"} {
    // expected-error@+1 {{padding to a bucket is not exact here, so one artifact cannot serve a range of sizes: it reduces over 's'}}
    %m = tfm.reduce mean %x axes = [1] : tensor<2x4x3xf32> -> tensor<2x3xf32>
    return %m : tensor<2x3xf32>
  }
}

// -----

// Tests that the last row, which may be padding, is refused.
module attributes {tfm.symbol_ranges = {s = array<i64: 1, 4>}} {
  func.func @h.s4(%x: tensor<2x4x3xf32> {tfm.symbols = ["", "s", ""]}) -> tensor<2x1x3xf32> attributes {tfm.bucket_of = "h"} {
    // expected-error@+1 {{it slices 's' at positions that may lie in the padding}}
    %last = tfm.slice %x starts = [0, 3, 0] sizes = [2, 1, 3] steps = [1, 1, 1] : tensor<2x4x3xf32> -> tensor<2x1x3xf32>
    return %last : tensor<2x1x3xf32>
  }
}

// -----

// Tests that a product summing over the sequence with neither side zero on
// the padding (scores of inputs shifted off zero, with no softmax and its
// mask between) is refused.
module attributes {tfm.symbol_ranges = {s = array<i64: 1, 4>}} {
  func.func @h.s4(%x: tensor<1x4x3xf32> {tfm.symbols = ["", "s", ""]}) -> tensor<1x4x3xf32> attributes {tfm.bucket_of = "h"} {
    %one = arith.constant dense<1.0> : tensor<3xf32>
    %y = tfm.add %x, %one : (tensor<1x4x3xf32>, tensor<3xf32>) -> tensor<1x4x3xf32>
    %s = tfm.matmul %y, %y transpose_rhs : (tensor<1x4x3xf32>, tensor<1x4x3xf32>) -> tensor<1x4x4xf32>
    %e = tfm.relu %s : tensor<1x4x4xf32>
    // expected-error@+1 {{it sums over 's', and neither side is zero on the padding}}
    %o = tfm.matmul %e, %y : (tensor<1x4x4xf32>, tensor<1x4x3xf32>) -> tensor<1x4x3xf32>
    return %o : tensor<1x4x3xf32>
  }
}
