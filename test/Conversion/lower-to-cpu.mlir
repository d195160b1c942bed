// RUN: tfm-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(tfm-plan-memory),tfm-lower-to-cpu)' | FileCheck %s

// A linear with bias and GELU is one LINEAR kernel (kind 1) with
// M = 2·3, K = 8, N = 4, has_bias, activation 2, no residual, and constant
// weights (which the kernel packs once); the result is returned, so
// the kernel writes straight into the caller's output buffer.
// CHECK: tfm.entries = [{arena_bytes = 0 : i64, inputs = [{name = "x", type = tensor<2x3x8xf32>}], name = "infer", outputs = [{name = "y", type = tensor<2x3x4xf32>}], symbol = "__tfm_entry_infer"}]
// CHECK-SAME: tfm.kernels = [{dtype = 1 : i32, fparams = array<f64: 0.000000e+00, 0.000000e+00>, kind = 1 : i32, params = array<i64: 6, 8, 4, 1, 2, 0, 1, 0>}]
// CHECK-SAME: tfm.weight_offsets = array<i64: 0, 128>
// CHECK-SAME: tfm.weights_bytes = 192
// CHECK: llvm.func @__tfm_run_kernel(!llvm.ptr, i32, !llvm.ptr) -> i32
// CHECK: func.func @__tfm_entry_infer(%[[HOST:.+]]: !llvm.ptr, %{{.+}}: memref<0xi8>, %[[W:.+]]: memref<192xi8>, %{{.+}}: memref<0xi8>, %[[X:.+]]: memref<2x3x8xf32>, %[[Y:.+]]: memref<2x3x4xf32>) -> i32
// CHECK: memref.extract_aligned_pointer_as_index %[[X]]
// CHECK: memref.extract_aligned_pointer_as_index %[[W]]
// CHECK: %[[B:.+]] = memref.extract_aligned_pointer_as_index %[[W]]
// CHECK: arith.addi %[[B]], %c128
// CHECK: llvm.mlir.zero
// CHECK: memref.extract_aligned_pointer_as_index %[[Y]]
// CHECK: llvm.call @__tfm_run_kernel(%[[HOST]], %{{.+}}, %{{.+}})
// CHECK-NOT: tfm.linear
func.func @infer(%x: tensor<2x3x8xf32> {tfm.name = "x"}) -> (tensor<2x3x4xf32> {tfm.name = "y"}) {
  %w = arith.constant dense<0.5> : tensor<4x8xf32>
  %b = arith.constant dense<1.0> : tensor<4xf32>
  %y = tfm.linear %x, %w, %b activation = gelu : (tensor<2x3x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// -----

// A padding mask [B, 1, 1, S] on scores [B, H, S, S]: group g = b·H + h
// reads mask row g / H (div = 4) with a group stride of S and no row stride.
// The scores live in the arena, the softmax works in place over them, and
// the reshape is a view of the same bytes, not a copy.
// The scores are one BATCH_MATMUL (kind 2) over B1 = 2, B2 = 4, M = 8,
// K = 16, N = 8, reading k transposed through its strides.
// CHECK: kind = 2 : i32, params = array<i64: 2, 4, 8, 16, 8, 0, 0, 0>, strides = array<i64: 512, 128, 16, 1, 512, 128, 1, 16, 256, 64, 8, 1>
// CHECK: kind = 3 : i32, params = array<i64: 8, 8, 8, 0, 1, 4, 8, 0>
// CHECK: func.func @__tfm_entry_infer(%{{.+}}: !llvm.ptr, %[[ARENA:.+]]: memref<2048xi8>
// CHECK: %[[S:.+]] = memref.view %[[ARENA]][%c0{{.*}}][] : memref<2048xi8> to memref<2x4x8x8xf32>
// CHECK: llvm.call @__tfm_run_kernel
// CHECK: %[[P:.+]] = memref.view %[[ARENA]][%c0{{.*}}][] : memref<2048xi8> to memref<2x4x8x8xf32>
// CHECK: llvm.call @__tfm_run_kernel
// CHECK: %[[R:.+]] = memref.view %[[ARENA]][%c0{{.*}}][] : memref<2048xi8> to memref<2x256xf32>
// CHECK: linalg.generic {{.*}} ins(%[[R]] : memref<2x256xf32>)
func.func @infer(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %m: tensor<2x1x1x8xf32>) -> tensor<2x256xf32> {
  %s = tfm.matmul %q, %k transpose_rhs : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %p = tfm.masked_softmax %s, mask %m mask_kind = additive {scale = 0.25} : (tensor<2x4x8x8xf32>, tensor<2x1x1x8xf32>) -> tensor<2x4x8x8xf32>
  %r = tfm.reshape %p : tensor<2x4x8x8xf32> -> tensor<2x256xf32>
  %y = tfm.relu %r : tensor<2x256xf32>
  return %y : tensor<2x256xf32>
}

// -----

// A packed projection is one LINEAR (M = 6, K = 8, N = 12) into one packed
// buffer; each part is a column window of it, copied out here because the
// parts are returned.
// CHECK: tfm.kernels = [{dtype = 1 : i32, fparams = array<f64: 0.000000e+00, 0.000000e+00>, kind = 1 : i32, params = array<i64: 6, 8, 12, 1, 0, 0, 0, 0>}]
// CHECK: func.func @__tfm_entry_infer
// CHECK: %[[PACKED:.+]] = memref.alloc() {{.*}} : memref<6x12xf32>
// CHECK: llvm.call @__tfm_run_kernel
// CHECK-NOT: llvm.call @__tfm_run_kernel
// CHECK: memref.reinterpret_cast %[[PACKED]] to offset: [0], sizes: [2, 3, 4], strides: [36, 12, 1]
// CHECK: memref.reinterpret_cast %[[PACKED]] to offset: [4], sizes: [2, 3, 4], strides: [36, 12, 1]
// CHECK: memref.reinterpret_cast %[[PACKED]] to offset: [8], sizes: [2, 3, 4], strides: [36, 12, 1]
func.func @infer(%x: tensor<2x3x8xf32>, %w: tensor<12x8xf32>, %b: tensor<12xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %q, %k, %v = tfm.qkv_projection %x, %w, %b sizes = [4, 4, 4] : (tensor<2x3x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>)
  return %q, %k, %v : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// -----

// Residual add + layer norm that also returns the sum: LAYER_NORM with
// M = 6, N = 8, has_residual, has_bias, writes_sum, epsilon 1e-5.
// CHECK: fparams = array<f64: 1.000000e-05, 0.000000e+00>, kind = 4 : i32, params = array<i64: 6, 8, 1, 1, 1, 0, 0, 0>
func.func @infer(%x: tensor<2x3x8xf32>, %r: tensor<2x3x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %y, %s = tfm.add_layer_norm %x, %r, %g, %b {epsilon = 1.0e-05} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>)
  return %y, %s : tensor<2x3x8xf32>, tensor<2x3x8xf32>
}

// -----

// Data movement: an f32 transpose is a REORDER kernel (kind 5) from the
// input's strides, permuted, to the dense result; an i64 transpose is a
// linalg copy from the input read through the permuted strides; a constant
// returned as is is copied out of the weights.
// CHECK: tfm.kernels = [{dtype = 1 : i32, fparams = array<f64: 0.000000e+00, 0.000000e+00>, kind = 5 : i32, params = array<i64: 3, 3, 2, 4, 0, 0, 0, 0>, strides = array<i64: 4, 12, 1, 0, 0, 0, 8, 4, 1, 0, 0, 0>}]
// CHECK: func.func @__tfm_entry_infer(%{{.+}}: !llvm.ptr, %{{.+}}: memref<0xi8>, %{{.+}}: memref<64xi8>, %{{.+}}: memref<0xi8>, %{{.+}}: memref<2x3x4xf32>, %[[I:.+]]: memref<2x3x4xi64>
// CHECK: llvm.call @__tfm_run_kernel
// CHECK: %[[PERMUTED:.+]] = memref.reinterpret_cast %[[I]] to offset: [0], sizes: [3, 2, 4], strides: [4, 12, 1]
// CHECK: linalg.generic {{.*}} ins(%[[PERMUTED]] : memref<3x2x4xi64, strided<[4, 12, 1]>>)
// CHECK: linalg.generic
func.func @infer(%x: tensor<2x3x4xf32>, %i: tensor<2x3x4xi64>) -> (tensor<3x2x4xf32>, tensor<3x2x4xi64>, tensor<2xf32>) {
  %c = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %t = tfm.transpose %x permutation = [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %u = tfm.transpose %i permutation = [1, 0, 2] : tensor<2x3x4xi64> -> tensor<3x2x4xi64>
  return %t, %u, %c : tensor<3x2x4xf32>, tensor<3x2x4xi64>, tensor<2xf32>
}

// -----

// A transpose that only moves a dimension of size 1 keeps the data in
// order: it is a view, with no kernel and no copy.
// CHECK: tfm.kernels = []
// CHECK: func.func @__tfm_entry_infer(%{{.+}}: !llvm.ptr, %{{.+}}: memref<{{[0-9]+}}xi8>, %{{.+}}: memref<0xi8>, %{{.+}}: memref<0xi8>, %[[X:[^:]+]]: memref<1x3x4xf32>, %[[Y:[^:]+]]: memref<3x1x4xf32>)
// CHECK: %[[V:.+]] = memref.reinterpret_cast %[[X]] to offset: [0], sizes: [3, 1, 4], strides: [4, 4, 1]
// CHECK: linalg.generic {{.*}} ins(%[[V]] : memref<3x1x4xf32>) outs(%[[Y]] : memref<3x1x4xf32>)
// CHECK-NOT: linalg.generic
func.func @infer(%x: tensor<1x3x4xf32>) -> tensor<3x1x4xf32> {
  %t = tfm.transpose %x permutation = [1, 0, 2] : tensor<1x3x4xf32> -> tensor<3x1x4xf32>
  %y = tfm.relu %t : tensor<3x1x4xf32>
  return %y : tensor<3x1x4xf32>
}

// -----

// A training step: the parameter is a view of the session state (offset 0,
// its initial value at weights offset 0), the step count lives after it and
// the Adam moments after that. The update is one ADAM kernel (kind 6) on the
// 32 elements, handed the parameter and the moments in place (state offsets
// 0, 192 and 320) and the step's coefficients, which the code computes from
// the step count.
// CHECK: tfm.kernels = [{dtype = 1 : i32, fparams = array<f64: 0.000000e+00, 0.000000e+00>, kind = 6 : i32, params = array<i64: 32, 0, 0, 0, 0, 0, 0, 0>}]
// CHECK-SAME: tfm.state_bytes = 448
// CHECK-SAME: tfm.states = [{init_offset = 0 : i64, kind = 1 : i32, name = "w", offset = 0 : i64, type = tensor<4x8xf32>}, {init_offset = -1 : i64, kind = 4 : i32, name = "step", offset = 128 : i64, type = tensor<i64>}, {init_offset = -1 : i64, kind = 2 : i32, name = "w", offset = 192 : i64, type = tensor<4x8xf32>}, {init_offset = -1 : i64, kind = 3 : i32, name = "w", offset = 320 : i64, type = tensor<4x8xf32>}]
// CHECK: func.func @__tfm_entry_train_step(%{{.+}}: !llvm.ptr, %{{.+}}: memref<{{[0-9]+}}xi8>, %{{.+}}: memref<128xi8>, %[[S:.+]]: memref<448xi8>,
// CHECK: %[[STEP:.+]] = memref.view %[[S]][%c128{{.*}}][] : memref<448xi8> to memref<i64>
// CHECK: memref.load %[[STEP]][]
// CHECK: memref.store
// CHECK: math.powf
// CHECK: %[[C:.+]] = memref.alloc() {{.*}} : memref<8xf32>
// CHECK-COUNT-8: memref.store %{{.+}}, %[[C]][%{{.+}}] : memref<8xf32>
// CHECK: %[[P:.+]] = memref.extract_aligned_pointer_as_index %[[S]]
// CHECK: %[[G:.+]] = memref.extract_aligned_pointer_as_index %arg4
// CHECK: %[[M:.+]] = memref.extract_aligned_pointer_as_index %[[S]]
// CHECK: arith.addi %[[M]], %c192{{.*}} : index
// CHECK: %[[V:.+]] = memref.extract_aligned_pointer_as_index %[[S]]
// CHECK: arith.addi %[[V]], %c320{{.*}} : index
// CHECK: %[[CP:.+]] = memref.extract_aligned_pointer_as_index %[[C]]
// CHECK: llvm.call @__tfm_run_kernel(%{{.+}}, %c0_i32{{.*}}, %{{.+}})
// CHECK-NOT: linalg.generic
func.func @train_step(%g: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %t = tfm.next_step : tensor<i64>
  %w = tfm.parameter "w" {initial_value = dense<0.5> : tensor<4x8xf32>} : tensor<4x8xf32>
  %y = tfm.mul %w, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  tfm.adam_update "w", %g, %t {lr = 1.0e-03} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
