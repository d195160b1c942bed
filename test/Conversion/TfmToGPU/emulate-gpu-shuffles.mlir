// Tests that tfm-emulate-gpu-kernels runs gpu.shuffle over the warp's
// lanes, each reading its source lane's value (WarpSemantics.h): every
// expected value is worked out by hand.
// RUN: tfm-opt %s -tfm-emulate-gpu-kernels | mlir-opt -convert-scf-to-cf -expand-strided-metadata -finalize-memref-to-llvm -convert-arith-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils | FileCheck %s

// Two warps sum their lanes' indices by xor shuffles: 0 + ... + 31 = 496 in
// the first, 32 + ... + 63 = 496 + 32 * 32 = 1520 in the second.
func.func @warp_sums(%out: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %w = arith.constant 32 : i32
    %o16 = arith.constant 16 : i32
    %o8 = arith.constant 8 : i32
    %o4 = arith.constant 4 : i32
    %o2 = arith.constant 2 : i32
    %o1 = arith.constant 1 : i32
    %i = arith.index_cast %tx : index to i32
    %v0 = arith.sitofp %i : i32 to f32
    %s16, %p16 = gpu.shuffle xor %v0, %o16, %w : f32
    %v1 = arith.addf %v0, %s16 : f32
    %s8, %p8 = gpu.shuffle xor %v1, %o8, %w : f32
    %v2 = arith.addf %v1, %s8 : f32
    %s4, %p4 = gpu.shuffle xor %v2, %o4, %w : f32
    %v3 = arith.addf %v2, %s4 : f32
    %s2, %p2 = gpu.shuffle xor %v3, %o2, %w : f32
    %v4 = arith.addf %v3, %s2 : f32
    %s1, %p1 = gpu.shuffle xor %v4, %o1, %w : f32
    %v5 = arith.addf %v4, %s1 : f32
    memref.store %v5, %out[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}

// An inclusive scan of 1..32 by up shuffles, each adding only where the
// source lane is valid (lane >= offset): lane t ends with (t + 1)(t + 2) / 2.
func.func @warp_scan(%out: memref<32xf32>) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %w = arith.constant 32 : i32
    %o1 = arith.constant 1 : i32
    %o2 = arith.constant 2 : i32
    %o4 = arith.constant 4 : i32
    %o8 = arith.constant 8 : i32
    %o16 = arith.constant 16 : i32
    %one = arith.constant 1 : i32
    %i = arith.index_cast %tx : index to i32
    %i1 = arith.addi %i, %one : i32
    %x0 = arith.sitofp %i1 : i32 to f32
    %y1, %p1 = gpu.shuffle up %x0, %o1, %w : f32
    %a1 = arith.addf %x0, %y1 : f32
    %x1 = arith.select %p1, %a1, %x0 : f32
    %y2, %p2 = gpu.shuffle up %x1, %o2, %w : f32
    %a2 = arith.addf %x1, %y2 : f32
    %x2 = arith.select %p2, %a2, %x1 : f32
    %y4, %p4 = gpu.shuffle up %x2, %o4, %w : f32
    %a4 = arith.addf %x2, %y4 : f32
    %x4 = arith.select %p4, %a4, %x2 : f32
    %y8, %p8 = gpu.shuffle up %x4, %o8, %w : f32
    %a8 = arith.addf %x4, %y8 : f32
    %x8 = arith.select %p8, %a8, %x4 : f32
    %y16, %p16 = gpu.shuffle up %x8, %o16, %w : f32
    %a16 = arith.addf %x8, %y16 : f32
    %x16 = arith.select %p16, %a16, %x8 : f32
    memref.store %x16, %out[%tx] : memref<32xf32>
    gpu.terminator
  }
  return
}

// CHECK: [496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 496, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520, 1520]
// CHECK: [1, 3, 6, 10, 15, 21, 28, 36, 45, 55, 66, 78, 91, 105, 120, 136, 153, 171, 190, 210, 231, 253, 276, 300, 325, 351, 378, 406, 435, 465, 496, 528]
func.func @main() {
  %sums = memref.alloc() : memref<64xf32>
  %scan = memref.alloc() : memref<32xf32>
  call @warp_sums(%sums) : (memref<64xf32>) -> ()
  %u = memref.cast %sums : memref<64xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  call @warp_scan(%scan) : (memref<32xf32>) -> ()
  %v = memref.cast %scan : memref<32xf32> to memref<*xf32>
  call @printMemrefF32(%v) : (memref<*xf32>) -> ()
  memref.dealloc %sums : memref<64xf32>
  memref.dealloc %scan : memref<32xf32>
  return
}

func.func private @printMemrefF32(memref<*xf32>)
