// Tests that tfm-emulate-gpu-kernels runs nvgpu.ldmatrix (with and without
// .trans) and the tf32 shapes of nvgpu.mma.sync over a warp's lanes with
// the PTX layouts. The kernels address and store their fragments by the
// ISA's formulas, written here apart from WarpSemantics.h; the values a
// lane receives are worked out by hand, and the products are checked
// against plain loops over the same values (small integers, so exact).
// RUN: tfm-opt %s -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// RUN: sed -e '/the RACE run deletes/d' %s | tfm-opt -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s --check-prefix=RACE

// ldmatrix.x4 from a 32 x 8 tile in shared memory, M[r][c] = 8r + c, each
// lane giving the address of row tx (so matrix j is rows 8j to 8j + 7).
// Lane l receives from matrix j row l / 4, columns 2 (l mod 4) and the
// next: lane 13 gets 8 (8j + 3) + 2 and + 3.
// CHECK-LABEL: ldmatrix.x4
// CHECK: [0,   1,   64,   65,   128,   129,   192,   193]
// CHECK: [26,   27,   90,   91,   154,   155,   218,   219]
// CHECK: [62,   63,   126,   127,   190,   191,   254,   255]
func.func @x4(%out: memref<32x8xf32>) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
             workgroup(%tile : memref<32x8xf16, #gpu.address_space<workgroup>>) {
    %c0 = arith.constant 0 : index
    %c1_ = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    scf.for %c = %c0 to %c8 step %c1_ {
      %r8 = arith.muli %tx, %c8 : index
      %v = arith.addi %r8, %c : index
      %i = arith.index_cast %v : index to i32
      %f = arith.sitofp %i : i32 to f16
      memref.store %f, %tile[%tx, %c] : memref<32x8xf16, #gpu.address_space<workgroup>>
    }
    gpu.barrier
    %m = nvgpu.ldmatrix %tile[%tx, %c0] {numTiles = 4 : i32, transpose = false} : memref<32x8xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
    %e = arith.extf %m : vector<4x2xf16> to vector<4x2xf32>
    %flat = vector.shape_cast %e : vector<4x2xf32> to vector<8xf32>
    vector.store %flat, %out[%tx, %c0] : memref<32x8xf32>, vector<8xf32>
    gpu.terminator
  }
  return
}

// ldmatrix.x2.trans from a 16 x 8 tile, B[k][n] = 8k + n, lanes 0 to 15
// giving the rows. Lane l receives from matrix j the elements at row
// 2 (l mod 4) (and the next), column l / 4: lane 13 gets 8 (8j + 2) + 3 and
// 8 (8j + 3) + 3.
// CHECK-LABEL: ldmatrix.x2.trans
// CHECK: [0,   8,   64,   72]
// CHECK: [19,   27,   83,   91]
// CHECK: [55,   63,   119,   127]
func.func @x2_trans(%out: memref<32x4xf32>) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
             workgroup(%tile : memref<16x8xf16, #gpu.address_space<workgroup>>) {
    %c0 = arith.constant 0 : index
    %c1_ = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %row = arith.remui %tx, %c16 : index
    %writer = arith.cmpi ult, %tx, %c16 : index
    scf.if %writer {
      scf.for %c = %c0 to %c8 step %c1_ {
        %r8 = arith.muli %tx, %c8 : index
        %v = arith.addi %r8, %c : index
        %i = arith.index_cast %v : index to i32
        %f = arith.sitofp %i : i32 to f16
        memref.store %f, %tile[%tx, %c] : memref<16x8xf16, #gpu.address_space<workgroup>>
      }
    }
    gpu.barrier
    %m = nvgpu.ldmatrix %tile[%row, %c0] {numTiles = 2 : i32, transpose = true} : memref<16x8xf16, #gpu.address_space<workgroup>> -> vector<2x2xf16>
    %e = arith.extf %m : vector<2x2xf16> to vector<2x2xf32>
    %flat = vector.shape_cast %e : vector<2x2xf32> to vector<4xf32>
    vector.store %flat, %out[%tx, %c0] : memref<32x4xf32>, vector<4xf32>
    gpu.terminator
  }
  return
}

// A 16 x 16 A and a 16 x 8 B staged in shared memory by two warps, each
// thread copying four elements of A and two of B, so that each warp reads
// what the other wrote and only the barrier orders them. Both warps then
// take A's fragment by ldmatrix.x4 (lane l gives row l mod 8 +
// 8 ((l / 8) mod 2), column 8 (l / 16)) and B's by ldmatrix.x2.trans,
// multiply them by mma.sync m16n8k16, and the first stores D: lane l its
// elements i at row l / 4 + 8 (i / 2), column 2 (l mod 4) + i mod 2.
func.func @staged(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %d: memref<16x8xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1)
             workgroup(%sa : memref<16x16xf16, #gpu.address_space<workgroup>>,
                       %sb : memref<16x8xf16, #gpu.address_space<workgroup>>) {
    %c0 = arith.constant 0 : index
    %c1_ = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %c32 = arith.constant 32 : index
    %row = arith.divui %tx, %c4 : index
    %quarter = arith.remui %tx, %c4 : index
    %acol = arith.muli %quarter, %c4 : index
    scf.for %j = %c0 to %c4 step %c1_ {
      %col = arith.addi %acol, %j : index
      %x = memref.load %a[%row, %col] : memref<16x16xf16>
      memref.store %x, %sa[%row, %col] : memref<16x16xf16, #gpu.address_space<workgroup>>
    }
    %bcol = arith.muli %quarter, %c2 : index
    scf.for %j = %c0 to %c2 step %c1_ {
      %col = arith.addi %bcol, %j : index
      %x = memref.load %b[%row, %col] : memref<16x8xf16>
      memref.store %x, %sb[%row, %col] : memref<16x8xf16, #gpu.address_space<workgroup>>
    }
    gpu.barrier // the barrier that the RACE run deletes
    %lane = arith.remui %tx, %c32 : index
    %r8 = arith.remui %lane, %c8 : index
    %q = arith.divui %lane, %c8 : index
    %q2 = arith.remui %q, %c2 : index
    %q8 = arith.muli %q2, %c8 : index
    %ra = arith.addi %r8, %q8 : index
    %h = arith.divui %lane, %c16 : index
    %ca = arith.muli %h, %c8 : index
    %fa = nvgpu.ldmatrix %sa[%ra, %ca] {numTiles = 4 : i32, transpose = false} : memref<16x16xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
    %rb = arith.remui %lane, %c16 : index
    %fb = nvgpu.ldmatrix %sb[%rb, %c0] {numTiles = 2 : i32, transpose = true} : memref<16x8xf16, #gpu.address_space<workgroup>> -> vector<2x2xf16>
    %zero = arith.constant dense<0.0> : vector<2x2xf32>
    %fd = nvgpu.mma.sync(%fa, %fb, %zero) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
    %first = arith.cmpi ult, %tx, %c32 : index
    scf.if %first {
      %g = arith.divui %lane, %c4 : index
      %t = arith.remui %lane, %c4 : index
      %t2 = arith.muli %t, %c2 : index
      %g8 = arith.addi %g, %c8 : index
      %t21 = arith.addi %t2, %c1_ : index
      %d0 = vector.extract %fd[0, 0] : f32 from vector<2x2xf32>
      %d1 = vector.extract %fd[0, 1] : f32 from vector<2x2xf32>
      %d2 = vector.extract %fd[1, 0] : f32 from vector<2x2xf32>
      %d3 = vector.extract %fd[1, 1] : f32 from vector<2x2xf32>
      memref.store %d0, %d[%g, %t2] : memref<16x8xf32>
      memref.store %d1, %d[%g, %t21] : memref<16x8xf32>
      memref.store %d2, %d[%g8, %t2] : memref<16x8xf32>
      memref.store %d3, %d[%g8, %t21] : memref<16x8xf32>
    }
    gpu.terminator
  }
  return
}

// mma.sync m16n8k8 on tf32: lane l (g = l / 4, t = l mod 4) holds A's
// elements at (g + 8 (i mod 2), t + 4 (i / 2)) and B's at (t + 4i, g),
// and stores D as above.
func.func @tf32(%a: memref<16x8xf32>, %b: memref<8x8xf32>, %d: memref<16x8xf32>) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %c0 = arith.constant 0 : index
    %c1_ = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %g = arith.divui %tx, %c4 : index
    %t = arith.remui %tx, %c4 : index
    %g8 = arith.addi %g, %c8 : index
    %t4 = arith.addi %t, %c4 : index
    %a0 = memref.load %a[%g, %t] : memref<16x8xf32>
    %a1 = memref.load %a[%g8, %t] : memref<16x8xf32>
    %a2 = memref.load %a[%g, %t4] : memref<16x8xf32>
    %a3 = memref.load %a[%g8, %t4] : memref<16x8xf32>
    %b0 = memref.load %b[%t, %g] : memref<8x8xf32>
    %b1 = memref.load %b[%t4, %g] : memref<8x8xf32>
    %ea = arith.constant dense<0.0> : vector<4x1xf32>
    %va0 = vector.insert %a0, %ea [0, 0] : f32 into vector<4x1xf32>
    %va1 = vector.insert %a1, %va0 [1, 0] : f32 into vector<4x1xf32>
    %va2 = vector.insert %a2, %va1 [2, 0] : f32 into vector<4x1xf32>
    %va = vector.insert %a3, %va2 [3, 0] : f32 into vector<4x1xf32>
    %eb = arith.constant dense<0.0> : vector<2x1xf32>
    %vb0 = vector.insert %b0, %eb [0, 0] : f32 into vector<2x1xf32>
    %vb = vector.insert %b1, %vb0 [1, 0] : f32 into vector<2x1xf32>
    %zero = arith.constant dense<0.0> : vector<2x2xf32>
    %fd = nvgpu.mma.sync(%va, %vb, %zero) {mmaShape = [16, 8, 8], tf32Enabled} : (vector<4x1xf32>, vector<2x1xf32>, vector<2x2xf32>) -> vector<2x2xf32>
    %t2 = arith.muli %t, %c2 : index
    %t21 = arith.addi %t2, %c1_ : index
    %d0 = vector.extract %fd[0, 0] : f32 from vector<2x2xf32>
    %d1 = vector.extract %fd[0, 1] : f32 from vector<2x2xf32>
    %d2 = vector.extract %fd[1, 0] : f32 from vector<2x2xf32>
    %d3 = vector.extract %fd[1, 1] : f32 from vector<2x2xf32>
    memref.store %d0, %d[%g, %t2] : memref<16x8xf32>
    memref.store %d1, %d[%g, %t21] : memref<16x8xf32>
    memref.store %d2, %d[%g8, %t2] : memref<16x8xf32>
    memref.store %d3, %d[%g8, %t21] : memref<16x8xf32>
    gpu.terminator
  }
  return
}

// The largest |D - A B| by plain loops, A M x K and B K x N in f32.
func.func @check(%a: memref<?x?xf32>, %b: memref<?x?xf32>, %d: memref<16x8xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %kk = memref.dim %a, %c1 : memref<?x?xf32>
  %zero = arith.constant 0.0 : f32
  %r = scf.for %m = %c0 to %c16 step %c1 iter_args(%worst = %zero) -> f32 {
    %s = scf.for %n = %c0 to %c8 step %c1 iter_args(%w = %worst) -> f32 {
      %dot = scf.for %k = %c0 to %kk step %c1 iter_args(%acc = %zero) -> f32 {
        %x = memref.load %a[%m, %k] : memref<?x?xf32>
        %y = memref.load %b[%k, %n] : memref<?x?xf32>
        %p = arith.mulf %x, %y : f32
        %q = arith.addf %acc, %p : f32
        scf.yield %q : f32
      }
      %got = memref.load %d[%m, %n] : memref<16x8xf32>
      %diff = arith.subf %got, %dot : f32
      %abs = math.absf %diff : f32
      %w2 = arith.maximumf %w, %abs : f32
      scf.yield %w2 : f32
    }
    scf.yield %s : f32
  }
  return %r : f32
}

// X[r][c] = (r + 3c) mod 7 - 3 + s, small integers.
func.func @fill(%x: memref<?x?xf32>, %s: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c7 = arith.constant 7 : index
  %rows = memref.dim %x, %c0 : memref<?x?xf32>
  %cols = memref.dim %x, %c1 : memref<?x?xf32>
  scf.for %r = %c0 to %rows step %c1 {
    scf.for %c = %c0 to %cols step %c1 {
      %t = arith.muli %c, %c3 : index
      %u = arith.addi %r, %t : index
      %u2 = arith.addi %u, %s : index
      %v = arith.remui %u2, %c7 : index
      %w = arith.subi %v, %c3 : index
      %i = arith.index_cast %w : index to i32
      %f = arith.sitofp %i : i32 to f32
      memref.store %f, %x[%r, %c] : memref<?x?xf32>
    }
  }
  return
}

// CHECK-LABEL: staged f16 mma
// CHECK-NEXT: 0
// RACE-LABEL: staged f16 mma
// RACE-NEXT: nan
// CHECK-LABEL: tf32 mma
// CHECK-NEXT: 0
func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %x4 = memref.alloc() : memref<32x8xf32>
  call @x4(%x4) : (memref<32x8xf32>) -> ()
  vector.print str "ldmatrix.x4\n"
  %x4u = memref.cast %x4 : memref<32x8xf32> to memref<*xf32>
  call @printMemrefF32(%x4u) : (memref<*xf32>) -> ()
  %x2 = memref.alloc() : memref<32x4xf32>
  call @x2_trans(%x2) : (memref<32x4xf32>) -> ()
  vector.print str "ldmatrix.x2.trans\n"
  %x2u = memref.cast %x2 : memref<32x4xf32> to memref<*xf32>
  call @printMemrefF32(%x2u) : (memref<*xf32>) -> ()

  %a = memref.alloc(%c16, %c16) : memref<?x?xf32>
  %b = memref.alloc(%c16, %c8) : memref<?x?xf32>
  call @fill(%a, %c0) : (memref<?x?xf32>, index) -> ()
  call @fill(%b, %c2) : (memref<?x?xf32>, index) -> ()
  %a16 = memref.alloc() : memref<16x16xf16>
  %b16 = memref.alloc() : memref<16x8xf16>
  scf.for %r = %c0 to %c16 step %c1 {
    scf.for %c = %c0 to %c16 step %c1 {
      %x = memref.load %a[%r, %c] : memref<?x?xf32>
      %h = arith.truncf %x : f32 to f16
      memref.store %h, %a16[%r, %c] : memref<16x16xf16>
    }
    scf.for %c = %c0 to %c8 step %c1 {
      %x = memref.load %b[%r, %c] : memref<?x?xf32>
      %h = arith.truncf %x : f32 to f16
      memref.store %h, %b16[%r, %c] : memref<16x8xf16>
    }
  }
  %d = memref.alloc() : memref<16x8xf32>
  call @staged(%a16, %b16, %d) : (memref<16x16xf16>, memref<16x8xf16>, memref<16x8xf32>) -> ()
  %w = call @check(%a, %b, %d) : (memref<?x?xf32>, memref<?x?xf32>, memref<16x8xf32>) -> f32
  vector.print str "staged f16 mma\n"
  vector.print %w : f32

  %at = memref.alloc(%c16, %c8) : memref<?x?xf32>
  %bt = memref.alloc(%c8, %c8) : memref<?x?xf32>
  call @fill(%at, %c1) : (memref<?x?xf32>, index) -> ()
  call @fill(%bt, %c2) : (memref<?x?xf32>, index) -> ()
  %as = memref.cast %at : memref<?x?xf32> to memref<16x8xf32>
  %bs = memref.cast %bt : memref<?x?xf32> to memref<8x8xf32>
  %dt = memref.alloc() : memref<16x8xf32>
  call @tf32(%as, %bs, %dt) : (memref<16x8xf32>, memref<8x8xf32>, memref<16x8xf32>) -> ()
  %wt = call @check(%at, %bt, %dt) : (memref<?x?xf32>, memref<?x?xf32>, memref<16x8xf32>) -> f32
  vector.print str "tf32 mma\n"
  vector.print %wt : f32
  return
}

func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}
