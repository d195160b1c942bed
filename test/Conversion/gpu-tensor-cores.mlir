// RUN: tfm-opt %s '--tfm-gpu-pipeline=compute-type=f16 stage=linalg' | FileCheck %s --check-prefix=LINALG
// RUN: tfm-opt %s '--tfm-gpu-pipeline=compute-type=f16 gpu-arch=sm_90' | FileCheck %s --check-prefix=F16
// RUN: tfm-opt %s '--tfm-gpu-pipeline=gpu-arch=sm_90' > %t.f32.mlir
// RUN: FileCheck %s --check-prefix=F32 < %t.f32.mlir
// RUN: not grep -q mma.sync %t.f32.mlir
// RUN: tfm-opt %s '--tfm-gpu-pipeline=compute-type=bf16 stage=linalg' | FileCheck %s --check-prefix=LINALG-BF16
// RUN: tfm-opt %s '--tfm-gpu-pipeline=compute-type=bf16 gpu-arch=sm_80' > %t.bf16.mlir
// RUN: FileCheck %s --check-prefix=BF16 < %t.bf16.mlir
// RUN: not grep -q "mma.sync.aligned.m16n8k16.row.col.f32.f16" %t.bf16.mlir

// Tests the GEMMs of the CUDA target. Two linear layers on one input (which
// tfm-fuse-qkv packs into one projection of two parts) and a batched matmul
// with the transposed right operand of attention's scores: with
// compute-type=f16 or bf16 their operands are rounded into scratch copies
// of that type and multiplied on tensor cores (mma.sync m16n8k16, f32
// accumulators), and with f32 each thread's register tile multiplies with
// fused multiply-adds. The constant weights are rounded at compile time
// instead, each part's rows of the packed weight on their own: the copies
// join the weights after the f32 constants (8448 bytes), and the entry's
// weights argument grows by them. Rounding is to nearest even, as
// arith.truncf rounds at run time: 0.1 is 0x3DCD in bf16 (toward zero
// would give 0x3DCC, 9.960940e-02), and 1.00390625, a tie, is 0x3F80
// (away from zero would give 0x3F81, 1.007810e+00).

// LINALG: tfm.weights = [{{.*}}, dense<9.997550e-02> : tensor<48x32xf16>, dense<1.003910e+00> : tensor<16x32xf16>]
// LINALG: func.func @__tfm_entry_infer({{.*}}%arg2: memref<12544xi8>
// LINALG: arith.truncf %{{.+}} : f32 to f16
// LINALG: memref.view %arg2[%c8448][] : memref<12544xi8> to memref<48x32xf16>
// LINALG: arith.extf %{{.+}} : f16 to f32
// LINALG: arith.extf %{{.+}} : f16 to f32
// LINALG: arith.truncf %{{.+}} : f32 to f16
// LINALG: memref.view %arg2[%c11520][] : memref<12544xi8> to memref<16x32xf16>
// LINALG-COUNT-2: arith.truncf %{{.+}} : f32 to f16
// LINALG-NOT: arith.truncf

// F16: tfm.device_code = "{{.*}}.target sm_90
// F16-SAME: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32

// F32: tfm.device_code = "{{.*}}.target sm_90
// F32-SAME: fma.rn.f32
// F32: llvm.func @__tfm_entry_infer

// LINALG-BF16: tfm.weights = [{{.*}}, dense<1.000980e-01> : tensor<48x32xbf16>, dense<1.000000e+00> : tensor<16x32xbf16>]
// LINALG-BF16: arith.truncf %{{.+}} : f32 to bf16
// LINALG-BF16: memref.view %arg2[%c8448][] : memref<12544xi8> to memref<48x32xbf16>
// LINALG-BF16: arith.extf %{{.+}} : bf16 to f32
// LINALG-BF16: arith.extf %{{.+}} : bf16 to f32
// LINALG-BF16: arith.truncf %{{.+}} : f32 to bf16
// LINALG-BF16: memref.view %arg2[%c11520][] : memref<12544xi8> to memref<16x32xbf16>
// LINALG-BF16-COUNT-2: arith.truncf %{{.+}} : f32 to bf16
// LINALG-BF16-NOT: arith.truncf

// BF16: tfm.device_code = "{{.*}}.target sm_80
// BF16-SAME: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32

func.func @infer(%x: tensor<64x32xf32> {tfm.name = "x"},
                 %q: tensor<2x4x32x16xf32> {tfm.name = "q"})
    -> (tensor<64x48xf32>, tensor<2x4x32x32xf32>, tensor<64x16xf32>) {
  %w = arith.constant dense<0.1> : tensor<48x32xf32>
  %b = arith.constant dense<0.5> : tensor<48xf32>
  %y = tfm.linear %x, %w, %b : (tensor<64x32xf32>, tensor<48x32xf32>, tensor<48xf32>) -> tensor<64x48xf32>
  %s = tfm.matmul %q, %q transpose_rhs : (tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>) -> tensor<2x4x32x32xf32>
  %w2 = arith.constant dense<1.00390625> : tensor<16x32xf32>
  %z = tfm.linear %x, %w2 : (tensor<64x32xf32>, tensor<16x32xf32>) -> tensor<64x16xf32>
  return %y, %s, %z : tensor<64x48xf32>, tensor<2x4x32x32xf32>, tensor<64x16xf32>
}
