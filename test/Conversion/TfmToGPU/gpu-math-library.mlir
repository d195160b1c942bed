// RUN: tfm-opt %s --pass-pipeline='builtin.module(gpu.module(tfm-gpu-math-library))' | FileCheck %s

// Tests that the kernel module defines the libdevice functions that are one
// PTX instruction each, declared already or not, so that the PTX calls no
// function the driver would have to link; exp, which has no instruction,
// stays a declaration (tfm-approximate-math{all} removes its uses before).

// CHECK-LABEL: gpu.module @kernels
// CHECK: llvm.func internal @__nv_sqrtf(%[[X:.+]]: f32) -> f32
// CHECK-NEXT: llvm.inline_asm "sqrt.rn.f32 $0, $1;", "=f,f" %[[X]] : (f32) -> f32
// CHECK: llvm.func internal @__nv_fmaf(
// CHECK-NEXT: llvm.inline_asm "fma.rn.f32 $0, $1, $2, $3;", "=f,f,f,f"
// CHECK: llvm.func @__nv_expf(f32) -> f32
// CHECK: llvm.func internal @__nv_floor(
// CHECK-NEXT: llvm.inline_asm "cvt.rmi.f64.f64 $0, $1;", "=d,d"
// CHECK: llvm.func internal @__nv_copysignf(
// CHECK-NEXT: llvm.inline_asm "copysign.f32 $0, $2, $1;"
gpu.module @kernels {
  llvm.func @__nv_sqrtf(f32) -> f32
  llvm.func @__nv_fmaf(f32, f32, f32) -> f32
  llvm.func @__nv_expf(f32) -> f32
  llvm.func @use(%x: f32) -> f32 {
    %0 = llvm.call @__nv_sqrtf(%x) : (f32) -> f32
    %1 = llvm.call @__nv_fmaf(%0, %x, %x) : (f32, f32, f32) -> f32
    llvm.return %1 : f32
  }
}
