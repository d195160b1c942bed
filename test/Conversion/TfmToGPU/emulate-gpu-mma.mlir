// Tests that tfm-emulate-gpu-kernels runs nvgpu.mma.sync over a warp's
// lanes with the PTX fragment layouts (WarpSemantics.h): a GEMM tile as
// tfm-tile-gpu-matmul writes it, distributed over the lanes by MLIR's
// convert-vector-to-gpu (the GPU pipeline's step), must give what plain
// loops over the same f16 values give, and the same kernel on bf16 bit
// patterns held as f16 (tfm-retype-bf16-tiles' form, marked on the launch)
// what loops over the bf16 values give. The inputs are small integers, so
// every sum is exact and the two must agree bit for bit: the largest
// difference prints 0, and a wrong fragment layout or a NaN of a lane left
// out prints another value.
// RUN: mlir-opt %s --convert-vector-to-gpu=use-nvgpu=true | tfm-opt -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>

// One warp multiplies a 16 x 32 A by a 32 x 8 B (given as its transpose,
// as a linear layer's weight is), k in two steps of 16, so that the
// accumulators are carried around the mma.sync.
func.func @tile(%a: memref<16x32xf16>, %b: memref<8x32xf16>, %c: memref<16x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %pad = arith.constant 0.0 : f16
    %zero = arith.constant dense<0.0> : vector<16x8xf32>
    %r = scf.for %k = %c0 to %c32 step %c16 iter_args(%acc = %zero) -> vector<16x8xf32> {
      %va = vector.transfer_read %a[%c0, %k], %pad {in_bounds = [true, true]} : memref<16x32xf16>, vector<16x16xf16>
      %vb = vector.transfer_read %b[%c0, %k], %pad {in_bounds = [true, true]} : memref<8x32xf16>, vector<8x16xf16>
      %d = vector.contract {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va, %vb, %acc : vector<16x16xf16>, vector<8x16xf16> into vector<16x8xf32>
      scf.yield %d : vector<16x8xf32>
    }
    vector.transfer_write %r, %c[%c0, %c0] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x8xf32>
    gpu.terminator
  }
  return
}

// The same, its operands bf16 bit patterns.
func.func @tile_bf16(%a: memref<16x32xf16>, %b: memref<8x32xf16>, %c: memref<16x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %pad = arith.constant 0.0 : f16
    %zero = arith.constant dense<0.0> : vector<16x8xf32>
    %r = scf.for %k = %c0 to %c32 step %c16 iter_args(%acc = %zero) -> vector<16x8xf32> {
      %va = vector.transfer_read %a[%c0, %k], %pad {in_bounds = [true, true]} : memref<16x32xf16>, vector<16x16xf16>
      %vb = vector.transfer_read %b[%c0, %k], %pad {in_bounds = [true, true]} : memref<8x32xf16>, vector<8x16xf16>
      %d = vector.contract {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va, %vb, %acc : vector<16x16xf16>, vector<8x16xf16> into vector<16x8xf32>
      scf.yield %d : vector<16x8xf32>
    }
    vector.transfer_write %r, %c[%c0, %c0] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x8xf32>
    gpu.terminator
  } {tfm.mma_operand_type = bf16}
  return
}

// A[m][k] = (3m + k) mod 7 - 3 and B[k][n] = (n + 2k) mod 5 - 2, in f32.
func.func @inputs(%a: memref<16x32xf32>, %b: memref<8x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  scf.for %k = %c0 to %c32 step %c1 {
    scf.for %m = %c0 to %c16 step %c1 {
      %t = arith.muli %m, %c3 : index
      %u = arith.addi %t, %k : index
      %v = arith.remui %u, %c7 : index
      %w = arith.subi %v, %c3 : index
      %i = arith.index_cast %w : index to i32
      %f = arith.sitofp %i : i32 to f32
      memref.store %f, %a[%m, %k] : memref<16x32xf32>
    }
    scf.for %n = %c0 to %c8 step %c1 {
      %t = arith.muli %k, %c2 : index
      %u = arith.addi %t, %n : index
      %v = arith.remui %u, %c5 : index
      %w = arith.subi %v, %c2 : index
      %i = arith.index_cast %w : index to i32
      %f = arith.sitofp %i : i32 to f32
      memref.store %f, %b[%n, %k] : memref<8x32xf32>
    }
  }
  return
}

// C = A B by plain loops, and the largest |C - D|.
func.func @check(%a: memref<16x32xf32>, %b: memref<8x32xf32>, %d: memref<16x8xf32>) -> (f32, f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %zero = arith.constant 0.0 : f32
  %r:2 = scf.for %m = %c0 to %c16 step %c1 iter_args(%worst = %zero, %sum = %zero) -> (f32, f32) {
    %s:2 = scf.for %n = %c0 to %c8 step %c1 iter_args(%w = %worst, %t = %sum) -> (f32, f32) {
      %dot = scf.for %k = %c0 to %c32 step %c1 iter_args(%acc = %zero) -> f32 {
        %x = memref.load %a[%m, %k] : memref<16x32xf32>
        %y = memref.load %b[%n, %k] : memref<8x32xf32>
        %p = arith.mulf %x, %y : f32
        %q = arith.addf %acc, %p : f32
        scf.yield %q : f32
      }
      %got = memref.load %d[%m, %n] : memref<16x8xf32>
      %diff = arith.subf %got, %dot : f32
      %abs = math.absf %diff : f32
      %w2 = arith.maximumf %w, %abs : f32
      %mag = math.absf %dot : f32
      %t2 = arith.addf %t, %mag : f32
      scf.yield %w2, %t2 : f32, f32
    }
    scf.yield %s#0, %s#1 : f32, f32
  }
  return %r#0, %r#1 : f32, f32
}

// CHECK: f16 tile: largest difference 0 of total 472
// CHECK: bf16 tile: largest difference 0 of total 472
func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %a = memref.alloc() : memref<16x32xf32>
  %b = memref.alloc() : memref<8x32xf32>
  call @inputs(%a, %b) : (memref<16x32xf32>, memref<8x32xf32>) -> ()
  %a16 = memref.alloc() : memref<16x32xf16>
  %b16 = memref.alloc() : memref<8x32xf16>
  %abf = memref.alloc() : memref<16x32xf16>
  %bbf = memref.alloc() : memref<8x32xf16>
  scf.for %k = %c0 to %c32 step %c1 {
    scf.for %m = %c0 to %c16 step %c1 {
      %x = memref.load %a[%m, %k] : memref<16x32xf32>
      %h = arith.truncf %x : f32 to f16
      memref.store %h, %a16[%m, %k] : memref<16x32xf16>
      %g = arith.truncf %x : f32 to bf16
      %gh = arith.bitcast %g : bf16 to f16
      memref.store %gh, %abf[%m, %k] : memref<16x32xf16>
    }
    scf.for %n = %c0 to %c8 step %c1 {
      %x = memref.load %b[%n, %k] : memref<8x32xf32>
      %h = arith.truncf %x : f32 to f16
      memref.store %h, %b16[%n, %k] : memref<8x32xf16>
      %g = arith.truncf %x : f32 to bf16
      %gh = arith.bitcast %g : bf16 to f16
      memref.store %gh, %bbf[%n, %k] : memref<8x32xf16>
    }
  }
  %d = memref.alloc() : memref<16x8xf32>
  call @tile(%a16, %b16, %d) : (memref<16x32xf16>, memref<8x32xf16>, memref<16x8xf32>) -> ()
  %w:2 = call @check(%a, %b, %d) : (memref<16x32xf32>, memref<8x32xf32>, memref<16x8xf32>) -> (f32, f32)
  vector.print str "f16 tile: largest difference "
  vector.print %w#0 : f32 punctuation <no_punctuation>
  vector.print str " of total "
  vector.print %w#1 : f32
  %e = memref.alloc() : memref<16x8xf32>
  call @tile_bf16(%abf, %bbf, %e) : (memref<16x32xf16>, memref<8x32xf16>, memref<16x8xf32>) -> ()
  %v:2 = call @check(%a, %b, %e) : (memref<16x32xf32>, memref<8x32xf32>, memref<16x8xf32>) -> (f32, f32)
  vector.print str "bf16 tile: largest difference "
  vector.print %v#0 : f32 punctuation <no_punctuation>
  vector.print str " of total "
  vector.print %v#1 : f32
  return
}
