// Tests the GPU's row kernels on rows of 2048 columns or more (WarpRows.h):
// a block of 8 warps per row, each thread taking every 256th column, the
// warps' partials combined in shared memory between two barriers. Run on
// the CPU through the emulation of the kernels (--gpu-schedule-on-cpu), the
// outputs must match the reference interpreter's on random inputs: a
// softmax of 3 rows of 2100 (a last stride of 52 columns) and its gradient
// (tfm.softmax_grad), a causal masked
// softmax with an additive mask over 2048, cross-entropy and its gradient
// over a vocabulary of 2500 with a label left out, a layer norm with its
// residual and its backward pass over 2049, and a maximum and a sum over
// rows of 3000. Each of these fails it (tried): the warps' partials not
// combined, either barrier dropped, and a pass striding by a warp's 32
// columns or starting at the lane instead of the thread's column.
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg' | FileCheck %s --check-prefix=KERNEL
// RUN: rm -rf %t && tfmc run --reference %s --seed 13 --output-dir %t
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --test-data-dir %t --rtol 1e-5 --atol 1e-6 | FileCheck %s
// CHECK: all outputs match (rtol 1e-05, atol 1e-06)

// KERNEL-LABEL: func.func @__tfm_entry_infer
// KERNEL: gpu.launch blocks({{.*}}) in ({{.*}} = %c3{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c8{{.*}}, {{.*}} = %c1{{.*}}) workgroup(%{{.*}} : memref<8xf32, #gpu.address_space<workgroup>>)
// KERNEL: gpu.barrier
// KERNEL: gpu.barrier
func.func @infer(%x: tensor<3x2100xf32> {tfm.name = "x"},
                 %s: tensor<1x1x3x2048xf32> {tfm.name = "s"}, %add: tensor<1x1x1x2048xf32> {tfm.name = "add"},
                 %logits: tensor<2x3x2500xf32> {tfm.name = "logits"}, %g: tensor<f32> {tfm.name = "g"},
                 %h: tensor<3x2049xf32> {tfm.name = "h"}, %r: tensor<3x2049xf32> {tfm.name = "r"},
                 %gamma: tensor<2049xf32> {tfm.name = "gamma"}, %beta: tensor<2049xf32> {tfm.name = "beta"},
                 %z: tensor<2x3000xf32> {tfm.name = "z"}, %dp: tensor<3x2100xf32> {tfm.name = "dp"})
    -> (tensor<3x2100xf32>, tensor<3x2100xf32>, tensor<1x1x3x2048xf32>, tensor<f32>, tensor<2x3x2500xf32>,
        tensor<3x2049xf32>, tensor<3x2049xf32>, tensor<3x2049xf32>, tensor<2xf32>, tensor<2xf32>) {
  %p = tfm.softmax %x : tensor<3x2100xf32>
  %q = tfm.masked_softmax %s, mask %add mask_kind = additive causal {scale = 1.25e-01}
      : (tensor<1x1x3x2048xf32>, tensor<1x1x1x2048xf32>) -> tensor<1x1x3x2048xf32>
  %labels = arith.constant dense<[[3, -100, 2499], [0, 1250, 17]]> : tensor<2x3xi64>
  %l = tfm.cross_entropy %logits, %labels {label_smoothing = 1.0e-01}
      : (tensor<2x3x2500xf32>, tensor<2x3xi64>) -> tensor<f32>
  %d = tfm.cross_entropy_grad %logits, %labels, %g {label_smoothing = 1.0e-01}
      : (tensor<2x3x2500xf32>, tensor<2x3xi64>, tensor<f32>) -> tensor<2x3x2500xf32>
  %y, %sum = tfm.add_layer_norm %h, %r, %gamma, %beta {epsilon = 1.0e-05}
      : (tensor<3x2049xf32>, tensor<3x2049xf32>, tensor<2049xf32>, tensor<2049xf32>)
      -> (tensor<3x2049xf32>, tensor<3x2049xf32>)
  %dx, %dg, %db = tfm.layer_norm_grad %h, %gamma, %r {epsilon = 1.0e-05}
      : (tensor<3x2049xf32>, tensor<2049xf32>, tensor<3x2049xf32>)
      -> (tensor<3x2049xf32>, tensor<2049xf32>, tensor<2049xf32>)
  %max = tfm.reduce max %z axes = [1] : tensor<2x3000xf32> -> tensor<2xf32>
  %total = tfm.reduce sum %z axes = [1] : tensor<2x3000xf32> -> tensor<2xf32>
  %gp = tfm.softmax_grad %p, %dp : tensor<3x2100xf32>
  return %p, %gp, %q, %l, %d, %y, %sum, %dx, %max, %total : tensor<3x2100xf32>, tensor<3x2100xf32>, tensor<1x1x3x2048xf32>, tensor<f32>, tensor<2x3x2500xf32>,
      tensor<3x2049xf32>, tensor<3x2049xf32>, tensor<3x2049xf32>, tensor<2xf32>, tensor<2xf32>
}
