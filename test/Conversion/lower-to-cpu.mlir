// RUN: tfm-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(tfm-plan-memory),tfm-lower-to-cpu)' | FileCheck %s

// Tests that a linear with bias and GELU is one LINEAR kernel call with
// M = 2·3, K = 8, N = 4, has_bias, activation 2 (gelu), no residual
// (slot 3 absent), and constant weights (which the kernel packs once); the
// result is returned, so the kernel writes straight into the caller's
// output buffer, and the entry returns the kernel's status if it fails.
// CHECK: tfm.entries = [#tfm.entry<name = "infer", symbol = @__tfm_entry_infer, inputs = [#tfm.tensor_desc<name = "x", type = tensor<2x3x8xf32>>], outputs = [#tfm.tensor_desc<name = "y", type = tensor<2x3x4xf32>>], arena_bytes = 0>]
// CHECK-SAME: tfm.weight_offsets = array<i64: 0, 128>
// CHECK-SAME: tfm.weights_bytes = 192
// CHECK: func.func @__tfm_entry_infer
// CHECK-SAME: (%[[HOST:.+]]: !llvm.ptr, %{{.+}}: memref<0xi8>, %[[W:.+]]: memref<192xi8>, %{{.+}}: memref<0xi8>, %[[X:.+]]: memref<2x3x8xf32>, %[[Y:.+]]: memref<2x3x4xf32>) -> i32
// CHECK: %[[WV:.+]] = memref.view %[[W]][%{{.+}}][] : memref<192xi8> to memref<4x8xf32>
// CHECK: %[[BV:.+]] = memref.view %[[W]][%{{.+}}][] : memref<192xi8> to memref<4xf32>
// CHECK: %[[RC:.+]] = tfm.kernel_call %[[HOST]], <kind = linear, dtype = f32, params = [6, 8, 4, 1, 2, 0, 1]>(%[[X]], %[[WV]], %[[BV]], %[[Y]]) {slots = array<i64: 0, 1, 2, 4>}
// CHECK: %[[FAILED:.+]] = arith.cmpi ne, %[[RC]]
// CHECK: cf.cond_br %[[FAILED]], ^[[EXIT:.+]](%[[RC]] : i32), ^
// CHECK-NOT: tfm.linear
// CHECK: ^[[EXIT]](%[[CODE:.+]]: i32):
// CHECK-NEXT: return %[[CODE]]
func.func @infer(%x: tensor<2x3x8xf32> {tfm.name = "x"}) -> (tensor<2x3x4xf32> {tfm.name = "y"}) {
  %w = arith.constant dense<0.5> : tensor<4x8xf32>
  %b = arith.constant dense<1.0> : tensor<4xf32>
  %y = tfm.linear %x, %w, %b activation = gelu : (tensor<2x3x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// -----

// Tests a padding mask [B, 1, 1, S] on scores [B, H, S, S]: group g = b·H + h
// reads mask row g / H (div = 4) with a group stride of S and no row stride.
// The scores live in the arena, the softmax works in place over them, and
// the reshape is a view of the same bytes, not a copy. The scores are one
// BATCH_MATMUL over B1 = 2, B2 = 4, M = 8, K = 16, N = 8, reading k
// transposed through its strides.
// CHECK: func.func @__tfm_entry_infer
// CHECK-SAME: (%{{.+}}: !llvm.ptr, %[[ARENA:.+]]: memref<2048xi8>
// CHECK: %[[S:.+]] = memref.view %[[ARENA]][%c0{{.*}}][] : memref<2048xi8> to memref<2x4x8x8xf32>
// CHECK: tfm.kernel_call %{{.+}}, <kind = batch_matmul, dtype = f32, params = [2, 4, 8, 16, 8], strides = [512, 128, 16, 1, 512, 128, 1, 16, 256, 64, 8, 1]>(%{{.+}}, %{{.+}}, %[[S]])
// CHECK: %[[P:.+]] = memref.view %[[ARENA]][%c0{{.*}}][] : memref<2048xi8> to memref<2x4x8x8xf32>
// CHECK: tfm.kernel_call %{{.+}}, <kind = masked_softmax, dtype = f32, params = [8, 8, 8, 0, 1, 4, 8, 0], fparams = [2.500000e-01]>(%[[S]], %{{.+}}, %[[P]])
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

// Tests that a packed projection is one LINEAR (M = 6, K = 8, N = 12) into
// one packed buffer of 72 floats in the arena; each part is a column
// window of it (rows 12 apart, from columns 0, 4 and 8), copied out here
// by REORDER kernels because the parts are returned.
// CHECK: func.func @__tfm_entry_infer
// CHECK: %[[PACKED:.+]] = memref.view %{{.+}}[%{{.+}}][] : memref<{{[0-9]+}}xi8> to memref<72xf32>
// CHECK: tfm.kernel_call %{{.+}}, <kind = linear, dtype = f32, params = [6, 8, 12, 1, 0, 0, 0]>(%{{.+}}, %{{.+}}, %{{.+}}, %[[PACKED]])
// CHECK: tfm.kernel_call %{{.+}}, <kind = reorder, dtype = f32, params = [3, 2, 3, 4], strides = [36, 12, 1, 0, 0, 0, 12, 4, 1]>(%[[PACKED]], %{{.+}}) :
// CHECK: tfm.kernel_call %{{.+}}, <kind = reorder, {{.*}}>(%[[PACKED]], %{{.+}}) {offsets = array<i64: 4, 0>}
// CHECK: tfm.kernel_call %{{.+}}, <kind = reorder, {{.*}}>(%[[PACKED]], %{{.+}}) {offsets = array<i64: 8, 0>}
func.func @infer(%x: tensor<2x3x8xf32>, %w: tensor<12x8xf32>, %b: tensor<12xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %q, %k, %v = tfm.qkv_projection %x, %w, %b sizes = [4, 4, 4] : (tensor<2x3x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>)
  return %q, %k, %v : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// -----

// Tests residual add + layer norm that also returns the sum: LAYER_NORM
// with M = 6, N = 8, has_residual, has_bias, writes_sum, epsilon 1e-5.
// CHECK: tfm.kernel_call %{{.+}}, <kind = layer_norm, dtype = f32, params = [6, 8, 1, 1, 1], fparams = [1.000000e-05]>
func.func @infer(%x: tensor<2x3x8xf32>, %r: tensor<2x3x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %y, %s = tfm.add_layer_norm %x, %r, %g, %b {epsilon = 1.0e-05} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>)
  return %y, %s : tensor<2x3x8xf32>, tensor<2x3x8xf32>
}

// -----

// Tests data movement: an f32 transpose is a REORDER kernel from the
// input's strides, permuted, to the dense result; an i64 transpose is a
// linalg copy from the input read through the permuted strides; a constant
// returned as is is copied out of the weights.
// CHECK: func.func @__tfm_entry_infer
// CHECK-SAME: (%{{.+}}: !llvm.ptr, %{{.+}}: memref<0xi8>, %{{.+}}: memref<64xi8>, %{{.+}}: memref<0xi8>, %{{.+}}: memref<2x3x4xf32>, %[[I:.+]]: memref<2x3x4xi64>
// CHECK: tfm.kernel_call %{{.+}}, <kind = reorder, dtype = f32, params = [3, 3, 2, 4], strides = [4, 12, 1, 0, 0, 0, 8, 4, 1]>
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

// Tests that a transpose that only moves a dimension of size 1 keeps the
// data in order: it is a view, with no kernel and no copy.
// CHECK: func.func @__tfm_entry_infer
// CHECK-SAME: (%{{.+}}: !llvm.ptr, %{{.+}}: memref<{{[0-9]+}}xi8>, %{{.+}}: memref<0xi8>, %{{.+}}: memref<0xi8>, %[[X:[^:]+]]: memref<1x3x4xf32>, %[[Y:[^:]+]]: memref<3x1x4xf32>)
// CHECK-NOT: tfm.kernel_call
// CHECK: %[[V:.+]] = memref.reinterpret_cast %[[X]] to offset: [0], sizes: [3, 1, 4], strides: [4, 4, 1] : memref<1x3x4xf32> to memref<3x1x4xf32>
// CHECK: linalg.generic {{.*}} ins(%[[V]] : memref<3x1x4xf32>) outs(%[[Y]] : memref<3x1x4xf32>)
// CHECK-NOT: linalg.generic
func.func @infer(%x: tensor<1x3x4xf32>) -> tensor<3x1x4xf32> {
  %t = tfm.transpose %x permutation = [1, 0, 2] : tensor<1x3x4xf32> -> tensor<3x1x4xf32>
  %y = tfm.relu %t : tensor<3x1x4xf32>
  return %y : tensor<3x1x4xf32>
}

// -----

// Tests a training step: the parameter is a view of the session state
// (offset 0, its initial value at weights offset 0), the step count lives
// after it and the Adam moments after that. The update is one ADAM kernel
// on the 32 elements, handed the parameter and the moments in place (state
// offsets 0, 192 and 320) and the step's coefficients, which the code
// computes from the step count into scratch memory in the arena.
// CHECK: tfm.state_bytes = 448
// CHECK-SAME: tfm.states = [#tfm.state_slot<name = "w", kind = parameter, type = tensor<4x8xf32>, offset = 0, init_offset = 0>, #tfm.state_slot<name = "step", kind = step, type = tensor<i64>, offset = 128>, #tfm.state_slot<name = "w", kind = adam_m, type = tensor<4x8xf32>, offset = 192>, #tfm.state_slot<name = "w", kind = adam_v, type = tensor<4x8xf32>, offset = 320>]
// CHECK: func.func @__tfm_entry_train_step
// CHECK-SAME: (%{{.+}}: !llvm.ptr, %[[A:.+]]: memref<{{[0-9]+}}xi8>, %{{.+}}: memref<128xi8>, %[[S:.+]]: memref<448xi8>, %[[G:.+]]: memref<4x8xf32>,
// CHECK: %[[STEP:.+]] = memref.view %[[S]][%c128{{.*}}][] : memref<448xi8> to memref<i64>
// CHECK: %[[NEXT:.+]] = memref.view %[[A]][%c0{{.*}}][] : memref<{{[0-9]+}}xi8> to memref<i64>
// CHECK: linalg.generic {{.+}} ins(%[[STEP]] : memref<i64>) outs(%[[NEXT]] : memref<i64>)
// CHECK: arith.addi
// CHECK: linalg.generic {{.+}} ins(%[[NEXT]] : memref<i64>) outs(%[[STEP]] : memref<i64>)
// CHECK: memref.view %[[S]][%c0{{.*}}][] : memref<448xi8> to memref<4x8xf32>
// CHECK: memref.load %[[NEXT]][]
// CHECK: math.powf
// CHECK: %[[C:.+]] = memref.view %[[A]][%{{.+}}][] : memref<{{[0-9]+}}xi8> to memref<8xf32>
// CHECK-COUNT-8: memref.store %{{.+}}, %[[C]][%{{.+}}] : memref<8xf32>
// CHECK: %[[M:.+]] = memref.view %[[S]][%c192{{.*}}][] : memref<448xi8> to memref<4x8xf32>
// CHECK: %[[V:.+]] = memref.view %[[S]][%c320{{.*}}][] : memref<448xi8> to memref<4x8xf32>
// CHECK: tfm.kernel_call %{{.+}}, <kind = adam, dtype = f32, params = [32]>(%{{.+}}, %[[G]], %[[M]], %[[V]], %[[C]])
func.func @train_step(%g: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %t = tfm.next_step : tensor<i64>
  %w = tfm.parameter "w" {initial_value = dense<0.5> : tensor<4x8xf32>} : tensor<4x8xf32>
  %y = tfm.mul %w, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  tfm.adam_update "w", %g, %t {lr = 1.0e-03} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests a sharded Adam step (--shard-optimizer): the moments' slots take no
// bytes of the state (offset 0, and the state ends after the step count),
// and the ADAM kernel gets the parameter, the gradient and the
// coefficients, its params naming the first moment's slot (index 2) for
// the runtime, which keeps the moments.
// CHECK: tfm.state_bytes = 192
// CHECK-SAME: tfm.states = [#tfm.state_slot<name = "w", kind = parameter, type = tensor<4x8xf32>, offset = 0, init_offset = 0>, #tfm.state_slot<name = "step", kind = step, type = tensor<i64>, offset = 128>, #tfm.state_slot<name = "w", kind = adam_m_shard, type = tensor<4x8xf32>, offset = 0>, #tfm.state_slot<name = "w", kind = adam_v_shard, type = tensor<4x8xf32>, offset = 0>]
// CHECK: func.func @__tfm_entry_train_step
// CHECK-SAME: %[[G:[a-z0-9]+]]: memref<4x8xf32>
// CHECK: %[[C:.+]] = memref.view %{{.+}}[%{{.+}}][] : memref<{{[0-9]+}}xi8> to memref<8xf32>
// CHECK: tfm.kernel_call %{{.+}}, <kind = adam, dtype = f32, params = [32, 1, 2]>(%{{.+}}, %[[G]], %[[C]])
func.func @train_step(%g: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %t = tfm.next_step : tensor<i64>
  %w = tfm.parameter "w" {initial_value = dense<0.5> : tensor<4x8xf32>} : tensor<4x8xf32>
  %y = tfm.mul %w, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  tfm.adam_update "w", %g, %t {lr = 1.0e-03, sharded} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that token ids are checked before the embedding reads them: the
// first position outside [0, 10) stops the run through __tfm_check_failed,
// whose check names the op and the input.
// CHECK: tfm.checks = [#tfm.index_check<op = "{{.+}}:{{[0-9]+}}:{{[0-9]+}}", tensor = "input 'ids'", input = 0, lower = 0, upper = 10>]
// CHECK: func.func @__tfm_entry_infer
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction"]
// CHECK: %[[FIRST:.+]] = memref.load
// CHECK: %[[FOUND:.+]] = arith.cmpi slt, %[[FIRST]], %c6
// CHECK: cf.cond_br %[[FOUND]], ^[[FAIL:.+]], ^
// CHECK: ^[[FAIL]]:
// CHECK: %[[CODE:.+]] = call @__tfm_check_failed(%{{.+}}, %{{.+}}, %[[FIRST]], %{{.+}})
// CHECK: cf.br ^{{.+}}(%[[CODE]] : i32)
func.func @infer(%ids: tensor<2x3xi64> {tfm.name = "ids"}, %table: tensor<10x4xf32>) -> tensor<2x3x4xf32> {
  %e = tfm.embedding %table, %ids : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  return %e : tensor<2x3x4xf32>
}

// -----

// Tests that a quantized linear whose input is quantized by constants (a
// static QDQ) is one QUANTIZED_LINEAR kernel call with STATIC_INPUT (flags
// 2 | 64: a scale per row, the static input), the input's zero point in
// params[7] (uint8's 128 as it is; int8's -3 as 125) and its scale in
// fparams; with a scale that is no constant, the generated code.
// CHECK-LABEL: func.func @__tfm_entry_static_u8
// CHECK: tfm.kernel_call %{{.+}}, <kind = quantized_linear, dtype = f32, params = [4, 3, 2, 0, 0, 66, 0, 128], fparams = [2.000000e-02]>
// CHECK-LABEL: func.func @__tfm_entry_static_s8
// CHECK: tfm.kernel_call %{{.+}}, <kind = quantized_linear, dtype = f32, params = [4, 3, 2, 0, 0, 66, 0, 125], fparams = [5.000000e-01]>
// CHECK-LABEL: func.func @__tfm_entry_static_given
// CHECK-NOT: tfm.kernel_call
// CHECK: return
func.func @static_u8(%x: tensor<4x3xf32> {tfm.name = "x"}) -> (tensor<4x2xf32> {tfm.name = "y"}) {
  %w = arith.constant dense<[[1, -2, 3], [4, 5, -6]]> : tensor<2x3xi8>
  %s = arith.constant dense<[0.5, 0.25]> : tensor<2xf32>
  %xs = arith.constant dense<0.02> : tensor<f32>
  %xz = arith.constant dense<128> : tensor<ui8>
  %y = tfm.quantized_linear %x, %w scale %s input_scale %xs input_zero_point %xz input_quantization = static : (tensor<4x3xf32>, tensor<2x3xi8>, tensor<2xf32>, tensor<f32>, tensor<ui8>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
func.func @static_s8(%x: tensor<4x3xf32> {tfm.name = "x"}) -> (tensor<4x2xf32> {tfm.name = "y"}) {
  %w = arith.constant dense<[[1, -2, 3], [4, 5, -6]]> : tensor<2x3xi8>
  %s = arith.constant dense<[0.5, 0.25]> : tensor<2xf32>
  %xs = arith.constant dense<0.5> : tensor<f32>
  %xz = arith.constant dense<-3> : tensor<i8>
  %y = tfm.quantized_linear %x, %w scale %s input_scale %xs input_zero_point %xz input_quantization = static : (tensor<4x3xf32>, tensor<2x3xi8>, tensor<2xf32>, tensor<f32>, tensor<i8>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
func.func @static_given(%x: tensor<4x3xf32> {tfm.name = "x"}, %xs: tensor<f32> {tfm.name = "xs"}) -> (tensor<4x2xf32> {tfm.name = "y"}) {
  %w = arith.constant dense<[[1, -2, 3], [4, 5, -6]]> : tensor<2x3xi8>
  %s = arith.constant dense<[0.5, 0.25]> : tensor<2xf32>
  %xz = arith.constant dense<128> : tensor<ui8>
  %y = tfm.quantized_linear %x, %w scale %s input_scale %xs input_zero_point %xz input_quantization = static : (tensor<4x3xf32>, tensor<2x3xi8>, tensor<2xf32>, tensor<f32>, tensor<ui8>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
