// Tests rotary embeddings applied inside the GPU's attention kernels: a
// tfm.rotary that one attention reads is rotated while the kernel loads the
// operand, and never stored (#tfm.inline). The f32 kernel of a warp per
// query row rotates its query rows; the tensor-core kernel (--dtype=f16 and
// bf16) rotates the query and the keys in the kernel that rounds them to 16
// bits. Run on the CPU through the emulation of the kernels, the outputs
// must match the reference interpreter's: rotate_half with grouped keys
// (causal, 70 rows: a second, partial block), interleaved pairs with a
// head of 64 (a lane's two consecutive columns, read as one vector) and
// tables of rank 2, and a rotated query that is also returned, which the
// attention therefore reads from memory.
// RUN: rm -rf %t && tfmc run --reference %s --seed 9 --output-dir %t
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --test-data-dir %t --rtol 1e-5 --atol 1e-5 | FileCheck %s
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --dtype=f16 --test-data-dir %t --rtol 2e-2 --atol 5e-3 | FileCheck %s
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --dtype=bf16 --test-data-dir %t --rtol 5e-2 --atol 3e-2 | FileCheck %s
// CHECK: all outputs match

// Which rotations the plan computes inside the attention: under f32 the
// queries only; the keys keep their pass, since the kernel of a warp per
// row reads each key row once for every query row.
// RUN: tfm-opt %s --pass-pipeline='builtin.module(func.func(tfm-plan-memory{target=cuda}))' | FileCheck %s --check-prefix=F32
// F32: %[[Q:.*]] = tfm.rotary %arg0, {{.*}}tfm.plan = [#tfm.inline]
// F32: %[[K:.*]] = tfm.rotary %arg1, {{.*}}tfm.plan = [#tfm.arena
// F32: tfm.attention %[[Q]], %[[K]]
// F32: tfm.rotary %arg6, {{.*}}tfm.plan = [#tfm.inline]
// F32: tfm.rotary %arg7, {{.*}}tfm.plan = [#tfm.arena
// F32: tfm.rotary %arg11, {{.*}}tfm.plan = [#tfm.output
// RUN: tfm-opt %s --pass-pipeline='builtin.module(func.func(tfm-plan-memory{target=cuda compute-type=f16}))' | FileCheck %s --check-prefix=F16
// F16: tfm.rotary %arg0, {{.*}}tfm.plan = [#tfm.inline]
// F16: tfm.rotary %arg1, {{.*}}tfm.plan = [#tfm.inline]
// F16: tfm.rotary %arg6, {{.*}}tfm.plan = [#tfm.inline]
// F16: tfm.rotary %arg7, {{.*}}tfm.plan = [#tfm.inline]
// F16: tfm.rotary %arg11, {{.*}}tfm.plan = [#tfm.output

// The same decisions as the remarks (and the fusion report) give them.
// RUN: tfm-opt %s --tfm-gpu-pipeline='stage=linalg remarks=true' 2>&1 >/dev/null | FileCheck %s --check-prefix=WHY
// WHY: tfm-gpu-kernel: tfm.rotary: in-attention
// WHY: tfm-gpu-kernel: tfm.rotary: loops; not in-attention: it rotates the keys, which the attention of a warp per row reads once for every query row
// WHY: tfm-gpu-kernel: tfm.rotary: loops; not in-attention: its result is also read by 'func.return'

func.func @infer(%q: tensor<2x4x70x16xf32> {tfm.name = "q"}, %k: tensor<2x2x70x16xf32> {tfm.name = "k"},
                 %v: tensor<2x2x70x16xf32> {tfm.name = "v"}, %cos: tensor<1x1x70x16xf32> {tfm.name = "cos"},
                 %sin: tensor<1x1x70x16xf32> {tfm.name = "sin"},
                 %iv: tensor<1x2x33x64xf32> {tfm.name = "iv"}, %iq: tensor<1x2x33x64xf32> {tfm.name = "iq"},
                 %ik: tensor<1x2x33x64xf32> {tfm.name = "ik"}, %icos: tensor<33x64xf32> {tfm.name = "icos"},
                 %isin: tensor<33x64xf32> {tfm.name = "isin"},
                 %rv: tensor<1x2x24x32xf32> {tfm.name = "rv"}, %rq: tensor<1x2x24x32xf32> {tfm.name = "rq"},
                 %rcos: tensor<24x32xf32> {tfm.name = "rcos"}, %rsin: tensor<24x32xf32> {tfm.name = "rsin"})
    -> (tensor<2x4x70x16xf32>, tensor<1x2x33x64xf32>, tensor<1x2x24x32xf32>, tensor<1x2x24x32xf32>) {
  %qr = tfm.rotary %q, %cos, %sin : (tensor<2x4x70x16xf32>, tensor<1x1x70x16xf32>, tensor<1x1x70x16xf32>) -> tensor<2x4x70x16xf32>
  %kr = tfm.rotary %k, %cos, %sin : (tensor<2x2x70x16xf32>, tensor<1x1x70x16xf32>, tensor<1x1x70x16xf32>) -> tensor<2x2x70x16xf32>
  %o = tfm.attention %qr, %kr, %v causal : (tensor<2x4x70x16xf32>, tensor<2x2x70x16xf32>, tensor<2x2x70x16xf32>) -> tensor<2x4x70x16xf32>
  %iqr = tfm.rotary %iq, %icos, %isin interleaved : (tensor<1x2x33x64xf32>, tensor<33x64xf32>, tensor<33x64xf32>) -> tensor<1x2x33x64xf32>
  %ikr = tfm.rotary %ik, %icos, %isin interleaved : (tensor<1x2x33x64xf32>, tensor<33x64xf32>, tensor<33x64xf32>) -> tensor<1x2x33x64xf32>
  %io = tfm.attention %iqr, %ikr, %iv : (tensor<1x2x33x64xf32>, tensor<1x2x33x64xf32>, tensor<1x2x33x64xf32>) -> tensor<1x2x33x64xf32>
  %rqr = tfm.rotary %rq, %rcos, %rsin : (tensor<1x2x24x32xf32>, tensor<24x32xf32>, tensor<24x32xf32>) -> tensor<1x2x24x32xf32>
  %ro = tfm.attention %rqr, %rv, %rv : (tensor<1x2x24x32xf32>, tensor<1x2x24x32xf32>, tensor<1x2x24x32xf32>) -> tensor<1x2x24x32xf32>
  return %o, %io, %ro, %rqr : tensor<2x4x70x16xf32>, tensor<1x2x33x64xf32>, tensor<1x2x24x32xf32>, tensor<1x2x24x32xf32>
}
