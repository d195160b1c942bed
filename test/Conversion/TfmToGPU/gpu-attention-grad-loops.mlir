// Tests tfm.attention_grad on the neutral lowering's loops, which the GPU
// falls back on for heads wider than a warp's registers take (300 > 256;
// the kernel report says why): it matches the interpreter through the
// emulation, with dQ written at the strides of the transpose right after
// it, as the GPU's layout rules plan.
// RUN: rm -rf %t && tfmc run --reference %s --seed 2 --output-dir %t
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --test-data-dir %t --rtol 1e-5 --atol 1e-6 | FileCheck %s
// RUN: tfmc compile %s --target=cuda --fusion-report -o %t/model.so | FileCheck %s --check-prefix=REPORT
// CHECK: all outputs match (rtol 1e-05, atol 1e-06)
// REPORT: tfm.attention_grad at {{.*}}: loops, not attention-rows: its query rows of 300 are not 1 to 256 wide
func.func @infer(%q: tensor<2x3x300xf32> {tfm.name = "q"}, %k: tensor<2x4x300xf32> {tfm.name = "k"}, %v: tensor<2x4x8xf32> {tfm.name = "v"}, %g: tensor<2x3x8xf32> {tfm.name = "g"}, %x: tensor<3x2x300xf32> {tfm.name = "x"})
    -> (tensor<3x2x300xf32>, tensor<2x4x300xf32>, tensor<2x4x8xf32>) {
  %o = tfm.attention %q, %k, %v : (tensor<2x3x300xf32>, tensor<2x4x300xf32>, tensor<2x4x8xf32>) -> tensor<2x3x8xf32>
  %dq, %dk, %dv = tfm.attention_grad %q, %k, %v, %o, %g : (tensor<2x3x300xf32>, tensor<2x4x300xf32>, tensor<2x4x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> (tensor<2x3x300xf32>, tensor<2x4x300xf32>, tensor<2x4x8xf32>)
  %t = tfm.transpose %dq permutation = [1, 0, 2] : tensor<2x3x300xf32> -> tensor<3x2x300xf32>
  %s = tfm.add %t, %x : (tensor<3x2x300xf32>, tensor<3x2x300xf32>) -> tensor<3x2x300xf32>
  return %s, %dk, %dv : tensor<3x2x300xf32>, tensor<2x4x300xf32>, tensor<2x4x8xf32>
}
