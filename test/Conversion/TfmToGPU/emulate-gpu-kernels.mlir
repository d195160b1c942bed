// Tests tfm-emulate-gpu-kernels: a block's threads run in phases between
// barriers, values that cross a barrier are kept per thread, and workgroup
// memory starts poisoned, so a missing barrier shows as NaN in the result.
// RUN: tfm-opt %s -tfm-emulate-gpu-kernels | FileCheck %s --check-prefix=IR
// RUN: tfm-opt %s -tfm-emulate-gpu-kernels | mlir-opt -convert-scf-to-cf -expand-strided-metadata -finalize-memref-to-llvm -convert-arith-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils | FileCheck %s --check-prefix=EXEC

// Each block of 8 threads reverses its 8 elements through workgroup memory.
// IR-LABEL: func.func @reverse
// IR-NOT: gpu.launch
// IR: memref.alloca() {alignment = 1024 : i64} : memref<8xf32>
// IR: memref.alloca(%{{.+}}) : memref<?xindex>
// IR-COUNT-2: scf.for %{{.+}} = %{{.+}} to %[[THREADS:.+]] step
func.func @reverse(%in: memref<16xf32>, %out: memref<16xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1)
             workgroup(%sh : memref<8xf32, #gpu.address_space<workgroup>>) {
    %base = arith.muli %bx, %c8 : index
    %i = arith.addi %base, %tx : index
    %v = memref.load %in[%i] : memref<16xf32>
    memref.store %v, %sh[%tx] : memref<8xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %r = arith.subi %c7, %tx : index
    %w = memref.load %sh[%r] : memref<8xf32, #gpu.address_space<workgroup>>
    memref.store %w, %out[%i] : memref<16xf32>
    gpu.terminator
  }
  return
}

// The same kernel without its barrier: threads 0-3 read elements 7-4
// before threads 4-7 have written them.
func.func @reverse_without_barrier(%in: memref<16xf32>, %out: memref<16xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1)
             workgroup(%sh : memref<8xf32, #gpu.address_space<workgroup>>) {
    %base = arith.muli %bx, %c8 : index
    %i = arith.addi %base, %tx : index
    %v = memref.load %in[%i] : memref<16xf32>
    memref.store %v, %sh[%tx] : memref<8xf32, #gpu.address_space<workgroup>>
    %r = arith.subi %c7, %tx : index
    %w = memref.load %sh[%r] : memref<8xf32, #gpu.address_space<workgroup>>
    memref.store %w, %out[%i] : memref<16xf32>
    gpu.terminator
  }
  return
}

// One block of 4 threads walks 4 tiles of 4 elements in a loop, staging
// each tile in workgroup memory: thread t writes the tile's prefix sum at t.
// The tile count is computed in the body, the same for every thread.
// IR-LABEL: func.func @tile_prefix_sums
// IR-NOT: gpu.barrier
func.func @tile_prefix_sums(%in: memref<16xf32>, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1)
             workgroup(%sh : memref<4xf32, #gpu.address_space<workgroup>>) {
    %tiles = arith.muli %c2, %c2 : index
    scf.for %k = %c0 to %tiles step %c1 {
      %base = arith.muli %k, %c4 : index
      %i = arith.addi %base, %tx : index
      %v = memref.load %in[%i] : memref<16xf32>
      memref.store %v, %sh[%tx] : memref<4xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %t1 = arith.addi %tx, %c1 : index
      %zero = arith.constant 0.0 : f32
      %sum = scf.for %j = %c0 to %t1 step %c1 iter_args(%acc = %zero) -> f32 {
        %e = memref.load %sh[%j] : memref<4xf32, #gpu.address_space<workgroup>>
        %a = arith.addf %acc, %e : f32
        scf.yield %a : f32
      }
      memref.store %sum, %out[%i] : memref<16xf32>
      gpu.barrier
    }
    gpu.terminator
  }
  return
}

// The same without the barrier that ends each iteration: thread 0 stages
// the next tile's element before threads 1-3 have read the current one.
func.func @tile_prefix_sums_without_last_barrier(%in: memref<16xf32>, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1)
             workgroup(%sh : memref<4xf32, #gpu.address_space<workgroup>>) {
    scf.for %k = %c0 to %c4 step %c1 {
      %base = arith.muli %k, %c4 : index
      %i = arith.addi %base, %tx : index
      %v = memref.load %in[%i] : memref<16xf32>
      memref.store %v, %sh[%tx] : memref<4xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %t1 = arith.addi %tx, %c1 : index
      %zero = arith.constant 0.0 : f32
      %sum = scf.for %j = %c0 to %t1 step %c1 iter_args(%acc = %zero) -> f32 {
        %e = memref.load %sh[%j] : memref<4xf32, #gpu.address_space<workgroup>>
        %a = arith.addf %acc, %e : f32
        scf.yield %a : f32
      }
      memref.store %sum, %out[%i] : memref<16xf32>
    }
    gpu.terminator
  }
  return
}

// EXEC: [7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8]
// EXEC: [nan, nan, nan, nan, 3, 2, 1, 0, nan, nan, nan, nan, 11, 10, 9, 8]
// EXEC: [0, 1, 3, 6, 4, 9, 15, 22, 8, 17, 27, 38, 12, 25, 39, 54]
// Without it each thread sums, then stages its element of the next tile,
// before the next thread sums: thread t of tile k reads the next tile's
// elements 0 to t - 1. Tile 0: 0, 4 + 1, 4 + 5 + 2, 4 + 5 + 6 + 3; and so
// on, until the last tile, which no later one overwrites.
// EXEC: [0, 5, 11, 18, 4, 13, 23, 34, 8, 21, 35, 50, 12, 25, 39, 54]
func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %in = memref.alloc() : memref<16xf32>
  %out = memref.alloc() : memref<16xf32>
  scf.for %i = %c0 to %c16 step %c1 {
    %n = arith.index_cast %i : index to i32
    %f = arith.sitofp %n : i32 to f32
    memref.store %f, %in[%i] : memref<16xf32>
  }
  %u = memref.cast %out : memref<16xf32> to memref<*xf32>
  call @reverse(%in, %out) : (memref<16xf32>, memref<16xf32>) -> ()
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  call @reverse_without_barrier(%in, %out) : (memref<16xf32>, memref<16xf32>) -> ()
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  call @tile_prefix_sums(%in, %out) : (memref<16xf32>, memref<16xf32>) -> ()
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  call @tile_prefix_sums_without_last_barrier(%in, %out) : (memref<16xf32>, memref<16xf32>) -> ()
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  memref.dealloc %in : memref<16xf32>
  memref.dealloc %out : memref<16xf32>
  return
}

func.func private @printMemrefF32(memref<*xf32>)
