// RUN: tfm-opt %s --pass-pipeline='builtin.module(func.func(tfm-plan-memory),tfm-lower-to-cpu{compute-type=bf16})' | FileCheck %s --check-prefix=BF16
// RUN: tfm-opt %s --pass-pipeline='builtin.module(func.func(tfm-plan-memory),tfm-lower-to-cpu)' | FileCheck %s --check-prefix=F32
// RUN: not tfm-opt %s --pass-pipeline='builtin.module(func.func(tfm-plan-memory),tfm-lower-to-cpu{compute-type=f16})' 2>&1 | FileCheck %s --check-prefix=F16
// RUN: not tfm-opt %s --tfm-pipeline='stage=linalg compute-type=bf16 train=true' 2>&1 | FileCheck %s --check-prefix=TRAIN

// Tests that the compute type reaches the LINEAR kernel's dtype (operands
// and outputs stay f32), that the CPU target refuses f16 by name, and that
// the pipelines refuse a narrower compute type for training, which has no
// bf16 backward pass.
// BF16: tfm.kernel_call %{{.+}}, <kind = linear, dtype = bf16,
// F32: tfm.kernel_call %{{.+}}, <kind = linear, dtype = f32,
// F16: error: the CPU target multiplies in f32 or bf16, not f16
// TRAIN: training compiles in f32 only; compute-type=bf16 is for inference
func.func @infer(%x: tensor<2x8xf32> {tfm.name = "x"}) -> (tensor<2x4xf32> {tfm.name = "y"}) {
  %w = arith.constant dense<0.5> : tensor<4x8xf32>
  %y = tfm.linear %x, %w : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
