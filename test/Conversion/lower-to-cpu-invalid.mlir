// RUN: tfm-opt %s -split-input-file --tfm-lower-to-cpu -verify-diagnostics

// The lowering reads the memory plan and refuses one it cannot honour,
// naming the op, instead of writing outside the arena.

// Tests that an op without a plan is refused.
func.func @infer(%x: tensor<4xf32> {tfm.name = "x"}) -> (tensor<4xf32> {tfm.name = "y"})
    attributes {tfm.arena_bytes = 64 : i64, tfm.arena_lower_bound = 64 : i64} {
  // expected-error @+1 {{'tfm.relu' has no memory plan; run tfm-plan-memory before lowering}}
  %0 = tfm.relu %x : tensor<4xf32>
  %1 = tfm.relu %0 {tfm.plan = [#tfm.output<index = 0>]} : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Tests that an arena slot past the function's arena is refused.
func.func @infer(%x: tensor<4xf32> {tfm.name = "x"}) -> (tensor<4xf32> {tfm.name = "y"})
    attributes {tfm.arena_bytes = 64 : i64, tfm.arena_lower_bound = 64 : i64} {
  // expected-error @+1 {{result #0 of 'tfm.relu' is planned at arena bytes [64, 80), past the function's tfm.arena_bytes = 64}}
  %0 = tfm.relu %x {tfm.plan = [#tfm.arena<offset = 64>]} : tensor<4xf32>
  %1 = tfm.relu %0 {tfm.plan = [#tfm.output<index = 0>]} : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Tests that a view reaching past the storage it reads is refused.
func.func @infer(%x: tensor<4xf32> {tfm.name = "x"}) -> (tensor<2x2xf32> {tfm.name = "y"})
    attributes {tfm.arena_bytes = 64 : i64, tfm.arena_lower_bound = 64 : i64} {
  %0 = tfm.relu %x {tfm.plan = [#tfm.arena<offset = 0>]} : tensor<4xf32>
  // expected-error @+1 {{the plan's view of result #0 of 'tfm.reshape' reaches element 5 of a storage of 4}}
  %1 = tfm.reshape %0 {tfm.plan = [#tfm.view<operand = 0, offset = 2, strides = [2, 1]>]} : tensor<4xf32> -> tensor<2x2xf32>
  %2 = tfm.relu %1 {tfm.plan = [#tfm.output<index = 0>]} : tensor<2x2xf32>
  return %2 : tensor<2x2xf32>
}
