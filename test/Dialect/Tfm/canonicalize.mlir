// RUN: tfm-opt %s -canonicalize -split-input-file | FileCheck %s

// Tests that two transposes compose into one.
// CHECK-LABEL: func.func @transpose_of_transpose
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[T:.+]] = tfm.transpose %[[X]] permutation = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT: return %[[T]]
func.func @transpose_of_transpose(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = tfm.transpose %x permutation = [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %1 = tfm.transpose %0 permutation = [1, 2, 0] : tensor<3x4x2xf32> -> tensor<4x2x3xf32>
  return %1 : tensor<4x2x3xf32>
}

// -----

// Tests that a transpose and its inverse cancel.
// CHECK-LABEL: func.func @transpose_inverse
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @transpose_inverse(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = tfm.transpose %x permutation = [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %1 = tfm.transpose %0 permutation = [0, 2, 1] : tensor<2x4x3xf32> -> tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// -----

// Tests that the identity permutation folds away.
// CHECK-LABEL: func.func @transpose_identity
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @transpose_identity(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = tfm.transpose %x permutation = [0, 1] : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Tests that chained reshapes become one.
// CHECK-LABEL: func.func @reshape_of_reshape
// CHECK-SAME: (%[[X:.+]]: tensor<2x8x64xf32>)
// CHECK-NEXT: %[[R:.+]] = tfm.reshape %[[X]] : tensor<2x8x64xf32> -> tensor<16x64xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_of_reshape(%x: tensor<2x8x64xf32>) -> tensor<16x64xf32> {
  %0 = tfm.reshape %x : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  %1 = tfm.reshape %0 : tensor<2x8x4x16xf32> -> tensor<16x64xf32>
  return %1 : tensor<16x64xf32>
}

// -----

// Tests that a reshape back to the original type disappears.
// CHECK-LABEL: func.func @reshape_round_trip
// CHECK-SAME: (%[[X:.+]]: tensor<2x6xf32>)
// CHECK-NEXT: return %[[X]]
func.func @reshape_round_trip(%x: tensor<2x6xf32>) -> tensor<2x6xf32> {
  %0 = tfm.reshape %x : tensor<2x6xf32> -> tensor<12xf32>
  %1 = tfm.reshape %0 : tensor<12xf32> -> tensor<2x6xf32>
  return %1 : tensor<2x6xf32>
}

// -----

// Tests that adding a splat zero on either side folds, and that subtracting
// zero, multiplying by one and dividing by one fold too.
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.+]]: tensor<2x4xf32>)
// CHECK-NOT: tfm.
// CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @identities(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %zero = arith.constant dense<0.0> : tensor<4xf32>
  %one = arith.constant dense<1.0> : tensor<2x4xf32>
  %0 = tfm.add %x, %zero : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %1 = tfm.add %zero, %x : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %2 = tfm.sub %x, %zero : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %3 = tfm.mul %one, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %4 = tfm.div %x, %one : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0, %1, %2, %3, %4 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Tests that identities do not fold when broadcasting changes the shape, when
// the constant is not the identity, or when zero is subtracted from.
// CHECK-LABEL: func.func @not_identities
// CHECK: tfm.add
// CHECK: tfm.mul
// CHECK: tfm.sub
func.func @not_identities(%x: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %zero = arith.constant dense<0.0> : tensor<2x4xf32>
  %two = arith.constant dense<2.0> : tensor<4xf32>
  %0 = tfm.add %x, %zero : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %1 = tfm.mul %x, %two : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %z = arith.constant dense<0.0> : tensor<4xf32>
  %2 = tfm.sub %z, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2 : tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that relu of relu is one relu.
// CHECK-LABEL: func.func @relu_relu
// CHECK-COUNT-1: tfm.relu
// CHECK-NOT: tfm.relu
func.func @relu_relu(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = tfm.relu %x : tensor<4xf32>
  %1 = tfm.relu %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Tests that dropout outside training and at rate 0 folds away, and that
// training dropout stays, and so does one kept for a training step
// (trainable), which tfm-autodiff has not seen yet.
// CHECK-LABEL: func.func @dropout
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK: %[[D:.+]] = tfm.dropout %[[X]] training
// CHECK: %[[K:.+]] = tfm.dropout %[[X]] trainable
// CHECK: return %[[X]], %[[X]], %[[D]], %[[K]]
func.func @dropout(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = tfm.dropout %x {rate = 0.5 : f64} : tensor<4xf32>
  %1 = tfm.dropout %x training {rate = 0.0 : f64} : tensor<4xf32>
  %2 = tfm.dropout %x training {rate = 0.5 : f64} : tensor<4xf32>
  %3 = tfm.dropout %x trainable {rate = 0.5 : f64} : tensor<4xf32>
  return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that a concat of one input and a split into one part fold away.
// CHECK-LABEL: func.func @single_concat_split
// CHECK-SAME: (%[[X:.+]]: tensor<2x4xf32>)
// CHECK-NEXT: return %[[X]], %[[X]]
func.func @single_concat_split(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %0 = tfm.concat %x axis = 1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %1 = tfm.split %x axis = 1 sizes = [4] : tensor<2x4xf32> -> tensor<2x4xf32>
  return %0, %1 : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Tests that a ScatterND writing every element of the leading axes once, in
// order, is its updates (a fixed-size cache written whole), and that one
// writing them in another order is kept.
// CHECK-LABEL: func.func @scatter_nd_whole
// CHECK-SAME: (%[[DATA:.+]]: tensor<2x3x4xf32>, %[[NEW:.+]]: tensor<2x3x4xf32>)
// CHECK-NEXT: return %[[NEW]]
func.func @scatter_nd_whole(%data: tensor<2x3x4xf32>, %new: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %idx = arith.constant dense<[[[0, 0], [0, 1], [0, 2]], [[1, 0], [1, 1], [1, 2]]]> : tensor<2x3x2xi64>
  %r = tfm.scatter_nd %data, %idx, %new reduction = none : (tensor<2x3x4xf32>, tensor<2x3x2xi64>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %r : tensor<2x3x4xf32>
}
// CHECK-LABEL: func.func @scatter_nd_reordered
// CHECK: tfm.scatter_nd
func.func @scatter_nd_reordered(%data: tensor<2x3x4xf32>, %new: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %idx = arith.constant dense<[[[0, 0], [0, 2], [0, 1]], [[1, 0], [1, 1], [1, 2]]]> : tensor<2x3x2xi64>
  %r = tfm.scatter_nd %data, %idx, %new reduction = none : (tensor<2x3x4xf32>, tensor<2x3x2xi64>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %r : tensor<2x3x4xf32>
}

// -----

// Tests that a slice of a constant folds on its elements: row 1, columns 1
// and 3 of [[0, 1, 2, 3], [4, 5, 6, 7]].
// CHECK-LABEL: func.func @slice_of_constant
// CHECK-NEXT: %[[C:.+]] = arith.constant dense<{{\[}}[5.000000e+00, 7.000000e+00]]> : tensor<1x2xf32>
// CHECK-NEXT: return %[[C]]
func.func @slice_of_constant() -> tensor<1x2xf32> {
  %c = arith.constant dense<[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]> : tensor<2x4xf32>
  %0 = tfm.slice %c starts = [1, 1] sizes = [1, 2] steps = [1, 2] : tensor<2x4xf32> -> tensor<1x2xf32>
  return %0 : tensor<1x2xf32>
}

// -----

// Tests that a negative step reads backwards: indices 4, 2, 0.
// CHECK-LABEL: func.func @slice_of_constant_backwards
// CHECK-NEXT: %[[C:.+]] = arith.constant dense<[14, 12, 10]> : tensor<3xi64>
// CHECK-NEXT: return %[[C]]
func.func @slice_of_constant_backwards() -> tensor<3xi64> {
  %c = arith.constant dense<[10, 11, 12, 13, 14]> : tensor<5xi64>
  %0 = tfm.slice %c starts = [4] sizes = [3] steps = [-2] : tensor<5xi64> -> tensor<3xi64>
  return %0 : tensor<3xi64>
}

// -----

// Tests that a causal buffer of booleans (packed one bit each) slices to its
// first two rows.
// CHECK-LABEL: func.func @slice_of_boolean_constant
// CHECK-NEXT: %[[C:.+]] = arith.constant dense<{{\[}}[true, false, false], [true, true, false]]> : tensor<2x3xi1>
// CHECK-NEXT: return %[[C]]
func.func @slice_of_boolean_constant() -> tensor<2x3xi1> {
  %c = arith.constant dense<[[true, false, false], [true, true, false], [true, true, true]]> : tensor<3x3xi1>
  %0 = tfm.slice %c starts = [0, 0] sizes = [2, 3] steps = [1, 1] : tensor<3x3xi1> -> tensor<2x3xi1>
  return %0 : tensor<2x3xi1>
}

// -----

// Tests that a slice of a splat is a smaller splat.
// CHECK-LABEL: func.func @slice_of_splat
// CHECK-NEXT: %[[C:.+]] = arith.constant dense<2.000000e+00> : tensor<2x2xf32>
// CHECK-NEXT: return %[[C]]
func.func @slice_of_splat() -> tensor<2x2xf32> {
  %c = arith.constant dense<2.0> : tensor<4x4xf32>
  %0 = tfm.slice %c starts = [1, 2] sizes = [2, 2] steps = [1, 1] : tensor<4x4xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

// Tests that a gather of a constant at constant indices folds, a negative
// index counting from the end: columns 2 and 0 of [[1, 2, 3], [4, 5, 6]].
// CHECK-LABEL: func.func @gather_of_constant
// CHECK-NEXT: %[[C:.+]] = arith.constant dense<{{\[}}[3.000000e+00, 1.000000e+00], [6.000000e+00, 4.000000e+00]]> : tensor<2x2xf16>
// CHECK-NEXT: return %[[C]]
func.func @gather_of_constant() -> tensor<2x2xf16> {
  %c = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf16>
  %i = arith.constant dense<[-1, 0]> : tensor<2xi64>
  %0 = tfm.gather %c, %i axis = 1 : (tensor<2x3xf16>, tensor<2xi64>) -> tensor<2x2xf16>
  return %0 : tensor<2x2xf16>
}

// -----

// Tests that rows gathered by a 2-D index tensor keep the indices' shape.
// CHECK-LABEL: func.func @gather_rows_of_constant
// CHECK-NEXT: %[[C:.+]] = arith.constant dense<{{\[}}{{\[}}[5, 6], [1, 2]], {{\[}}[3, 4], [5, 6]]]> : tensor<2x2x2xi32>
// CHECK-NEXT: return %[[C]]
func.func @gather_rows_of_constant() -> tensor<2x2x2xi32> {
  %c = arith.constant dense<[[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi32>
  %i = arith.constant dense<[[2, 0], [1, 2]]> : tensor<2x2xi32>
  %0 = tfm.gather %c, %i axis = 0 : (tensor<3x2xi32>, tensor<2x2xi32>) -> tensor<2x2x2xi32>
  return %0 : tensor<2x2x2xi32>
}

// -----

// Tests that an index out of range is left for the run time to report.
// CHECK-LABEL: func.func @gather_out_of_range
// CHECK: tfm.gather
func.func @gather_out_of_range() -> tensor<1xf32> {
  %c = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %i = arith.constant dense<[2]> : tensor<1xi64>
  %0 = tfm.gather %c, %i axis = 0 : (tensor<2xf32>, tensor<1xi64>) -> tensor<1xf32>
  return %0 : tensor<1xf32>
}

// -----

// Tests that the gradients of three slices that split a packed projection
// (Q, K, V), each padded back with zeros, add up to one concatenation of
// the three, in any order of the additions and with the axis counted from
// either end.
// CHECK-LABEL: func.func @sum_of_disjoint_paddings
// CHECK-SAME: (%[[Q:.+]]: tensor<2x3x4xf32>, %[[K:.+]]: tensor<2x3x4xf32>, %[[V:.+]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[C:.+]] = tfm.concat %[[Q]], %[[K]], %[[V]] axis = 2
// CHECK-NEXT: return %[[C]]
func.func @sum_of_disjoint_paddings(%dq: tensor<2x3x4xf32>, %dk: tensor<2x3x4xf32>, %dv: tensor<2x3x4xf32>) -> tensor<2x3x12xf32> {
  %z8 = arith.constant dense<0.0> : tensor<2x3x8xf32>
  %z4 = arith.constant dense<0.0> : tensor<2x3x4xf32>
  %pq = tfm.concat %dq, %z8 axis = 2 : (tensor<2x3x4xf32>, tensor<2x3x8xf32>) -> tensor<2x3x12xf32>
  %pk = tfm.concat %z4, %dk, %z4 axis = 2 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x12xf32>
  %pv = tfm.concat %z8, %dv axis = -1 : (tensor<2x3x8xf32>, tensor<2x3x4xf32>) -> tensor<2x3x12xf32>
  %s = tfm.add %pv, %pk : (tensor<2x3x12xf32>, tensor<2x3x12xf32>) -> tensor<2x3x12xf32>
  %t = tfm.add %pq, %s : (tensor<2x3x12xf32>, tensor<2x3x12xf32>) -> tensor<2x3x12xf32>
  return %t : tensor<2x3x12xf32>
}

// -----

// Tests that a gap where both are zeros stays zeros, and that parts that
// meet (both add something there) are left to the addition.
// CHECK-LABEL: func.func @paddings_with_a_gap
// CHECK-SAME: (%[[A:.+]]: tensor<2x4xf32>, %[[B:.+]]: tensor<2x4xf32>, %[[W:.+]]: tensor<2x8xf32>)
// CHECK: %[[Z:.+]] = arith.constant dense<0.000000e+00> : tensor<2x4xf32>
// CHECK: %[[C:.+]] = tfm.concat %[[A]], %[[Z]], %[[B]] axis = 1
// CHECK: %[[M:.+]] = tfm.concat %[[W]], %[[Z]] axis = 1
// CHECK: tfm.add %[[C]], %[[M]]
func.func @paddings_with_a_gap(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>, %w: tensor<2x8xf32>) -> tensor<2x12xf32> {
  %z8 = arith.constant dense<0.0> : tensor<2x8xf32>
  %pa = tfm.concat %a, %z8 axis = 1 : (tensor<2x4xf32>, tensor<2x8xf32>) -> tensor<2x12xf32>
  %pb = tfm.concat %z8, %b axis = 1 : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x12xf32>
  %s = tfm.add %pa, %pb : (tensor<2x12xf32>, tensor<2x12xf32>) -> tensor<2x12xf32>
  %z4 = arith.constant dense<0.0> : tensor<2x4xf32>
  %pw = tfm.concat %w, %z4 axis = 1 : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x12xf32>
  %t = tfm.add %s, %pw : (tensor<2x12xf32>, tensor<2x12xf32>) -> tensor<2x12xf32>
  return %t : tensor<2x12xf32>
}
