// Tests the generated GEMM on sm_90a (TfmToGPU/WgmmaGemm.cpp), the GEMM
// library's fallback under --dtype=f16 and bf16 with --gpu-arch=sm_90a:
// 128 x 128 output tiles of one warpgroup, the operand tiles loaded by TMA
// (through tensor maps the runtime makes; tfm-lower-tensor-maps) into
// three stages of dynamic shared memory in the 128-byte-swizzled layout
// wgmma reads, each stage's loads counted on its mbarrier, and multiplied
// by one nvgpu.warpgroup.mma per 64 rows and 16 of K; with --gpu-tma=false
// copied by cp.async instead and fenced into the async proxy. Run on the
// CPU through the emulation of the kernels with the library off, where a
// load lands only at the wait on its barrier (a copy at its wait), a wgmma
// reads the stage through its descriptor as MLIR 19's lowering and the
// hardware address it, and a copy into a stage that a group in flight
// still reads stops the run, the outputs must match the reference
// interpreter's within the operands' rounding:
// * a linear of 256 rows (two batches of 128 as one GEMM), 128 outputs and
//   320 inputs (five steps of 64 over three stages), its bias and ReLU
//   applied on the way out: A and B both K-major, every tile whole;
// * a batch of two Aᵀ B of 136 x 72 over 40: A M-major (transposeA) and B
//   N-major (transposeB), every edge partial, K shorter than a step;
// * a batch of two A B of 136 x 72 over 200: A K-major, B N-major, the
//   last step partial;
// * a batch of two Aᵀ Bᵀ, which wgmma does not read (an M-major A with a
//   K-major B): the staged mma.sync kernel takes it.
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg compute-type=bf16' | tfm-opt '--tfm-tile-gpu-matmul=warpgroup-mma=1' | FileCheck %s --check-prefix=KERNEL
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg compute-type=bf16' | tfm-opt '--tfm-tile-gpu-matmul=warpgroup-mma=1 tma=1' | FileCheck %s --check-prefix=TMA
// RUN: rm -rf %t && tfmc run --reference %s --seed 3 --output-dir %t
// RUN: env TFM_CUBLASLT=off tfmc run %s --device=cuda --gpu-schedule-on-cpu --gpu-arch=sm_90a --dtype=f16 --test-data-dir %t --rtol 2e-2 --atol 1e-2 | FileCheck %s
// bf16 for a CPU without bf16 instructions on any host, where LLVM rounds
// the tiles' bf16 selects and vectors through __truncsfbf2, which the
// library defines.
// RUN: tfmc compile %s --target=cuda --gpu-schedule-on-cpu --gpu-arch=sm_90a --dtype=bf16 --cpu=x86-64-v3 -o %t/bf16-v3.so
// RUN: env TFM_CUBLASLT=off DNNL_MAX_CPU_ISA=AVX2 tfmc run %t/bf16-v3.so --test-data-dir %t --rtol 5e-2 --atol 5e-2 | FileCheck %s
// RUN: env TFM_CUBLASLT=off tfmc run %s --device=cuda --gpu-schedule-on-cpu --gpu-arch=sm_90a --gpu-tma=false --dtype=f16 --test-data-dir %t --rtol 2e-2 --atol 1e-2 | FileCheck %s
// The PTX, for sm_90a only (the staged kernel elsewhere).
// RUN: tfmc compile %s --target=cuda --gpu-arch=sm_90a --dtype=bf16 --emit=ptx -o - | FileCheck %s --check-prefix=PTX
// RUN: tfmc compile %s --target=cuda --gpu-arch=sm_90a --gpu-tma=false --dtype=bf16 --emit=ptx -o - | FileCheck %s --check-prefix=CPASYNC
// RUN: tfmc compile %s --target=cuda --gpu-arch=sm_90 --dtype=bf16 --emit=ptx -o - | FileCheck %s --check-prefix=SM90
// The library compiled whole and run on the stand-in driver, whose kernels
// do not run: the session encodes each operand's map once (a bf16 tensor,
// innermost dims first, boxes of 64 x 64, the 128-byte swizzle), over two
// runs and a graph's recording.
// RUN: tfmc compile %s --target=cuda --gpu-arch=sm_90a --dtype=bf16 -o %t/wgmma.so
// RUN: env TFM_CUDA_DRIVER=%fake_cuda TFM_CUBLASLT=off TFM_FAKE_CUDA_LOG=%t/driver.log tfmc run %t/wgmma.so --bench 2
// RUN: grep "tensor map" %t/driver.log | FileCheck %s --check-prefix=MAPS
// RUN: grep -c "tensor map" %t/driver.log | FileCheck %s --check-prefix=MAPCOUNT
// CHECK: all outputs match
// MAPCOUNT: {{^}}6{{$}}
// MAPS-DAG: tensor map type 9 rank 2 dims 320 256 strides 640 box 64 64 swizzle 3
// MAPS-DAG: tensor map type 9 rank 2 dims 320 128 strides 640 box 64 64 swizzle 3
// MAPS-DAG: tensor map type 9 rank 3 dims 136 40 2 strides 272 10880 box 64 64 1 swizzle 3

// KERNEL-LABEL: func.func @__tfm_entry_infer
// KERNEL: tfm.kernel_call {{.*}}<kind = linear
// KERNEL: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{.*}}, {{.*}} = %c2{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c128{{.*}}) dynamic_shared_memory_size %c99328_i32
// KERNEL: memref.view {{.*}} to memref<3x2x64x64xbf16, #gpu.address_space<workgroup>>
// KERNEL: nvgpu.device_async_copy {{.*}}, 8 {bypassL1} : memref<256x320xbf16> to memref<3x2x64x64xbf16, #gpu.address_space<workgroup>>
// KERNEL: scf.for
// KERNEL: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// KERNEL-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// KERNEL-NEXT: gpu.barrier
// KERNEL: nvgpu.warpgroup.mma {{.*}} {waitGroup = 8 : i32} : <tensor = memref<64x16xbf16, #gpu.address_space<workgroup>>>, <tensor = memref<16x128xbf16, #gpu.address_space<workgroup>>>
// KERNEL: gpu.barrier
// KERNEL: nvvm.wgmma.wait.group.sync.aligned 0
// KERNEL: nvgpu.warpgroup.mma.store {{.*}} to memref<64x128xf32, strided<[136, 1]>, #gpu.address_space<workgroup>>
// KERNEL: arith.maximumf
// KERNEL: tfm.kernel_call {{.*}}<kind = batch_matmul
// KERNEL: gpu.launch {{.*}} dynamic_shared_memory_size
// KERNEL: nvgpu.warpgroup.mma {{.*}} {transposeA, transposeB, waitGroup = 8 : i32}
// KERNEL: tfm.kernel_call {{.*}}<kind = batch_matmul
// KERNEL: gpu.launch {{.*}} dynamic_shared_memory_size
// KERNEL: nvgpu.warpgroup.mma {{.*}} {transposeB, waitGroup = 8 : i32}
// KERNEL: tfm.kernel_call {{.*}}<kind = batch_matmul
// KERNEL: gpu.launch {{.*}} workgroup(
// KERNEL-NOT: nvgpu.warpgroup.mma
// KERNEL: nvgpu.mma.sync

// TMA: nvgpu.tma.create.descriptor {{.*}} box[{{.*}}] : memref<*xbf16> -> <tensor = memref<64x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// TMA: gpu.launch {{.*}} dynamic_shared_memory_size %c99328_i32
// TMA: nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 3>
// TMA: nvgpu.mbarrier.init
// TMA: gpu.barrier
// TMA: nvgpu.mbarrier.arrive.expect_tx {{.*}}, %c32768
// TMA-COUNT-4: nvgpu.tma.async.load
// TMA: scf.for
// TMA: nvgpu.mbarrier.try_wait.parity
// TMA-NOT: nvgpu.device_async
// TMA: nvgpu.warpgroup.mma
// TMA: gpu.barrier
// TMA: nvgpu.mbarrier.arrive.expect_tx
// TMA-COUNT-4: nvgpu.tma.async.load
// TMA: nvvm.wgmma.wait.group.sync.aligned 0
// TMA: nvgpu.tma.create.descriptor {{.*}} : memref<*xbf16> -> <tensor = memref<1x64x64xbf16, #gpu.address_space<workgroup>>

// PTX-NOT: fence.proxy.async
// PTX: mbarrier.init.shared.b64
// PTX: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
// PTX: mbarrier.try_wait.parity.shared.b64
// PTX: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// PTX: wgmma.wait_group.sync.aligned 8
// PTX: wgmma.wait_group.sync.aligned 0
// PTX: cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes
// CPASYNC-NOT: cp.async.bulk.tensor
// CPASYNC: fence.proxy.async.shared::cta
// CPASYNC: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CPASYNC-NOT: cp.async.bulk.tensor
// SM90-NOT: wgmma
// SM90: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// SM90-NOT: wgmma
func.func @infer(%x: tensor<2x128x320xf32> {tfm.name = "x"}, %w: tensor<128x320xf32> {tfm.name = "w"},
                 %bias: tensor<128xf32> {tfm.name = "bias"}, %a: tensor<2x40x136xf32> {tfm.name = "a"},
                 %c: tensor<2x40x72xf32> {tfm.name = "c"}, %p: tensor<2x136x200xf32> {tfm.name = "p"},
                 %q: tensor<2x200x72xf32> {tfm.name = "q"}, %r: tensor<2x72x40xf32> {tfm.name = "r"})
    -> (tensor<2x128x128xf32>, tensor<2x136x72xf32>, tensor<2x136x72xf32>, tensor<2x136x72xf32>) {
  %y = tfm.linear %x, %w, %bias activation = relu : (tensor<2x128x320xf32>, tensor<128x320xf32>, tensor<128xf32>) -> tensor<2x128x128xf32>
  %z = tfm.matmul %a, %c transpose_lhs : (tensor<2x40x136xf32>, tensor<2x40x72xf32>) -> tensor<2x136x72xf32>
  %u = tfm.matmul %p, %q : (tensor<2x136x200xf32>, tensor<2x200x72xf32>) -> tensor<2x136x72xf32>
  %v = tfm.matmul %a, %r transpose_lhs transpose_rhs : (tensor<2x40x136xf32>, tensor<2x72x40xf32>) -> tensor<2x136x72xf32>
  return %y, %z, %u, %v : tensor<2x128x128xf32>, tensor<2x136x72xf32>, tensor<2x136x72xf32>, tensor<2x136x72xf32>
}
