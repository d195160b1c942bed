// Tests the GPU's softmaxes of a warp per row (TfmToGPU/Normalization.cpp):
// one kernel per softmax over the last axis, a block of 8 warps, each
// warp's maximum and sum taken by two butterflies of xor shuffles. Run on
// the CPU through the emulation of the kernels (--gpu-schedule-on-cpu), the
// outputs must match the reference interpreter's on random inputs: a
// masked softmax with a scale, an additive mask broadcast over heads and
// rows, and the causal triangle (30 rows of 40, row i of each 5 x 40 matrix
// keeping columns 0 to i); one with a boolean mask broadcast over rows; a
// plain softmax of 7 rows of 33; a softmax over the first axis, which
// takes the neutral lowering instead; and the backward pass
// (tfm.softmax_grad, Σ dy · y then scale · y · (dy - Σ), one kernel) of the
// plain softmax and, scaled, of the masked one.
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg' | FileCheck %s --check-prefix=KERNEL
// RUN: rm -rf %t && tfmc run --reference %s --seed 7 --output-dir %t
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --test-data-dir %t --rtol 1e-5 --atol 1e-6 | FileCheck %s
// CHECK: all outputs match (rtol 1e-05, atol 1e-06)

// KERNEL-LABEL: func.func @__tfm_entry_infer
// KERNEL-COUNT-5: threads({{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c8{{.*}}, {{.*}} = %c1{{.*}})
// KERNEL-NOT: = %c8{{.*}}, {{.*}} = %c1{{.*}})
// KERNEL: return
func.func @infer(%s: tensor<2x3x5x40xf32> {tfm.name = "s"}, %add: tensor<2x1x1x40xf32> {tfm.name = "add"},
                 %u: tensor<2x6x40xf32> {tfm.name = "u"}, %x: tensor<7x33xf32> {tfm.name = "x"},
                 %z: tensor<4x3xf32> {tfm.name = "z"}, %dr: tensor<7x33xf32> {tfm.name = "dr"},
                 %dp: tensor<2x3x5x40xf32> {tfm.name = "dp"})
    -> (tensor<2x3x5x40xf32>, tensor<2x6x40xf32>, tensor<7x33xf32>, tensor<4x3xf32>,
        tensor<7x33xf32>, tensor<2x3x5x40xf32>) {
  %p = tfm.masked_softmax %s, mask %add mask_kind = additive causal {scale = 2.5e-01}
      : (tensor<2x3x5x40xf32>, tensor<2x1x1x40xf32>) -> tensor<2x3x5x40xf32>
  %keep = arith.constant dense<[[[false, true, true, true, true, false, true, true, true, true, false, true, true, true, true, false, true, true, true, true, false, true, true, true, true, false, true, true, true, true, false, true, true, true, true, false, true, true, true, true]], [[true, false, true, true, true, true, false, true, true, true, true, false, true, true, true, true, false, true, true, true, true, false, true, true, true, true, false, true, true, true, true, false, true, true, true, true, false, true, true, true]]]> : tensor<2x1x40xi1>
  %q = tfm.masked_softmax %u, mask %keep mask_kind = boolean
      : (tensor<2x6x40xf32>, tensor<2x1x40xi1>) -> tensor<2x6x40xf32>
  %r = tfm.softmax %x : tensor<7x33xf32>
  %w = tfm.softmax %z axis = 0 : tensor<4x3xf32>
  %gr = tfm.softmax_grad %r, %dr : tensor<7x33xf32>
  %gp = tfm.softmax_grad %p, %dp {scale = 2.5e-01} : tensor<2x3x5x40xf32>
  return %p, %q, %r, %w, %gr, %gp : tensor<2x3x5x40xf32>, tensor<2x6x40xf32>, tensor<7x33xf32>, tensor<4x3xf32>,
      tensor<7x33xf32>, tensor<2x3x5x40xf32>
}
