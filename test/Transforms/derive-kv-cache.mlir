// RUN: tfm-opt %s -split-input-file --tfm-derive-kv-cache=prefill-chunk=2 -verify-diagnostics | FileCheck %s

// Tests that a causal self-attention over a sequence of 4 becomes a chunk
// of 2 (@prefill) and of 1 (@decode_step) at a run-time position: K and V
// go through caches of the full length, the causal flag becomes the rows
// `position + i` of the triangle, and the position table is gathered at
// those rows. The forward function stays.
// CHECK-LABEL: func.func @infer
// CHECK-LABEL: func.func @prefill
// CHECK-SAME: (%[[IDS:.+]]: tensor<1x2xi64> {{{.*}}tfm.name = "ids"}, %[[POS:.+]]: tensor<i64> {{{.*}}tfm.name = "position"}) -> (tensor<1x2x5xf32> {tfm.name = "logits"})
// CHECK: %[[X:.+]] = tfm.embedding %{{.+}}, %[[IDS]] : (tensor<5x4xf32>, tensor<1x2xi64>) -> tensor<1x2x4xf32>
// CHECK: %[[IOTA:.+]] = arith.constant dense<[0, 1]> : tensor<2xi64>
// CHECK: %[[ROWS:.+]] = tfm.add %[[IOTA]], %[[POS]]
// CHECK: %[[PE:.+]] = tfm.gather %{{.+}}, %[[ROWS]] axis = 1 : (tensor<1x4x4xf32>, tensor<2xi64>) -> tensor<1x2x4xf32>
// CHECK: %[[H:.+]] = tfm.add %[[X]], %[[PE]]
// CHECK: %[[Q:.+]] = tfm.linear %[[H]]
// CHECK: %[[K:.+]] = tfm.linear %[[H]]
// CHECK: %[[V:.+]] = tfm.linear %[[H]]
// CHECK: %[[KC:.+]] = tfm.cache_update "attention0.keys", %[[K]], %[[POS]] {axis = 1 : i64} : (tensor<1x2x4xf32>, tensor<i64>) -> tensor<1x4x4xf32>
// CHECK: %[[S:.+]] = tfm.matmul %[[Q]], %[[KC]] transpose_rhs : (tensor<1x2x4xf32>, tensor<1x4x4xf32>) -> tensor<1x2x4xf32>
// CHECK: %[[TRI:.+]] = arith.constant dense<{{\[}}[0.000000e+00, 0xFF800000, 0xFF800000, 0xFF800000], [0.000000e+00, 0.000000e+00, 0xFF800000
// CHECK: %[[M:.+]] = tfm.gather %[[TRI]], %[[ROWS]] axis = 0 : (tensor<4x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
// CHECK: %[[P:.+]] = tfm.masked_softmax %[[S]], mask %[[M]] mask_kind = additive {scale = 5.000000e-01 : f64}
// CHECK: %[[VC:.+]] = tfm.cache_update "attention0.values", %[[V]], %[[POS]] {axis = 1 : i64} : (tensor<1x2x4xf32>, tensor<i64>) -> tensor<1x4x4xf32>
// CHECK: tfm.matmul %[[P]], %[[VC]] : (tensor<1x2x4xf32>, tensor<1x4x4xf32>) -> tensor<1x2x4xf32>
// CHECK-LABEL: func.func @decode_step
// CHECK-SAME: tensor<1x1xi64>
// CHECK: tfm.cache_update "attention0.keys", %{{.+}} : (tensor<1x1x4xf32>, tensor<i64>) -> tensor<1x4x4xf32>
// CHECK: tfm.cache_update "attention0.values", %{{.+}} : (tensor<1x1x4xf32>, tensor<i64>) -> tensor<1x4x4xf32>
// CHECK: return %{{.+}} : tensor<1x1x5xf32>
module {
  func.func @infer(%ids: tensor<1x4xi64> {tfm.name = "ids"}) -> (tensor<1x4x5xf32> {tfm.name = "logits"}) {
    %table = arith.constant dense<0.5> : tensor<5x4xf32>
    %pe = arith.constant dense<0.25> : tensor<1x4x4xf32>
    %w = arith.constant dense<0.125> : tensor<4x4xf32>
    %x = tfm.embedding %table, %ids : (tensor<5x4xf32>, tensor<1x4xi64>) -> tensor<1x4x4xf32>
    %h = tfm.add %x, %pe : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
    %q = tfm.linear %h, %w : (tensor<1x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4xf32>
    %k = tfm.linear %h, %w : (tensor<1x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4xf32>
    %v = tfm.linear %h, %w : (tensor<1x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4xf32>
    %s = tfm.matmul %q, %k transpose_rhs : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
    %p = tfm.masked_softmax %s causal {scale = 0.5 : f64} : (tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
    %o = tfm.matmul %p, %v : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
    %logits = tfm.linear %o, %table : (tensor<1x4x4xf32>, tensor<5x4xf32>) -> tensor<1x4x5xf32>
    return %logits : tensor<1x4x5xf32>
  }
}

// -----

// Tests that a mask the model computes from a parameter (a buffer of a model
// compiled for training) is taken for causal by its value, and read at the
// step's rows; a mask that lets a query see a later key is refused.
// CHECK-LABEL: func.func @decode_step
// CHECK: %[[ROWS:.+]] = tfm.add
// CHECK: %[[M:.+]] = tfm.gather %{{.+}}, %[[ROWS]] axis = 0 : (tensor<4x4xi1>, tensor<1xi64>) -> tensor<1x4xi1>
// CHECK: tfm.masked_softmax %{{.+}}, mask %[[M]] mask_kind = boolean
module {
  func.func @infer(%ids: tensor<1x4xi64>) -> tensor<1x4x5xf32> {
    %table = arith.constant dense<0.5> : tensor<5x4xf32>
    %tril = tfm.parameter "causal" {initial_value = dense<[[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]]> : tensor<4x4xf32>} : tensor<4x4xf32>
    %zero = arith.constant dense<0.0> : tensor<f32>
    %keep = tfm.compare ne, %tril, %zero : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
    %x = tfm.embedding %table, %ids : (tensor<5x4xf32>, tensor<1x4xi64>) -> tensor<1x4x4xf32>
    %s = tfm.matmul %x, %x transpose_rhs : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
    %p = tfm.masked_softmax %s, mask %keep mask_kind = boolean : (tensor<1x4x4xf32>, tensor<4x4xi1>) -> tensor<1x4x4xf32>
    %o = tfm.matmul %p, %x : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
    %logits = tfm.linear %o, %table : (tensor<1x4x4xf32>, tensor<5x4xf32>) -> tensor<1x4x5xf32>
    return %logits : tensor<1x4x5xf32>
  }
}

// -----

module {
  func.func @infer(%ids: tensor<1x4xi64>) -> tensor<1x4x5xf32> {
    %table = arith.constant dense<0.5> : tensor<5x4xf32>
    %band = tfm.parameter "band" {initial_value = dense<[[0.0, 0.0, -1.0e9, -1.0e9], [0.0, 0.0, 0.0, -1.0e9], [-1.0e9, 0.0, 0.0, 0.0], [-1.0e9, -1.0e9, 0.0, 0.0]]> : tensor<4x4xf32>} : tensor<4x4xf32>
    %x = tfm.embedding %table, %ids : (tensor<5x4xf32>, tensor<1x4xi64>) -> tensor<1x4x4xf32>
    %s = tfm.matmul %x, %x transpose_rhs : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
    // expected-error@+1 {{cannot derive a KV cache: the attention is not causal}}
    %p = tfm.masked_softmax %s, mask %band mask_kind = additive : (tensor<1x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4xf32>
    %o = tfm.matmul %p, %x : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
    %logits = tfm.linear %o, %table : (tensor<1x4x4xf32>, tensor<5x4xf32>) -> tensor<1x4x5xf32>
    return %logits : tensor<1x4x5xf32>
  }
}

// -----

// Tests that attention without a causal mask is refused: a token would see
// positions the cache does not hold yet.
module {
  func.func @infer(%ids: tensor<1x4xi64>) -> tensor<1x4x5xf32> {
    %table = arith.constant dense<0.5> : tensor<5x4xf32>
    %x = tfm.embedding %table, %ids : (tensor<5x4xf32>, tensor<1x4xi64>) -> tensor<1x4x4xf32>
    %s = tfm.matmul %x, %x transpose_rhs : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
    // expected-error@+1 {{cannot derive a KV cache: an attention has no causal mask}}
    %p = tfm.softmax %s : tensor<1x4x4xf32>
    %o = tfm.matmul %p, %x : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
    %logits = tfm.linear %o, %table : (tensor<1x4x4xf32>, tensor<5x4xf32>) -> tensor<1x4x5xf32>
    return %logits : tensor<1x4x5xf32>
  }
}

// -----

// Tests that a reduction over the sequence (mean pooling) is refused at
// its location.
module {
  func.func @infer(%ids: tensor<1x4xi64>) -> tensor<1x4x4xf32> {
    %table = arith.constant dense<0.5> : tensor<5x4xf32>
    %x = tfm.embedding %table, %ids : (tensor<5x4xf32>, tensor<1x4xi64>) -> tensor<1x4x4xf32>
    // expected-error@+1 {{cannot derive a KV cache: it reduces over the sequence}}
    %m = tfm.reduce mean %x axes = [1] keepdims : tensor<1x4x4xf32> -> tensor<1x1x4xf32>
    %y = tfm.add %x, %m : (tensor<1x4x4xf32>, tensor<1x1x4xf32>) -> tensor<1x4x4xf32>
    return %y : tensor<1x4x4xf32>
  }
}

// -----

// Tests that a model with more inputs than a source and the token ids is
// refused.
module {
  // expected-error@+1 {{but it has 3 inputs that are neither empty nor masks}}
  func.func @infer(%src: tensor<1x4xi64>, %ids: tensor<1x4xi64>, %mask: tensor<1x4xi64>) -> tensor<1x4xi64> {
    return %ids : tensor<1x4xi64>
  }
}

// -----

// Tests that a model without attention has nothing to cache.
module {
  // expected-error@+1 {{found no causal self-attention}}
  func.func @infer(%ids: tensor<1x4xi64>) -> tensor<1x4x4xf32> {
    %table = arith.constant dense<0.5> : tensor<5x4xf32>
    %x = tfm.embedding %table, %ids : (tensor<5x4xf32>, tensor<1x4xi64>) -> tensor<1x4x4xf32>
    return %x : tensor<1x4x4xf32>
  }
}
