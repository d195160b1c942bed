// Tests tfm.softmax_grad, the gradient rules' closed form of a softmax's
// backward pass: the op prints as it parses, and compiled for the CPU (the
// neutral lowering: the row sums into a temporary, then one elementwise
// pass) and, through the emulation, for the GPU, it matches the reference
// interpreter on random inputs, along the last axis (scaled, as a masked
// softmax's) and along the first (which the GPU takes by loops too).
// RUN: tfm-opt %s | FileCheck %s --check-prefix=PRINT
// RUN: rm -rf %t && tfmc run --reference %s --seed 3 --output-dir %t
// RUN: tfmc run %s --test-data-dir %t --rtol 1e-5 --atol 1e-6 | FileCheck %s
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --test-data-dir %t --rtol 1e-5 --atol 1e-6 | FileCheck %s
// CHECK: all outputs match (rtol 1e-05, atol 1e-06)

// PRINT: tfm.softmax_grad %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64} : tensor<2x5x24xf32>
// PRINT: tfm.softmax_grad %{{.*}}, %{{.*}} axis = 0 : tensor<6x7xf32>
func.func @infer(%s: tensor<2x5x24xf32> {tfm.name = "s"}, %ds: tensor<2x5x24xf32> {tfm.name = "ds"},
                 %t: tensor<6x7xf32> {tfm.name = "t"}, %dt: tensor<6x7xf32> {tfm.name = "dt"})
    -> (tensor<2x5x24xf32>, tensor<6x7xf32>) {
  %p = tfm.softmax %s : tensor<2x5x24xf32>
  %gp = tfm.softmax_grad %p, %ds {scale = 1.25e-01} : tensor<2x5x24xf32>
  %q = tfm.softmax %t axis = 0 : tensor<6x7xf32>
  %gq = tfm.softmax_grad %q, %dt axis = 0 : tensor<6x7xf32>
  return %gp, %gq : tensor<2x5x24xf32>, tensor<6x7xf32>
}
