// RUN: tfm-opt %s -cse -canonicalize | FileCheck %s

// Tests that a parameter read after an update of that parameter is not
// merged with the read before it: tfm.parameter reads the training state,
// which the update writes.
// CHECK-LABEL: func.func @read_update_read
// CHECK: %[[A:.+]] = tfm.parameter "w"
// CHECK: tfm.sgd_update "w"
// CHECK: %[[B:.+]] = tfm.parameter "w"
// CHECK: tfm.add %[[A]], %[[B]]
func.func @read_update_read(%g: tensor<4xf32>) -> tensor<4xf32> {
  %t = tfm.next_step : tensor<i64>
  %a = tfm.parameter "w" {initial_value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  tfm.sgd_update "w", %g, %t {lr = 1.0e-01 : f64} : tensor<4xf32>
  %b = tfm.parameter "w" {initial_value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %s = tfm.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// Tests that two reads with no update between them are one, and that an
// unused read is erased: reading has no effect of its own.
// CHECK-LABEL: func.func @reads_merge
// CHECK-COUNT-1: tfm.parameter "w"
// CHECK-NOT: tfm.parameter
func.func @reads_merge() -> tensor<4xf32> {
  %a = tfm.parameter "w" {initial_value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %b = tfm.parameter "w" {initial_value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %unused = tfm.parameter "v" {initial_value = dense<2.0> : tensor<4xf32>} : tensor<4xf32>
  %s = tfm.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// Tests that two cache updates are never merged or dropped: each writes the
// session's cache, even when its result is unused.
// CHECK-LABEL: func.func @cache_updates_stay
// CHECK-COUNT-2: tfm.cache_update "k"
func.func @cache_updates_stay(%k: tensor<1x1x4xf32>, %p: tensor<i64>) {
  %0 = tfm.cache_update "k", %k, %p {axis = 1 : i64} : (tensor<1x1x4xf32>, tensor<i64>) -> tensor<1x8x4xf32>
  %1 = tfm.cache_update "k", %k, %p {axis = 1 : i64} : (tensor<1x1x4xf32>, tensor<i64>) -> tensor<1x8x4xf32>
  return
}
