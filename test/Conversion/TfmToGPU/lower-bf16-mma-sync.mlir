// RUN: tfm-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(gpu.module(tfm-lower-bf16-mma-sync))' | FileCheck %s

// Tests that in a kernel marked bf16 an mma.sync becomes the bf16
// instruction's intrinsic: A's four register pairs and B's two as 32-bit
// words, C's four values row by row, and the result back in C's layout;
// an unmarked kernel keeps its f16 mma.sync.
// CHECK-LABEL: gpu.func @marked
// CHECK-SAME: (%[[A:.+]]: vector<4x2xf16>, %[[B:.+]]: vector<2x2xf16>, %[[C:.+]]: vector<2x2xf32>
// CHECK: %[[A0:.+]] = vector.extract %[[A]][0] : vector<2xf16> from vector<4x2xf16>
// CHECK: %[[W0:.+]] = llvm.bitcast %[[A0]] : vector<2xf16> to i32
// CHECK: %[[A3:.+]] = vector.extract %[[A]][3] : vector<2xf16> from vector<4x2xf16>
// CHECK: %[[W3:.+]] = llvm.bitcast %[[A3]] : vector<2xf16> to i32
// CHECK: %[[B0:.+]] = vector.extract %[[B]][0] : vector<2xf16> from vector<2x2xf16>
// CHECK: %[[V0:.+]] = llvm.bitcast %[[B0]] : vector<2xf16> to i32
// CHECK: %[[B1:.+]] = vector.extract %[[B]][1] : vector<2xf16> from vector<2x2xf16>
// CHECK: %[[V1:.+]] = llvm.bitcast %[[B1]] : vector<2xf16> to i32
// CHECK: %[[C00:.+]] = vector.extract %[[C]][0, 0] : f32 from vector<2x2xf32>
// CHECK: %[[C01:.+]] = vector.extract %[[C]][0, 1] : f32 from vector<2x2xf32>
// CHECK: %[[C10:.+]] = vector.extract %[[C]][1, 0] : f32 from vector<2x2xf32>
// CHECK: %[[C11:.+]] = vector.extract %[[C]][1, 1] : f32 from vector<2x2xf32>
// CHECK: %[[D:.+]] = llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.bf16"(%[[W0]], %{{.+}}, %{{.+}}, %[[W3]], %[[V0]], %[[V1]], %[[C00]], %[[C01]], %[[C10]], %[[C11]])
// CHECK: %[[D3:.+]] = llvm.extractvalue %[[D]][3]
// CHECK: vector.insert %[[D3]], %{{.+}} [1, 1] : f32 into vector<2x2xf32>
// CHECK-NOT: nvgpu.mma.sync
// CHECK-LABEL: gpu.func @unmarked
// CHECK: nvgpu.mma.sync
gpu.module @kernels {
  gpu.func @marked(%a: vector<4x2xf16>, %b: vector<2x2xf16>, %c: vector<2x2xf32>, %out: memref<2x2xf32>) kernel attributes {tfm.mma_operand_type = bf16} {
    %d = nvgpu.mma.sync(%a, %b, %c) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
    %c0 = arith.constant 0 : index
    vector.store %d, %out[%c0, %c0] : memref<2x2xf32>, vector<2x2xf32>
    gpu.return
  }
  gpu.func @unmarked(%a: vector<4x2xf16>, %b: vector<2x2xf16>, %c: vector<2x2xf32>, %out: memref<2x2xf32>) kernel {
    %d = nvgpu.mma.sync(%a, %b, %c) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
    %c0 = arith.constant 0 : index
    vector.store %d, %out[%c0, %c0] : memref<2x2xf32>, vector<2x2xf32>
    gpu.return
  }
}

// -----

// Tests that another shape in a bf16 kernel is an error, not a wrong
// instruction.
gpu.module @kernels {
  gpu.func @marked(%a: vector<2x2xf16>, %b: vector<1x2xf16>, %c: vector<2x2xf32>, %out: memref<2x2xf32>) kernel attributes {tfm.mma_operand_type = bf16} {
    // expected-error @+1 {{expected an m16n8k16 mma.sync of f16-held operands into f32}}
    %d = nvgpu.mma.sync(%a, %b, %c) {mmaShape = [16, 8, 8]} : (vector<2x2xf16>, vector<1x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
    %c0 = arith.constant 0 : index
    vector.store %d, %out[%c0, %c0] : memref<2x2xf32>, vector<2x2xf32>
    gpu.return
  }
}
