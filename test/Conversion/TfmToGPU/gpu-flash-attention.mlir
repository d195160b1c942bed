// Tests the tensor-core flash attention (TfmToGPU/FlashAttentionMma.cpp)
// under --dtype=f16 and bf16: one kernel of 4 warps per 64 query rows, its
// tiles copied into shared memory by cp.async one step ahead of their use,
// its products mma.sync m16n8k16 on fragments that ldmatrix reads from
// shared memory (.trans for V; K and V two n8 tiles to an ldmatrix.x4),
// its softmax online in base 2 with quad shuffles. Run on the CPU
// through the emulation of the kernels (--gpu-schedule-on-cpu), where each
// ldmatrix and mma.sync moves the lanes' fragments by the PTX layouts, the
// outputs must match the reference interpreter's within f16's rounding of
// the operands: 100 rows of 64 (a second, partial block of rows, a
// partial key tile); causal 130 rows of 32 (three blocks, tiles skipped
// past the diagonal); 70 rows of 16 with an additive mask broadcast over
// heads and rows, and causal with a boolean padding mask (the last 6 keys
// dropped) broadcast over the batch too. The masked one is merged back by
// a transpose right after it, which its kernel writes in place: its result
// is stored at the transposed strides. And a head of 128, the widest the
// kernel takes, causal over 80 rows (two blocks, the second partial).
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg compute-type=f16' | FileCheck %s --check-prefix=STRIDED
// STRIDED: memref.reinterpret_cast {{.*}} to memref<2x3x70x16xf32, strided<[3360, 16, 48, 1]>>
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg compute-type=f16' | FileCheck %s --check-prefix=KERNEL
// RUN: rm -rf %t && tfmc run --reference %s --seed 3 --output-dir %t
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --dtype=f16 --test-data-dir %t --rtol 2e-2 --atol 5e-3 | FileCheck %s
// The same in bf16, whose patterns the tiles hold as f16 and each mma.sync
// is marked to read as bf16 (8 bits of mantissa: errors 8 times f16's).
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --dtype=bf16 --test-data-dir %t --rtol 5e-2 --atol 2e-2 | FileCheck %s
// CHECK: all outputs match
// Each attention kernel asks ptxas for one block per SM, which lets it keep
// the tiles in registers (at head dim 64 it spills one otherwise).
// RUN: tfmc compile %s --target=cuda --dtype=f16 --emit=ptx -o - | FileCheck %s --check-prefix=PTX
// PTX-COUNT-5: .maxntid 128, 1, 1{{[[:space:]]+}}.minnctapersm 1{{[[:space:]]+}}{
// PTX-NOT: .minnctapersm

// KERNEL-LABEL: func.func @__tfm_entry_infer
// KERNEL: gpu.launch blocks({{.*}}) in ({{.*}} = %c2, {{.*}} = %c4, {{.*}}) threads({{.*}}) in ({{.*}} = %c128, {{.*}}) workgroup({{.*}} : memref<64x64xf16, #gpu.address_space<workgroup>>
// KERNEL: nvgpu.device_async_copy {{.*}}, 8, %{{.*}} {bypassL1} : memref<4x100x64xf16> to memref<64x64xf16, #gpu.address_space<workgroup>>
// KERNEL: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// KERNEL-NEXT: gpu.barrier
// KERNEL: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// KERNEL: scf.for
// KERNEL: nvgpu.device_async_wait
// KERNEL-NEXT: gpu.barrier
// KERNEL: nvgpu.device_async_copy
// KERNEL: nvgpu.mma.sync
// KERNEL: gpu.shuffle  xor
// KERNEL: math.exp2
// KERNEL: nvgpu.device_async_wait
// KERNEL-NEXT: gpu.barrier
// KERNEL: scf.if
// KERNEL: nvgpu.device_async_copy
// KERNEL: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// KERNEL: } {nvvm.minctasm = 1 : i32}
func.func @infer(%q: tensor<2x2x100x64xf32> {tfm.name = "q"}, %k: tensor<2x2x100x64xf32> {tfm.name = "k"},
                 %v: tensor<2x2x100x64xf32> {tfm.name = "v"}, %cq: tensor<1x2x130x32xf32> {tfm.name = "cq"},
                 %mq: tensor<2x3x70x16xf32> {tfm.name = "mq"}, %add: tensor<2x1x1x70xf32> {tfm.name = "add"},
                 %hq: tensor<1x2x80x128xf32> {tfm.name = "hq"}, %hk: tensor<1x2x80x128xf32> {tfm.name = "hk"})
    -> (tensor<2x2x100x64xf32>, tensor<1x2x130x32xf32>, tensor<2x70x3x16xf32>, tensor<2x3x70x16xf32>, tensor<1x2x80x128xf32>) {
  %o = tfm.attention %q, %k, %v : (tensor<2x2x100x64xf32>, tensor<2x2x100x64xf32>, tensor<2x2x100x64xf32>) -> tensor<2x2x100x64xf32>
  %c = tfm.attention %cq, %cq, %cq causal : (tensor<1x2x130x32xf32>, tensor<1x2x130x32xf32>, tensor<1x2x130x32xf32>) -> tensor<1x2x130x32xf32>
  %m = tfm.attention %mq, %mq, %mq, mask %add : (tensor<2x3x70x16xf32>, tensor<2x3x70x16xf32>, tensor<2x3x70x16xf32>, tensor<2x1x1x70xf32>) -> tensor<2x3x70x16xf32>
  %mt = tfm.transpose %m permutation = [0, 2, 1, 3] : tensor<2x3x70x16xf32> -> tensor<2x70x3x16xf32>
  %ms = tfm.add %mt, %mt : (tensor<2x70x3x16xf32>, tensor<2x70x3x16xf32>) -> tensor<2x70x3x16xf32>
  %keep = arith.constant dense<[[[[true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, false, false, false, false, false, false]]]]> : tensor<1x1x1x70xi1>
  %p = tfm.attention %mq, %mq, %mq, mask %keep causal : (tensor<2x3x70x16xf32>, tensor<2x3x70x16xf32>, tensor<2x3x70x16xf32>, tensor<1x1x1x70xi1>) -> tensor<2x3x70x16xf32>
  %h = tfm.attention %hq, %hk, %hq causal : (tensor<1x2x80x128xf32>, tensor<1x2x80x128xf32>, tensor<1x2x80x128xf32>) -> tensor<1x2x80x128xf32>
  return %o, %c, %ms, %p, %h : tensor<2x2x100x64xf32>, tensor<1x2x130x32xf32>, tensor<2x70x3x16xf32>, tensor<2x3x70x16xf32>, tensor<1x2x80x128xf32>
}
