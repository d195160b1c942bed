// Tests RMSNorm (tfm.layer_norm {rms}) in the GPU's kernels of a warp per
// row (TfmToGPU/Normalization.cpp): with the mean held at zero, the forward
// kernel makes one pass for the squares (writing the residual sum as it
// goes) and one butterfly of five xor shuffles, where layer norm makes two;
// the backward kernel sums two statistics (the squares and g·x̂), ten
// shuffles. Run on the CPU through the emulation of the kernels, its
// outputs must match the reference interpreter's on random inputs: 15 rows
// of 40 columns with the residual sum written, 6 rows of 96 normalized over
// two axes, and the backward pass of the first (r as the output's
// gradient).
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg' | FileCheck %s --check-prefix=KERNEL
// RUN: rm -rf %t && tfmc run --reference %s --seed 7 --output-dir %t
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --test-data-dir %t --rtol 1e-5 --atol 1e-5 | FileCheck %s
// CHECK: all outputs match (rtol 1e-05, atol 1e-05)

// KERNEL-LABEL: func.func @__tfm_entry_infer
// KERNEL: gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c8{{.*}}, {{.*}} = %c1{{.*}})
// KERNEL-COUNT-5: gpu.shuffle  xor
// KERNEL-NOT: gpu.shuffle
// KERNEL: gpu.terminator
// KERNEL: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c8{{.*}}, {{.*}} = %c1{{.*}})
// KERNEL-COUNT-5: gpu.shuffle  xor
// KERNEL-NOT: gpu.shuffle
// KERNEL: gpu.terminator
// KERNEL: gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c8{{.*}}, {{.*}} = %c1{{.*}})
// KERNEL-COUNT-10: gpu.shuffle  xor
// KERNEL-NOT: gpu.shuffle
// KERNEL: gpu.terminator

func.func @infer(%x: tensor<3x5x40xf32> {tfm.name = "x"}, %r: tensor<3x5x40xf32> {tfm.name = "r"},
                 %g: tensor<40xf32> {tfm.name = "g"},
                 %z: tensor<6x2x48xf32> {tfm.name = "z"}, %h: tensor<2x48xf32> {tfm.name = "h"})
    -> (tensor<3x5x40xf32>, tensor<3x5x40xf32>, tensor<6x2x48xf32>,
        tensor<3x5x40xf32>, tensor<40xf32>, tensor<40xf32>) {
  %y, %s = tfm.add_layer_norm %x, %r, %g {epsilon = 1.0e-05, rms}
      : (tensor<3x5x40xf32>, tensor<3x5x40xf32>, tensor<40xf32>)
      -> (tensor<3x5x40xf32>, tensor<3x5x40xf32>)
  %w = tfm.layer_norm %z, %h {axis = 1, epsilon = 1.0e-03, rms}
      : (tensor<6x2x48xf32>, tensor<2x48xf32>) -> tensor<6x2x48xf32>
  %dx, %dg, %db = tfm.layer_norm_grad %x, %g, %r {epsilon = 1.0e-05, rms}
      : (tensor<3x5x40xf32>, tensor<40xf32>, tensor<3x5x40xf32>)
      -> (tensor<3x5x40xf32>, tensor<40xf32>, tensor<40xf32>)
  return %y, %s, %w, %dx, %dg, %db : tensor<3x5x40xf32>, tensor<3x5x40xf32>, tensor<6x2x48xf32>,
      tensor<3x5x40xf32>, tensor<40xf32>, tensor<40xf32>
}
