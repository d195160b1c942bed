// Tests that tfm-emulate-gpu-kernels runs the warpgroup ops as MLIR 19's
// NVVM lowering and the hardware do: A (128 x 64) and B (64 x 128, N-major,
// two boxes of 64 columns) land in shared memory by TMA with the 128-byte
// swizzle (in dynamic shared memory), and one warpgroup multiplies them
// twice through descriptors
// (nvgpu.warpgroup.mma reads A K-major, B transposed), accumulating, and
// stores the accumulators (nvgpu.warpgroup.mma.store). The output must be
// 2 A B; the test compares against plain loops over small integers (exact)
// and prints the largest difference, which must be 0.
// RUN: tfm-opt %s -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// The mutations: the second mma leaves its group in flight (waitGroup 1)
// and the store reads it (NaN); and B read K-major instead of N-major,
// which MLIR 19's lowering mis-addresses from the second step of 16 on,
// so the emulation refuses it.
// RUN: sed -e 's/{transposeB, waitGroup = 0 : i32} : !descA, !descB, !acc -> !acc \/\/ SECOND/{transposeB, waitGroup = 1 : i32} : !descA, !descB, !acc -> !acc/' %s | tfm-opt -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s --check-prefix=INFLIGHT
// RUN: sed -e 's/{transposeB, waitGroup = 0 : i32}/{waitGroup = 0 : i32}/g' %s | not tfm-opt -tfm-emulate-gpu-kernels 2>&1 | FileCheck %s --check-prefix=KMAJOR
// The same kernel lowers through upstream's NVVM pipeline to the PTX
// instructions the emulation stands for (the kernel assembles with
// ptxas -arch=sm_90a where a CUDA toolkit is at hand: 154 registers, no
// spills, on 2026-11-29).
// RUN: mlir-opt %s -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90a cubin-features=+ptx80 cubin-format=isa" | FileCheck %s --check-prefix=PTX
// PTX: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
// PTX: mbarrier.try_wait.parity
// PTX: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
// CHECK-LABEL: largest difference
// CHECK-NEXT: {{^}}0{{$}}
// INFLIGHT-LABEL: largest difference
// INFLIGHT-NEXT: nan
// KMAJOR: error: 'nvgpu.warpgroup.mma' op reads B K-major with K = 64: MLIR 19's lowering advances B by 16 x K x 2 bytes per step of 16
!mapA = !nvgpu.tensormap.descriptor<tensor = memref<128x64xf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!mapB = !nvgpu.tensormap.descriptor<tensor = memref<64x64xf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!descA = !nvgpu.warpgroup.descriptor<tensor = memref<128x64xf16, 3>>
!descB = !nvgpu.warpgroup.descriptor<tensor = memref<64x128xf16, 3>>
!acc = !nvgpu.warpgroup.accumulator<fragmented = vector<128x128xf32>>
!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>
#wg = #gpu.address_space<workgroup>

func.func @twice(%pa: !llvm.ptr, %pb: !llvm.ptr, %out: memref<128x128xf32>) {
  %mapA = builtin.unrealized_conversion_cast %pa : !llvm.ptr to !mapA
  %mapB = builtin.unrealized_conversion_cast %pb : !llvm.ptr to !mapB
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %shared = arith.constant 32768 : i32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1)
             dynamic_shared_memory_size %shared {
    %c0 = arith.constant 0 : index
    %c16384 = arith.constant 16384 : index
    // A's tile and B's two boxes in dynamic shared memory, 16 KB apart.
    %dyn = gpu.dynamic_shared_memory : memref<?xi8, #wg>
    %a = memref.view %dyn[%c0][] : memref<?xi8, #wg> to memref<128x64xf16, #wg>
    %b = memref.view %dyn[%c16384][] : memref<?xi8, #wg> to memref<2x64x64xf16, #wg>
    %c1_ = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %bytes = arith.constant 32768 : index
    %ticks = arith.constant 10000000 : index
    %even = arith.constant false
    %bars = nvgpu.mbarrier.create -> !bars
    %first = arith.cmpi eq, %tx, %c0 : index
    scf.if %first {
      nvgpu.mbarrier.init %bars[%c0], %c1_ : !bars
    }
    gpu.barrier
    %b0 = memref.subview %b[0, 0, 0] [1, 64, 64] [1, 1, 1] : memref<2x64x64xf16, #wg> to memref<64x64xf16, strided<[64, 1]>, #wg>
    %b1 = memref.subview %b[1, 0, 0] [1, 64, 64] [1, 1, 1] : memref<2x64x64xf16, #wg> to memref<64x64xf16, strided<[64, 1], offset: 4096>, #wg>
    scf.if %first {
      nvgpu.mbarrier.arrive.expect_tx %bars[%c0], %bytes : !bars
      nvgpu.tma.async.load %mapA[%c0, %c0], %bars[%c0] to %a : !mapA, !bars -> memref<128x64xf16, #wg>
      nvgpu.tma.async.load %mapB[%c0, %c0], %bars[%c0] to %b0 : !mapB, !bars -> memref<64x64xf16, strided<[64, 1]>, #wg>
      nvgpu.tma.async.load %mapB[%c64, %c0], %bars[%c0] to %b1 : !mapB, !bars -> memref<64x64xf16, strided<[64, 1], offset: 4096>, #wg>
    }
    nvgpu.mbarrier.try_wait.parity %bars[%c0], %even, %ticks : !bars
    %dA = nvgpu.warpgroup.generate.descriptor %a, %mapA : memref<128x64xf16, #wg>, !mapA -> !descA
    %dB = nvgpu.warpgroup.generate.descriptor %b0, %mapB : memref<64x64xf16, strided<[64, 1]>, #wg>, !mapB -> !descB
    %zero = nvgpu.warpgroup.mma.init.accumulator -> !acc
    %once = nvgpu.warpgroup.mma %dA, %dB, %zero {transposeB, waitGroup = 0 : i32} : !descA, !descB, !acc -> !acc
    %twice = nvgpu.warpgroup.mma %dA, %dB, %once {transposeB, waitGroup = 0 : i32} : !descA, !descB, !acc -> !acc // SECOND
    nvgpu.warpgroup.mma.store %twice, %out : !acc to memref<128x128xf32>
    gpu.terminator
  }
  return
}

// The map of a [rows, cols] tensor of f16: its address, its dims innermost
// first, and the bytes between its rows.
func.func @mapOf(%t: memref<?x?xf16>, %words: memref<10xi64>) -> !llvm.ptr {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c6 = arith.constant 6 : index
  %base = memref.extract_aligned_pointer_as_index %t : memref<?x?xf16> -> index
  %base64 = arith.index_cast %base : index to i64
  memref.store %base64, %words[%c0] : memref<10xi64>
  %rows = memref.dim %t, %c0 : memref<?x?xf16>
  %cols = memref.dim %t, %c1 : memref<?x?xf16>
  %cols64 = arith.index_cast %cols : index to i64
  %rows64 = arith.index_cast %rows : index to i64
  memref.store %cols64, %words[%c1] : memref<10xi64>
  memref.store %rows64, %words[%c2] : memref<10xi64>
  %two = arith.constant 2 : i64
  %pitch = arith.muli %cols64, %two : i64
  memref.store %pitch, %words[%c6] : memref<10xi64>
  %wp = memref.extract_aligned_pointer_as_index %words : memref<10xi64> -> index
  %wp64 = arith.index_cast %wp : index to i64
  %ptr = llvm.inttoptr %wp64 : i64 to !llvm.ptr
  return %ptr : !llvm.ptr
}

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %c2i = arith.constant 2 : i32
  %c3i = arith.constant 3 : i32
  %c5i = arith.constant 5 : i32
  %c7i = arith.constant 7 : i32
  %zero = arith.constant 0.0 : f32
  // A[m][k] = (m + 2k) mod 7 - 3, B[k][n] = (3k + n) mod 5 - 2.
  %a = memref.alloc() : memref<128x64xf16>
  %b = memref.alloc() : memref<64x128xf16>
  scf.for %m = %c0 to %c128 step %c1 {
    scf.for %k = %c0 to %c64 step %c1 {
      %mi = arith.index_cast %m : index to i32
      %ki = arith.index_cast %k : index to i32
      %k2 = arith.muli %ki, %c2i : i32
      %s = arith.addi %mi, %k2 : i32
      %r = arith.remui %s, %c7i : i32
      %v = arith.subi %r, %c3i : i32
      %f = arith.sitofp %v : i32 to f16
      memref.store %f, %a[%m, %k] : memref<128x64xf16>
    }
  }
  scf.for %k = %c0 to %c64 step %c1 {
    scf.for %n = %c0 to %c128 step %c1 {
      %ki = arith.index_cast %k : index to i32
      %ni = arith.index_cast %n : index to i32
      %k3 = arith.muli %ki, %c3i : i32
      %s = arith.addi %k3, %ni : i32
      %r = arith.remui %s, %c5i : i32
      %v = arith.subi %r, %c2i : i32
      %f = arith.sitofp %v : i32 to f16
      memref.store %f, %b[%k, %n] : memref<64x128xf16>
    }
  }
  %wa = memref.alloc() : memref<10xi64>
  %wb = memref.alloc() : memref<10xi64>
  %ad = memref.cast %a : memref<128x64xf16> to memref<?x?xf16>
  %bd = memref.cast %b : memref<64x128xf16> to memref<?x?xf16>
  %pa = call @mapOf(%ad, %wa) : (memref<?x?xf16>, memref<10xi64>) -> !llvm.ptr
  %pb = call @mapOf(%bd, %wb) : (memref<?x?xf16>, memref<10xi64>) -> !llvm.ptr
  %out = memref.alloc() : memref<128x128xf32>
  call @twice(%pa, %pb, %out) : (!llvm.ptr, !llvm.ptr, memref<128x128xf32>) -> ()
  %worst = scf.for %m = %c0 to %c128 step %c1 iter_args(%w0 = %zero) -> (f32) {
    %wm = scf.for %n = %c0 to %c128 step %c1 iter_args(%w1 = %w0) -> (f32) {
      %dot = scf.for %k = %c0 to %c64 step %c1 iter_args(%s = %zero) -> (f32) {
        %x = memref.load %a[%m, %k] : memref<128x64xf16>
        %y = memref.load %b[%k, %n] : memref<64x128xf16>
        %xf = arith.extf %x : f16 to f32
        %yf = arith.extf %y : f16 to f32
        %p = arith.mulf %xf, %yf : f32
        %s2 = arith.addf %s, %p : f32
        scf.yield %s2 : f32
      }
      %want = arith.addf %dot, %dot : f32
      %got = memref.load %out[%m, %n] : memref<128x128xf32>
      %d = arith.subf %got, %want : f32
      %ad2 = math.absf %d : f32
      %w2 = arith.maximumf %w1, %ad2 : f32
      scf.yield %w2 : f32
    }
    scf.yield %wm : f32
  }
  vector.print str "largest difference\n"
  vector.print %worst : f32
  return
}
