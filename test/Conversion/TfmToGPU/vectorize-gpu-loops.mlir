// RUN: tfm-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tfm-vectorize-gpu-loops))' | FileCheck %s
// RUN: tfm-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tfm-vectorize-gpu-loops),gpu.module(tfm-lower-aligned-vector-access))' | FileCheck %s --check-prefix=LLVM

// Tests that a bias add gives each thread 4 floats: the row and the bias
// are read as 16-byte vectors (views of an entry argument at multiples of
// 16 bytes, rows of 32 floats), the body runs once per element, and the
// sums are written as one vector.
// CHECK-LABEL: func.func @bias_add
// CHECK: %[[C4:.+]] = arith.constant 4 : index
// CHECK: scf.parallel (%[[I:.+]], %[[J:.+]]) = ({{.+}}) to ({{.+}}) step (%{{.+}}, %[[C4]])
// CHECK: %[[X:.+]] = vector.load %{{.+}}[%[[I]], %[[J]]] {tfm.alignment = 16 : i64} : memref<16x32xf32>, vector<4xf32>
// CHECK-COUNT-4: vector.extract %[[X]]
// CHECK: %[[B:.+]] = vector.load %{{.+}}[%[[J]]] {tfm.alignment = 16 : i64} : memref<32xf32>, vector<4xf32>
// CHECK-COUNT-4: arith.addf
// CHECK: %[[S:.+]] = vector.from_elements {{.+}} : vector<4xf32>
// CHECK: vector.store %[[S]], %{{.+}}[%[[I]], %[[J]]] {tfm.alignment = 16 : i64}
// CHECK-NOT: memref.load
// CHECK-NOT: memref.store
func.func @bias_add(%arena: memref<4096xi8>, %b: memref<32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %c2048 = arith.constant 2048 : index
  %x = memref.view %arena[%c0][] : memref<4096xi8> to memref<16x32xf32>
  %y = memref.view %arena[%c2048][] : memref<4096xi8> to memref<16x32xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%c16, %c32) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<16x32xf32>
    %w = memref.load %b[%j] : memref<32xf32>
    %s = arith.addf %v, %w : f32
    memref.store %s, %y[%i, %j] : memref<16x32xf32>
    scf.reduce
  }
  return
}

// -----

// Tests that the widest element sets the vector: rounding f32 to bf16 reads
// 4 floats (16 bytes) and writes 4 bf16 (8 bytes); a loop of bf16 alone
// takes 8 (16 bytes each way).
// CHECK-LABEL: func.func @round
// CHECK: vector.load {{.+}} {tfm.alignment = 16 : i64} : memref<8x64xf32>, vector<4xf32>
// CHECK: vector.store {{.+}} {tfm.alignment = 8 : i64} : memref<8x64xbf16>, vector<4xbf16>
// CHECK-LABEL: func.func @scale_bf16
// CHECK: vector.load {{.+}} {tfm.alignment = 16 : i64} : memref<8x64xbf16>, vector<8xbf16>
// CHECK-COUNT-8: arith.mulf
// CHECK: vector.store {{.+}} {tfm.alignment = 16 : i64} : memref<8x64xbf16>, vector<8xbf16>
func.func @round(%x: memref<8x64xf32>, %y: memref<8x64xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c64) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<8x64xf32>
    %r = arith.truncf %v : f32 to bf16
    memref.store %r, %y[%i, %j] : memref<8x64xbf16>
    scf.reduce
  }
  return
}
func.func @scale_bf16(%x: memref<8x64xbf16>, %y: memref<8x64xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %two = arith.constant 2.0 : bf16
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c64) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<8x64xbf16>
    %r = arith.mulf %v, %two : bf16
    memref.store %r, %y[%i, %j] : memref<8x64xbf16>
    scf.reduce
  }
  return
}

// -----

// Tests the accesses that stay element by element while the others become
// vectors: a view 4 bytes past a multiple of 16 (its address is not
// proven aligned), a transposed read (not contiguous along the innermost
// dimension), and i1 (LLVM packs vectors of i1 into bits, where memory
// holds a byte each).
// CHECK-LABEL: func.func @element_by_element
// CHECK: scf.parallel {{.+}} step (%{{.+}}, %[[C4:.+]])
// CHECK-NOT: vector.load
// CHECK: memref.load %[[X:.+]][%[[I:.+]], %[[J:.+]]] : memref<16x32xf32>
// CHECK-NEXT: memref.load %{{.+}}[%[[J]], %[[I]]] : memref<32x16xf32>
// CHECK-NEXT: memref.load %{{.+}}[%[[I]], %[[J]]] : memref<16x32xi1>
// CHECK-COUNT-3: memref.load %[[X]]
// CHECK-NOT: vector.load
// CHECK: vector.store {{.+}} {tfm.alignment = 16 : i64} : memref<16x32xf32>, vector<4xf32>
func.func @element_by_element(%arena: memref<8192xi8>, %t: memref<32x16xf32>,
                              %m: memref<16x32xi1>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %c4096 = arith.constant 4096 : index
  %x = memref.view %arena[%c4][] : memref<8192xi8> to memref<16x32xf32>
  %y = memref.view %arena[%c4096][] : memref<8192xi8> to memref<16x32xf32>
  scf.parallel (%i, %j) = (%c0, %c0) to (%c16, %c32) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<16x32xf32>
    %w = memref.load %t[%j, %i] : memref<32x16xf32>
    %k = memref.load %m[%i, %j] : memref<16x32xi1>
    %s = arith.addf %v, %w : f32
    %z = arith.constant 0.0 : f32
    %r = arith.select %k, %s, %z : f32
    memref.store %r, %y[%i, %j] : memref<16x32xf32>
    scf.reduce
  }
  return
}

// -----

// Tests that a strided view keeps its vectors when its offset and the
// strides of the other dimensions keep the alignment (a transpose that
// merges heads back), and that a row of 6 takes vectors of 2.
// CHECK-LABEL: func.func @strided
// CHECK: vector.load {{.+}} {tfm.alignment = 16 : i64} : memref<8x2x32xf32, strided<[32, 256, 1]>>, vector<4xf32>
// CHECK: vector.store {{.+}} {tfm.alignment = 16 : i64} : memref<8x2x32xf32, strided<[64, 32, 1]>>, vector<4xf32>
// CHECK-LABEL: func.func @rows_of_six
// CHECK: vector.load {{.+}} {tfm.alignment = 8 : i64} : memref<4x6xf32>, vector<2xf32>
// CHECK: vector.store {{.+}} {tfm.alignment = 8 : i64} : memref<4x6xf32>, vector<2xf32>
// CHECK-LABEL: func.func @strided_misaligned
// CHECK-NOT: vector.load
// CHECK-COUNT-4: memref.load
// CHECK: vector.store
func.func @strided(%x: memref<2x8x32xf32>, %y: memref<8x2x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  %xt = memref.reinterpret_cast %x to offset: [0], sizes: [8, 2, 32], strides: [32, 256, 1] : memref<2x8x32xf32> to memref<8x2x32xf32, strided<[32, 256, 1]>>
  %yt = memref.reinterpret_cast %y to offset: [0], sizes: [8, 2, 32], strides: [64, 32, 1] : memref<8x2x32xf32> to memref<8x2x32xf32, strided<[64, 32, 1]>>
  scf.parallel (%a, %b, %c) = (%c0, %c0, %c0) to (%c8, %c2, %c32) step (%c1, %c1, %c1) {
    %v = memref.load %xt[%a, %b, %c] : memref<8x2x32xf32, strided<[32, 256, 1]>>
    memref.store %v, %yt[%a, %b, %c] : memref<8x2x32xf32, strided<[64, 32, 1]>>
    scf.reduce
  }
  return
}
func.func @rows_of_six(%x: memref<4x6xf32>, %y: memref<4x6xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c6 = arith.constant 6 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c6) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<4x6xf32>
    %e = math.exp %v : f32
    memref.store %e, %y[%i, %j] : memref<4x6xf32>
    scf.reduce
  }
  return
}
// Rows 34 floats apart: the second row starts 8 bytes past a multiple of 16.
func.func @strided_misaligned(%x: memref<4x34xf32>, %y: memref<4x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %xs = memref.subview %x[0, 0] [4, 32] [1, 1] : memref<4x34xf32> to memref<4x32xf32, strided<[34, 1]>>
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c32) step (%c1, %c1) {
    %v = memref.load %xs[%i, %j] : memref<4x32xf32, strided<[34, 1]>>
    memref.store %v, %y[%i, %j] : memref<4x32xf32>
    scf.reduce
  }
  return
}

// -----

// Tests the loops that stay as they are: a load after a store (moving the
// stores last would change what it reads), a store that every element of
// a thread would make to one address, and a loop already mapped.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: vector.
// CHECK: return
func.func @left_alone(%x: memref<8x32xf32>, %y: memref<8x32xf32>, %s: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c32) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<8x32xf32>
    memref.store %v, %y[%i, %j] : memref<8x32xf32>
    %w = memref.load %y[%i, %j] : memref<8x32xf32>
    memref.store %w, %x[%i, %j] : memref<8x32xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c32) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<8x32xf32>
    memref.store %v, %s[%i] : memref<8xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c8, %c32) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<8x32xf32>
    memref.store %v, %y[%i, %j] : memref<8x32xf32>
    scf.reduce
  } {mapping = [#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>, #gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
  return
}

// -----

// Tests a row kernel's pass over its columns (`tfm.column_pass`): each lane
// takes 4 consecutive columns from 4 · lane on, in steps of 128; the sum it
// carries runs through its 4 elements in order, and the store under the
// spare warps' guard becomes one vector store under the same guard. The
// same loop unmarked is left alone: only the builder knows that the lanes
// combine what they carry.
// CHECK-LABEL: func.func @column_pass
// CHECK: %[[C4:.+]] = arith.constant 4 : index
// CHECK: %[[FIRST:.+]] = arith.muli %{{.+}}, %[[C4]] : index
// CHECK: %[[SUM:.+]] = scf.for %[[COL:.+]] = %[[FIRST]] to %{{.+}} step %c128 iter_args(%[[ACC:.+]] = %{{.+}}) -> (f32)
// CHECK: %[[V:.+]] = vector.load %{{.+}}[%{{.+}}, %[[COL]]] {tfm.alignment = 16 : i64} : memref<8x256xf32>, vector<4xf32>
// CHECK: %[[A0:.+]] = arith.addf %[[ACC]], %{{.+}} : f32
// CHECK: %[[A1:.+]] = arith.addf %[[A0]], %{{.+}} : f32
// CHECK: %[[A2:.+]] = arith.addf %[[A1]], %{{.+}} : f32
// CHECK: %[[A3:.+]] = arith.addf %[[A2]], %{{.+}} : f32
// CHECK: scf.if %{{.+}} {
// CHECK-NEXT: vector.from_elements
// CHECK-NEXT: vector.store %{{.+}}, %{{.+}}[%{{.+}}, %[[COL]]] {tfm.alignment = 16 : i64}
// CHECK: scf.yield %[[A3]] : f32
// CHECK: memref.store %[[SUM]]
// CHECK-LABEL: func.func @unmarked_pass
// CHECK-NOT: vector.
// CHECK: return
func.func @column_pass(%x: memref<8x256xf32>, %y: memref<8x256xf32>, %live: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  %c256 = arith.constant 256 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c8, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %zero = arith.constant 0.0 : f32
    %sum = scf.for %col = %tx to %c256 step %c32 iter_args(%acc = %zero) -> (f32) {
      %v = memref.load %x[%bx, %col] : memref<8x256xf32>
      %e = math.exp %v : f32
      scf.if %live {
        memref.store %e, %y[%bx, %col] : memref<8x256xf32>
      }
      %next = arith.addf %acc, %e : f32
      scf.yield %next : f32
    } {tfm.column_pass}
    memref.store %sum, %x[%bx, %c0] : memref<8x256xf32>
    gpu.terminator
  }
  return
}
func.func @unmarked_pass(%x: memref<8x256xf32>, %y: memref<8x256xf32>) {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  %c256 = arith.constant 256 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c8, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    scf.for %col = %tx to %c256 step %c32 {
      %v = memref.load %x[%bx, %col] : memref<8x256xf32>
      memref.store %v, %y[%bx, %col] : memref<8x256xf32>
    }
    gpu.terminator
  }
  return
}

// -----

// Tests that a vector access carrying its alignment becomes an LLVM access
// stating it, where upstream's lowering would state the element's 4 bytes.
// LLVM-LABEL: gpu.func @kernel
// LLVM: llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr -> vector<4xf32>
// LLVM: llvm.store %{{.+}}, %{{.+}} {alignment = 8 : i64} : vector<4xbf16>, !llvm.ptr
// LLVM: vector.load %{{.+}} : memref<8xf32>, vector<4xf32>
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @kernel(%x: memref<8xf32>, %y: memref<8xbf16>) kernel {
      %c0 = arith.constant 0 : index
      %v = vector.load %x[%c0] {tfm.alignment = 16 : i64} : memref<8xf32>, vector<4xf32>
      %r = arith.truncf %v : vector<4xf32> to vector<4xbf16>
      vector.store %r, %y[%c0] {tfm.alignment = 8 : i64} : memref<8xbf16>, vector<4xbf16>
      %u = vector.load %x[%c0] : memref<8xf32>, vector<4xf32>
      gpu.return
    }
  }
}
