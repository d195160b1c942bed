// RUN: tfm-opt %s -split-input-file --tfm-fuse-rotary=remarks=true -verify-diagnostics | FileCheck %s
// RUN: %python %S/Inputs/check_pass_equivalence.py %tfm_opt_bin %tfmc_bin --tfm-fuse-rotary %s %t | FileCheck %s --check-prefix=EQUIV
// EQUIV: functions equivalent after --tfm-fuse-rotary, also compiled

// Tests Llama's rotate_half as exported: x · cos + concat(-x[.., 4:],
// x[.., :4]) · sin, with the tables [1, 1, S, 8].
// CHECK-LABEL: func.func @rotate_half
// CHECK: %[[R:.+]] = tfm.rotary %arg0, %arg1, %arg2 : (tensor<1x2x3x8xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>) -> tensor<1x2x3x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @rotate_half(%x: tensor<1x2x3x8xf32>, %cos: tensor<1x1x3x8xf32>, %sin: tensor<1x1x3x8xf32>) -> tensor<1x2x3x8xf32> {
  %a = tfm.mul %x, %cos : (tensor<1x2x3x8xf32>, tensor<1x1x3x8xf32>) -> tensor<1x2x3x8xf32>
  %lo = tfm.slice %x starts = [0, 0, 0, 0] sizes = [1, 2, 3, 4] steps = [1, 1, 1, 1] : tensor<1x2x3x8xf32> -> tensor<1x2x3x4xf32>
  %hi = tfm.slice %x starts = [0, 0, 0, 4] sizes = [1, 2, 3, 4] steps = [1, 1, 1, 1] : tensor<1x2x3x8xf32> -> tensor<1x2x3x4xf32>
  %n = arith.negf %hi : tensor<1x2x3x4xf32>
  %r = tfm.concat %n, %lo axis = -1 : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x8xf32>
  %b = tfm.mul %r, %sin : (tensor<1x2x3x8xf32>, tensor<1x1x3x8xf32>) -> tensor<1x2x3x8xf32>
  // expected-remark@+1 {{tfm-fuse-rotary: fused}}
  %y = tfm.add %a, %b : (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32>
  return %y : tensor<1x2x3x8xf32>
}

// -----

// Tests the interleaved pairs of GPT-J and NeoX-style models on a partial
// rotary embedding: the odd and even elements by step-2 slices, stacked as
// (-odd, even) on a new axis and merged back, the factors and terms in the
// other order; the part past the rotated dims passes through a concat.
// CHECK-LABEL: func.func @interleaved_partial
// CHECK: %[[P:.+]] = tfm.slice %arg0 starts = [0, 0, 0] sizes = [2, 5, 4]
// CHECK: %[[R:.+]] = tfm.rotary %[[P]], %arg1, %arg2 interleaved : (tensor<2x5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>) -> tensor<2x5x4xf32>
// CHECK: tfm.concat %[[R]]
func.func @interleaved_partial(%q: tensor<2x5x6xf32>, %cos: tensor<5x4xf32>, %sin: tensor<5x4xf32>) -> tensor<2x5x6xf32> {
  %x = tfm.slice %q starts = [0, 0, 0] sizes = [2, 5, 4] steps = [1, 1, 1] : tensor<2x5x6xf32> -> tensor<2x5x4xf32>
  %pass = tfm.slice %q starts = [0, 0, 4] sizes = [2, 5, 2] steps = [1, 1, 1] : tensor<2x5x6xf32> -> tensor<2x5x2xf32>
  %a = tfm.mul %cos, %x : (tensor<5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  %even = tfm.slice %x starts = [0, 0, 0] sizes = [2, 5, 2] steps = [1, 1, 2] : tensor<2x5x4xf32> -> tensor<2x5x2xf32>
  %odd = tfm.slice %x starts = [0, 0, 1] sizes = [2, 5, 2] steps = [1, 1, 2] : tensor<2x5x4xf32> -> tensor<2x5x2xf32>
  %n = arith.negf %odd : tensor<2x5x2xf32>
  %n1 = tfm.reshape %n : tensor<2x5x2xf32> -> tensor<2x5x2x1xf32>
  %e1 = tfm.reshape %even : tensor<2x5x2xf32> -> tensor<2x5x2x1xf32>
  %st = tfm.concat %n1, %e1 axis = -1 : (tensor<2x5x2x1xf32>, tensor<2x5x2x1xf32>) -> tensor<2x5x2x2xf32>
  %r = tfm.reshape %st : tensor<2x5x2x2xf32> -> tensor<2x5x4xf32>
  %b = tfm.mul %sin, %r : (tensor<5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  // expected-remark@+1 {{tfm-fuse-rotary: fused}}
  %y = tfm.add %b, %a : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  %o = tfm.concat %y, %pass axis = 2 : (tensor<2x5x4xf32>, tensor<2x5x2xf32>) -> tensor<2x5x6xf32>
  return %o : tensor<2x5x6xf32>
}

// -----

// Tests that a rotation multiplied and summed with something other than the
// rotated input is reported, not silently left.
// CHECK-LABEL: func.func @not_the_same_input
// CHECK-NOT: tfm.rotary
func.func @not_the_same_input(%x: tensor<3x4xf32>, %z: tensor<3x4xf32>, %cos: tensor<3x4xf32>, %sin: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %a = tfm.mul %z, %cos : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %lo = tfm.slice %x starts = [0, 0] sizes = [3, 2] steps = [1, 1] : tensor<3x4xf32> -> tensor<3x2xf32>
  %hi = tfm.slice %x starts = [0, 2] sizes = [3, 2] steps = [1, 1] : tensor<3x4xf32> -> tensor<3x2xf32>
  %n = arith.negf %hi : tensor<3x2xf32>
  %r = tfm.concat %n, %lo axis = 1 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x4xf32>
  %b = tfm.mul %r, %sin : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  // expected-remark@+1 {{tfm-fuse-rotary: missed: the rotated input is not also multiplied by a table}}
  %y = tfm.add %a, %b : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}
