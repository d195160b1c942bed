// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg' | FileCheck %s

// Tests that the updates of one step share their coefficients (Adam's
// step size and bias correction, computed from the step count): the first
// update computes them into the entry's scratch memory, once, and both
// updates read them there. On the GPU that is one small kernel per step
// rather than one per parameter.
// CHECK-LABEL: func.func @__tfm_entry_train_step
// CHECK: linalg.generic {{.+}} ins(%{{.+}} : memref<i64>) outs(%[[C:.+]] : memref<2xf32>)
// CHECK-NOT: outs(%{{[^)]+}} : memref<2xf32>)
// CHECK: ins(%{{.+}}, %[[C]], %[[C]] : memref<32xf32>, memref<2xf32>, memref<2xf32>)
// CHECK-NOT: outs(%{{[^)]+}} : memref<2xf32>)
// CHECK: ins(%{{.+}}, %[[C]], %[[C]] : memref<8xf32>, memref<2xf32>, memref<2xf32>)
func.func @train_step(%g: tensor<4x8xf32>, %h: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %w = tfm.parameter "w" {initial_value = dense<0.5> : tensor<4x8xf32>} : tensor<4x8xf32>
  %b = tfm.parameter "b" {initial_value = dense<0.25> : tensor<8xf32>} : tensor<8xf32>
  %t = tfm.next_step : tensor<i64>
  tfm.adam_update "w", %g, %t {lr = 1.0e-03} : tensor<4x8xf32>
  tfm.adam_update "b", %h, %t {lr = 1.0e-03} : tensor<8xf32>
  return %w, %b : tensor<4x8xf32>, tensor<8xf32>
}
