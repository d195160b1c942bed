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
// of that type, which the library calls and their fallbacks read, and
// multiplied on tensor cores (mma.sync m16n8k16, f32 accumulators); with
// f32 each thread's register tile multiplies with fused multiply-adds. An
// op's operand is rounded once: x for both parts, q for both sides of
// q·qᵀ. The packed weight, which only the GEMMs read, is rounded at compile
// time and stored so alone (64 × 32 × 2 bytes, then the f32 bias: 4352
// bytes in all, where the f32 weight and its copy took 12544). Rounding is
// to nearest even, as arith.truncf rounds at run time: 0.1 is 0x3DCD in
// bf16 (toward zero would give 0x3DCC) and 0x2E66 in f16, and 1.00390625,
// a tie in bf16, is 0x3F80 (away from zero would give 0x3F81), exact in
// f16 (0x3C04); the patterns print little-endian.

// LINALG: tfm.weights = [dense<"0x{{(662E)+(043C)+}}"> : tensor<64x32xf16>, dense<{{.+}}> : tensor<64xf32>]
// LINALG: func.func @__tfm_entry_infer({{.*}}%arg2: memref<4352xi8>
// LINALG: memref.view %arg2[%c0][] : memref<4352xi8> to memref<64x32xf16>
// LINALG: arith.truncf %{{.+}} : f32 to f16
// LINALG: tfm.kernel_call %arg0, <kind = linear, dtype = f16, params = [64, 32, 48, {{.*}}]>({{.*}}) {{.*}} : !llvm.ptr, memref<64x32xf16>, memref<64x32xf16>, memref<64xf32>, memref<64x48xf32>
// LINALG-COUNT-2: arith.extf %{{.+}} : f16 to f32
// LINALG-NOT: arith.truncf
// LINALG: tfm.kernel_call %arg0, <kind = linear, dtype = f16, params = [64, 32, 16, {{.*}}]>({{.*}}) {fallback, offsets = array<i64: 0, 1536, 48, 0>
// LINALG-COUNT-2: arith.extf %{{.+}} : f16 to f32
// LINALG: arith.truncf %{{.+}} : f32 to f16
// LINALG: tfm.kernel_call %arg0, <kind = batch_matmul, dtype = f16, {{.*}}>(%[[Q16:.+]], %[[Q16]], %{{.+}})
// LINALG-NOT: arith.truncf

// F16: tfm.device_code = "{{.*}}.target sm_90
// F16-SAME: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32

// F32: tfm.device_code = "{{.*}}.target sm_90
// F32-SAME: fma.rn.f32
// F32: llvm.func @__tfm_entry_infer

// LINALG-BF16: tfm.weights = [dense<"0x{{(CD3D)+(803F)+}}"> : tensor<64x32xbf16>, dense<{{.+}}> : tensor<64xf32>]
// LINALG-BF16: memref.view %arg2[%c0][] : memref<4352xi8> to memref<64x32xbf16>
// LINALG-BF16: arith.truncf %{{.+}} : f32 to bf16
// LINALG-BF16: tfm.kernel_call %arg0, <kind = linear, dtype = bf16,
// LINALG-BF16-COUNT-2: arith.extf %{{.+}} : bf16 to f32
// LINALG-BF16-NOT: arith.truncf
// LINALG-BF16: tfm.kernel_call %arg0, <kind = linear, dtype = bf16,
// LINALG-BF16-COUNT-2: arith.extf %{{.+}} : bf16 to f32
// LINALG-BF16: arith.truncf %{{.+}} : f32 to bf16
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
