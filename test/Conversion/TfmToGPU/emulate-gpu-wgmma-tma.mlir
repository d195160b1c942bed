// Tests the emulation's checks of a wgmma fed by TMA, as the generated GEMM
// on sm_90a feeds it (TfmToGPU/WgmmaGemm.cpp): A (64 x 64, K-major) and B
// (64 x 128, N-major, two boxes of 64 columns) are loaded by TMA in boxes
// of 64 x 64 with the 128-byte swizzle that wgmma reads, counted on an
// mbarrier; after the wait one warpgroup multiplies them; then A is loaded
// again (on a second barrier) and multiplied again, accumulating. The
// output must be 2 A B exactly (small integers).
// RUN: tfm-opt %s -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// The mutation, which a GPU may answer with other values: the first mma
// leaves its group in flight (waitGroup 1) while the second load
// overwrites the A it reads. The emulation stops the run with the reason.
// RUN: sed -e 's/waitGroup = 0 : i32} : !descA, !descB, !acc -> !acc \/\/ FIRST/waitGroup = 1 : i32} : !descA, !descB, !acc -> !acc/' %s | tfm-opt -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | not --crash stdbuf -o0 mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils 2>&1 | FileCheck %s --check-prefix=INFLIGHT
// And B's second box loaded at columns 0-63 again: the product differs.
// RUN: sed -e 's/%mapB\[%c64, %c0\]/%mapB[%c0, %c0]/' %s | tfm-opt -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s --check-prefix=WRONGBOX
// CHECK-LABEL: largest difference
// CHECK-NEXT: {{^}}0{{$}}
// WRONGBOX-LABEL: largest difference
// WRONGBOX-NOT: {{^}}0{{$}}
// INFLIGHT: a TMA load writes shared memory that a group of wgmma still in flight reads
!map = !nvgpu.tensormap.descriptor<tensor = memref<64x64xf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!descA = !nvgpu.warpgroup.descriptor<tensor = memref<64x64xf16, 3>>
!descB = !nvgpu.warpgroup.descriptor<tensor = memref<64x128xf16, 3>>
!acc = !nvgpu.warpgroup.accumulator<fragmented = vector<64x128xf32>>
!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
#wg = #gpu.address_space<workgroup>

func.func @twice(%pa: !llvm.ptr, %pb: !llvm.ptr, %out: memref<64x128xf32>) {
  %mapA = builtin.unrealized_conversion_cast %pa : !llvm.ptr to !map
  %mapB = builtin.unrealized_conversion_cast %pb : !llvm.ptr to !map
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1)
             workgroup(%a : memref<64x64xf16, #wg>, %b : memref<2x64x64xf16, #wg>) {
    %c0 = arith.constant 0 : index
    %c1_ = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %ticks = arith.constant 10000000 : index
    %three = arith.constant 24576 : index
    %one = arith.constant 8192 : index
    %even = arith.constant false
    %bars = nvgpu.mbarrier.create -> !bars
    %first = arith.cmpi eq, %tx, %c0 : index
    scf.if %first {
      nvgpu.mbarrier.init %bars[%c0], %c1_ : !bars
      nvgpu.mbarrier.init %bars[%c1_], %c1_ : !bars
    }
    gpu.barrier
    %b0 = memref.subview %b[0, 0, 0] [1, 64, 64] [1, 1, 1] : memref<2x64x64xf16, #wg> to memref<64x64xf16, strided<[64, 1]>, #wg>
    %b1 = memref.subview %b[1, 0, 0] [1, 64, 64] [1, 1, 1] : memref<2x64x64xf16, #wg> to memref<64x64xf16, strided<[64, 1], offset: 4096>, #wg>
    // A's box, and B's two (columns 0-63 and 64-127), innermost first.
    scf.if %first {
      nvgpu.mbarrier.arrive.expect_tx %bars[%c0], %three : !bars
      nvgpu.tma.async.load %mapA[%c0, %c0], %bars[%c0] to %a : !map, !bars -> memref<64x64xf16, #wg>
      nvgpu.tma.async.load %mapB[%c0, %c0], %bars[%c0] to %b0 : !map, !bars -> memref<64x64xf16, strided<[64, 1]>, #wg>
      nvgpu.tma.async.load %mapB[%c64, %c0], %bars[%c0] to %b1 : !map, !bars -> memref<64x64xf16, strided<[64, 1], offset: 4096>, #wg>
    }
    nvgpu.mbarrier.try_wait.parity %bars[%c0], %even, %ticks : !bars
    %null = llvm.mlir.zero : !llvm.ptr
    %dmap = builtin.unrealized_conversion_cast %null : !llvm.ptr to !map
    %dA = nvgpu.warpgroup.generate.descriptor %a, %dmap : memref<64x64xf16, #wg>, !map -> !descA
    %dB = nvgpu.warpgroup.generate.descriptor %b0, %dmap : memref<64x64xf16, strided<[64, 1]>, #wg>, !map -> !descB
    %zero = nvgpu.warpgroup.mma.init.accumulator -> !acc
    %once = nvgpu.warpgroup.mma %dA, %dB, %zero {transposeB, waitGroup = 0 : i32} : !descA, !descB, !acc -> !acc // FIRST
    gpu.barrier
    // A again, over itself.
    scf.if %first {
      nvgpu.mbarrier.arrive.expect_tx %bars[%c1_], %one : !bars
      nvgpu.tma.async.load %mapA[%c0, %c0], %bars[%c1_] to %a : !map, !bars -> memref<64x64xf16, #wg>
    }
    nvgpu.mbarrier.try_wait.parity %bars[%c1_], %even, %ticks : !bars
    %dA2 = nvgpu.warpgroup.generate.descriptor %a, %dmap : memref<64x64xf16, #wg>, !map -> !descA
    %twice = nvgpu.warpgroup.mma %dA2, %dB, %once {transposeB, waitGroup = 0 : i32} : !descA, !descB, !acc -> !acc
    nvgpu.warpgroup.mma.store %twice, %out : !acc to memref<64x128xf32>
    gpu.terminator
  }
  return
}

// The words of a map of a [rows, cols] f16 tensor: its address, cols and
// rows (innermost first), and 2 cols bytes between rows.
func.func @map(%t: memref<64x64xf16>, %cols: index, %rows: index) -> !llvm.ptr {
  %base = memref.extract_aligned_pointer_as_index %t : memref<64x64xf16> -> index
  %p = call @words(%base, %cols, %rows) : (index, index, index) -> !llvm.ptr
  return %p : !llvm.ptr
}
func.func @mapb(%t: memref<64x128xf16>, %cols: index, %rows: index) -> !llvm.ptr {
  %base = memref.extract_aligned_pointer_as_index %t : memref<64x128xf16> -> index
  %p = call @words(%base, %cols, %rows) : (index, index, index) -> !llvm.ptr
  return %p : !llvm.ptr
}
func.func @words(%base: index, %cols: index, %rows: index) -> !llvm.ptr {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c6 = arith.constant 6 : index
  %c10 = arith.constant 10 : index
  %zero = arith.constant 0 : i64
  %words = memref.alloc() : memref<10xi64>
  scf.for %w = %c0 to %c10 step %c1 {
    memref.store %zero, %words[%w] : memref<10xi64>
  }
  %b64 = arith.index_cast %base : index to i64
  %d0 = arith.index_cast %cols : index to i64
  %d1 = arith.index_cast %rows : index to i64
  %two = arith.constant 2 : i64
  %s1 = arith.muli %d0, %two : i64
  memref.store %b64, %words[%c0] : memref<10xi64>
  memref.store %d0, %words[%c1] : memref<10xi64>
  memref.store %d1, %words[%c2] : memref<10xi64>
  memref.store %s1, %words[%c6] : memref<10xi64>
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
  // The maps, as the runtime's CPU device writes them: the tensor's
  // address, its dims innermost first, the bytes between its rows.
  %pa = call @map(%a, %c64, %c64) : (memref<64x64xf16>, index, index) -> !llvm.ptr
  %pb = call @mapb(%b, %c128, %c64) : (memref<64x128xf16>, index, index) -> !llvm.ptr
  %out = memref.alloc() : memref<64x128xf32>
  call @twice(%pa, %pb, %out) : (!llvm.ptr, !llvm.ptr, memref<64x128xf32>) -> ()
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
