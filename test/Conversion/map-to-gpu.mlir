// RUN: tfm-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(tfm-map-to-gpu{threads=128}))' | FileCheck %s

// Tests that a parallel nest becomes one grid: its 300 iterations are
// flattened onto ceil(300 / 128) = 3 blocks of 128 threads, the threads past
// the end do nothing, and the flat index is split back into (i, j).
// CHECK-LABEL: func.func @nest
// CHECK: scf.parallel (%[[B:.+]]) = (%{{.+}}) to (%[[C3:.+]]) step
// CHECK: scf.parallel (%[[T:.+]]) = (%{{.+}}) to (%[[C128:.+]]) step
// CHECK: %[[M:.+]] = arith.muli %[[B]], %{{.+}} : index
// CHECK: %[[FLAT:.+]] = arith.addi %[[M]], %[[T]] : index
// CHECK: %[[IN:.+]] = arith.cmpi ult, %[[FLAT]], %c300 : index
// CHECK: scf.if %[[IN]] {
// CHECK: %[[J:.+]] = arith.remui %[[FLAT]], %c100
// CHECK: %[[I:.+]] = arith.divui %[[FLAT]], %c100
// CHECK: memref.load %{{.+}}[%{{.+}}, %{{.+}}] : memref<3x100xf32>
// CHECK: } {mapping = [#gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
// CHECK: } {mapping = [#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
func.func @nest(%a: memref<3x100xf32>, %b: memref<3x100xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c100 = arith.constant 100 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c3, %c100) step (%c1, %c1) {
    %v = memref.load %a[%i, %j] : memref<3x100xf32>
    memref.store %v, %b[%i, %j] : memref<3x100xf32>
  }
  return
}

// -----

// Tests that a serial loop (a scan, an optimizer's scalar work) runs on one
// thread of one block, and so does a lone store with what it computes from.
// CHECK-LABEL: func.func @serial
// CHECK: scf.parallel (%{{.+}}) = (%c0{{.*}}) to (%c1{{.*}}) step
// CHECK: scf.parallel (%{{.+}}) = (%c0{{.*}}) to (%c1{{.*}}) step
// CHECK: scf.for
// CHECK: {mapping = [#gpu.loop_dim_map<processor = thread_x
// CHECK: {mapping = [#gpu.loop_dim_map<processor = block_x
// CHECK-LABEL: func.func @scalar
// CHECK: scf.parallel
// CHECK: scf.parallel
// CHECK: memref.load
// CHECK: arith.addi
// CHECK: memref.store
// CHECK: {mapping = [#gpu.loop_dim_map<processor = thread_x
func.func @serial(%a: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c1 to %c8 step %c1 {
    %p = arith.subi %i, %c1 : index
    %v = memref.load %a[%p] : memref<8xf32>
    memref.store %v, %a[%i] : memref<8xf32>
  }
  return
}
func.func @scalar(%a: memref<i64>, %b: memref<i64>) {
  %one = arith.constant 1 : i64
  %v = memref.load %a[] : memref<i64>
  %n = arith.addi %v, %one : i64
  memref.store %n, %b[] : memref<i64>
  return
}

// -----

// Tests that host code reading device memory is refused, by name.
func.func @host_read(%a: memref<i64>) -> i64 {
  // expected-error @+1 {{the CUDA target cannot run 'memref.load' on the host, which cannot read device memory}}
  %v = memref.load %a[] : memref<i64>
  return %v : i64
}
