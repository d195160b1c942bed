// RUN: tfm-opt %s -split-input-file --tfm-lower-kernel-calls -verify-diagnostics | FileCheck %s

// Tests that each kernel call becomes a call through __tfm_run_kernel on an
// array of pointers: a buffer's pointer is the argument it views plus the
// views' byte offsets (128 for the weights' second constant), plus its
// element offset (8 floats = 32 bytes); an absent slot is NULL, and so are
// the unused slots. Equal descriptors share one entry of tfm.kernels.
// CHECK: module attributes {tfm.kernel_origins = [{{.+}}], tfm.kernels = [#tfm.kernel<kind = linear, dtype = f32, params = [6, 8, 4, 1, 0, 0, 1]>, #tfm.kernel<kind = sgd, dtype = f32, params = [4]>]}
// CHECK: llvm.func @__tfm_run_kernel(!llvm.ptr, i32, !llvm.ptr) -> i32
// CHECK-LABEL: func.func @entry
// CHECK-SAME: (%[[HOST:.+]]: !llvm.ptr, %[[W:.+]]: memref<256xi8>, %[[X:.+]]: memref<6x8xf32>, %[[Y:.+]]: memref<6x4xf32>)
// CHECK: %[[ARGS:.+]] = llvm.alloca %{{.+}} x !llvm.ptr
// CHECK: %[[XP:.+]] = memref.extract_aligned_pointer_as_index %[[X]]
// CHECK: %[[WP:.+]] = memref.extract_aligned_pointer_as_index %[[W]]
// CHECK: arith.addi %[[WP]], %c128
// CHECK: arith.addi %{{.+}}, %c32
// CHECK: memref.extract_aligned_pointer_as_index %[[Y]]
// CHECK-COUNT-2: llvm.store
// CHECK: llvm.mlir.zero : !llvm.ptr
// CHECK-COUNT-6: llvm.store
// CHECK: %[[RC:.+]] = llvm.call @__tfm_run_kernel(%[[HOST]], %c0_i32, %[[ARGS]])
// CHECK: llvm.call @__tfm_run_kernel(%[[HOST]], %c0_i32{{.*}}, %[[ARGS]])
// CHECK: llvm.call @__tfm_run_kernel(%[[HOST]], %c1_i32, %[[ARGS]])
// CHECK-NOT: tfm.kernel_call
func.func @entry(%host: !llvm.ptr, %w: memref<256xi8>, %x: memref<6x8xf32>, %y: memref<6x4xf32>) -> i32 {
  %c128 = arith.constant 128 : index
  %wv = memref.view %w[%c128][] : memref<256xi8> to memref<4x8xf32>
  %rc = tfm.kernel_call %host, <kind = linear, dtype = f32, params = [6, 8, 4, 1, 0, 0, 1]>(%x, %wv, %y) {slots = array<i64: 0, 1, 4>, offsets = array<i64: 0, 8, 0>} : !llvm.ptr, memref<6x8xf32>, memref<4x8xf32>, memref<6x4xf32>
  %rc2 = tfm.kernel_call %host, <kind = linear, dtype = f32, params = [6, 8, 4, 1, 0, 0, 1]>(%x, %wv, %y) {slots = array<i64: 0, 1, 4>} : !llvm.ptr, memref<6x8xf32>, memref<4x8xf32>, memref<6x4xf32>
  %flat = memref.reinterpret_cast %y to offset: [0], sizes: [4], strides: [1] : memref<6x4xf32> to memref<4xf32>
  %rc3 = tfm.kernel_call %host, <kind = sgd, dtype = f32, params = [4]>(%flat, %flat, %flat) : !llvm.ptr, memref<4xf32>, memref<4xf32>, memref<4xf32>
  %s = arith.addi %rc, %rc2 : i32
  %t = arith.addi %s, %rc3 : i32
  return %t : i32
}

// -----

// Tests that a buffer the pass cannot trace to an argument is an error.
func.func @entry(%host: !llvm.ptr) -> i32 {
  %a = memref.alloc() : memref<4xf32>
  // expected-error@+1 {{cannot take the address of buffer 0}}
  %rc = tfm.kernel_call %host, <kind = sgd, dtype = f32, params = [4]>(%a, %a, %a) : !llvm.ptr, memref<4xf32>, memref<4xf32>, memref<4xf32>
  return %rc : i32
}
