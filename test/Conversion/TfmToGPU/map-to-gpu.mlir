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

// -----

// Tests a loop of warps (tfm.lanes = 32): its 6 x 3 = 18 iterations go to
// the 4 warps of each block of 128 threads, 5 blocks, with a second thread
// dimension of 32 lanes (thread_x) that the body does not use, the warp
// (thread_y) picking the iteration; the mask is the same for the whole warp.
// CHECK-LABEL: func.func @warps
// CHECK: scf.parallel (%[[B:.+]]) = (%{{.+}}) to (%c5) step
// CHECK: scf.parallel (%{{.+}}, %[[W:.+]]) = (%{{.+}}, %{{.+}}) to (%c32, %c4) step
// CHECK: %[[M:.+]] = arith.muli %[[B]], %c4
// CHECK: %[[FLAT:.+]] = arith.addi %[[M]], %[[W]] : index
// CHECK: arith.cmpi ult, %[[FLAT]], %c18 : index
// CHECK: vector.transfer_read
// CHECK: } {mapping = [#gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>, #gpu.loop_dim_map<processor = thread_y, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
// CHECK: } {mapping = [#gpu.loop_dim_map<processor = block_x
func.func @warps(%a: memref<96x24xf16>, %b: memref<96x24xf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %pad = arith.constant 0.0 : f16
  scf.parallel (%i, %j) = (%c0, %c0) to (%c6, %c3) step (%c1, %c1) {
    %r = arith.muli %i, %c16 : index
    %k = arith.muli %j, %c8 : index
    %v = vector.transfer_read %a[%r, %k], %pad {in_bounds = [true, true]} : memref<96x24xf16>, vector<16x8xf16>
    vector.transfer_write %v, %b[%r, %k] {in_bounds = [true, true]} : vector<16x8xf16>, memref<96x24xf16>
  } {tfm.lanes = 32 : i64}
  return
}

// -----

// Tests that a loop of more lanes than a block has threads is refused.
func.func @too_many_lanes(%a: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  // expected-error @+1 {{tfm-map-to-gpu: 256 lanes do not divide a block of 128 threads}}
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %v = memref.load %a[%i] : memref<8xf32>
    memref.store %v, %a[%i] : memref<8xf32>
  } {tfm.lanes = 256 : i64}
  return
}

// -----

// Tests that the stores of one rank-0 op with two results (a fused chain
// that keeps its intermediate, written in place over its input) run in one
// kernel, in the host's order: a kernel per store, each recomputing the
// chain, read %a after the first had overwritten it (DynamicQuantizeLinear's
// expanded scale came out (max - min) - min).
// CHECK-LABEL: func.func @two_results
// CHECK: scf.parallel
// CHECK: scf.parallel
// CHECK: %[[X:.+]] = memref.load %[[A:.+]][] : memref<f32>
// CHECK: %[[D:.+]] = arith.subf %[[X]], %{{.+}} : f32
// CHECK: %[[Q:.+]] = arith.divf %[[D]], %{{.+}} : f32
// CHECK: memref.store %[[D]], %[[A]][] : memref<f32>
// CHECK: memref.store %[[Q]], %{{.+}}[] : memref<f32>
// CHECK: {mapping = [#gpu.loop_dim_map<processor = thread_x
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @two_results(%a: memref<f32>, %b: memref<f32>, %out: memref<f32>) {
  %x = memref.load %a[] : memref<f32>
  %y = memref.load %b[] : memref<f32>
  %d = arith.subf %x, %y : f32
  %q = arith.divf %d, %y : f32
  memref.store %d, %a[] : memref<f32>
  memref.store %q, %out[] : memref<f32>
  return
}
