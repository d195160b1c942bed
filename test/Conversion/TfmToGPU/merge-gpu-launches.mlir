// RUN: tfm-opt %s --pass-pipeline='builtin.module(func.func(tfm-merge-gpu-launches))' | FileCheck %s

// Tests that two optimizer-like updates of separate parameters become one
// launch: the grids end to end (1 + 4 blocks), the block as wide as the
// wider part, the narrower part's extra threads idle, and the second part's
// block index rebased.
// CHECK-LABEL: func.func @independent
// CHECK-DAG: %[[C1:.+]] = arith.constant 1 : index
// CHECK-DAG: %[[C5:.+]] = arith.constant 5 : index
// CHECK-DAG: %[[C96:.+]] = arith.constant 96 : index
// CHECK-DAG: %[[C256:.+]] = arith.constant 256 : index
// CHECK: gpu.launch blocks(%[[BX:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %[[C5]], %{{.+}} = %[[C1]], %{{.+}} = %[[C1]]) threads(%[[TX:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %[[C256]], %{{.+}} = %[[C1]], %{{.+}} = %[[C1]])
// CHECK: %[[FIRST:.+]] = arith.cmpi ult, %[[BX]], %[[C1]] : index
// CHECK: %[[NARROW:.+]] = arith.cmpi ult, %[[TX]], %[[C96]] : index
// CHECK: %[[IN0:.+]] = arith.andi %[[FIRST]], %[[NARROW]] : i1
// CHECK: scf.if %[[IN0]] {
// CHECK: memref.store %{{.+}}, %[[P:.+]][%[[TX]]] : memref<96xf32>
// CHECK: }
// CHECK: %[[BELOW:.+]] = arith.cmpi ult, %[[BX]], %[[C5]] : index
// CHECK: %[[ABOVE:.+]] = arith.cmpi uge, %[[BX]], %[[C1]] : index
// CHECK: %[[IN1:.+]] = arith.andi %[[BELOW]], %[[ABOVE]] : i1
// CHECK: scf.if %[[IN1]] {
// CHECK: %[[REBASED:.+]] = arith.subi %[[BX]], %[[C1]] : index
// CHECK: arith.muli %[[REBASED]]
// CHECK: memref.store %{{.+}} : memref<1024xf32>
// CHECK: }
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
func.func @independent(%params: memref<8192xi8>, %arena: memref<8192xi8>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c96 = arith.constant 96 : index
  %c256 = arith.constant 256 : index
  %c512 = arith.constant 512 : index
  %c1024 = arith.constant 1024 : index
  %p = memref.view %params[%c0][] : memref<8192xi8> to memref<96xf32>
  %g = memref.view %arena[%c0][] : memref<8192xi8> to memref<96xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c96, %sy = %c1, %sz = %c1) {
    %v = memref.load %p[%tx] : memref<96xf32>
    %d = memref.load %g[%tx] : memref<96xf32>
    %n = arith.subf %v, %d : f32
    memref.store %n, %p[%tx] : memref<96xf32>
    gpu.terminator
  }
  // The next parameter's views: pure ops may stand between the two.
  %q = memref.view %params[%c512][] : memref<8192xi8> to memref<1024xf32>
  %h = memref.view %arena[%c512][] : memref<8192xi8> to memref<1024xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %base = arith.muli %bx, %c256 : index
    %i = arith.addi %base, %tx : index
    %v = memref.load %q[%i] : memref<1024xf32>
    %d = memref.load %h[%i] : memref<1024xf32>
    %n = arith.subf %v, %d : f32
    memref.store %n, %q[%i] : memref<1024xf32>
    gpu.terminator
  }
  return
}

// Tests that a kernel reading what the one before it wrote keeps its own
// launch, as does one rewriting what the one before it wrote; a kernel
// writing bytes that an earlier launch read joins a later one that does not
// touch them.
// CHECK-LABEL: func.func @dependent
// CHECK: gpu.launch
// CHECK-NOT: scf.if
// CHECK: gpu.terminator
// CHECK: gpu.launch
// CHECK-COUNT-2: scf.if
// CHECK: gpu.terminator
// CHECK: gpu.launch
// CHECK-NOT: scf.if
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
func.func @dependent(%arena: memref<8192xi8>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %x = memref.view %arena[%c0][] : memref<8192xi8> to memref<32xf32>
  %y = memref.view %arena[%c128][] : memref<8192xi8> to memref<32xf32>
  // %x's bytes, seen through another shape.
  %x2 = memref.view %arena[%c0][] : memref<8192xi8> to memref<8x4xf32>
  %z = memref.view %arena[%c256][] : memref<8192xi8> to memref<32xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<32xf32>
    memref.store %v, %y[%tx] : memref<32xf32>
    gpu.terminator
  }
  // Reads %y, which the first writes.
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %v = memref.load %y[%tx] : memref<32xf32>
    memref.store %v, %z[%tx] : memref<32xf32>
    gpu.terminator
  }
  // Writes %x's bytes, which only the first, launched alone, reads.
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %r = arith.divui %tx, %c32 : index
    %cst = arith.constant 0.0 : f32
    memref.store %cst, %x2[%r, %c0] : memref<8x4xf32>
    gpu.terminator
  }
  // Rewrites %z, which the second writes.
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %cst = arith.constant 1.0 : f32
    memref.store %cst, %z[%tx] : memref<32xf32>
    gpu.terminator
  }
  return
}

// Tests that copies into separate columns of one packed buffer merge (their
// subviews' boxes miss each other), and that one into overlapping columns
// does not.
// CHECK-LABEL: func.func @columns
// CHECK: %[[C4:.+]] = arith.constant 4 : index
// CHECK: gpu.launch blocks({{.+}}) in (%{{.+}} = %[[C4]],
// CHECK-COUNT-2: scf.if
// CHECK: gpu.terminator
// CHECK: gpu.launch
// CHECK-NOT: gpu.launch
func.func @columns(%a: memref<8x32xf32>, %b: memref<8x32xf32>, %packed: memref<8x96xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %q = memref.subview %packed[0, 0] [8, 32] [1, 1] : memref<8x96xf32> to memref<8x32xf32, strided<[96, 1]>>
  %k = memref.subview %packed[0, 32] [8, 32] [1, 1] : memref<8x96xf32> to memref<8x32xf32, strided<[96, 1], offset: 32>>
  %kv = memref.subview %packed[0, 48] [8, 32] [1, 1] : memref<8x96xf32> to memref<8x32xf32, strided<[96, 1], offset: 48>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %i = arith.addi %bx, %tx : index
    %r = arith.divui %i, %c32 : index
    %c = arith.remui %i, %c32 : index
    %v = memref.load %a[%r, %c] : memref<8x32xf32>
    memref.store %v, %q[%r, %c] : memref<8x32xf32, strided<[96, 1]>>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %i = arith.addi %bx, %tx : index
    %r = arith.divui %i, %c32 : index
    %c = arith.remui %i, %c32 : index
    %v = memref.load %b[%r, %c] : memref<8x32xf32>
    memref.store %v, %k[%r, %c] : memref<8x32xf32, strided<[96, 1], offset: 32>>
    gpu.terminator
  }
  // Columns 48..79 overlap the second copy's 32..63.
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %i = arith.addi %bx, %tx : index
    %r = arith.divui %i, %c32 : index
    %c = arith.remui %i, %c32 : index
    %v = memref.load %b[%r, %c] : memref<8x32xf32>
    memref.store %v, %kv[%r, %c] : memref<8x32xf32, strided<[96, 1], offset: 48>>
    gpu.terminator
  }
  return
}

// Tests what keeps a launch alone: an op touching memory between two
// launches, a barrier, shared memory, warp shuffles, and a buffer whose
// place is unknown beside a write.
// CHECK-LABEL: func.func @alone
// CHECK-COUNT-6: gpu.launch
// CHECK-NOT: gpu.launch
func.func private @touch(memref<32xf32>)
func.func @alone(%x: memref<32xf32>, %y: memref<32xf32>, %w: memref<64xf32>,
                 %u: memref<?xf32>) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %cst = arith.constant 0.0 : f32
  %m = memref.alloc() : memref<64xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    memref.store %cst, %x[%tx] : memref<32xf32>
    gpu.terminator
  }
  func.call @touch(%y) : (memref<32xf32>) -> ()
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    memref.store %cst, %y[%tx] : memref<32xf32>
    gpu.barrier
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
             workgroup(%s : memref<32xf32, #gpu.address_space<workgroup>>) {
    memref.store %cst, %s[%tx] : memref<32xf32, #gpu.address_space<workgroup>>
    gpu.terminator
  }
  // A warp's shuffle needs all its lanes, which a wider block would mask.
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<32xf32>
    %c16 = arith.constant 16 : i32
    %c32i = arith.constant 32 : i32
    %s, %ok = gpu.shuffle xor %v, %c16, %c32i : f32
    memref.store %s, %y[%tx] : memref<32xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    memref.store %cst, %w[%tx] : memref<64xf32>
    gpu.terminator
  }
  // %m lies no one knows where, so it may be %w.
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %v = memref.load %m[%tx] : memref<64xf32>
    memref.store %v, %u[%tx] : memref<?xf32>
    gpu.terminator
  }
  return
}

// Tests that a dynamic grid is summed on the host, and the second part's
// blocks counted from its end.
// CHECK-LABEL: func.func @dynamic_grid
// CHECK: %[[TOTAL:.+]] = arith.addi %[[G:.+]], %{{.+}} : index
// CHECK: gpu.launch blocks({{.+}}) in (%{{.+}} = %[[TOTAL]],
// CHECK: arith.subi %{{.+}}, %[[G]] : index
// CHECK-NOT: gpu.launch
func.func @dynamic_grid(%x: memref<?xf32>, %y: memref<?xf32>, %n: index) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %n, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %i = arith.muli %bx, %c32 : index
    %j = arith.addi %i, %tx : index
    %v = memref.load %x[%j] : memref<?xf32>
    %s = arith.mulf %v, %v : f32
    memref.store %s, %x[%j] : memref<?xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %cst = arith.constant 0.0 : f32
    %v = memref.load %y[%bx] : memref<?xf32>
    %s = arith.addf %v, %cst : f32
    memref.store %s, %y[%tx] : memref<?xf32>
    gpu.terminator
  }
  return
}
