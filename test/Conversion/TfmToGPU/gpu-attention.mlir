// RUN: tfm-opt %s -split-input-file '--tfm-gpu-pipeline=stage=linalg' | FileCheck %s
// RUN: tfm-opt %s -split-input-file '--tfm-gpu-pipeline=gpu-arch=sm_90' | FileCheck %s --check-prefix=PTX

// Each case also compiles down to PTX, the row's vector ops lowered in the
// kernel module, which MLIR's NVVM pipeline alone does not do.
// PTX: tfm.device_code = "{{.*}}.visible .entry infer_kernel(
// PTX: tfm.device_code = "{{.*}}.visible .entry infer_kernel(
// PTX: tfm.device_code = "{{.*}}.visible .entry infer_kernel(

// Tests the CUDA target's fused attention: a causal attention with a
// boolean key mask is one parallel loop over the 2 x 4 x 8 query rows,
// whose loop over the keys stops at the row's own position and carries the
// running maximum, the running sum and the 16-wide output row; the mask is
// read per score at its broadcast position, each value row is read as one
// vector, and the row is written once, divided by the sum. No buffer of
// the 8 x 8 scores exists.
// CHECK-LABEL: func.func @__tfm_entry_infer
// CHECK-NOT: x8x8xf32
// CHECK: scf.parallel (%[[B:.+]], %[[H:.+]], %[[I:.+]]) = (%{{.+}}, %{{.+}}, %{{.+}}) to (%c2, %c4, %c8)
// CHECK: %[[NEXT:.+]] = arith.addi %[[I]], %c1
// CHECK: %[[UPPER:.+]] = arith.minui %[[NEXT]], %c8
// CHECK: %[[ROW:.+]]:3 = scf.for %[[J:.+]] = %{{.+}} to %[[UPPER]] step %{{.+}} iter_args(%[[M:.+]] = %cst{{.*}}, %[[L:.+]] = %cst{{.*}}, %[[ACC:.+]] = %cst{{.*}}) -> (f32, f32, vector<16xf32>)
// CHECK: scf.for
// CHECK: memref.load %{{.+}}[%[[B]], %c0{{.*}}, %c0{{.*}}, %[[J]]] : memref<2x1x1x8xi1>
// CHECK: arith.select
// CHECK: arith.maximumf %[[M]]
// CHECK: math.exp
// CHECK: math.exp
// CHECK: vector.transfer_read %{{.+}}[%[[B]], %[[H]], %[[J]], %{{.+}}]{{.+}} vector<16xf32>
// CHECK: scf.yield
// CHECK: arith.divf %[[ROW]]#2
// CHECK: vector.transfer_write %{{.+}}, %{{.+}}[%[[B]], %[[H]], %[[I]], %{{.+}}]
// CHECK-NOT: x8x8xf32
// CHECK: return
func.func @infer(%q: tensor<2x4x8x16xf32> {tfm.name = "q"},
                 %k: tensor<2x4x8x16xf32> {tfm.name = "k"},
                 %v: tensor<2x4x8x16xf32> {tfm.name = "v"},
                 %m: tensor<2x1x1x8xi1> {tfm.name = "m"}) -> tensor<2x4x8x16xf32> {
  %o = tfm.attention %q, %k, %v, mask %m causal
      : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x1x1x8xi1>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that the exported form, the scores' product, the masked softmax and
// the weighted sum, is fused for the CUDA target: no buffer of the scores.
// CHECK-LABEL: func.func @__tfm_entry_infer
// CHECK-NOT: x4x4xf32>
// CHECK: scf.parallel
// CHECK: vector<8xf32>
// CHECK-NOT: x4x4xf32>
// CHECK: return
func.func @infer(%q: tensor<1x4x8xf32> {tfm.name = "q"},
                 %k: tensor<1x4x8xf32> {tfm.name = "k"},
                 %v: tensor<1x4x8xf32> {tfm.name = "v"}) -> tensor<1x4x8xf32> {
  %s = tfm.matmul %q, %k transpose_rhs : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x4xf32>
  %p = tfm.masked_softmax %s causal {scale = 0.5 : f64} : (tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %o = tfm.matmul %p, %v : (tensor<1x4x4xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return %o : tensor<1x4x8xf32>
}

// -----

// Tests that a value row wider than 256 keeps the neutral lowering, the
// scores in scratch memory.
// CHECK-LABEL: func.func @__tfm_entry_infer
// CHECK: memref<1x4x4xf32>
// CHECK: linalg.generic
func.func @infer(%q: tensor<1x4x8xf32> {tfm.name = "q"},
                 %k: tensor<1x4x8xf32> {tfm.name = "k"},
                 %v: tensor<1x4x300xf32> {tfm.name = "v"}) -> tensor<1x4x300xf32> {
  %o = tfm.attention %q, %k, %v : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x300xf32>) -> tensor<1x4x300xf32>
  return %o : tensor<1x4x300xf32>
}
