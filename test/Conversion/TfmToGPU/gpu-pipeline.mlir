// RUN: tfm-opt %s --tfm-gpu-pipeline | FileCheck %s
// RUN: tfm-opt %s '--tfm-gpu-pipeline=gpu-arch=sm_90a' | FileCheck %s --check-prefix=SM90A
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg' | FileCheck %s --check-prefix=LINALG
// RUN: not tfm-opt %s '--tfm-gpu-pipeline=gpu-arch=sm_75' 2>&1 | FileCheck %s --check-prefix=BADARCH

// Tests the CUDA target's pipeline on a relu and a layer norm (one kernel
// of a warp per row, its statistics summed by shuffles). On buffers,
// the entry is linalg on device memory, bare pointers in, and no kernel
// calls (gpu-gemm.mlir has those). At the end the module carries the PTX of every kernel, one
// `.entry` each, for the architecture asked, the kernels' names in launch
// order, and host code that launches each through the runtime and returns
// the launch's status when it fails.

// LINALG-NOT: tfm.kernel_call
// LINALG-NOT: __tfm_read_device
// LINALG: func.func @__tfm_entry_infer({{.*}}) -> i32 attributes {llvm.bareptr}
// LINALG: linalg.generic
// LINALG: arith.maximumf
// LINALG-NOT: tfm.kernel_call

// CHECK: module attributes
// CHECK-SAME: tfm.device_arch = "sm_80"
// CHECK-SAME: tfm.device_code = "{{.*}}.version 7.0\0A.target sm_80\0A{{.*}}.visible .entry infer_kernel(
// CHECK-SAME: max.NaN.f32
// CHECK-SAME: shfl.sync.bfly.b32
// CHECK-SAME: sqrt.rn.f32
// CHECK-NOT: __nv_
// CHECK-SAME: tfm.device_kernels = ["infer_kernel", "infer_kernel_0"]
// CHECK-SAME: tfm.kernels = []
// CHECK: llvm.func @__tfm_launch_kernel(!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> i32
// CHECK: llvm.func @__tfm_entry_infer
// CHECK: %[[RC:.+]] = llvm.call @__tfm_launch_kernel(%arg0, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}})
// CHECK: llvm.cond_br %{{.+}}, ^[[FAIL:.+]], ^{{.+}}
// CHECK: ^[[FAIL]]:
// CHECK-NEXT: llvm.return %[[RC]] : i32
// CHECK-NOT: gpu.module
// CHECK-NOT: gpu.launch

// SM90A: tfm.device_arch = "sm_90a"
// SM90A-SAME: .version 8.0\0A.target sm_90a

// BADARCH: error: unknown GPU architecture 'sm_75'; the CUDA target builds for sm_80, sm_86, sm_89, sm_90 and sm_90a

func.func @infer(%x: tensor<4x8xf32> {tfm.name = "x"}) -> tensor<4x8xf32> {
  %g = arith.constant dense<1.0> : tensor<8xf32>
  %b = arith.constant dense<0.5> : tensor<8xf32>
  %0 = tfm.relu %x : tensor<4x8xf32>
  %1 = tfm.layer_norm %0, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}
