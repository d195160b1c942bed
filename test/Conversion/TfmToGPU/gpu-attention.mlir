// RUN: tfm-opt %s -split-input-file '--tfm-gpu-pipeline=stage=linalg' | FileCheck %s
// RUN: tfm-opt %s -split-input-file '--tfm-gpu-pipeline=gpu-arch=sm_90' | FileCheck %s --check-prefix=PTX

// Each case also compiles down to PTX, the warp kernels' shuffles and the
// neutral lowering's loops for the wide value row alike.
// PTX: tfm.device_code = "{{.*}}.visible .entry infer_kernel(
// PTX: tfm.device_code = "{{.*}}.visible .entry infer_kernel(
// PTX: tfm.device_code = "{{.*}}.visible .entry infer_kernel(

// Tests the CUDA target's fused attention in f32: a causal attention with
// a boolean key mask is one kernel of a warp per query row (2 x 4 x 8 = 64
// rows: 8 blocks of 8 warps of 32 lanes), whose loop over the keys stops
// at the block's last position and carries the running maximum, the
// running sum and the lane's column of the 16-wide output row. Each score
// is the lanes' products summed by five xor shuffles, -inf above the row's
// own diagonal, and masked at its broadcast position; the value row is
// read at the lane's column, and the row is written once, divided by the
// sum. No buffer of the 8 x 8 scores exists.
// CHECK-LABEL: func.func @__tfm_entry_infer
// CHECK-NOT: x8x8xf32
// CHECK: gpu.launch blocks({{.*}}) in (%{{.+}} = %c8{{.*}}, %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}) threads({{.*}}) in (%{{.+}} = %c32, %{{.+}} = %c8, %{{.+}} = %c1)
// CHECK: memref.load %arg4[
// CHECK: %[[END:.+]] = arith.minui %{{.+}}, %c8
// CHECK: %[[ROW:.+]]:3 = scf.for %[[J:.+]] = %{{.+}} to %[[END]] step %{{.+}} iter_args(%[[M:.+]] = %{{.+}}, %[[L:.+]] = %{{.+}}, %[[ACC:.+]] = %{{.+}}) -> (f32, f32, f32)
// CHECK: memref.load %arg5[%{{.+}}, %{{.+}}, %[[J]], %{{.+}}]
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: arith.cmpi ugt, %[[J]]
// CHECK: memref.load %arg7[%{{.+}}, %c0{{.*}}, %c0{{.*}}, %[[J]]] : memref<2x1x1x8xi1>
// CHECK: arith.maximumf %[[M]]
// CHECK: math.exp
// CHECK: math.exp
// CHECK: memref.load %arg6[%{{.+}}, %{{.+}}, %[[J]], %{{.+}}]
// CHECK: scf.yield
// CHECK: arith.divf %[[ROW]]#2, %[[ROW]]#1
// CHECK: memref.store
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
// CHECK: gpu.launch
// CHECK: gpu.shuffle
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
