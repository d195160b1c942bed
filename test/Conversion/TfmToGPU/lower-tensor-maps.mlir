// RUN: tfm-opt %s --tfm-lower-tensor-maps -split-input-file -verify-diagnostics | FileCheck %s
// A TMA tensor map made in an entry's host code becomes the runtime's
// (tfm_abi_host_t.tensor_map): a constant description (f16 = 2, rank 3, a
// 128-byte swizzle, the dims, byte strides and box innermost first), the
// address of the tensor's first element with the memref.view's shift added
// here, the status returned if the runtime refuses, and the map passed to
// the kernel as the pointer it is.

// CHECK: llvm.mlir.global internal constant @__tfm_tensor_map_desc_0(dense<[2, 3, 128, 64, 8, 2, 0, 0, 128, 1024, 0, 0, 64, 8, 1, 0, 0]> : tensor<17xi64>)
// CHECK: func.func private @__tfm_tensor_map(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-LABEL: func.func @__tfm_entry_infer(
// CHECK-SAME: %[[HOST:.*]]: !llvm.ptr, %[[ARENA:.*]]: memref<4096xi8>)
// CHECK: %[[SLOT:.*]] = llvm.alloca
// CHECK: %[[DESC:.*]] = llvm.mlir.addressof @__tfm_tensor_map_desc_0
// CHECK: %[[START:.*]] = memref.extract_aligned_pointer_as_index %[[ARENA]]
// CHECK: %[[SHIFTED:.*]] = arith.addi %[[START]], %c1024
// CHECK: %[[BASE:.*]] = llvm.inttoptr
// CHECK: %[[STATUS:.*]] = call @__tfm_tensor_map(%[[HOST]], %[[DESC]], %[[BASE]], %[[SLOT]])
// CHECK: %[[FAILED:.*]] = arith.cmpi ne, %[[STATUS]]
// CHECK: cf.cond_br %[[FAILED]], ^[[EXIT:.*]](%[[STATUS]] : i32), ^[[NEXT:.*]]
// CHECK: ^[[NEXT]]:
// CHECK: %[[MAP:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> !llvm.ptr
// CHECK: gpu.launch_func @k::@k {{.*}} args(%[[MAP]] : !llvm.ptr)
// CHECK: gpu.func @k(%[[ARG:.*]]: !llvm.ptr) kernel
// CHECK-NEXT: builtin.unrealized_conversion_cast %[[ARG]] : !llvm.ptr to !nvgpu.tensormap.descriptor
!map = !nvgpu.tensormap.descriptor<tensor = memref<1x8x64xf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
module attributes {gpu.container_module} {
  func.func @__tfm_entry_infer(%host: !llvm.ptr, %arena: memref<4096xi8>) -> i32 {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %c1024 = arith.constant 1024 : index
    %v = memref.view %arena[%c1024][] : memref<4096xi8> to memref<2x8x64xf16>
    %u = memref.cast %v : memref<2x8x64xf16> to memref<*xf16>
    %m = nvgpu.tma.create.descriptor %u box[%c1, %c8, %c64] : memref<*xf16> -> !map
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : !map)
    cf.br ^exit(%c0 : i32)
  ^exit(%s: i32):
    return %s : i32
  }
  gpu.module @k {
    gpu.func @k(%m: !map) kernel {
      gpu.return
    }
  }
}

// -----

// A box its descriptor's type does not give.
!map = !nvgpu.tensormap.descriptor<tensor = memref<8x64xf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
func.func @__tfm_entry_infer(%host: !llvm.ptr, %t: memref<16x64xf16>) -> i32 {
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %u = memref.cast %t : memref<16x64xf16> to memref<*xf16>
  // expected-error @+1 {{tfm-lower-tensor-maps: a box that is not its descriptor type's}}
  %m = nvgpu.tma.create.descriptor %u box[%c16, %c64] : memref<*xf16> -> !map
  cf.br ^exit(%c0 : i32)
^exit(%s: i32):
  return %s : i32
}

// -----

// A map made where no entry's host code is.
!map = !nvgpu.tensormap.descriptor<tensor = memref<8x64xf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
func.func @helper(%t: memref<16x64xf16>) {
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %u = memref.cast %t : memref<16x64xf16> to memref<*xf16>
  // expected-error @+1 {{tfm-lower-tensor-maps: a tensor map made outside an entry's host code}}
  %m = nvgpu.tma.create.descriptor %u box[%c8, %c64] : memref<*xf16> -> !map
  return
}
