// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg' | FileCheck %s
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg compute-type=bf16' | FileCheck %s --check-prefix=BF16
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg compute-type=f16' | FileCheck %s --check-prefix=F16
// RUN: tfm-opt %s --tfm-gpu-pipeline | FileCheck %s --check-prefix=HOST

// Tests the CUDA target's GEMMs: each is a call of the runtime's GEMM
// kernel (cuBLASLt) with the generated GEMM as its fallback, which runs
// when the call returns TFM_ABI_STATUS_KERNEL_DECLINED (-101); any other
// non-zero status ends the run. ReLU and tanh-GELU go into the call's
// epilogue; erf-GELU has no cuBLASLt epilogue and is applied after the
// call, on either path. A transposed operand is read through its strides.

// CHECK-LABEL: func.func @__tfm_entry_infer
// CHECK: %[[RC:.+]] = tfm.kernel_call %arg0, <kind = linear, dtype = f32, params = [4, 8, 6, 1, 1, 0, 1]>({{.*}}) {fallback, slots = array<i64: 0, 1, 2, 4>}
// CHECK: %[[DECLINED:.+]] = arith.cmpi eq, %[[RC]], %c-101_i32
// CHECK: cf.cond_br %[[DECLINED]], ^[[OWN:.+]], ^[[CALLED:[a-z0-9]+]]
// CHECK: ^[[CALLED]]:
// CHECK: %[[FAILED:.+]] = arith.cmpi ne, %[[RC]], %c0_i32
// CHECK: cf.cond_br %[[FAILED]], ^[[EXIT:[a-z0-9]+]](%[[RC]] : i32)
// CHECK: ^[[OWN]]:
// CHECK: linalg.generic {{.*}}"reduction"
// CHECK: arith.maximumf
// CHECK: cf.br ^[[NEXT:[a-z0-9]+]]
// CHECK: ^[[NEXT]]:
// CHECK: tfm.kernel_call %arg0, <kind = linear, dtype = f32, params = [4, 6, 5, 0, 0, 0, 1]>
// CHECK: ^{{.+}}:
// CHECK: linalg.generic {{.*}}"reduction"
// CHECK-NOT: math.erf
// CHECK: cf.br ^[[JOIN:[a-z0-9]+]]
// CHECK: ^[[JOIN]]:
// CHECK-NEXT: linalg.generic
// CHECK: math.erf
// CHECK: tfm.kernel_call %arg0, <kind = batch_matmul, dtype = f32, params = [1, 1, 5, 4, 3], strides = [20, 20, 1, 5, 12, 12, 3, 1, 15, 15, 3, 1]>
// CHECK: ^[[EXIT]](%{{.+}}: i32):
// CHECK-NEXT: return

// BF16: tfm.kernel_call %arg0, <kind = linear, dtype = bf16,
// BF16: tfm.kernel_call %arg0, <kind = batch_matmul, dtype = bf16,
// F16: tfm.kernel_call %arg0, <kind = linear, dtype = f16,
// F16: tfm.kernel_call %arg0, <kind = batch_matmul, dtype = f16,

// On the host, each call is one of the kernel table, all three flagged as
// having a fallback.
// HOST: tfm.kernel_flags = array<i32: 1, 1, 1>
// HOST-SAME: tfm.kernels = [#tfm.kernel<kind = linear, {{.*}}>, #tfm.kernel<kind = linear, {{.*}}>, #tfm.kernel<kind = batch_matmul, {{.*}}>]
// HOST: llvm.func @__tfm_run_kernel(!llvm.ptr, i32, !llvm.ptr) -> i32
// HOST: llvm.func @__tfm_entry_infer
// HOST: llvm.mlir.constant(-101 : i32)
// HOST: llvm.call @__tfm_run_kernel
// HOST: llvm.call @__tfm_launch_kernel

func.func @infer(%x: tensor<4x8xf32> {tfm.name = "x"}, %a: tensor<4x5xf32> {tfm.name = "a"}, %c: tensor<4x3xf32> {tfm.name = "c"}) -> (tensor<4x5xf32>, tensor<5x3xf32>) {
  %w = arith.constant dense<0.25> : tensor<6x8xf32>
  %b = arith.constant dense<0.5> : tensor<6xf32>
  %v = arith.constant dense<0.125> : tensor<5x6xf32>
  %h = tfm.linear %x, %w, %b activation = relu : (tensor<4x8xf32>, tensor<6x8xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %y = tfm.linear %h, %v activation = gelu : (tensor<4x6xf32>, tensor<5x6xf32>) -> tensor<4x5xf32>
  %z = tfm.matmul %a, %c {transpose_lhs} : (tensor<4x5xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
  return %y, %z : tensor<4x5xf32>, tensor<5x3xf32>
}
