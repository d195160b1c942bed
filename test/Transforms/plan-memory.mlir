// RUN: tfm-opt %s -split-input-file --tfm-plan-memory | FileCheck %s

// Tests a plan derived by hand. Every tensor is 16 f32 = 64 bytes. %a lives
// over ops 0-1 and %b over 1-2, so they overlap and need two buffers; %c is
// elementwise over %b, which dies there, so it is computed in place; %d is
// returned, so it is an output, not in the arena. Arena: 128 bytes, which is
// also the most alive at once.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: tfm.arena_bytes = 128 : i64, tfm.arena_lower_bound = 128 : i64
// CHECK: tfm.relu %arg0 {tfm.arena_offsets = array<i64: [[A:[0-9]+]]>}
// CHECK: tfm.transpose %{{.+}} {{.*}}{tfm.arena_offsets = array<i64: [[B:[0-9]+]]>}
// CHECK: tfm.gelu %{{.+}} {tfm.arena_offsets = array<i64: [[B]]>}
// CHECK: tfm.relu %{{.+}} {tfm.arena_offsets = array<i64: -1>}
func.func @chain(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = tfm.relu %x : tensor<4x4xf32>
  %b = tfm.transpose %a permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %c = tfm.gelu %b : tensor<4x4xf32>
  %d = tfm.relu %c : tensor<4x4xf32>
  return %d : tensor<4x4xf32>
}

// -----

// Tests that buffers whose lifetimes do not overlap reuse the same offset
// (%r takes %p's), and that a reshape shares its input's buffer.
// CHECK-LABEL: func.func @reuse
// CHECK-SAME: tfm.arena_bytes = 128 : i64, tfm.arena_lower_bound = 128 : i64
// CHECK: tfm.transpose %arg0 {{.*}}{tfm.arena_offsets = array<i64: [[P:[0-9]+]]>}
// CHECK: tfm.transpose %{{.+}} {{.*}}{tfm.arena_offsets = array<i64: [[Q:[0-9]+]]>}
// CHECK: tfm.transpose %{{.+}} {{.*}}{tfm.arena_offsets = array<i64: [[P]]>}
// CHECK: tfm.reshape %{{.+}} {tfm.arena_offsets = array<i64: [[P]]>}
func.func @reuse(%x: tensor<4x4xf32>) -> tensor<16xf32> {
  %p = tfm.transpose %x permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %q = tfm.transpose %p permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %r = tfm.transpose %q permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %s = tfm.reshape %r : tensor<4x4xf32> -> tensor<16xf32>
  %t = tfm.relu %s : tensor<16xf32>
  return %t : tensor<16xf32>
}

// -----

// Tests that a softmax works in place over scores that die there (the CPU
// lowering reads each row before writing it).
// CHECK-LABEL: func.func @softmax_in_place
// CHECK: tfm.transpose %arg0 {{.*}}{tfm.arena_offsets = array<i64: [[S:[0-9]+]]>}
// CHECK: tfm.softmax %{{.+}} {tfm.arena_offsets = array<i64: [[S]]>}
func.func @softmax_in_place(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %s = tfm.transpose %x permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %p = tfm.softmax %s : tensor<4x4xf32>
  %y = tfm.relu %p : tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// Tests a compare that only a select reads (ReLU's gradient): the CPU
// lowering computes it inside the select, so it gets no buffer, and the
// select reads its operand %y. %y must stay alive until the select: %g,
// computed between the two, cannot take %y's buffer.
// CHECK-LABEL: func.func @compare_inside_select
// CHECK-SAME: tfm.arena_bytes = 128 : i64
// CHECK: tfm.relu %arg0 {tfm.arena_offsets = array<i64: [[Y:[0-9]+]]>}
// CHECK: tfm.compare gt, {{.*}}{tfm.arena_offsets = array<i64: -1>}
// CHECK-NOT: tfm.gelu %arg1 {tfm.arena_offsets = array<i64: [[Y]]>}
// CHECK: tfm.gelu %arg1 {tfm.arena_offsets = array<i64: {{[0-9]+}}>}
func.func @compare_inside_select(%x: tensor<16xf32>, %d: tensor<16xf32>) -> tensor<16xf32> {
  %zero = arith.constant dense<0.0> : tensor<16xf32>
  %y = tfm.relu %x : tensor<16xf32>
  %c = tfm.compare gt, %y, %zero : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xi1>
  %g = tfm.gelu %d : tensor<16xf32>
  %s = tfm.select %c, %g, %zero : (tensor<16xi1>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %s : tensor<16xf32>
}
