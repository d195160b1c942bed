// RUN: tfm-opt %s '--tfm-gpu-pipeline=compute-type=f16 stage=linalg' | FileCheck %s --check-prefix=LINALG
// RUN: tfm-opt %s '--tfm-gpu-pipeline=compute-type=f16 gpu-arch=sm_90' | FileCheck %s --check-prefix=F16
// RUN: tfm-opt %s '--tfm-gpu-pipeline=gpu-arch=sm_90' > %t.f32.mlir
// RUN: FileCheck %s --check-prefix=F32 < %t.f32.mlir
// RUN: not grep -q mma.sync %t.f32.mlir
// RUN: tfm-opt %s '--tfm-gpu-pipeline=compute-type=bf16 stage=linalg' | FileCheck %s --check-prefix=LINALG-BF16
// RUN: tfm-opt %s '--tfm-gpu-pipeline=compute-type=bf16 gpu-arch=sm_80' > %t.bf16.mlir
// RUN: FileCheck %s --check-prefix=BF16 < %t.bf16.mlir
// RUN: not grep -q "mma.sync.aligned.m16n8k16.row.col.f32.f16" %t.bf16.mlir

// Tests the GEMMs of the CUDA target. A linear layer and a batched matmul
// with the transposed right operand of attention's scores: with
// compute-type=f16 or bf16 their operands are rounded into scratch copies
// of that type and multiplied on tensor cores (mma.sync m16n8k16, f32
// accumulators), and with f32 each thread's register tile multiplies with
// fused multiply-adds. The linear layer's constant weight is rounded at
// compile time: its copy joins the weights, and the entry's weights
// argument grows by it (6336 bytes of f32 constants, then 48x32 halves).
// 0.1 rounds to nearest even, as arith.truncf does at run time: 0x3DCD in
// bf16 (toward zero would give 0x3DCC, 9.960940e-02).

// LINALG: tfm.weights = [{{.*}}, dense<9.997550e-02> : tensor<48x32xf16>]
// LINALG: func.func @__tfm_entry_infer({{.*}}%arg2: memref<9408xi8>
// LINALG: arith.truncf %{{.+}} : f32 to f16
// LINALG: memref.view %arg2[%c6336][] : memref<9408xi8> to memref<48x32xf16>
// LINALG: arith.extf %{{.+}} : f16 to f32
// LINALG: arith.extf %{{.+}} : f16 to f32
// LINALG-COUNT-2: arith.truncf %{{.+}} : f32 to f16
// LINALG-NOT: arith.truncf

// F16: tfm.device_code = "{{.*}}.target sm_90
// F16-SAME: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32

// F32: tfm.device_code = "{{.*}}.target sm_90
// F32-SAME: fma.rn.f32
// F32: llvm.func @__tfm_entry_infer

// LINALG-BF16: tfm.weights = [{{.*}}, dense<1.000980e-01> : tensor<48x32xbf16>]
// LINALG-BF16: arith.truncf %{{.+}} : f32 to bf16
// LINALG-BF16: memref.view %arg2[%c6336][] : memref<9408xi8> to memref<48x32xbf16>
// LINALG-BF16: arith.extf %{{.+}} : bf16 to f32
// LINALG-BF16: arith.extf %{{.+}} : bf16 to f32
// LINALG-BF16-COUNT-2: arith.truncf %{{.+}} : f32 to bf16
// LINALG-BF16-NOT: arith.truncf

// BF16: tfm.device_code = "{{.*}}.target sm_80
// BF16-SAME: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32

func.func @infer(%x: tensor<64x32xf32> {tfm.name = "x"},
                 %q: tensor<2x4x32x16xf32> {tfm.name = "q"})
    -> (tensor<64x48xf32>, tensor<2x4x32x32xf32>) {
  %w = arith.constant dense<0.1> : tensor<48x32xf32>
  %b = arith.constant dense<0.5> : tensor<48xf32>
  %y = tfm.linear %x, %w, %b : (tensor<64x32xf32>, tensor<48x32xf32>, tensor<48xf32>) -> tensor<64x48xf32>
  %s = tfm.matmul %q, %q transpose_rhs : (tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>) -> tensor<2x4x32x32xf32>
  return %y, %s : tensor<64x48xf32>, tensor<2x4x32x32xf32>
}
