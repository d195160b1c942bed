// RUN: tfm-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(tfm-tile-gpu-matmul{tile-m=4 tile-n=2}))' | FileCheck %s

// Tests that a linear layer's GEMM, as the neutral lowering writes it (a
// generic that yields zero, then the contraction), becomes one parallel
// loop over 2 x 3 tiles of 4 x 2 outputs: the fill is gone and its zero
// starts the eight accumulators, each input is loaded once per row or
// column it varies along (4 rows of %a, 2 rows of %w) at clamped
// positions, the body is cloned per output with contraction allowed, and
// the stores past the 6 x 5 edge are skipped.
// CHECK-LABEL: func.func @linear
// CHECK-NOT: linalg.
// CHECK: scf.parallel (%[[TI:.+]], %[[TJ:.+]]) = (%{{.+}}, %{{.+}}) to (%c2, %c3)
// CHECK: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[ACC:.+]]:8 = scf.for %[[K:.+]] = %{{.+}} to %c8 step %{{.+}} iter_args(%{{.+}} = %[[ZERO]], %{{.+}} = %[[ZERO]], %{{.+}} = %[[ZERO]], %{{.+}} = %[[ZERO]], %{{.+}} = %[[ZERO]], %{{.+}} = %[[ZERO]], %{{.+}} = %[[ZERO]], %{{.+}} = %[[ZERO]])
// CHECK-COUNT-4: memref.load %arg0[%{{.+}}, %[[K]]] : memref<6x8xf32>
// CHECK-COUNT-2: memref.load %arg1[%{{.+}}, %[[K]]] : memref<5x8xf32>
// CHECK-NOT: memref.load
// CHECK-COUNT-8: arith.addf %{{.+}}, %{{.+}} fastmath<contract> : f32
// CHECK: scf.yield
// CHECK: %[[IN:.+]] = arith.andi
// CHECK: scf.if %[[IN]] {
// CHECK-NEXT: memref.store %[[ACC]]#0, %arg2
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mB = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @linear(%a: memref<6x8xf32>, %w: memref<5x8xf32>, %c: memref<6x5xf32>) {
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%c : memref<6x5xf32>) {
  ^bb0(%out: f32):
    %zero = arith.constant 0.0 : f32
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [#mA, #mB, #mC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %w : memref<6x8xf32>, memref<5x8xf32>) outs(%c : memref<6x5xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Tests a batched GEMM whose right operand is broadcast over the batch (a
// constant index in its map) and whose output is not filled just before:
// the accumulators start from the output's values, the batch loop stays
// whole, and a tile that divides the matrix stores without guards.
// CHECK-LABEL: func.func @batched
// CHECK: scf.parallel (%[[B:.+]], %{{.+}}, %{{.+}}) = (%{{.+}}, %{{.+}}, %{{.+}}) to (%c3, %c2, %c4)
// CHECK-COUNT-8: memref.load %arg2[%[[B]], %{{.+}}, %{{.+}}] : memref<3x8x8xf32>
// CHECK: scf.for
// CHECK-COUNT-4: memref.load %arg0[%[[B]], %{{.+}}, %{{.+}}] : memref<3x8x4xf32>
// CHECK-COUNT-2: memref.load %arg1[%c0{{.*}}, %{{.+}}, %{{.+}}] : memref<1x4x8xf32>
// CHECK: scf.yield
// CHECK-NOT: scf.if
// CHECK-COUNT-8: memref.store
#bA = affine_map<(b, m, n, k) -> (b, m, k)>
#bB = affine_map<(b, m, n, k) -> (0, k, n)>
#bC = affine_map<(b, m, n, k) -> (b, m, n)>
func.func @batched(%a: memref<3x8x4xf32>, %w: memref<1x4x8xf32>, %c: memref<3x8x8xf32>) {
  linalg.generic {indexing_maps = [#bA, #bB, #bC], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %w : memref<3x8x4xf32>, memref<1x4x8xf32>) outs(%c : memref<3x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Tests what stays as it is: a fill whose buffer is written before the
// contraction (the contraction is tiled, the fill kept and the
// accumulators start from the output), a row sum (one input) and a sum of
// products whose inputs both vary along every output (no reuse to gain).
// CHECK-LABEL: func.func @untouched
// CHECK: linalg.fill
// CHECK: memref.store
// CHECK: scf.parallel
// CHECK: memref.load %arg2
// CHECK: scf.for
// CHECK: linalg.generic {{.+}} iterator_types = ["parallel", "reduction"]
// CHECK: linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "reduction"]
#mA = affine_map<(d0, d1, d2) -> (d0, d2)>
#mB = affine_map<(d0, d1, d2) -> (d1, d2)>
#mC = affine_map<(d0, d1, d2) -> (d0, d1)>
#rA = affine_map<(d0, d1) -> (d0, d1)>
#rC = affine_map<(d0, d1) -> (d0)>
#eA = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @untouched(%a: memref<6x8xf32>, %w: memref<5x8xf32>, %c: memref<6x5xf32>, %s: memref<6xf32>, %e: memref<6x5x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %c0 = arith.constant 0 : index
  linalg.fill ins(%zero : f32) outs(%c : memref<6x5xf32>)
  memref.store %one, %c[%c0, %c0] : memref<6x5xf32>
  linalg.generic {indexing_maps = [#mA, #mB, #mC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %w : memref<6x8xf32>, memref<5x8xf32>) outs(%c : memref<6x5xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#rA, #rC], iterator_types = ["parallel", "reduction"]}
      ins(%a : memref<6x8xf32>) outs(%s : memref<6xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %acc, %x : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#eA, #eA, #mC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%e, %e : memref<6x5x8xf32>, memref<6x5x8xf32>) outs(%c : memref<6x5xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Tests a GEMM of f16 operands into f32, as the neutral lowering writes it
// under --dtype=f16 (a zero fill, then extf of both operands): it becomes
// a loop of warps (tfm.lanes = 32) over 32 x 16 tiles of the 64 x 48
// output, each with 2 x 2 accumulators of 16 x 8 that start from the fill's
// zero, reading 16 x 16 of A and 8 x 16 of B, the right operand stored
// [K, N] and so read transposed, per step of 16 along K.
// CHECK-LABEL: func.func @halves
// CHECK-NOT: linalg.
// CHECK: scf.parallel (%[[WI:.+]], %[[WJ:.+]]) = (%{{.+}}, %{{.+}}) to (%c2, %c3)
// CHECK: %[[ZERO:.+]] = arith.constant dense<0.000000e+00> : vector<16x8xf32>
// CHECK: %[[ACC:.+]]:4 = scf.for %[[K:.+]] = %{{.+}} to %c32{{[_0-9]*}} step %c16{{[_0-9]*}} iter_args(%{{.+}} = %[[ZERO]], %{{.+}} = %[[ZERO]], %{{.+}} = %[[ZERO]], %{{.+}} = %[[ZERO]])
// CHECK-COUNT-2: vector.transfer_read %arg0[%{{.+}}, %[[K]]], %{{.+}} {in_bounds = [true, true]} : memref<64x32xf16>, vector<16x16xf16>
// CHECK-COUNT-2: vector.transfer_read %arg1[%[[K]], %{{.+}}], %{{.+}} {in_bounds = [true, true], permutation_map = #{{.+}}} : memref<32x48xf16>, vector<8x16xf16>
// CHECK-COUNT-4: vector.contract {{.+}} : vector<16x16xf16>, vector<8x16xf16> into vector<16x8xf32>
// CHECK: scf.yield
// CHECK-COUNT-4: vector.transfer_write %[[ACC]]#{{[0-3]}}, %arg2[%{{.+}}, %{{.+}}] {in_bounds = [true, true]} : vector<16x8xf32>, memref<64x48xf32>
// CHECK: } {tfm.lanes = 32 : i64}
#hA = affine_map<(d0, d1, d2) -> (d0, d2)>
#hB = affine_map<(d0, d1, d2) -> (d2, d1)>
#hC = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @halves(%a: memref<64x32xf16>, %w: memref<32x48xf16>, %c: memref<64x48xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<64x48xf32>)
  linalg.generic {indexing_maps = [#hA, #hB, #hC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %w : memref<64x32xf16>, memref<32x48xf16>) outs(%c : memref<64x48xf32>) {
  ^bb0(%x: f16, %y: f16, %acc: f32):
    %xe = arith.extf %x : f16 to f32
    %ye = arith.extf %y : f16 to f32
    %p = arith.mulf %xe, %ye : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Tests that an f16 GEMM whose rows are not a multiple of 16 keeps the
// per-thread register tile, with the operands extended in the body.
// CHECK-LABEL: func.func @ragged_halves
// CHECK-NOT: vector.contract
// CHECK: scf.for
// CHECK: arith.extf {{.+}} fastmath<contract> : f16 to f32
// CHECK-NOT: tfm.lanes
#hA = affine_map<(d0, d1, d2) -> (d0, d2)>
#hB = affine_map<(d0, d1, d2) -> (d2, d1)>
#hC = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @ragged_halves(%a: memref<24x32xf16>, %w: memref<32x48xf16>, %c: memref<24x48xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<24x48xf32>)
  linalg.generic {indexing_maps = [#hA, #hB, #hC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %w : memref<24x32xf16>, memref<32x48xf16>) outs(%c : memref<24x48xf32>) {
  ^bb0(%x: f16, %y: f16, %acc: f32):
    %xe = arith.extf %x : f16 to f32
    %ye = arith.extf %y : f16 to f32
    %p = arith.mulf %xe, %ye : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Tests that the linear layer's bias and activation, an elementwise op
// that rewrites the GEMM's output in place right after it, runs on each
// accumulator before its store: the bias is read at the output's column,
// and the elementwise op is gone.
// CHECK-LABEL: func.func @linear_relu
// CHECK: scf.parallel
// CHECK: %[[ACC:.+]]:8 = scf.for
// CHECK: %[[B:.+]] = memref.load %arg2[%{{.+}}] : memref<8xf32>
// CHECK: %[[S:.+]] = arith.addf %[[ACC]]#0, %[[B]] : f32
// CHECK: %[[R:.+]] = arith.maximumf %[[S]], %{{.+}} : f32
// CHECK: memref.store %[[R]], %arg3
// CHECK-NOT: linalg.generic
#eA = affine_map<(d0, d1, d2) -> (d0, d2)>
#eB = affine_map<(d0, d1, d2) -> (d1, d2)>
#eC = affine_map<(d0, d1, d2) -> (d0, d1)>
#eId = affine_map<(d0, d1) -> (d0, d1)>
#eCol = affine_map<(d0, d1) -> (d1)>
func.func @linear_relu(%a: memref<8x8xf32>, %w: memref<8x8xf32>, %bias: memref<8xf32>, %c: memref<8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<8x8xf32>)
  linalg.generic {indexing_maps = [#eA, #eB, #eC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %w : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#eId, #eCol, #eId], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : memref<8x8xf32>, memref<8xf32>) outs(%c : memref<8x8xf32>) {
  ^bb0(%x: f32, %b: f32, %o: f32):
    %s = arith.addf %x, %b : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Tests that an elementwise op reading the output at other positions (a
// transpose) is not taken into the tiles: its reads would race the tiles'
// stores.
// CHECK-LABEL: func.func @transposed_reader
// CHECK: scf.parallel
// CHECK: linalg.generic
#eA = affine_map<(d0, d1, d2) -> (d0, d2)>
#eB = affine_map<(d0, d1, d2) -> (d1, d2)>
#eC = affine_map<(d0, d1, d2) -> (d0, d1)>
#eId = affine_map<(d0, d1) -> (d0, d1)>
#tT = affine_map<(d0, d1) -> (d1, d0)>
func.func @transposed_reader(%a: memref<8x8xf32>, %w: memref<8x8xf32>, %c: memref<8x8xf32>) {
  linalg.generic {indexing_maps = [#eA, #eB, #eC], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %w : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#tT, #eId], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x8xf32>) outs(%c : memref<8x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  return
}
