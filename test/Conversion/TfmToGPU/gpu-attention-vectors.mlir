// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg' | FileCheck %s --check-prefix=KERNEL
// RUN: rm -rf %t && tfmc run --reference %s --seed 13 --output-dir %t
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --test-data-dir %t --rtol 1e-5 --atol 1e-6 | FileCheck %s

// Tests the f32 attention of a warp per query row on heads whose width is
// a multiple of 64: each lane takes consecutive columns of a row (2 of a
// head of 64, 4 of a value row of 128) and reads and writes them as
// vectors, here of entry arguments and arena buffers aligned to 64 bytes;
// keys of 64 with values of 128, causal with a boolean key mask, and heads
// split from [S, B, H, D] tensors by transposes, whose strides keep the
// alignment. Run through the emulation against the reference interpreter.
// CHECK: all outputs match (rtol 1e-05, atol 1e-06)

// KERNEL-LABEL: func.func @__tfm_entry_infer
// KERNEL: gpu.launch
// KERNEL: vector.load %{{.+}} {tfm.alignment = 8 : i64} : memref<2x3x7x64xf32>, vector<2xf32>
// KERNEL: vector.load %{{.+}} {tfm.alignment = 8 : i64} : memref<2x3x9x64xf32>, vector<2xf32>
// KERNEL: vector.load %{{.+}} {tfm.alignment = 16 : i64} : memref<2x3x9x128xf32>, vector<4xf32>
// KERNEL: vector.store %{{.+}} {tfm.alignment = 16 : i64} : memref<2x3x7x128xf32, strided<[2688, 896, 128, 1]>>, vector<4xf32>
// KERNEL: gpu.launch
// KERNEL: vector.load %{{.+}} {tfm.alignment = 16 : i64} : memref<2x4x5x128xf32, strided<[512, 128, 1024, 1]>>, vector<4xf32>
func.func @infer(%q: tensor<2x3x7x64xf32> {tfm.name = "q"},
                 %k: tensor<2x3x9x64xf32> {tfm.name = "k"},
                 %v: tensor<2x3x9x128xf32> {tfm.name = "v"},
                 %m: tensor<2x1x1x9xi1> {tfm.name = "m"},
                 %x: tensor<5x2x4x128xf32> {tfm.name = "x"})
    -> (tensor<2x3x7x128xf32>, tensor<5x2x4x128xf32>) {
  %o = tfm.attention %q, %k, %v, mask %m causal
      : (tensor<2x3x7x64xf32>, tensor<2x3x9x64xf32>, tensor<2x3x9x128xf32>, tensor<2x1x1x9xi1>) -> tensor<2x3x7x128xf32>
  %h = tfm.transpose %x permutation = [1, 2, 0, 3] : tensor<5x2x4x128xf32> -> tensor<2x4x5x128xf32>
  %a = tfm.attention %h, %h, %h : (tensor<2x4x5x128xf32>, tensor<2x4x5x128xf32>, tensor<2x4x5x128xf32>) -> tensor<2x4x5x128xf32>
  %b = tfm.transpose %a permutation = [2, 0, 1, 3] : tensor<2x4x5x128xf32> -> tensor<5x2x4x128xf32>
  return %o, %b : tensor<2x3x7x128xf32>, tensor<5x2x4x128xf32>
}
