// Tests tfm-fold-fills-into-reductions: a fill that starts a reduction
// (0 for a column sum, -inf for a maximum; both of a norm's column sums at
// once) is dropped, and the reduction reads the fill's value where all its
// reduction indices are 0. A fill stays where something between reads or
// writes its buffer, where the reduction also reads the buffer, where it
// writes only a part of it, and where a non-generic op lies between.
// RUN: tfm-opt %s -split-input-file --tfm-fold-fills-into-reductions | FileCheck %s

// CHECK-LABEL: func.func @column_sum
// CHECK-NOT: linalg.yield %cst
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK: %[[ZERO:.*]] = arith.constant 0 : index
// CHECK: %[[ROW:.*]] = linalg.index 0 : index
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[ROW]], %[[ZERO]] : index
// CHECK: %[[START:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[INIT:.*]] = arith.select %[[FIRST]], %[[START]], %[[ACC]] : f32
// CHECK: arith.addf %[[INIT]], %[[IN]] : f32
func.func @column_sum(%x: memref<16x32xf32>, %out: memref<32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%out : memref<32xf32>) {
  ^bb0(%o: f32):
    %zero = arith.constant 0.0 : f32
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<16x32xf32>) outs(%out : memref<32xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A fill of a value from above, a maximum over two reduction dimensions,
// and a view computed between the two (free of memory effects).
// CHECK-LABEL: func.func @maximum
// CHECK-SAME: %[[START:[a-z0-9]+]]: f32
// CHECK-NOT: iterator_types = ["parallel", "parallel"]} outs
// CHECK: iterator_types = ["parallel", "reduction", "reduction"]
// CHECK: %[[I1:.*]] = linalg.index 1 : index
// CHECK: %[[F1:.*]] = arith.cmpi eq, %[[I1]]
// CHECK: %[[I2:.*]] = linalg.index 2 : index
// CHECK: %[[F2:.*]] = arith.cmpi eq, %[[I2]]
// CHECK: %[[FIRST:.*]] = arith.andi %[[F1]], %[[F2]] : i1
// CHECK: arith.select %[[FIRST]], %[[START]], %{{.*}} : f32
func.func @maximum(%x: memref<4x5x6xf32>, %arena: memref<64xi8>, %start: f32) {
  %c0 = arith.constant 0 : index
  %out = memref.view %arena[%c0][] : memref<64xi8> to memref<4xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%out : memref<4xf32>) {
  ^bb0(%o: f32):
    linalg.yield %start : f32
  }
  %c16 = arith.constant 16 : index
  %other = memref.view %arena[%c16][] : memref<64xi8> to memref<4xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0)>],
                  iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x : memref<4x5x6xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %m = arith.maximumf %acc, %a : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// A norm's two column sums in one generic, each output filled before it,
// the second fill between the first and the sums: both fold.
// CHECK-LABEL: func.func @two_sums
// CHECK-NOT: iterator_types = ["parallel"]} outs
// CHECK: ^bb0(%{{.*}}: f32, %{{.*}}: f32, %[[ACC0:.*]]: f32, %[[ACC1:.*]]: f32):
// CHECK-DAG: arith.select %{{.*}}, %{{.*}}, %[[ACC0]] : f32
// CHECK-DAG: arith.select %{{.*}}, %{{.*}}, %[[ACC1]] : f32
func.func @two_sums(%dy: memref<8x32xf32>, %x: memref<8x32xf32>, %arena: memref<256xi8>) {
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %ds = memref.view %arena[%c0][] : memref<256xi8> to memref<32xf32>
  %db = memref.view %arena[%c128][] : memref<256xi8> to memref<32xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%ds : memref<32xf32>) {
  ^bb0(%o: f32):
    %zero = arith.constant 0.0 : f32
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%db : memref<32xf32>) {
  ^bb0(%o: f32):
    %zero = arith.constant 0.0 : f32
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>,
                                   affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d1)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%dy, %x : memref<8x32xf32>, memref<8x32xf32>) outs(%ds, %db : memref<32xf32>, memref<32xf32>) {
  ^bb0(%g: f32, %v: f32, %s: f32, %b: f32):
    %p = arith.mulf %g, %v : f32
    %s2 = arith.addf %s, %p : f32
    %b2 = arith.addf %b, %g : f32
    linalg.yield %s2, %b2 : f32, f32
  }
  return
}

// -----

// Fills that must stay: read between (a copy of the buffer), the reduction
// reading its own output as an input, the reduction writing a part of the
// buffer, and a non-generic op between.
// CHECK-LABEL: func.func @kept
// CHECK: iterator_types = ["parallel"]} outs(%arg1
// CHECK: iterator_types = ["parallel"]} outs(%arg2
// CHECK: iterator_types = ["parallel", "parallel"]} outs(%arg4
// CHECK: iterator_types = ["parallel"]} outs(%arg3
// CHECK-NOT: arith.select
func.func @kept(%x: memref<16x32xf32>, %a: memref<32xf32>, %b: memref<32xf32>,
                %c: memref<32xf32>, %d: memref<2x32xf32>, %e: memref<32xf32>) {
  // Read between.
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%a : memref<32xf32>) {
  ^bb0(%o: f32):
    %zero = arith.constant 0.0 : f32
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%a : memref<32xf32>) outs(%e : memref<32xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<16x32xf32>) outs(%a : memref<32xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  // Read by the reduction itself.
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%b : memref<32xf32>) {
  ^bb0(%o: f32):
    %zero = arith.constant 0.0 : f32
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d1)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x, %b : memref<16x32xf32>, memref<32xf32>) outs(%b : memref<32xf32>) {
  ^bb0(%v: f32, %w: f32, %acc: f32):
    %p = arith.mulf %v, %w : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  // Only the first row of the filled buffer reduced into.
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      outs(%d : memref<2x32xf32>) {
  ^bb0(%o: f32):
    %zero = arith.constant 0.0 : f32
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d1)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<16x32xf32>) outs(%d : memref<2x32xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  // A copy between.
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%c : memref<32xf32>) {
  ^bb0(%o: f32):
    %zero = arith.constant 0.0 : f32
    linalg.yield %zero : f32
  }
  memref.copy %e, %a : memref<32xf32> to memref<32xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<16x32xf32>) outs(%c : memref<32xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  return
}
