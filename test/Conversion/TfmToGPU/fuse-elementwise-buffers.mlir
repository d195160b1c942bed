// RUN: tfm-opt %s --pass-pipeline='builtin.module(func.func(tfm-fuse-elementwise-buffers))' | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>

// Tests that a bias add and the rounding of its result become one op: the
// rounding reads the sum from the register, and both outputs are written.
// CHECK-LABEL: func.func @chain
// CHECK: linalg.generic {{.+}} ins(%[[X:.+]], %[[B:.+]] : memref<4x8xf32>, memref<8xf32>) outs(%[[Y:.+]], %[[R:.+]] : memref<4x8xf32>, memref<4x8xbf16>)
// CHECK: ^bb0(%[[XV:.+]]: f32, %[[BV:.+]]: f32, %{{.+}}: f32, %{{.+}}: bf16):
// CHECK: %[[SUM:.+]] = arith.addf %[[XV]], %[[BV]] : f32
// CHECK: %[[ROUND:.+]] = arith.truncf %[[SUM]] : f32 to bf16
// CHECK: linalg.yield %[[SUM]], %[[ROUND]] : f32, bf16
// CHECK-NOT: linalg.generic
func.func @chain(%arena: memref<1024xi8>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %x = memref.view %arena[%c0][] : memref<1024xi8> to memref<4x8xf32>
  %y = memref.view %arena[%c128][] : memref<1024xi8> to memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : memref<4x8xf32>, memref<8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%xv: f32, %bv: f32, %o: f32):
    %s = arith.addf %xv, %bv : f32
    linalg.yield %s : f32
  }
  // Another view of the same bytes is the same buffer.
  %y2 = memref.view %arena[%c128][] : memref<1024xi8> to memref<4x8xf32>
  %r = memref.view %arena[%c256][] : memref<1024xi8> to memref<4x8xbf16>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y2 : memref<4x8xf32>) outs(%r : memref<4x8xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %t = arith.truncf %v : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// Tests that an op rewriting the first's output in place leaves one output,
// whose old value the second reads as the first's result.
// CHECK-LABEL: func.func @in_place
// CHECK: linalg.generic {{.+}} ins(%{{.+}} : memref<4x8xf32>) outs(%{{.+}} : memref<4x8xf32>)
// CHECK: %[[E:.+]] = math.exp
// CHECK: %[[M:.+]] = arith.mulf %[[E]], %[[E]] : f32
// CHECK: linalg.yield %[[M]] : f32
// CHECK-NOT: linalg.generic
func.func @in_place(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %e = math.exp %v : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<4x8xf32>) {
  ^bb0(%o: f32):
    %m = arith.mulf %o, %o : f32
    linalg.yield %m : f32
  }
  return
}

// Tests that a copy and the rounding of its result read through another
// shape of the same bytes merge over the copy's shape.
// CHECK-LABEL: func.func @reshaped
// CHECK: %[[R:.+]] = memref.reinterpret_cast %{{.+}} to offset: [0], sizes: [2, 2, 8], strides: [16, 8, 1] : memref<4x8xbf16> to memref<2x2x8xbf16, strided<[16, 8, 1]>>
// CHECK: linalg.generic {{.+}} ins(%{{.+}} : memref<2x2x8xf32, strided<[8, 16, 1]>>) outs(%{{.+}}, %[[R]] : memref<2x2x8xf32>, memref<2x2x8xbf16, strided<[16, 8, 1]>>)
// CHECK: arith.truncf
// CHECK-NOT: linalg.generic
func.func @reshaped(%arena: memref<1024xi8>, %src: memref<2x2x8xf32, strided<[8, 16, 1]>>) {
  %c0 = arith.constant 0 : index
  %c256 = arith.constant 256 : index
  %copy = memref.view %arena[%c0][] : memref<1024xi8> to memref<2x2x8xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%src : memref<2x2x8xf32, strided<[8, 16, 1]>>) outs(%copy : memref<2x2x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  %flat = memref.view %arena[%c0][] : memref<1024xi8> to memref<4x8xf32>
  %r = memref.view %arena[%c256][] : memref<1024xi8> to memref<4x8xbf16>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%flat : memref<4x8xf32>) outs(%r : memref<4x8xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %t = arith.truncf %v : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// Tests what must stay apart. A transposed read of the first's output
// would read elements not yet written.
// CHECK-LABEL: func.func @transposed
// CHECK-COUNT-2: linalg.generic
func.func @transposed(%x: memref<8x8xf32>, %y: memref<8x8xf32>, %z: memref<8x8xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<8x8xf32>) outs(%y : memref<8x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : memref<8x8xf32>) outs(%z : memref<8x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  return
}

// The second writes over bytes the first still reads elsewhere (the plan
// reused the first's dead input for the second's output, shifted by a row).
// CHECK-LABEL: func.func @overwrites_input
// CHECK-COUNT-2: linalg.generic
func.func @overwrites_input(%arena: memref<1024xi8>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %c512 = arith.constant 512 : index
  %a = memref.view %arena[%c0][] : memref<1024xi8> to memref<4x8xf32>
  %b = memref.view %arena[%c512][] : memref<1024xi8> to memref<4x8xf32>
  %c = memref.view %arena[%c32][] : memref<1024xi8> to memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%b : memref<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : memref<4x8xf32>) outs(%c : memref<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  return
}

// A store between them, a reduction, and another shape with a position
// asked (linalg.index) keep the ops apart.
// CHECK-LABEL: func.func @apart
// CHECK-COUNT-4: linalg.generic
func.func @apart(%x: memref<4x8xf32>, %y: memref<4x8xf32>, %s: memref<4xf32>, %w: memref<32xf32>, %f: memref<f32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  %zero = arith.constant 0.0 : f32
  memref.store %zero, %f[] : memref<f32>
  linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%y : memref<4x8xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %a = arith.addf %v, %o : f32
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%w : memref<32xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %n = arith.index_cast %i : index to i32
    %v = arith.sitofp %n : i32 to f32
    linalg.yield %v : f32
  }
  return
}

// A body that loads at a computed position reads what another thread of a
// merged kernel may not have written yet. Exclusive CumSum's two shifts:
// the first copies x into y[1..4], the second loads y at its own position
// (the slice of the next shift), so thread i reads y[i], which thread i-1
// writes. Merged, they raced on the GPU; apart, each is one kernel.
// CHECK-LABEL: func.func @loads_first_output
// CHECK-COUNT-2: linalg.generic
func.func @loads_first_output(%arena: memref<192xi8>, %x: memref<4xf64>) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %y = memref.view %arena[%c64][] : memref<192xi8> to memref<5xf64>
  %tail = memref.subview %y[1] [4] [1] : memref<5xf64> to memref<4xf64, strided<[1], offset: 1>>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%x : memref<4xf64>) outs(%tail : memref<4xf64, strided<[1], offset: 1>>) {
  ^bb0(%v: f64, %o: f64):
    linalg.yield %v : f64
  }
  %s = memref.view %arena[%c0][] : memref<192xi8> to memref<4xf64>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%s : memref<4xf64>) {
  ^bb0(%o: f64):
    %i = linalg.index 0 : index
    %v = memref.load %y[%i] : memref<5xf64>
    linalg.yield %v : f64
  }
  return
}

// The reverse: the first loads at computed positions from a buffer that
// the second writes, so thread i's write could land before thread j's load.
// CHECK-LABEL: func.func @overwrites_first_load
// CHECK-COUNT-2: linalg.generic
func.func @overwrites_first_load(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%y : memref<8xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %c7 = arith.constant 7 : index
    %j = arith.subi %c7, %i : index
    %v = memref.load %x[%j] : memref<8xf32>
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%y : memref<8xf32>) outs(%x : memref<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %d = arith.addf %v, %v : f32
    linalg.yield %d : f32
  }
  return
}

// Loads that miss the other op's output still merge: a gather from a
// table nobody writes, then the rounding of its result.
// CHECK-LABEL: func.func @loads_elsewhere
// CHECK: linalg.generic
// CHECK: memref.load
// CHECK: arith.truncf
// CHECK-NOT: linalg.generic
func.func @loads_elsewhere(%table: memref<16xf32>, %y: memref<8xf32>, %r: memref<8xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%y : memref<8xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %c2 = arith.constant 2 : index
    %j = arith.muli %i, %c2 : index
    %v = memref.load %table[%j] : memref<16xf32>
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%y : memref<8xf32>) outs(%r : memref<8xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %t = arith.truncf %v : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}
