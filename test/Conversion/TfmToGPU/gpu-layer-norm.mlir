// Tests the GPU's layer norm of a warp per row (TfmToGPU/Normalization.cpp):
// one kernel per (residual-added) layer norm, a block of 8 warps, each
// warp's statistics summed by two butterflies of xor shuffles. Run on the
// CPU through the emulation of the kernels (--gpu-schedule-on-cpu), its
// outputs must match the reference interpreter's on random inputs: 15 rows
// (the last block's spare warp recomputes row 14 without storing it) of 40
// columns (lanes 0 to 7 take two, the others one), with the residual sum
// written; 6 rows of 96 normalized over two axes, without a bias; a
// residual of one row broadcast to every row (a bias); position
// embeddings [5, 40] as the input, broadcast over the batch of the
// residual [3, 5, 40], as an exporter writes BERT's embeddings; and the
// backward pass of the first (r as the output's gradient), the input's
// gradient from four row statistics, 20 shuffles, in one kernel, the
// scale's and bias's as column sums.
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg' | FileCheck %s --check-prefix=KERNEL
// RUN: rm -rf %t && tfmc run --reference %s --seed 5 --output-dir %t
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --test-data-dir %t --rtol 1e-5 --atol 1e-5 | FileCheck %s
// CHECK: all outputs match (rtol 1e-05, atol 1e-05)

// KERNEL-LABEL: func.func @__tfm_entry_infer
// KERNEL: gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c8{{.*}}, {{.*}} = %c1{{.*}})
// KERNEL-COUNT-10: gpu.shuffle  xor
// KERNEL: gpu.terminator
// KERNEL: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c8{{.*}}, {{.*}} = %c1{{.*}})
// KERNEL-COUNT-10: gpu.shuffle  xor
// KERNEL: gpu.terminator
// KERNEL: gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c8{{.*}}, {{.*}} = %c1{{.*}})
// KERNEL-COUNT-10: gpu.shuffle  xor
// KERNEL: gpu.terminator
// KERNEL: gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c8{{.*}}, {{.*}} = %c1{{.*}})
// KERNEL-COUNT-10: gpu.shuffle  xor
// KERNEL: gpu.terminator
// KERNEL: gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c8{{.*}}, {{.*}} = %c1{{.*}})
// KERNEL-COUNT-20: gpu.shuffle  xor
// KERNEL-NOT: gpu.shuffle
// KERNEL: return
func.func @infer(%x: tensor<3x5x40xf32> {tfm.name = "x"}, %r: tensor<3x5x40xf32> {tfm.name = "r"},
                 %g: tensor<40xf32> {tfm.name = "g"}, %b: tensor<40xf32> {tfm.name = "b"},
                 %z: tensor<6x2x48xf32> {tfm.name = "z"}, %h: tensor<2x48xf32> {tfm.name = "h"},
                 %row: tensor<40xf32> {tfm.name = "row"}, %pe: tensor<5x40xf32> {tfm.name = "pe"})
    -> (tensor<3x5x40xf32>, tensor<3x5x40xf32>, tensor<6x2x48xf32>, tensor<3x5x40xf32>,
        tensor<3x5x40xf32>, tensor<3x5x40xf32>, tensor<40xf32>, tensor<40xf32>) {
  %y, %s = tfm.add_layer_norm %x, %r, %g, %b {epsilon = 1.0e-05}
      : (tensor<3x5x40xf32>, tensor<3x5x40xf32>, tensor<40xf32>, tensor<40xf32>)
      -> (tensor<3x5x40xf32>, tensor<3x5x40xf32>)
  %w = tfm.layer_norm %z, %h {axis = 1, epsilon = 1.0e-03}
      : (tensor<6x2x48xf32>, tensor<2x48xf32>) -> tensor<6x2x48xf32>
  %v = tfm.add_layer_norm %x, %row, %g, %b {epsilon = 1.0e-05}
      : (tensor<3x5x40xf32>, tensor<40xf32>, tensor<40xf32>, tensor<40xf32>)
      -> tensor<3x5x40xf32>
  %u = tfm.add_layer_norm %pe, %x, %g, %b {epsilon = 1.0e-05}
      : (tensor<5x40xf32>, tensor<3x5x40xf32>, tensor<40xf32>, tensor<40xf32>)
      -> tensor<3x5x40xf32>
  %dx, %dg, %db = tfm.layer_norm_grad %x, %g, %r {epsilon = 1.0e-05}
      : (tensor<3x5x40xf32>, tensor<40xf32>, tensor<3x5x40xf32>)
      -> (tensor<3x5x40xf32>, tensor<40xf32>, tensor<40xf32>)
  return %y, %s, %w, %v, %u, %dx, %dg, %db : tensor<3x5x40xf32>, tensor<3x5x40xf32>, tensor<6x2x48xf32>, tensor<3x5x40xf32>,
      tensor<3x5x40xf32>, tensor<3x5x40xf32>, tensor<40xf32>, tensor<40xf32>
}
