// Tests the GPU's reductions over the last axes of a warp per row
// (TfmToGPU/Reduction.cpp): a kernel of 8 warps each, the row's value
// combined by a butterfly of xor shuffles; and those over the first axes of
// a block per 32 columns, whose 16 row groups' partials meet in shared
// memory behind a barrier. Run on the CPU through the
// emulation of the kernels (--gpu-schedule-on-cpu), the outputs must match
// the reference interpreter's on random inputs: a sum over the last axis
// kept as a dimension, as a hand-written softmax backward takes it; a mean over
// the last two axes; a maximum and a minimum over rows of 33 (a last block
// with spare warps); a bias gradient's sum over the first two axes of
// [4, 40, 72] (a last block of 8 columns), a mean over the 33 rows of
// [33, 50], and a maximum over the 64 rows of [64, 40] kept as a
// dimension. A sum over rows of 8 (shorter than a warp) and a maximum over
// the 7 rows of the first axis take the neutral lowering, whose fills
// tfm-fold-fills-into-reductions folds into the reductions; the maximum
// and the minimum over the first axis of values all below -9 (or above 9)
// fail if the reduction starts from anything but the fill's -inf (+inf),
// such as a buffer's stale contents (tried: the fold without its select).
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg' | FileCheck %s --check-prefix=KERNEL
// RUN: rm -rf %t && tfmc run --reference %s --seed 5 --output-dir %t
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --test-data-dir %t --rtol 1e-5 --atol 1e-6 | FileCheck %s
// CHECK: all outputs match (rtol 1e-05, atol 1e-06)

// KERNEL-LABEL: func.func @__tfm_entry_infer
// KERNEL-COUNT-4: threads({{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c8{{.*}}, {{.*}} = %c1{{.*}})
// KERNEL-NOT: = %c8{{.*}}, {{.*}} = %c1{{.*}})
// KERNEL-COUNT-3: threads({{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c16{{.*}}, {{.*}} = %c1{{.*}}) workgroup({{.*}} : memref<16x32xf32, #gpu.address_space<workgroup>>)
// KERNEL: return
func.func @infer(%y: tensor<6x3x40xf32> {tfm.name = "y"}, %dy: tensor<6x3x40xf32> {tfm.name = "dy"},
                 %x: tensor<4x5x8xf32> {tfm.name = "x"}, %z: tensor<7x33xf32> {tfm.name = "z"},
                 %g: tensor<4x40x72xf32> {tfm.name = "g"}, %u: tensor<33x50xf32> {tfm.name = "u"},
                 %v: tensor<64x40xf32> {tfm.name = "v"})
    -> (tensor<6x3x40xf32>, tensor<4xf32>, tensor<7xf32>, tensor<7x1xf32>, tensor<4x5x1xf32>, tensor<33xf32>,
        tensor<72xf32>, tensor<50xf32>, tensor<1x40xf32>, tensor<33xf32>, tensor<33xf32>) {
  %p = tfm.mul %dy, %y : (tensor<6x3x40xf32>, tensor<6x3x40xf32>) -> tensor<6x3x40xf32>
  %dot = tfm.reduce sum %p axes = [-1] keepdims : tensor<6x3x40xf32> -> tensor<6x3x1xf32>
  %d = tfm.sub %dy, %dot : (tensor<6x3x40xf32>, tensor<6x3x1xf32>) -> tensor<6x3x40xf32>
  %grad = tfm.mul %y, %d : (tensor<6x3x40xf32>, tensor<6x3x40xf32>) -> tensor<6x3x40xf32>
  %mean = tfm.reduce mean %x axes = [1, 2] : tensor<4x5x8xf32> -> tensor<4xf32>
  %max = tfm.reduce max %z axes = [1] : tensor<7x33xf32> -> tensor<7xf32>
  %min = tfm.reduce min %z axes = [-1] keepdims : tensor<7x33xf32> -> tensor<7x1xf32>
  %short = tfm.reduce sum %x axes = [2] keepdims : tensor<4x5x8xf32> -> tensor<4x5x1xf32>
  %first = tfm.reduce max %z axes = [0] : tensor<7x33xf32> -> tensor<33xf32>
  %bias = tfm.reduce sum %g axes = [0, 1] : tensor<4x40x72xf32> -> tensor<72xf32>
  %colmean = tfm.reduce mean %u axes = [0] : tensor<33x50xf32> -> tensor<50xf32>
  %colmax = tfm.reduce max %v axes = [0] keepdims : tensor<64x40xf32> -> tensor<1x40xf32>
  %ten = arith.constant dense<10.0> : tensor<f32>
  %below = tfm.sub %z, %ten : (tensor<7x33xf32>, tensor<f32>) -> tensor<7x33xf32>
  %above = tfm.add %z, %ten : (tensor<7x33xf32>, tensor<f32>) -> tensor<7x33xf32>
  %firstNeg = tfm.reduce max %below axes = [0] : tensor<7x33xf32> -> tensor<33xf32>
  %firstPos = tfm.reduce min %above axes = [0] : tensor<7x33xf32> -> tensor<33xf32>
  return %grad, %mean, %max, %min, %short, %first, %bias, %colmean, %colmax, %firstNeg, %firstPos
      : tensor<6x3x40xf32>, tensor<4xf32>, tensor<7xf32>, tensor<7x1xf32>, tensor<4x5x1xf32>, tensor<33xf32>,
        tensor<72xf32>, tensor<50xf32>, tensor<1x40xf32>, tensor<33xf32>, tensor<33xf32>
}
