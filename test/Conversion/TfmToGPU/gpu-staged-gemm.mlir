// Tests the staged tensor-core GEMM (TfmToGPU/StagedGemm.cpp), the GEMM
// library's fallback under --dtype=f16 and bf16 for GEMMs of at least
// 64 x 64: 128 x 128 output tiles of 4 warps, the operand tiles copied
// into three shared-memory stages by cp.async, ldmatrix (.trans for an
// operand stored along M or N) into mma.sync. Run on the CPU through the
// emulation of the kernels with the library off, where a copy lands only at
// the wait that covers it and each ldmatrix and mma.sync moves the lanes'
// fragments by the PTX layouts, the outputs must match the reference
// interpreter's within the operands' rounding: a linear of 256 rows (two
// batches of 128 as one GEMM), 128 outputs and 64 inputs, whose bias and
// ReLU run on the accumulators (every tile whole; A and B read along K);
// and a batch of two Aᵀ B of 136 x 72 over 40 (every edge partial, K's
// second step too; A stored [K, M] and B [K, N], both read transposed).
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg compute-type=f16' | tfm-opt --tfm-tile-gpu-matmul | FileCheck %s --check-prefix=KERNEL
// RUN: rm -rf %t && tfmc run --reference %s --seed 3 --output-dir %t
// RUN: env TFM_CUBLASLT=off tfmc run %s --device=cuda --gpu-schedule-on-cpu --dtype=f16 --test-data-dir %t --rtol 2e-2 --atol 1e-2 | FileCheck %s
// In bf16 the operands are bf16 bytes viewed as f16 for the copies and
// ldmatrix, and each mma.sync is marked to multiply bf16.
// RUN: env TFM_CUBLASLT=off tfmc run %s --device=cuda --gpu-schedule-on-cpu --dtype=bf16 --test-data-dir %t --rtol 5e-2 --atol 5e-2 | FileCheck %s
// CHECK: all outputs match

// KERNEL-LABEL: func.func @__tfm_entry_infer
// KERNEL: tfm.kernel_call {{.*}}<kind = linear
// KERNEL: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{.*}}, {{.*}} = %c2{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c128{{.*}}) workgroup({{.*}} : memref<3x128x32xf16, #gpu.address_space<workgroup>>, {{.*}} : memref<3x128x32xf16, #gpu.address_space<workgroup>>)
// KERNEL: nvgpu.device_async_copy {{.*}}, 8 {bypassL1}
// KERNEL: nvgpu.device_async_create_group
// KERNEL: scf.for
// KERNEL: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// KERNEL-NEXT: gpu.barrier
// KERNEL: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// KERNEL: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// KERNEL: vector.extract_strided_slice
// KERNEL: nvgpu.mma.sync
// KERNEL: arith.maximumf
// KERNEL: tfm.kernel_call {{.*}}<kind = batch_matmul
// KERNEL: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{.*}}, {{.*}} = %c2{{.*}}, {{.*}} = %c2{{.*}}) threads({{.*}}) in ({{.*}} = %c128{{.*}}) workgroup({{.*}} : memref<3x32x128xf16, #gpu.address_space<workgroup>>, {{.*}} : memref<3x32x128xf16, #gpu.address_space<workgroup>>)
// KERNEL: nvgpu.device_async_copy {{.*}}, 8, %{{.*}} {bypassL1}
// KERNEL: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// KERNEL: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// KERNEL: vector.extract_strided_slice
// KERNEL: nvgpu.mma.sync
func.func @infer(%x: tensor<2x128x64xf32> {tfm.name = "x"}, %w: tensor<128x64xf32> {tfm.name = "w"},
                 %bias: tensor<128xf32> {tfm.name = "bias"}, %a: tensor<2x40x136xf32> {tfm.name = "a"},
                 %c: tensor<2x40x72xf32> {tfm.name = "c"})
    -> (tensor<2x128x128xf32>, tensor<2x136x72xf32>) {
  %y = tfm.linear %x, %w, %bias activation = relu : (tensor<2x128x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<2x128x128xf32>
  %z = tfm.matmul %a, %c transpose_lhs : (tensor<2x40x136xf32>, tensor<2x40x72xf32>) -> tensor<2x136x72xf32>
  return %y, %z : tensor<2x128x128xf32>, tensor<2x136x72xf32>
}
