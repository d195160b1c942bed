// Tests the GPU's cross-entropy and its gradient of a warp per row
// (TfmToGPU/Loss.cpp): one kernel of 8 warps takes each row's maximum, sum
// of exponentials and sum of logits, and the gradient's writes each row in
// the same kernel. Run on the CPU through the emulation of the kernels
// (--gpu-schedule-on-cpu), the outputs must match the reference
// interpreter's on random logits: with random labels (i64) and label
// smoothing, and with constant labels (i32) of which three are ignored,
// rows that must give the loss nothing and a gradient of exactly 0. The
// loss's mean over the rows and the gradient's count of the labels that
// count take a kernel of one row each (each lane its rows, then the lanes
// added): 8 kernels of a warp per row, and 8 of one row, also over 70
// rows (lanes of three rows and of two) and 2100 (a wide row: the 8 warps
// of the block, added through shared memory).
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg' | FileCheck %s --check-prefix=KERNEL
// RUN: rm -rf %t && tfmc run --reference %s --seed 11 --output-dir %t
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --test-data-dir %t --rtol 1e-5 --atol 1e-6 | FileCheck %s
// CHECK: all outputs match (rtol 1e-05, atol 1e-06)

// KERNEL-LABEL: func.func @__tfm_entry_infer
// KERNEL-COUNT-16: threads({{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c8{{.*}}, {{.*}} = %c1{{.*}})
// KERNEL-NOT: gpu.launch
// KERNEL: return
func.func @infer(%logits: tensor<2x5x37xf32> {tfm.name = "logits"},
                 %labels: tensor<2x5xi64> {tfm.name = "labels"},
                 %g: tensor<f32> {tfm.name = "g"},
                 %logits3: tensor<70x3xf32> {tfm.name = "logits3"},
                 %labels3: tensor<70xi64> {tfm.name = "labels3"},
                 %logits4: tensor<2100x2xf32> {tfm.name = "logits4"},
                 %labels4: tensor<2100xi64> {tfm.name = "labels4"})
    -> (tensor<f32>, tensor<2x5x37xf32>, tensor<f32>, tensor<2x5x37xf32>,
        tensor<f32>, tensor<70x3xf32>, tensor<f32>, tensor<2100x2xf32>) {
  %l = tfm.cross_entropy %logits, %labels {label_smoothing = 1.0e-01}
      : (tensor<2x5x37xf32>, tensor<2x5xi64>) -> tensor<f32>
  %d = tfm.cross_entropy_grad %logits, %labels, %g {label_smoothing = 1.0e-01}
      : (tensor<2x5x37xf32>, tensor<2x5xi64>, tensor<f32>) -> tensor<2x5x37xf32>
  %fixed = arith.constant dense<[[3, -100, 36, 0, 17], [-100, 5, 5, -100, 20]]> : tensor<2x5xi32>
  %l2 = tfm.cross_entropy %logits, %fixed
      : (tensor<2x5x37xf32>, tensor<2x5xi32>) -> tensor<f32>
  %d2 = tfm.cross_entropy_grad %logits, %fixed, %g
      : (tensor<2x5x37xf32>, tensor<2x5xi32>, tensor<f32>) -> tensor<2x5x37xf32>
  %l3 = tfm.cross_entropy %logits3, %labels3
      : (tensor<70x3xf32>, tensor<70xi64>) -> tensor<f32>
  %d3 = tfm.cross_entropy_grad %logits3, %labels3, %g
      : (tensor<70x3xf32>, tensor<70xi64>, tensor<f32>) -> tensor<70x3xf32>
  %l4 = tfm.cross_entropy %logits4, %labels4
      : (tensor<2100x2xf32>, tensor<2100xi64>) -> tensor<f32>
  %d4 = tfm.cross_entropy_grad %logits4, %labels4, %g
      : (tensor<2100x2xf32>, tensor<2100xi64>, tensor<f32>) -> tensor<2100x2xf32>
  return %l, %d, %l2, %d2, %l3, %d3, %l4, %d4
      : tensor<f32>, tensor<2x5x37xf32>, tensor<f32>, tensor<2x5x37xf32>,
        tensor<f32>, tensor<70x3xf32>, tensor<f32>, tensor<2100x2xf32>
}
