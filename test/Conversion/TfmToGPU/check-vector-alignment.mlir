// Tests that tfm-check-vector-alignment checks what a vector access's
// `tfm.alignment` claims: a 16-byte load 16 bytes into a 64-byte aligned
// buffer reads its values, and the same claim 4 bytes in reads NaN
// instead of passing unseen, as it would on the CPU without the check (on
// a GPU, it faults); likewise a store.
// RUN: tfm-opt %s -tfm-check-vector-alignment | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// RUN: sed -e 's/\[4\] \[8\] \[1\]/[1] [8] [1]/' -e 's/offset: 4/offset: 1/' %s | tfm-opt -tfm-check-vector-alignment | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s --check-prefix=WRONG
// CHECK: ( 4, 5, 6, 7 )
// CHECK-NEXT: ( 9, 9, 9, 9 )
// WRONG: ( nan, nan, nan, nan )
// WRONG-NEXT: ( nan, nan, nan, nan )
func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %buffer = memref.alloc() {alignment = 64 : i64} : memref<64xf32>
  scf.for %i = %c0 to %c64 step %c1 {
    %n = arith.index_cast %i : index to i32
    %f = arith.sitofp %n : i32 to f32
    memref.store %f, %buffer[%i] : memref<64xf32>
  }
  %part = memref.subview %buffer[4] [8] [1] : memref<64xf32> to memref<8xf32, strided<[1], offset: 4>>
  %v = vector.load %part[%c0] {tfm.alignment = 16 : i64} : memref<8xf32, strided<[1], offset: 4>>, vector<4xf32>
  vector.print %v : vector<4xf32>
  %nine = arith.constant dense<9.0> : vector<4xf32>
  vector.store %nine, %part[%c0] {tfm.alignment = 16 : i64} : memref<8xf32, strided<[1], offset: 4>>, vector<4xf32>
  %w = vector.load %part[%c0] : memref<8xf32, strided<[1], offset: 4>>, vector<4xf32>
  vector.print %w : vector<4xf32>
  memref.dealloc %buffer : memref<64xf32>
  return
}
