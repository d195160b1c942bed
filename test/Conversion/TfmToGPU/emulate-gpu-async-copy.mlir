// Tests that tfm-emulate-gpu-kernels runs nvgpu.device_async_copy with
// cp.async's timing: a copy lands at the cp.async.wait_group that covers
// its group, its destination reading as poison before, so that a pipeline
// that waits for too few groups, or reuses a stage before every thread has
// read it, computes NaN. The expected values are worked out by hand.
// RUN: tfm-opt %s -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// The mutations, each of which a correct emulation must expose: a wait for
// all but the two newest groups (the tile just issued and the one to be
// read), no wait at all, and no barrier before the next copy overwrites
// the stage the other threads read (thread 31 then reads the poison that
// thread 0 left in the element it reads, issuing the next copy).
// RUN: sed -e 's/numGroups = 1 : i32/numGroups = 2 : i32/' %s | tfm-opt -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s --check-prefix=RACE
// RUN: sed -e '/the NOWAIT run deletes/d' %s | tfm-opt -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s --check-prefix=RACE
// RUN: sed -e '/the REUSE run deletes/d' %s | tfm-opt -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s --check-prefix=RACE

// Eight tiles of 64 floats, T[k][j] = 64 k + j, staged through two shared
// buffers: 32 threads copy two floats each (8 bytes) of tile k + 1 while
// the block reads tile k. Thread t adds up element (2t + 3) mod 64 of each
// tile, which thread t + 1 copied: 64 (0 + ... + 7) + 8 ((2t + 3) mod 64).
// CHECK-LABEL: double-buffered
// CHECK-NEXT: ( 1816, 1832, 1848, 1864, 1880, 1896, 1912, 1928, 1944, 1960, 1976, 1992, 2008, 2024, 2040, 2056, 2072, 2088, 2104, 2120, 2136, 2152, 2168, 2184, 2200, 2216, 2232, 2248, 2264, 2280, 2296, 1800 )
// RACE-LABEL: double-buffered
// RACE-NEXT: {{.*}}nan
func.func @double_buffered(%tiles: memref<8x64xf32>, %out: memref<32xf32>) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
             workgroup(%stage : memref<2x64xf32, #gpu.address_space<workgroup>>) {
    %c0 = arith.constant 0 : index
    %c1_ = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c7 = arith.constant 7 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %zero = arith.constant 0.0 : f32
    %mine = arith.muli %tx, %c2 : index
    %first = nvgpu.device_async_copy %tiles[%c0, %mine], %stage[%c0, %mine], 2 : memref<8x64xf32> to memref<2x64xf32, #gpu.address_space<workgroup>>
    %g0 = nvgpu.device_async_create_group %first
    %at = arith.addi %mine, %c3 : index
    %read = arith.remui %at, %c64 : index
    %sum = scf.for %k = %c0 to %c8 step %c1_ iter_args(%acc = %zero) -> (f32) {
      %more = arith.cmpi ult, %k, %c7 : index
      scf.if %more {
        %next = arith.addi %k, %c1_ : index
        %s = arith.remui %next, %c2 : index
        %cp = nvgpu.device_async_copy %tiles[%next, %mine], %stage[%s, %mine], 2 : memref<8x64xf32> to memref<2x64xf32, #gpu.address_space<workgroup>>
      }
      // Committed even when empty, so that a group per iteration keeps
      // "all but the newest" meaning tile k.
      %g = nvgpu.device_async_create_group
      nvgpu.device_async_wait %g {numGroups = 1 : i32} // the NOWAIT run deletes
      gpu.barrier
      %cur = arith.remui %k, %c2 : index
      %x = memref.load %stage[%cur, %read] : memref<2x64xf32, #gpu.address_space<workgroup>>
      %acc2 = arith.addf %acc, %x : f32
      gpu.barrier // the REUSE run deletes
      scf.yield %acc2 : f32
    }
    memref.store %sum, %out[%tx] : memref<32xf32>
    gpu.terminator
  }
  return
}

// One thread copies 16 bytes reading only %n of its 4 floats: cp.async
// fills the rest with zeros. Then a copy that no group commits: a
// wait_group 0 does not wait for it, whatever token it names, so its
// destination still reads as poison.
// CHECK-LABEL: zero-fill
// CHECK-NEXT: ( 5, 6, 7, 0 )
// CHECK-LABEL: uncommitted
// CHECK-NEXT: ( nan, nan, nan, nan )
func.func @zero_fill(%src: memref<4xf32>, %n: index, %filled: memref<4xf32>, %uncommitted: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%buf : memref<4xf32, #gpu.address_space<workgroup>>,
                       %late : memref<4xf32, #gpu.address_space<workgroup>>) {
    %c0 = arith.constant 0 : index
    %cp = nvgpu.device_async_copy %src[%c0], %buf[%c0], 4, %n : memref<4xf32> to memref<4xf32, #gpu.address_space<workgroup>>
    %g = nvgpu.device_async_create_group %cp
    nvgpu.device_async_wait %g
    %v = vector.load %buf[%c0] : memref<4xf32, #gpu.address_space<workgroup>>, vector<4xf32>
    vector.store %v, %filled[%c0] : memref<4xf32>, vector<4xf32>
    %cp2 = nvgpu.device_async_copy %src[%c0], %late[%c0], 4 : memref<4xf32> to memref<4xf32, #gpu.address_space<workgroup>>
    nvgpu.device_async_wait %cp2
    %w = vector.load %late[%c0] : memref<4xf32, #gpu.address_space<workgroup>>, vector<4xf32>
    vector.store %w, %uncommitted[%c0] : memref<4xf32>, vector<4xf32>
    gpu.terminator
  }
  return
}

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %tiles = memref.alloc() : memref<8x64xf32>
  scf.for %k = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c64 step %c1 {
      %r = arith.muli %k, %c64 : index
      %v = arith.addi %r, %j : index
      %i = arith.index_cast %v : index to i32
      %f = arith.sitofp %i : i32 to f32
      memref.store %f, %tiles[%k, %j] : memref<8x64xf32>
    }
  }
  %out = memref.alloc() : memref<32xf32>
  call @double_buffered(%tiles, %out) : (memref<8x64xf32>, memref<32xf32>) -> ()
  vector.print str "double-buffered\n"
  %o = vector.load %out[%c0] : memref<32xf32>, vector<32xf32>
  vector.print %o : vector<32xf32>

  %src = memref.alloc() : memref<4xf32>
  scf.for %j = %c0 to %c4 step %c1 {
    %v = arith.addi %j, %c4 : index
    %v1 = arith.addi %v, %c1 : index
    %i = arith.index_cast %v1 : index to i32
    %f = arith.sitofp %i : i32 to f32
    memref.store %f, %src[%j] : memref<4xf32>
  }
  %filled = memref.alloc() : memref<4xf32>
  %uncommitted = memref.alloc() : memref<4xf32>
  call @zero_fill(%src, %c3, %filled, %uncommitted) : (memref<4xf32>, index, memref<4xf32>, memref<4xf32>) -> ()
  vector.print str "zero-fill\n"
  %z = vector.load %filled[%c0] : memref<4xf32>, vector<4xf32>
  vector.print %z : vector<4xf32>
  vector.print str "uncommitted\n"
  %u = vector.load %uncommitted[%c0] : memref<4xf32>, vector<4xf32>
  vector.print %u : vector<4xf32>
  return
}
