// RUN: tfm-opt %s -split-input-file --tfm-plan-memory | FileCheck %s

// Tests a plan derived by hand. Every tensor is 16 f32 = 64 bytes. %a lives
// over ops 0-1 and %b over 1-2, so they overlap and need two buffers; %c is
// elementwise over %b, which dies there, so it is computed in place; %d is
// returned, so it is an output, not in the arena. Arena: 128 bytes, which is
// also the most alive at once.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: tfm.arena_bytes = 128 : i64, tfm.arena_lower_bound = 128 : i64
// CHECK: tfm.relu %arg0 {tfm.arena_offsets = array<i64: [[A:[0-9]+]]>}
// CHECK: tfm.softmax %{{.+}} {tfm.arena_offsets = array<i64: [[B:[0-9]+]]>}
// CHECK: tfm.gelu %{{.+}} {tfm.arena_offsets = array<i64: [[B]]>}
// CHECK: tfm.relu %{{.+}} {tfm.arena_offsets = array<i64: -1>}
func.func @chain(%x: tensor<16xf32>) -> tensor<16xf32> {
  %a = tfm.relu %x : tensor<16xf32>
  %b = tfm.softmax %a : tensor<16xf32>
  %c = tfm.gelu %b : tensor<16xf32>
  %d = tfm.relu %c : tensor<16xf32>
  return %d : tensor<16xf32>
}

// -----

// Tests that a reshape shares its input's buffer, and that buffers whose
// lifetimes do not overlap reuse the same offset.
// CHECK-LABEL: func.func @reuse
// CHECK-SAME: tfm.arena_bytes = 128 : i64, tfm.arena_lower_bound = 128 : i64
// CHECK: tfm.softmax %arg0 {tfm.arena_offsets = array<i64: [[P:[0-9]+]]>}
// CHECK: tfm.reshape %{{.+}} {tfm.arena_offsets = array<i64: [[P]]>}
func.func @reuse(%x: tensor<4x4xf32>) -> tensor<16xf32> {
  %p = tfm.softmax %x : tensor<4x4xf32>
  %r = tfm.reshape %p : tensor<4x4xf32> -> tensor<16xf32>
  %s = tfm.softmax %r : tensor<16xf32>
  %t = tfm.softmax %s : tensor<16xf32>
  %u = tfm.softmax %t : tensor<16xf32>
  return %u : tensor<16xf32>
}
