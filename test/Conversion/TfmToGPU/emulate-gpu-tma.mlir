// Tests that tfm-emulate-gpu-kernels runs TMA loads with their timing and
// layout: nvgpu.tma.async.load lands at the wait on its mbarrier, its
// destination reading as poison before, with each 16-byte chunk of a row
// of 128 bytes XORed with the row's index mod 8 (swizzle_128b) and zeros
// where the box lies outside the tensor. The kernel reads each element
// back at the swizzled place as the ISA's table gives it, so the output
// must equal the tensor's tile; the test compares against plain loops and
// prints the largest difference, which must be 0.
// RUN: tfm-opt %s -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// The mutations: no wait (the reads see poison), a barrier that expects
// half the box's bytes (the load completes more than its phase expects),
// and a kernel that reads without the swizzle.
// RUN: sed -e '/the NOWAIT run deletes/d' %s | tfm-opt -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s --check-prefix=RACE
// RUN: sed -e 's/%bytes = arith.constant 1024 : index/%bytes = arith.constant 512 : index/' %s | tfm-opt -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | not --crash stdbuf -o0 mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils 2>&1 | FileCheck %s --check-prefix=BYTES
// RUN: sed -e 's/%at = arith.xori %linear, %flip : index/%at = arith.addi %linear, %c0 : index/' %s | tfm-opt -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s --check-prefix=UNSWIZZLED
// BYTES: tfm-emulate-gpu-kernels: an nvgpu.tma.async.load completes more bytes than its barrier's phase expects

// Two boxes of 8 x 32 floats of a 20 x 40 tensor T[r][c] = 100 r + c + 1,
// one per stage and barrier: at (row 0, column 0), and at (16, 32), of
// which 4 rows and 8 columns lie inside the tensor.
// CHECK-LABEL: largest difference
// CHECK-NEXT: 0
// CHECK-LABEL: second box, first row
// CHECK-NEXT: ( 1633, 1634, 1635, 1636, 1637, 1638, 1639, 1640, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 )
// RACE-LABEL: largest difference
// RACE-NEXT: nan
// UNSWIZZLED-LABEL: largest difference
// UNSWIZZLED-NOT: {{^}}0{{$}}
!map = !nvgpu.tensormap.descriptor<tensor = memref<8x32xf32, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>

func.func @two_boxes(%ptr: !llvm.ptr, %out: memref<2x8x32xf32>) {
  // As the emulation's runtime passes a tensor map: a pointer to its words.
  %map = builtin.unrealized_conversion_cast %ptr : !llvm.ptr to !map
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1)
             workgroup(%stage : memref<2x8x32xf32, #gpu.address_space<workgroup>>) {
    %c0 = arith.constant 0 : index
    %c1_ = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c7 = arith.constant 7 : index
    %c16 = arith.constant 16 : index
    %c32 = arith.constant 32 : index
    %bytes = arith.constant 1024 : index
    %ticks = arith.constant 10000000 : index
    %even = arith.constant false
    %bars = nvgpu.mbarrier.create -> !bars
    %first = arith.cmpi eq, %tx, %c0 : index
    scf.if %first {
      nvgpu.mbarrier.init %bars[%c0], %c1_ : !bars
      nvgpu.mbarrier.init %bars[%c1_], %c1_ : !bars
    }
    gpu.barrier
    scf.if %first {
      %s0 = memref.subview %stage[0, 0, 0] [1, 8, 32] [1, 1, 1] : memref<2x8x32xf32, #gpu.address_space<workgroup>> to memref<8x32xf32, strided<[32, 1]>, #gpu.address_space<workgroup>>
      %d0 = memref.cast %s0 : memref<8x32xf32, strided<[32, 1]>, #gpu.address_space<workgroup>> to memref<8x32xf32, strided<[32, 1], offset: ?>, #gpu.address_space<workgroup>>
      nvgpu.mbarrier.arrive.expect_tx %bars[%c0], %bytes : !bars
      nvgpu.tma.async.load %map[%c0, %c0], %bars[%c0] to %s0 : !map, !bars -> memref<8x32xf32, strided<[32, 1]>, #gpu.address_space<workgroup>>
      %s1 = memref.subview %stage[1, 0, 0] [1, 8, 32] [1, 1, 1] : memref<2x8x32xf32, #gpu.address_space<workgroup>> to memref<8x32xf32, strided<[32, 1], offset: 256>, #gpu.address_space<workgroup>>
      nvgpu.mbarrier.arrive.expect_tx %bars[%c1_], %bytes : !bars
      nvgpu.tma.async.load %map[%c32, %c16], %bars[%c1_] to %s1 : !map, !bars -> memref<8x32xf32, strided<[32, 1], offset: 256>, #gpu.address_space<workgroup>>
    }
    nvgpu.mbarrier.try_wait.parity %bars[%c0], %even, %ticks : !bars // the NOWAIT run deletes
    nvgpu.mbarrier.try_wait.parity %bars[%c1_], %even, %ticks : !bars // the NOWAIT run deletes
    // Thread t reads row t / 32, column t mod 32 of each box, at its
    // swizzled place: the 16-byte chunk (4 floats) XORed with the row mod 8.
    %r = arith.divui %tx, %c32 : index
    %c = arith.remui %tx, %c32 : index
    %row = arith.muli %r, %c32 : index
    %linear = arith.addi %row, %c : index
    %rmod = arith.remui %r, %c32 : index
    %r8 = arith.andi %rmod, %c7 : index
    %flip = arith.muli %r8, %c4 : index
    %at = arith.xori %linear, %flip : index
    %ar = arith.divui %at, %c32 : index
    %ac = arith.remui %at, %c32 : index
    %v0 = memref.load %stage[%c0, %ar, %ac] : memref<2x8x32xf32, #gpu.address_space<workgroup>>
    %v1 = memref.load %stage[%c1_, %ar, %ac] : memref<2x8x32xf32, #gpu.address_space<workgroup>>
    memref.store %v0, %out[%c0, %r, %c] : memref<2x8x32xf32>
    memref.store %v1, %out[%c1_, %r, %c] : memref<2x8x32xf32>
    gpu.terminator
  }
  return
}

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c20 = arith.constant 20 : index
  %c32 = arith.constant 32 : index
  %c40 = arith.constant 40 : index
  %zero = arith.constant 0.0 : f32
  %t = memref.alloc() : memref<20x40xf32>
  scf.for %r = %c0 to %c20 step %c1 {
    scf.for %c = %c0 to %c40 step %c1 {
      %h = arith.muli %r, %c32 : index
      %rr = arith.index_cast %r : index to i32
      %cc = arith.index_cast %c : index to i32
      %hundred = arith.constant 100 : i32
      %one = arith.constant 1 : i32
      %a = arith.muli %rr, %hundred : i32
      %b = arith.addi %a, %cc : i32
      %v = arith.addi %b, %one : i32
      %f = arith.sitofp %v : i32 to f32
      memref.store %f, %t[%r, %c] : memref<20x40xf32>
    }
  }
  // The map: the tensor's address, its dims innermost first, and the bytes
  // between its rows.
  %words = memref.alloc() : memref<10xi64>
  %zero64 = arith.constant 0 : i64
  scf.for %w = %c0 to %c8 step %c1 {
    memref.store %zero64, %words[%w] : memref<10xi64>
  }
  %base = memref.extract_aligned_pointer_as_index %t : memref<20x40xf32> -> index
  %base64 = arith.index_cast %base : index to i64
  %d0 = arith.constant 40 : i64
  %d1 = arith.constant 20 : i64
  %s1 = arith.constant 160 : i64
  memref.store %base64, %words[%c0] : memref<10xi64>
  memref.store %d0, %words[%c1] : memref<10xi64>
  memref.store %d1, %words[%c2] : memref<10xi64>
  %c6 = arith.constant 6 : index
  memref.store %s1, %words[%c6] : memref<10xi64>
  %wp = memref.extract_aligned_pointer_as_index %words : memref<10xi64> -> index
  %wp64 = arith.index_cast %wp : index to i64
  %ptr = llvm.inttoptr %wp64 : i64 to !llvm.ptr
  %out = memref.alloc() : memref<2x8x32xf32>
  call @two_boxes(%ptr, %out) : (!llvm.ptr, memref<2x8x32xf32>) -> ()
  // The largest difference from the tensor's tiles (0 outside it).
  %worst = scf.for %s = %c0 to %c2 step %c1 iter_args(%w0 = %zero) -> (f32) {
    %ws = scf.for %r = %c0 to %c8 step %c1 iter_args(%w1 = %w0) -> (f32) {
      %wr = scf.for %c = %c0 to %c32 step %c1 iter_args(%w2 = %w1) -> (f32) {
        %row0 = arith.muli %s, %c16 : index
        %col0 = arith.muli %s, %c32 : index
        %gr = arith.addi %row0, %r : index
        %gc = arith.addi %col0, %c : index
        %inr = arith.cmpi ult, %gr, %c20 : index
        %inc = arith.cmpi ult, %gc, %c40 : index
        %in = arith.andi %inr, %inc : i1
        %want = scf.if %in -> (f32) {
          %x = memref.load %t[%gr, %gc] : memref<20x40xf32>
          scf.yield %x : f32
        } else {
          scf.yield %zero : f32
        }
        %got = memref.load %out[%s, %r, %c] : memref<2x8x32xf32>
        %d = arith.subf %got, %want : f32
        %ad = math.absf %d : f32
        %m = arith.maximumf %w2, %ad : f32
        scf.yield %m : f32
      }
      scf.yield %wr : f32
    }
    scf.yield %ws : f32
  }
  vector.print str "largest difference\n"
  vector.print %worst : f32
  vector.print str "second box, first row\n"
  %row = vector.load %out[%c1, %c0, %c0] : memref<2x8x32xf32>, vector<32xf32>
  vector.print %row : vector<32xf32>
  return
}
