// Tests rotary embeddings applied inside the CPU's ATTENTION kernel: a
// tfm.rotary that one such attention reads as its query or its keys is
// rotated while the kernel loads the rows, and never stored (#tfm.inline).
// Run, the outputs must match the reference interpreter's:
// * rotate_half of grouped queries and keys sharing tables, causal, 600
//   rows: the keys are rotated as the kernel packs their two blocks;
// * interleaved pairs with tables of rank 2 and 33 rows: one query block,
//   so the keys are rotated for each task as it reads them;
// * a query with tables per batch row, whose keys have tables of their
//   own: the kernel takes one pair, so the keys keep their pass;
// * a decoding step's single query, its table one row;
// * a rotated query that is also returned, which is therefore stored;
// * keys alone rotated, 600 of them for 8 queries: two key blocks, each
//   rotated as the task reads it;
// * query and keys whose heads are split by a transpose ([B, S, H, D] to
//   [B, H, S, D]), which is then a view the kernel reads at its strides.
// RUN: rm -rf %t && tfmc run --reference %s --seed 5 --output-dir %t
// RUN: tfmc run %s --test-data-dir %t --rtol 1e-5 --atol 1e-5 | FileCheck %s
// RUN: tfmc run %s --threads 1 --test-data-dir %t --rtol 1e-5 --atol 1e-5 | FileCheck %s
// CHECK: all outputs match

// RUN: tfm-opt %s --pass-pipeline='builtin.module(func.func(tfm-plan-memory{target=cpu}))' | FileCheck %s --check-prefix=PLAN
// PLAN: tfm.rotary %arg0, {{.*}}tfm.plan = [#tfm.inline]
// PLAN: tfm.rotary %arg1, {{.*}}tfm.plan = [#tfm.inline]
// PLAN: tfm.rotary %arg6, {{.*}}tfm.plan = [#tfm.inline]
// PLAN: tfm.rotary %arg7, {{.*}}tfm.plan = [#tfm.inline]
// PLAN: tfm.rotary %arg11, {{.*}}tfm.plan = [#tfm.inline]
// PLAN: tfm.rotary %arg12, {{.*}}tfm.plan = [#tfm.arena
// PLAN: tfm.rotary %arg15, {{.*}}tfm.plan = [#tfm.inline]
// PLAN: tfm.rotary %arg11, {{.*}}tfm.plan = [#tfm.output
// PLAN: tfm.rotary %arg20, {{.*}}tfm.plan = [#tfm.inline]
// PLAN: %[[TQ:.*]] = tfm.transpose %arg23 {{.*}}tfm.plan = [#tfm.view<operand = 0, offset = 0, strides = [2240, 16, 32, 1]>]
// PLAN: %[[TK:.*]] = tfm.transpose %arg24 {{.*}}tfm.plan = [#tfm.view
// PLAN: tfm.rotary %[[TQ]], {{.*}}tfm.plan = [#tfm.inline]
// PLAN: tfm.rotary %[[TK]], {{.*}}tfm.plan = [#tfm.inline]

func.func @infer(%q: tensor<1x4x600x16xf32> {tfm.name = "q"}, %k: tensor<1x2x600x16xf32> {tfm.name = "k"},
                 %v: tensor<1x2x600x16xf32> {tfm.name = "v"}, %cos: tensor<1x1x600x16xf32> {tfm.name = "cos"},
                 %sin: tensor<1x1x600x16xf32> {tfm.name = "sin"},
                 %iv: tensor<1x2x33x64xf32> {tfm.name = "iv"}, %iq: tensor<1x2x33x64xf32> {tfm.name = "iq"},
                 %ik: tensor<1x2x33x64xf32> {tfm.name = "ik"}, %icos: tensor<33x64xf32> {tfm.name = "icos"},
                 %isin: tensor<33x64xf32> {tfm.name = "isin"},
                 %rv: tensor<2x2x24x32xf32> {tfm.name = "rv"}, %rq: tensor<2x2x24x32xf32> {tfm.name = "rq"},
                 %rk: tensor<2x2x24x32xf32> {tfm.name = "rk"},
                 %rcos: tensor<2x1x24x32xf32> {tfm.name = "rcos"}, %rsin: tensor<2x1x24x32xf32> {tfm.name = "rsin"},
                 %dq: tensor<1x4x1x16xf32> {tfm.name = "dq"}, %dk: tensor<1x2x40x16xf32> {tfm.name = "dk"},
                 %dcos: tensor<1x1x1x16xf32> {tfm.name = "dcos"}, %dsin: tensor<1x1x1x16xf32> {tfm.name = "dsin"},
                 %xq: tensor<1x2x8x16xf32> {tfm.name = "xq"}, %xk: tensor<1x2x600x16xf32> {tfm.name = "xk"},
                 %xcos: tensor<600x16xf32> {tfm.name = "xcos"}, %xsin: tensor<600x16xf32> {tfm.name = "xsin"},
                 %tq: tensor<1x70x2x16xf32> {tfm.name = "tq"}, %tk: tensor<1x70x2x16xf32> {tfm.name = "tk"},
                 %tcos: tensor<70x16xf32> {tfm.name = "tcos"}, %tsin: tensor<70x16xf32> {tfm.name = "tsin"})
    -> (tensor<1x4x600x16xf32>, tensor<1x2x33x64xf32>, tensor<2x2x24x32xf32>, tensor<1x4x1x16xf32>,
        tensor<2x2x24x32xf32>, tensor<2x2x24x32xf32>, tensor<1x2x8x16xf32>, tensor<1x2x70x16xf32>) {
  %qr = tfm.rotary %q, %cos, %sin : (tensor<1x4x600x16xf32>, tensor<1x1x600x16xf32>, tensor<1x1x600x16xf32>) -> tensor<1x4x600x16xf32>
  %kr = tfm.rotary %k, %cos, %sin : (tensor<1x2x600x16xf32>, tensor<1x1x600x16xf32>, tensor<1x1x600x16xf32>) -> tensor<1x2x600x16xf32>
  %o = tfm.attention %qr, %kr, %v causal : (tensor<1x4x600x16xf32>, tensor<1x2x600x16xf32>, tensor<1x2x600x16xf32>) -> tensor<1x4x600x16xf32>
  %iqr = tfm.rotary %iq, %icos, %isin interleaved : (tensor<1x2x33x64xf32>, tensor<33x64xf32>, tensor<33x64xf32>) -> tensor<1x2x33x64xf32>
  %ikr = tfm.rotary %ik, %icos, %isin interleaved : (tensor<1x2x33x64xf32>, tensor<33x64xf32>, tensor<33x64xf32>) -> tensor<1x2x33x64xf32>
  %io = tfm.attention %iqr, %ikr, %iv : (tensor<1x2x33x64xf32>, tensor<1x2x33x64xf32>, tensor<1x2x33x64xf32>) -> tensor<1x2x33x64xf32>
  %rqr = tfm.rotary %rq, %rcos, %rsin : (tensor<2x2x24x32xf32>, tensor<2x1x24x32xf32>, tensor<2x1x24x32xf32>) -> tensor<2x2x24x32xf32>
  %rkr = tfm.rotary %rk, %rsin, %rcos : (tensor<2x2x24x32xf32>, tensor<2x1x24x32xf32>, tensor<2x1x24x32xf32>) -> tensor<2x2x24x32xf32>
  %ro = tfm.attention %rqr, %rkr, %rv : (tensor<2x2x24x32xf32>, tensor<2x2x24x32xf32>, tensor<2x2x24x32xf32>) -> tensor<2x2x24x32xf32>
  %dqr = tfm.rotary %dq, %dcos, %dsin : (tensor<1x4x1x16xf32>, tensor<1x1x1x16xf32>, tensor<1x1x1x16xf32>) -> tensor<1x4x1x16xf32>
  %do = tfm.attention %dqr, %dk, %dk : (tensor<1x4x1x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>) -> tensor<1x4x1x16xf32>
  %sqr = tfm.rotary %rq, %rsin, %rcos : (tensor<2x2x24x32xf32>, tensor<2x1x24x32xf32>, tensor<2x1x24x32xf32>) -> tensor<2x2x24x32xf32>
  %so = tfm.attention %sqr, %rk, %rv : (tensor<2x2x24x32xf32>, tensor<2x2x24x32xf32>, tensor<2x2x24x32xf32>) -> tensor<2x2x24x32xf32>
  %xkr = tfm.rotary %xk, %xcos, %xsin : (tensor<1x2x600x16xf32>, tensor<600x16xf32>, tensor<600x16xf32>) -> tensor<1x2x600x16xf32>
  %xo = tfm.attention %xq, %xkr, %xk : (tensor<1x2x8x16xf32>, tensor<1x2x600x16xf32>, tensor<1x2x600x16xf32>) -> tensor<1x2x8x16xf32>
  %tqh = tfm.transpose %tq permutation = [0, 2, 1, 3] : tensor<1x70x2x16xf32> -> tensor<1x2x70x16xf32>
  %tkh = tfm.transpose %tk permutation = [0, 2, 1, 3] : tensor<1x70x2x16xf32> -> tensor<1x2x70x16xf32>
  %tqr = tfm.rotary %tqh, %tcos, %tsin : (tensor<1x2x70x16xf32>, tensor<70x16xf32>, tensor<70x16xf32>) -> tensor<1x2x70x16xf32>
  %tkr = tfm.rotary %tkh, %tcos, %tsin : (tensor<1x2x70x16xf32>, tensor<70x16xf32>, tensor<70x16xf32>) -> tensor<1x2x70x16xf32>
  %to = tfm.attention %tqr, %tkr, %tkh causal : (tensor<1x2x70x16xf32>, tensor<1x2x70x16xf32>, tensor<1x2x70x16xf32>) -> tensor<1x2x70x16xf32>
  return %o, %io, %ro, %do, %so, %sqr, %xo, %to : tensor<1x4x600x16xf32>, tensor<1x2x33x64xf32>, tensor<2x2x24x32xf32>, tensor<1x4x1x16xf32>,
      tensor<2x2x24x32xf32>, tensor<2x2x24x32xf32>, tensor<1x2x8x16xf32>, tensor<1x2x70x16xf32>
}
