// RUN: tfm-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(tfm-plan-memory),tfm-lower-to-cpu)' | FileCheck %s

// Tests that unsigned tensors are stored signless (arith accepts no other
// integers) while their division, order and conversions stay unsigned, and
// that the entry's metadata keeps the types the model declares.
// CHECK: #tfm.tensor_desc<name = "a", type = tensor<4xui8>>
// CHECK-SAME: #tfm.tensor_desc<name = "q", type = tensor<4xui8>>
// CHECK-SAME: #tfm.tensor_desc<name = "f", type = tensor<4xf32>>
// CHECK-SAME: #tfm.tensor_desc<name = "w", type = tensor<4xi32>>
// CHECK: func.func @__tfm_entry_infer
// CHECK-SAME: memref<4xi8>, %{{.+}}: memref<4xi8>, %{{.+}}: memref<4xi8>, %{{.+}}: memref<4xi8>, %{{.+}}: memref<4xf32>, %{{.+}}: memref<4xi32>
// CHECK: arith.divui
// CHECK: arith.maxui
// CHECK: arith.cmpi ult
// CHECK: arith.uitofp
// CHECK: arith.extui
// CHECK-NOT: arith.divsi
// CHECK-NOT: arith.maxsi
// CHECK-NOT: arith.sitofp
func.func @infer(%a: tensor<4xui8> {tfm.name = "a"}, %b: tensor<4xui8> {tfm.name = "b"})
    -> (tensor<4xui8> {tfm.name = "q"}, tensor<4xui8> {tfm.name = "m"},
        tensor<4xi1> {tfm.name = "lt"}, tensor<4xf32> {tfm.name = "f"},
        tensor<4xi32> {tfm.name = "w"}) {
  %q = tfm.div %a, %b : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  %m = tfm.max %a, %b : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  %lt = tfm.compare lt, %a, %b : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xi1>
  %f = tfm.cast %a : tensor<4xui8> -> tensor<4xf32>
  %w = tfm.cast %b : tensor<4xui8> -> tensor<4xi32>
  return %q, %m, %lt, %f, %w : tensor<4xui8>, tensor<4xui8>, tensor<4xi1>, tensor<4xf32>, tensor<4xi32>
}

// -----

// Tests that signed narrow integers divide, order and widen signed, and
// that an unsigned max reduction starts from 0, not from the signed minimum.
// CHECK: func.func @__tfm_entry_narrow
// CHECK: arith.divsi {{.*}} : i16
// CHECK: arith.extsi {{.*}} : i8 to i64
// CHECK: outs(%{{.+}} : memref<2xi32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[INIT:.+]] = arith.constant 0 : i32
// CHECK-NEXT: linalg.yield %[[INIT]]
// CHECK: arith.maxui {{.*}} : i32
func.func @narrow(%a: tensor<4xi16>, %b: tensor<4xi16>, %c: tensor<4xi8>, %u: tensor<2x4xui32>)
    -> (tensor<4xi16>, tensor<4xi64>, tensor<2xui32>) {
  %q = tfm.div %a, %b : (tensor<4xi16>, tensor<4xi16>) -> tensor<4xi16>
  %w = tfm.cast %c : tensor<4xi8> -> tensor<4xi64>
  %r = tfm.reduce max %u axes = [1] : tensor<2x4xui32> -> tensor<2xui32>
  return %q, %w, %r : tensor<4xi16>, tensor<4xi64>, tensor<2xui32>
}
