// RUN: tfm-opt %s --tfm-autodiff="optimizer=sgd lr=0.1" --canonicalize | FileCheck %s

// Tests that a dropout imported for training (trainable) draws in
// @train_step, from the step offset by the process's rank · 2^40 (every
// rank of a data-parallel run its own masks, rank 0 those of one
// process), and folds away in the forward function.
func.func @infer(%x: tensor<4x3xf32> {tfm.name = "x"}) -> (tensor<4x5xf32> {tfm.name = "logits"}) {
  %w = tfm.parameter "w" {initial_value = dense<0.1> : tensor<5x3xf32>} : tensor<5x3xf32>
  %d = tfm.dropout %x trainable {rate = 0.5 : f64} : tensor<4x3xf32>
  %y = tfm.linear %d, %w : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}

// CHECK-LABEL: func.func @infer
// CHECK-NOT:   tfm.dropout
// CHECK:       return
// CHECK-LABEL: func.func @train_step
// CHECK-DAG:   %[[STRIDE:.+]] = arith.constant dense<1099511627776> : tensor<i64>
// CHECK-DAG:   %[[STEP:.+]] = tfm.next_step : tensor<i64>
// CHECK-DAG:   %[[RANK:.+]] = tfm.process_rank : tensor<i64>
// CHECK:       %[[OFFSET:.+]] = tfm.mul %[[RANK]], %[[STRIDE]]
// CHECK:       %[[AT:.+]] = tfm.add %[[STEP]], %[[OFFSET]]
// CHECK:       tfm.dropout %arg0 training step %[[AT]] {rate = 5.000000e-01 : f64, seed = 1 : i64}
