// RUN: tfm-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(tfm-map-to-gpu{threads=128},tfm-reverse-grid))' | FileCheck %s

// Tests that the grid of blocks and threads runs backwards: each mapped
// loop's index i becomes lb + ub - 1 - i before anything reads it, so
// block 2 and thread 127 come first and the flat index, the mask and the
// split indices follow from the reversed ones.
// CHECK-LABEL: func.func @nest
// CHECK: scf.parallel (%[[B:.+]]) = (%[[LB0:.+]]) to (%[[UB0:.+]]) step
// CHECK: %[[S0:.+]] = arith.addi %[[LB0]], %[[UB0]] : index
// CHECK: %[[L0:.+]] = arith.subi %[[S0]], %{{.+}} : index
// CHECK: %[[RB:.+]] = arith.subi %[[L0]], %[[B]] : index
// CHECK: scf.parallel (%[[T:.+]]) = (%[[LB1:.+]]) to (%[[UB1:.+]]) step
// CHECK: %[[S1:.+]] = arith.addi %[[LB1]], %[[UB1]] : index
// CHECK: %[[L1:.+]] = arith.subi %[[S1]], %{{.+}} : index
// CHECK: %[[RT:.+]] = arith.subi %[[L1]], %[[T]] : index
// CHECK: %[[M:.+]] = arith.muli %[[RB]], %{{.+}} : index
// CHECK: %[[FLAT:.+]] = arith.addi %[[M]], %[[RT]] : index
// CHECK: arith.cmpi ult, %[[FLAT]], %c300 : index
// CHECK: } {mapping = [#gpu.loop_dim_map<processor = thread_x
// CHECK: } {mapping = [#gpu.loop_dim_map<processor = block_x
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

// Tests that a loop nobody mapped (a nest inside a thread) keeps its
// order: only the grid's own loops run backwards.
// CHECK-LABEL: func.func @unmapped
// CHECK: scf.parallel (%[[B:.+]]) =
// CHECK: %[[RB:.+]] = arith.subi %{{.+}}, %[[B]] : index
// CHECK: scf.parallel (%[[I:.+]]) = (%{{.+}}) to (%{{.+}}) step (%{{.+}}) {
// CHECK-NEXT: memref.load %{{.+}}[%[[RB]], %[[I]]]
func.func @unmapped(%a: memref<4x8xf32>, %b: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%blk) = (%c0) to (%c4) step (%c1) {
    scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
      %v = memref.load %a[%blk, %i] : memref<4x8xf32>
      memref.store %v, %b[%blk, %i] : memref<4x8xf32>
    }
  } {mapping = [#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
  return
}

// -----

// A mapped loop that steps by more than one is refused by name rather than
// run in some other order.
func.func @strided(%a: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  // expected-error @+1 {{a mapped loop steps by other than 1; tfm-reverse-grid cannot reverse it}}
  scf.parallel (%i) = (%c0) to (%c8) step (%c2) {
    %v = memref.load %a[%i] : memref<8xf32>
    memref.store %v, %a[%i] : memref<8xf32>
  } {mapping = [#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
  return
}
