// RUN: tfm-opt %s -split-input-file --tfm-parallelize-glue=min-iterations=64 | FileCheck %s
// RUN: tfm-opt %s -split-input-file --tfm-parallelize-glue=min-iterations=0 | FileCheck %s --check-prefix=OFF

// An elementwise map goes to the session's threads along its first loop:
// the buffers' aligned pointers go into one array (the arena view's as the
// arena's plus the view's shift), and the outlined function runs the op on
// rows [begin, end) of every operand.
// CHECK: llvm.func @__tfm_parallel_for(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64)
// CHECK-LABEL: func.func @__tfm_entry_add(
// CHECK-SAME: %[[HOST:.*]]: !llvm.ptr, %[[ARENA:.*]]: memref<8192xi8>, %[[X:.*]]: memref<16x32xf32>, %[[Y:.*]]: memref<16x32xf32>)
// CHECK: %[[ARGS:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK: memref.extract_aligned_pointer_as_index %[[X]]
// CHECK: llvm.getelementptr %[[ARGS]][0]
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[ARENA]]
// CHECK: %[[SHIFT:.*]] = arith.constant 2048 : index
// CHECK: arith.addi %[[BASE]], %[[SHIFT]]
// CHECK: llvm.getelementptr %[[ARGS]][1]
// CHECK: memref.extract_aligned_pointer_as_index %[[Y]]
// CHECK: llvm.getelementptr %[[ARGS]][2]
// CHECK: %[[TASK:.*]] = llvm.mlir.addressof @__tfm_glue_0_task
// CHECK: %[[N:.*]] = arith.constant 16 : i64
// CHECK: llvm.call @__tfm_parallel_for(%[[HOST]], %[[TASK]], %[[ARGS]], %[[N]])
// CHECK-NOT: linalg.generic
// CHECK: return
// CHECK: func.func private @__tfm_glue_0(%[[A:.*]]: memref<16x32xf32>, %[[B:.*]]: memref<16x32xf32>, %[[C:.*]]: memref<16x32xf32>, %[[BEGIN:.*]]: index, %[[END:.*]]: index)
// CHECK: %[[ROWS:.*]] = arith.subi %[[END]], %[[BEGIN]]
// CHECK: %[[PA:.*]] = memref.subview %[[A]][%[[BEGIN]], 0] [%[[ROWS]], 32] [1, 1]
// CHECK: %[[PB:.*]] = memref.subview %[[B]][%[[BEGIN]], 0] [%[[ROWS]], 32] [1, 1]
// CHECK: %[[PC:.*]] = memref.subview %[[C]][%[[BEGIN]], 0] [%[[ROWS]], 32] [1, 1]
// CHECK: linalg.generic {{.*}} ins(%[[PA]], %[[PB]] : {{.*}}) outs(%[[PC]] : {{.*}})
// CHECK: arith.addf
// CHECK: llvm.func @__tfm_glue_0_task(!llvm.ptr, i64, i64)
// OFF-NOT: __tfm_parallel_for
// OFF: linalg.generic

#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @__tfm_entry_add(%host: !llvm.ptr, %arena: memref<8192xi8>, %x: memref<16x32xf32>, %y: memref<16x32xf32>) -> i32 {
  %shift = arith.constant 2048 : index
  %v = memref.view %arena[%shift][] : memref<8192xi8> to memref<16x32xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %v : memref<16x32xf32>, memref<16x32xf32>) outs(%y : memref<16x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }
  %ok = arith.constant 0 : i32
  return %ok : i32
}

// -----

// A bias gradient sums over the rows: its first loop is a reduction, so
// the columns are split, and each part sums whole columns.
// CHECK-LABEL: func.func @__tfm_entry_bias_grad(
// CHECK: %[[N:.*]] = arith.constant 32 : i64
// CHECK: llvm.call @__tfm_parallel_for(%{{.*}}, %{{.*}}, %{{.*}}, %[[N]])
// CHECK: func.func private @__tfm_glue_0(%[[DY:.*]]: memref<16x32xf32>, %[[DB:.*]]: memref<32xf32>, %[[BEGIN:.*]]: index, %[[END:.*]]: index)
// CHECK: %[[COLS:.*]] = arith.subi %[[END]], %[[BEGIN]]
// CHECK: memref.subview %[[DY]][0, %[[BEGIN]]] [16, %[[COLS]]] [1, 1]
// CHECK: memref.subview %[[DB]][%[[BEGIN]]] [%[[COLS]]] [1]
// CHECK: iterator_types = ["reduction", "parallel"]

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @__tfm_entry_bias_grad(%host: !llvm.ptr, %dy: memref<16x32xf32>, %db: memref<32xf32>) -> i32 {
  linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy : memref<16x32xf32>) outs(%db : memref<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  }
  %ok = arith.constant 0 : i32
  return %ok : i32
}

// -----

// A gather: the table it loads from above goes whole, at its offset in the
// weights (a subview keeps the view's pointer and its type the offset); the
// split loop's index counts from the part's start.
// CHECK-LABEL: func.func @__tfm_entry_gather(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %[[W:.*]]: memref<65536xi8>
// CHECK: memref.extract_aligned_pointer_as_index %[[W]]
// CHECK: arith.constant 4096 : index
// CHECK: llvm.call @__tfm_parallel_for
// CHECK: func.func private @__tfm_glue_0(%[[OUT:.*]]: memref<64x16xf32>, %[[TABLE:.*]]: memref<32x16xf32, strided<[16, 1], offset: 16>>, %[[BEGIN:.*]]: index, %{{.*}}: index)
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 0
// CHECK-NEXT: %[[ROW:.*]] = arith.addi %[[I]], %[[BEGIN]]
// CHECK: arith.remui %[[ROW]]
// CHECK: memref.load %[[TABLE]]

#out = affine_map<(d0, d1) -> (d0, d1)>
func.func @__tfm_entry_gather(%host: !llvm.ptr, %weights: memref<65536xi8>, %y: memref<64x16xf32>) -> i32 {
  %shift = arith.constant 4096 : index
  %c32 = arith.constant 32 : index
  %all = memref.view %weights[%shift][] : memref<65536xi8> to memref<33x16xf32>
  %table = memref.subview %all[1, 0] [32, 16] [1, 1] : memref<33x16xf32> to memref<32x16xf32, strided<[16, 1], offset: 16>>
  linalg.generic {indexing_maps = [#out], iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<64x16xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %r = arith.remui %i, %c32 : index
    %v = memref.load %table[%r, %j] : memref<32x16xf32, strided<[16, 1], offset: 16>>
    linalg.yield %v : f32
  }
  %ok = arith.constant 0 : i32
  return %ok : i32
}

// -----

// Below min-iterations, and an op whose only parallel loop an output does
// not index by itself (a diagonal), stay on the calling thread.
// CHECK-LABEL: func.func @__tfm_entry_stays(
// CHECK-NOT: __tfm_parallel_for
// CHECK: linalg.generic
// CHECK: linalg.generic
// CHECK-NOT: __tfm_glue

#id = affine_map<(d0, d1) -> (d0, d1)>
#diag = affine_map<(d0) -> (d0, d0)>
#vec = affine_map<(d0) -> (d0)>
func.func @__tfm_entry_stays(%host: !llvm.ptr, %x: memref<4x8xf32>, %y: memref<4x8xf32>, %v: memref<128xf32>, %m: memref<128x128xf32>) -> i32 {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#vec, #diag], iterator_types = ["parallel"]}
      ins(%v : memref<128xf32>) outs(%m : memref<128x128xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  %ok = arith.constant 0 : i32
  return %ok : i32
}
