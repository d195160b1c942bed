// Tests tfm.attention_grad, the backward pass of attention that recomputes
// its probabilities: the op prints as it parses, and compiled for the CPU
// (the neutral lowering: P and dP in scratch memory) and, through the
// emulation, for the GPU (a kernel of a warp per query row for dQ and the
// rows' log-sum-exp, then one of a warp per key row for dK and dV) it
// matches the reference interpreter, which writes P out. The cases: causal
// with a boolean key mask, 9 queries over 11 keys, heads of 40 and values
// of 24 (both end inside a warp's second pass over a row); an additive
// mask broadcast over the batch with its own scale; and a causal head of 64
// with 5 rows, so that a block's spare warps recompute its last row; and
// heads split from [S, B, H, D] tensors by transposes, which the GPU's
// kernels read in place, and dQ merged back by a transpose right after
// the kernels, which they write in place (four kernels for the four
// attentions, two for each gradient, one for the add after the transpose,
// and no copy). Each gradient is checked with the forward output it is
// given. Those four read their rows' log-sum-exp from the forward kernel,
// which keeps it; a fifth, whose forward output reaches it reshaped (as do
// its operands), computes it again (three kernels more, the reshapes being
// views).
// RUN: tfm-opt %s | FileCheck %s --check-prefix=PRINT
// RUN: rm -rf %t && tfmc run --reference %s --seed 3 --output-dir %t
// RUN: tfmc run %s --test-data-dir %t --rtol 1e-5 --atol 1e-6 | FileCheck %s
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --test-data-dir %t --rtol 1e-5 --atol 1e-6 | FileCheck %s
// RUN: tfmc compile %s --target=cuda --emit=ptx -o - | FileCheck %s --check-prefix=KERNELS
// CHECK: all outputs match (rtol 1e-05, atol 1e-06)
// KERNELS-COUNT-16: .visible .entry
// KERNELS-NOT: .visible .entry

// PRINT: tfm.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, mask %{{.*}} causal :
// PRINT: tfm.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, mask %{{.*}} {scale = 3.000000e-01 : f64} :
// PRINT: tfm.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal :
func.func @infer(%q: tensor<2x3x9x40xf32> {tfm.name = "q"},
                 %k: tensor<2x3x11x40xf32> {tfm.name = "k"},
                 %v: tensor<2x3x11x24xf32> {tfm.name = "v"},
                 %m: tensor<2x1x1x11xi1> {tfm.name = "m"},
                 %g: tensor<2x3x9x24xf32> {tfm.name = "g"},
                 %a: tensor<9x11xf32> {tfm.name = "a"},
                 %q2: tensor<5x64xf32> {tfm.name = "q2"},
                 %k2: tensor<5x64xf32> {tfm.name = "k2"},
                 %v2: tensor<5x64xf32> {tfm.name = "v2"},
                 %g2: tensor<5x64xf32> {tfm.name = "g2"},
                 %x: tensor<5x2x3x16xf32> {tfm.name = "x"},
                 %y: tensor<7x2x3x16xf32> {tfm.name = "y"},
                 %gx: tensor<5x2x3x16xf32> {tfm.name = "gx"},
                 %q5: tensor<6x32xf32> {tfm.name = "q5"},
                 %k5: tensor<6x32xf32> {tfm.name = "k5"},
                 %v5: tensor<6x32xf32> {tfm.name = "v5"},
                 %g5: tensor<1x6x32xf32> {tfm.name = "g5"})
    -> (tensor<2x3x9x24xf32>, tensor<2x3x9x40xf32>, tensor<2x3x11x40xf32>, tensor<2x3x11x24xf32>,
        tensor<2x3x9x40xf32>, tensor<2x3x11x40xf32>, tensor<2x3x11x24xf32>,
        tensor<5x64xf32>, tensor<5x64xf32>, tensor<5x64xf32>, tensor<5x64xf32>,
        tensor<2x3x5x16xf32>, tensor<5x2x3x16xf32>, tensor<2x3x7x16xf32>, tensor<2x3x7x16xf32>,
        tensor<1x6x32xf32>, tensor<1x6x32xf32>, tensor<1x6x32xf32>) {
  %o = tfm.attention %q, %k, %v, mask %m causal
      : (tensor<2x3x9x40xf32>, tensor<2x3x11x40xf32>, tensor<2x3x11x24xf32>, tensor<2x1x1x11xi1>) -> tensor<2x3x9x24xf32>
  %dq, %dk, %dv = tfm.attention_grad %q, %k, %v, %o, %g, mask %m causal
      : (tensor<2x3x9x40xf32>, tensor<2x3x11x40xf32>, tensor<2x3x11x24xf32>, tensor<2x3x9x24xf32>, tensor<2x3x9x24xf32>, tensor<2x1x1x11xi1>)
      -> (tensor<2x3x9x40xf32>, tensor<2x3x11x40xf32>, tensor<2x3x11x24xf32>)
  %o2 = tfm.attention %q, %k, %v, mask %a {scale = 0.3 : f64}
      : (tensor<2x3x9x40xf32>, tensor<2x3x11x40xf32>, tensor<2x3x11x24xf32>, tensor<9x11xf32>) -> tensor<2x3x9x24xf32>
  %eq, %ek, %ev = tfm.attention_grad %q, %k, %v, %o2, %g, mask %a {scale = 0.3 : f64}
      : (tensor<2x3x9x40xf32>, tensor<2x3x11x40xf32>, tensor<2x3x11x24xf32>, tensor<2x3x9x24xf32>, tensor<2x3x9x24xf32>, tensor<9x11xf32>)
      -> (tensor<2x3x9x40xf32>, tensor<2x3x11x40xf32>, tensor<2x3x11x24xf32>)
  %o3 = tfm.attention %q2, %k2, %v2 causal
      : (tensor<5x64xf32>, tensor<5x64xf32>, tensor<5x64xf32>) -> tensor<5x64xf32>
  %fq, %fk, %fv = tfm.attention_grad %q2, %k2, %v2, %o3, %g2 causal
      : (tensor<5x64xf32>, tensor<5x64xf32>, tensor<5x64xf32>, tensor<5x64xf32>, tensor<5x64xf32>)
      -> (tensor<5x64xf32>, tensor<5x64xf32>, tensor<5x64xf32>)
  %hq = tfm.transpose %x permutation = [1, 2, 0, 3] : tensor<5x2x3x16xf32> -> tensor<2x3x5x16xf32>
  %hk = tfm.transpose %y permutation = [1, 2, 0, 3] : tensor<7x2x3x16xf32> -> tensor<2x3x7x16xf32>
  %hg = tfm.transpose %gx permutation = [1, 2, 0, 3] : tensor<5x2x3x16xf32> -> tensor<2x3x5x16xf32>
  %o4 = tfm.attention %hq, %hk, %hk : (tensor<2x3x5x16xf32>, tensor<2x3x7x16xf32>, tensor<2x3x7x16xf32>) -> tensor<2x3x5x16xf32>
  %hdq, %hdk, %hdv = tfm.attention_grad %hq, %hk, %hk, %o4, %hg
      : (tensor<2x3x5x16xf32>, tensor<2x3x7x16xf32>, tensor<2x3x7x16xf32>, tensor<2x3x5x16xf32>, tensor<2x3x5x16xf32>)
      -> (tensor<2x3x5x16xf32>, tensor<2x3x7x16xf32>, tensor<2x3x7x16xf32>)
  %hdqt = tfm.transpose %hdq permutation = [2, 0, 1, 3] : tensor<2x3x5x16xf32> -> tensor<5x2x3x16xf32>
  %hdqx = tfm.add %hdqt, %x : (tensor<5x2x3x16xf32>, tensor<5x2x3x16xf32>) -> tensor<5x2x3x16xf32>
  %o5 = tfm.attention %q5, %k5, %v5 causal
      : (tensor<6x32xf32>, tensor<6x32xf32>, tensor<6x32xf32>) -> tensor<6x32xf32>
  %o5r = tfm.reshape %o5 : tensor<6x32xf32> -> tensor<1x6x32xf32>
  %q5r = tfm.reshape %q5 : tensor<6x32xf32> -> tensor<1x6x32xf32>
  %k5r = tfm.reshape %k5 : tensor<6x32xf32> -> tensor<1x6x32xf32>
  %v5r = tfm.reshape %v5 : tensor<6x32xf32> -> tensor<1x6x32xf32>
  %iq, %ik, %iv = tfm.attention_grad %q5r, %k5r, %v5r, %o5r, %g5 causal
      : (tensor<1x6x32xf32>, tensor<1x6x32xf32>, tensor<1x6x32xf32>, tensor<1x6x32xf32>, tensor<1x6x32xf32>)
      -> (tensor<1x6x32xf32>, tensor<1x6x32xf32>, tensor<1x6x32xf32>)
  return %o, %dq, %dk, %dv, %eq, %ek, %ev, %o3, %fq, %fk, %fv, %o4, %hdqx, %hdk, %hdv, %iq, %ik, %iv
      : tensor<2x3x9x24xf32>, tensor<2x3x9x40xf32>, tensor<2x3x11x40xf32>, tensor<2x3x11x24xf32>,
        tensor<2x3x9x40xf32>, tensor<2x3x11x40xf32>, tensor<2x3x11x24xf32>,
        tensor<5x64xf32>, tensor<5x64xf32>, tensor<5x64xf32>, tensor<5x64xf32>,
        tensor<2x3x5x16xf32>, tensor<5x2x3x16xf32>, tensor<2x3x7x16xf32>, tensor<2x3x7x16xf32>,
        tensor<1x6x32xf32>, tensor<1x6x32xf32>, tensor<1x6x32xf32>
}
