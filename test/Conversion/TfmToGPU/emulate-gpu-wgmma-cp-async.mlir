// Tests the emulation's checks of a wgmma fed by cp.async, as the
// generated GEMM on sm_90a feeds it (TfmToGPU/WgmmaGemm.cpp): A (64 x 64,
// K-major) and B (64 x 128, N-major, two halves of 64 columns) are copied
// 16 bytes a thread at a time into the 128-byte-swizzled layout wgmma
// reads; after the wait, a fence.proxy.async and a barrier, one warpgroup
// multiplies them; then A is copied again and multiplied again,
// accumulating. The output must be 2 A B exactly (small integers).
// RUN: tfm-opt %s -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// The mutations, each of which a GPU may answer with other values: the
// first mma leaves its group in flight (waitGroup 1) while the second copy
// overwrites the A it reads; and the fences are left out, so the async
// proxy through which wgmma reads need not see what cp.async wrote. The
// emulation stops each run with the reason.
// RUN: sed -e 's/waitGroup = 0 : i32} : !descA, !descB, !acc -> !acc \/\/ FIRST/waitGroup = 1 : i32} : !descA, !descB, !acc -> !acc/' %s | tfm-opt -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | not --crash stdbuf -o0 mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils 2>&1 | FileCheck %s --check-prefix=INFLIGHT
// RUN: sed -e '/nvvm.fence.proxy/d' %s | tfm-opt -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | not --crash stdbuf -o0 mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils 2>&1 | FileCheck %s --check-prefix=UNFENCED
// CHECK-LABEL: largest difference
// CHECK-NEXT: {{^}}0{{$}}
// INFLIGHT: cp.async writes shared memory that a group of wgmma still in flight reads
// UNFENCED: nvgpu.warpgroup.mma reads shared memory that cp.async wrote and no fence.proxy.async made visible to the async proxy
!map = !nvgpu.tensormap.descriptor<tensor = memref<64x64xf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!descA = !nvgpu.warpgroup.descriptor<tensor = memref<64x64xf16, 3>>
!descB = !nvgpu.warpgroup.descriptor<tensor = memref<64x128xf16, 3>>
!acc = !nvgpu.warpgroup.accumulator<fragmented = vector<64x128xf32>>
#wg = #gpu.address_space<workgroup>

func.func @twice(%ga: memref<64x64xf16>, %gb: memref<64x128xf16>, %out: memref<64x128xf32>) {
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1)
             workgroup(%a : memref<64x64xf16, #wg>, %b : memref<2x64x64xf16, #wg>) {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %c1_ = arith.constant 1 : index
    // A's row r, chunk c lands at chunk c xor (r mod 8): 4 chunks a thread.
    scf.for %j = %c0 to %c4 step %c1_ {
      %jt = arith.muli %j, %c128 : index
      %i = arith.addi %tx, %jt : index
      %r = arith.divui %i, %c8 : index
      %c = arith.remui %i, %c8 : index
      %rs = arith.remui %r, %c8 : index
      %cs = arith.xori %c, %rs : index
      %col = arith.muli %c, %c8 : index
      %scol = arith.muli %cs, %c8 : index
      %t = nvgpu.device_async_copy %ga[%r, %col], %a[%r, %scol], 8 : memref<64x64xf16> to memref<64x64xf16, #wg>
    }
    // B's row k, chunk c (of 16) lands in half c / 8 at chunk (c mod 8)
    // xor (k mod 8): 8 chunks a thread.
    scf.for %j = %c0 to %c8 step %c1_ {
      %jt = arith.muli %j, %c128 : index
      %i = arith.addi %tx, %jt : index
      %k = arith.divui %i, %c16 : index
      %c = arith.remui %i, %c16 : index
      %h = arith.divui %c, %c8 : index
      %cw = arith.remui %c, %c8 : index
      %ks = arith.remui %k, %c8 : index
      %cs = arith.xori %cw, %ks : index
      %col = arith.muli %c, %c8 : index
      %scol = arith.muli %cs, %c8 : index
      %t = nvgpu.device_async_copy %gb[%k, %col], %b[%h, %k, %scol], 8 : memref<64x128xf16> to memref<2x64x64xf16, #wg>
    }
    %g0 = nvgpu.device_async_create_group
    nvgpu.device_async_wait %g0 {numGroups = 0 : i32}
    nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
    gpu.barrier
    %null = llvm.mlir.zero : !llvm.ptr
    %map = builtin.unrealized_conversion_cast %null : !llvm.ptr to !map
    %b0 = memref.subview %b[0, 0, 0] [1, 64, 64] [1, 1, 1] : memref<2x64x64xf16, #wg> to memref<64x64xf16, strided<[64, 1]>, #wg>
    %dA = nvgpu.warpgroup.generate.descriptor %a, %map : memref<64x64xf16, #wg>, !map -> !descA
    %dB = nvgpu.warpgroup.generate.descriptor %b0, %map : memref<64x64xf16, strided<[64, 1]>, #wg>, !map -> !descB
    %zero = nvgpu.warpgroup.mma.init.accumulator -> !acc
    %once = nvgpu.warpgroup.mma %dA, %dB, %zero {transposeB, waitGroup = 0 : i32} : !descA, !descB, !acc -> !acc // FIRST
    gpu.barrier
    // A again, over itself.
    scf.for %j = %c0 to %c4 step %c1_ {
      %jt = arith.muli %j, %c128 : index
      %i = arith.addi %tx, %jt : index
      %r = arith.divui %i, %c8 : index
      %c = arith.remui %i, %c8 : index
      %rs = arith.remui %r, %c8 : index
      %cs = arith.xori %c, %rs : index
      %col = arith.muli %c, %c8 : index
      %scol = arith.muli %cs, %c8 : index
      %t = nvgpu.device_async_copy %ga[%r, %col], %a[%r, %scol], 8 : memref<64x64xf16> to memref<64x64xf16, #wg>
    }
    %g1 = nvgpu.device_async_create_group
    nvgpu.device_async_wait %g1 {numGroups = 0 : i32}
    nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
    gpu.barrier
    %dA2 = nvgpu.warpgroup.generate.descriptor %a, %map : memref<64x64xf16, #wg>, !map -> !descA
    %twice = nvgpu.warpgroup.mma %dA2, %dB, %once {transposeB, waitGroup = 0 : i32} : !descA, !descB, !acc -> !acc
    nvgpu.warpgroup.mma.store %twice, %out : !acc to memref<64x128xf32>
    gpu.terminator
  }
  return
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
  %a = memref.alloc() : memref<64x64xf16>
  %b = memref.alloc() : memref<64x128xf16>
  scf.for %m = %c0 to %c64 step %c1 {
    scf.for %k = %c0 to %c64 step %c1 {
      %mi = arith.index_cast %m : index to i32
      %ki = arith.index_cast %k : index to i32
      %k2 = arith.muli %ki, %c2i : i32
      %s = arith.addi %mi, %k2 : i32
      %r = arith.remui %s, %c7i : i32
      %v = arith.subi %r, %c3i : i32
      %f = arith.sitofp %v : i32 to f16
      memref.store %f, %a[%m, %k] : memref<64x64xf16>
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
  %out = memref.alloc() : memref<64x128xf32>
  call @twice(%a, %b, %out) : (memref<64x64xf16>, memref<64x128xf16>, memref<64x128xf32>) -> ()
  %worst = scf.for %m = %c0 to %c64 step %c1 iter_args(%w0 = %zero) -> (f32) {
    %wm = scf.for %n = %c0 to %c128 step %c1 iter_args(%w1 = %w0) -> (f32) {
      %dot = scf.for %k = %c0 to %c64 step %c1 iter_args(%s = %zero) -> (f32) {
        %x = memref.load %a[%m, %k] : memref<64x64xf16>
        %y = memref.load %b[%k, %n] : memref<64x128xf16>
        %xf = arith.extf %x : f16 to f32
        %yf = arith.extf %y : f16 to f32
        %p = arith.mulf %xf, %yf : f32
        %s2 = arith.addf %s, %p : f32
        scf.yield %s2 : f32
      }
      %want = arith.addf %dot, %dot : f32
      %got = memref.load %out[%m, %n] : memref<64x128xf32>
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
