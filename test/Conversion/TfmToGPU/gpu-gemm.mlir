// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg' | FileCheck %s
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg compute-type=bf16' | FileCheck %s --check-prefix=BF16
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg compute-type=f16' | FileCheck %s --check-prefix=F16
// RUN: tfm-opt %s --tfm-gpu-pipeline | FileCheck %s --check-prefix=HOST
// RUN: tfm-opt %s '--tfm-gpu-pipeline=compute-type=bf16' | FileCheck %s --check-prefix=HOST16

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

// Under bf16 and f16 the library reads 16-bit operands: an activation is
// rounded into a copy before the call (and the fallback reads that copy),
// a constant weight was rounded at compile time; bias and output stay f32.
// The weights only GEMMs read are stored once, rounded; the bias in f32.
// BF16: tfm.weights = [dense<2.500000e-01> : tensor<6x8xbf16>, dense<5.000000e-01> : tensor<6xf32>, dense<1.250000e-01> : tensor<5x6xbf16>]
// BF16: outs(%[[X16:.+]] : memref<4x8xbf16>)
// BF16-NEXT: ^bb0
// BF16-NEXT: arith.truncf %{{.+}} : f32 to bf16
// BF16: tfm.kernel_call %arg0, <kind = linear, dtype = bf16, {{.*}}>(%[[X16]], {{.*}}) {{.*}} : !llvm.ptr, memref<4x8xbf16>, memref<6x8xbf16>, memref<6xf32>, memref<4x6xf32>
// BF16: linalg.generic {{.*}}"reduction"{{.*}} ins(%{{.+}}, %{{.+}} : memref<4x8xbf16>, memref<6x8xbf16>) outs(%{{.+}} : memref<4x6xf32>)
// BF16: tfm.kernel_call %arg0, <kind = linear, dtype = bf16, {{.*}} : !llvm.ptr, memref<4x6xbf16>, memref<5x6xbf16>, memref<4x5xf32>
// BF16: tfm.kernel_call %arg0, <kind = batch_matmul, dtype = bf16, params = [1, 1, 5, 4, 3], strides = [20, 20, 1, 5, 12, 12, 3, 1, 15, 15, 3, 1]>({{.*}}) {fallback} : !llvm.ptr, memref<4x5xbf16>, memref<4x3xbf16>, memref<5x3xf32>
// F16: tfm.kernel_call %arg0, <kind = linear, dtype = f16, {{.*}} : !llvm.ptr, memref<4x8xf16>, memref<6x8xf16>, memref<6xf32>, memref<4x6xf32>
// F16: tfm.kernel_call %arg0, <kind = batch_matmul, dtype = f16, {{.*}} : !llvm.ptr, memref<4x5xf16>, memref<4x3xf16>, memref<5x3xf32>

// On the host, each call is one of the kernel table, all three flagged as
// having a fallback, and under bf16 as reading 16-bit operands
// (TFM_KERNEL_FLAG_NARROW_OPERANDS).
// HOST: tfm.kernel_flags = array<i32: 1, 1, 1>
// HOST16: tfm.kernel_flags = array<i32: 3, 3, 3>
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
