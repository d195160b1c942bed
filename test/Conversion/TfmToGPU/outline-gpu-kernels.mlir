// RUN: tfm-opt %s --tfm-outline-gpu-kernels | FileCheck %s
// Outlines as gpu-kernel-outlining does, and each launch's nvvm. attributes
// (and only those) go to the kernel it became; a launch outlined before
// the pass keeps its kernel as it was.

// CHECK-LABEL: func.func @two
// CHECK: gpu.launch_func @two_kernel::@two_kernel
// CHECK: gpu.launch_func @two_kernel_0::@two_kernel
// CHECK: gpu.launch_func @early::@early
// CHECK: gpu.launch_func @two_kernel_1::@two_kernel
// CHECK-NOT: gpu.launch
// CHECK: gpu.module @two_kernel
// CHECK: gpu.func @two_kernel(%{{.*}}: memref<4xf32>) kernel attributes {known_block_size = array<i32: 4, 1, 1>, known_grid_size = array<i32: 1, 1, 1>, nvvm.minctasm = 1 : i32}
// CHECK: gpu.module @two_kernel_0
// CHECK: gpu.func @two_kernel(%{{.*}}: memref<4xf32>) kernel attributes {known_block_size = array<i32: 2, 1, 1>, known_grid_size = array<i32: 1, 1, 1>}
// CHECK: gpu.module @two_kernel_1
// CHECK: gpu.func @two_kernel(%{{.*}}: memref<4xf32>) kernel attributes {known_block_size = array<i32: 1, 1, 1>, known_grid_size = array<i32: 1, 1, 1>, nvvm.maxnreg = 200 : i32}
// CHECK: gpu.module @early
// CHECK: gpu.func @early() kernel {
module attributes {gpu.container_module} {
  func.func @two(%m: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
      %v = memref.load %m[%tx] : memref<4xf32>
      memref.store %v, %m[%tx] : memref<4xf32>
      gpu.terminator
    } {nvvm.minctasm = 1 : i32}
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c2, %sy = %c1, %sz = %c1) {
      %v = memref.load %m[%tx] : memref<4xf32>
      memref.store %v, %m[%tx] : memref<4xf32>
      gpu.terminator
    } {tfm.other = 2 : i32}
    gpu.launch_func @early::@early blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
      %v = memref.load %m[%tx] : memref<4xf32>
      memref.store %v, %m[%tx] : memref<4xf32>
      gpu.terminator
    } {nvvm.maxnreg = 200 : i32}
    return
  }
  gpu.module @early {
    gpu.func @early() kernel {
      gpu.return
    }
  }
}
