// Tests tfm-emulate-gpu-kernels: a block's threads run in phases between
// barriers, values that cross a barrier are kept per thread, and workgroup
// memory starts poisoned, so a missing barrier shows as NaN in the result.
// RUN: tfm-opt %s -tfm-emulate-gpu-kernels | FileCheck %s --check-prefix=IR
// RUN: tfm-opt %s -tfm-emulate-gpu-kernels | mlir-opt -convert-scf-to-cf -expand-strided-metadata -finalize-memref-to-llvm -convert-arith-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils | FileCheck %s --check-prefix=EXEC

// Each block of 8 threads reverses its 8 elements through workgroup memory.
// IR-LABEL: func.func @reverse
// IR-NOT: gpu.launch
// IR: memref.alloca() : memref<8xf32>
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

// EXEC: [7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8]
// EXEC: [nan, nan, nan, nan, 3, 2, 1, 0, nan, nan, nan, nan, 11, 10, 9, 8]
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
  memref.dealloc %in : memref<16xf32>
  memref.dealloc %out : memref<16xf32>
  return
}

func.func private @printMemrefF32(memref<*xf32>)
