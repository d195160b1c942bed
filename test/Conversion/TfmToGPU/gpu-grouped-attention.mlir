// Tests grouped-query attention (key and value heads fewer than the query's)
// in the GPU's attention kernels: the f32 kernel of a warp per query row
// (Attention.cpp) and, under --dtype=f16 and bf16, the tensor-core flash
// attention (FlashAttentionMma.cpp). Each query head h reads key and value
// head h / G, which the kernels compute from the query's batch index: no
// repeated copy exists. Run on the CPU through the emulation of the kernels,
// the outputs must match the reference interpreter's: 4 query heads over 2
// (causal, 70 rows: a second, partial block of rows), and 6 over 1
// (multi-query, with a padding mask).
// RUN: rm -rf %t && tfmc run --reference %s --seed 5 --output-dir %t
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --test-data-dir %t --rtol 1e-5 --atol 1e-5 | FileCheck %s
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --dtype=f16 --test-data-dir %t --rtol 2e-2 --atol 5e-3 | FileCheck %s
// RUN: tfmc run %s --device=cuda --gpu-schedule-on-cpu --dtype=bf16 --test-data-dir %t --rtol 5e-2 --atol 2e-2 | FileCheck %s
// CHECK: all outputs match
// RUN: tfm-opt %s '--tfm-gpu-pipeline=stage=linalg compute-type=f16' | FileCheck %s --check-prefix=KERNEL
// The keys and values are rounded into copies of their own heads only.
// KERNEL: memref<2x2x70x16xf16>
// KERNEL: gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{.*}}, {{.*}} = %c8{{.*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c128
// KERNEL: arith.divui %{{.*}}, %c2

func.func @infer(%q: tensor<2x4x70x16xf32> {tfm.name = "q"}, %k: tensor<2x2x70x16xf32> {tfm.name = "k"},
                 %v: tensor<2x2x70x16xf32> {tfm.name = "v"}, %mq: tensor<1x6x40x32xf32> {tfm.name = "mq"},
                 %mk: tensor<1x1x40x32xf32> {tfm.name = "mk"}, %mv: tensor<1x1x40x32xf32> {tfm.name = "mv"})
    -> (tensor<2x4x70x16xf32>, tensor<1x6x40x32xf32>) {
  %o = tfm.attention %q, %k, %v causal : (tensor<2x4x70x16xf32>, tensor<2x2x70x16xf32>, tensor<2x2x70x16xf32>) -> tensor<2x4x70x16xf32>
  %keep = arith.constant dense<[[true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, false, false, false, false, false, false]]> : tensor<1x40xi1>
  %m = tfm.attention %mq, %mk, %mv, mask %keep : (tensor<1x6x40x32xf32>, tensor<1x1x40x32xf32>, tensor<1x1x40x32xf32>, tensor<1x40xi1>) -> tensor<1x6x40x32xf32>
  return %o, %m : tensor<2x4x70x16xf32>, tensor<1x6x40x32xf32>
}
