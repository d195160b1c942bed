// Tests tfm-parallel-dims-first: a generic that reduces over its first
// dimension (column sums over rows, as a norm's scale gradient takes them)
// gets its parallel dimensions first, so that the GPU's threads take the
// columns and each walks its rows; the maps and linalg.index follow the
// interchange. A generic in parallel-first order, and one inside a
// gpu.launch, are left as they are.
// RUN: tfm-opt %s --tfm-parallel-dims-first | FileCheck %s

// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[SECOND:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @column_sums
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]], iterator_types = ["parallel", "reduction"]}
// CHECK: %[[D0:.*]] = linalg.index 0 : index
// CHECK: %[[D1:.*]] = linalg.index 1 : index
// CHECK: %[[ROW:.*]] = affine.apply #[[SECOND]](%[[D0]], %[[D1]])
// CHECK: arith.index_cast %[[ROW]]
func.func @column_sums(%x: memref<16x32xf32>, %out: memref<32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<16x32xf32>) outs(%out : memref<32xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %row = linalg.index 0 : index
    %r = arith.index_cast %row : index to i32
    %f = arith.sitofp %r : i32 to f32
    %m = arith.mulf %a, %f : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// CHECK-LABEL: func.func @row_sums
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK-LABEL: func.func @in_a_kernel
// CHECK: iterator_types = ["reduction", "parallel"]
func.func @row_sums(%x: memref<16x32xf32>, %out: memref<16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<16x32xf32>) outs(%out : memref<16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

func.func @in_a_kernel(%x: memref<16x32xf32>, %out: memref<32xf32>) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>],
                    iterator_types = ["reduction", "parallel"]}
        ins(%x : memref<16x32xf32>) outs(%out : memref<32xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %s = arith.addf %acc, %a : f32
      linalg.yield %s : f32
    }
    gpu.terminator
  }
  return
}
