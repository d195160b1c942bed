// RUN: tfm-opt %s -split-input-file --tfm-plan-memory | FileCheck %s
// RUN: tfm-opt %s -split-input-file --tfm-plan-memory=target=generic | FileCheck %s --check-prefix=GENERIC
// RUN: not tfm-opt %s -split-input-file --tfm-plan-memory=target=tpu 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: tfm-opt %s -split-input-file --tfm-plan-memory=target=cuda | FileCheck %s --check-prefix=GPU

// UNKNOWN: error: tfm-plan-memory: no layout rules for target 'tpu'

// Tests a plan derived by hand. Every tensor is 16 f32 = 64 bytes. %a lives
// over ops 0-1 and %b over 1-2, so they overlap and need two buffers; %c is
// elementwise over %b, which dies there, so it is computed in place; %d is
// returned, so it goes to the caller's output buffer, not to the arena.
// Arena: 128 bytes, which is also the most alive at once.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: tfm.arena_bytes = 128 : i64, tfm.arena_lower_bound = 128 : i64
// CHECK: tfm.relu %arg0 {tfm.plan = [#tfm.arena<offset = [[A:[0-9]+]]>]}
// CHECK: tfm.transpose %{{.+}} {{.*}}{tfm.plan = [#tfm.arena<offset = [[B:[0-9]+]]>]}
// CHECK: tfm.gelu %{{.+}} {tfm.plan = [#tfm.arena<offset = [[B]], reuses = 0>]}
// CHECK: tfm.relu %{{.+}} {tfm.plan = [#tfm.output<index = 0>]}
func.func @chain(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = tfm.relu %x : tensor<4x4xf32>
  %b = tfm.transpose %a permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %c = tfm.gelu %b : tensor<4x4xf32>
  %d = tfm.relu %c : tensor<4x4xf32>
  return %d : tensor<4x4xf32>
}

// -----

// Tests that buffers whose lifetimes do not overlap reuse the same offset
// (%r takes %p's), and that a reshape is a view of its input's storage.
// CHECK-LABEL: func.func @reuse
// CHECK-SAME: tfm.arena_bytes = 128 : i64, tfm.arena_lower_bound = 128 : i64
// CHECK: tfm.transpose %arg0 {{.*}}{tfm.plan = [#tfm.arena<offset = [[P:[0-9]+]]>]}
// CHECK: tfm.transpose %{{.+}} {{.*}}{tfm.plan = [#tfm.arena<offset = [[Q:[0-9]+]]>]}
// CHECK: tfm.transpose %{{.+}} {{.*}}{tfm.plan = [#tfm.arena<offset = [[P]]>]}
// CHECK: tfm.reshape %{{.+}} {tfm.plan = [#tfm.view<operand = 0, offset = 0, strides = [1]>]}
func.func @reuse(%x: tensor<4x4xf32>) -> tensor<16xf32> {
  %p = tfm.transpose %x permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %q = tfm.transpose %p permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %r = tfm.transpose %q permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %s = tfm.reshape %r : tensor<4x4xf32> -> tensor<16xf32>
  %t = tfm.relu %s : tensor<16xf32>
  return %t : tensor<16xf32>
}

// -----

// Tests that a softmax works in place over scores that die there on the CPU
// (its kernel reads each row before writing it), and not on a target
// without such a kernel.
// CHECK-LABEL: func.func @softmax_in_place
// CHECK: tfm.transpose %arg0 {{.*}}{tfm.plan = [#tfm.arena<offset = [[S:[0-9]+]]>]}
// CHECK: tfm.softmax %{{.+}} {tfm.plan = [#tfm.arena<offset = [[S]], reuses = 0>]}
// GENERIC-LABEL: func.func @softmax_in_place
// GENERIC: tfm.softmax %{{.+}} {tfm.plan = [#tfm.arena<offset = {{[0-9]+}}>]}
func.func @softmax_in_place(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %s = tfm.transpose %x permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %p = tfm.softmax %s : tensor<4x4xf32>
  %y = tfm.relu %p : tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// Tests a compare that only a select reads (ReLU's gradient): it is
// computed inside the select, so it gets no buffer, and the select reads
// its operand %y. %y must stay alive until the select: %g, computed between
// the two, cannot take %y's buffer.
// CHECK-LABEL: func.func @compare_inside_select
// CHECK-SAME: tfm.arena_bytes = 128 : i64
// CHECK: tfm.relu %arg0 {tfm.plan = [#tfm.arena<offset = [[Y:[0-9]+]]>]}
// CHECK: tfm.compare gt, {{.*}}{tfm.plan = [#tfm.inline]}
// CHECK-NOT: tfm.gelu %arg1 {tfm.plan = [#tfm.arena<offset = [[Y]]>]}
// CHECK: tfm.gelu %arg1 {tfm.plan = [#tfm.arena<offset = {{[0-9]+}}>]}
func.func @compare_inside_select(%x: tensor<16xf32>, %d: tensor<16xf32>) -> tensor<16xf32> {
  %zero = arith.constant dense<0.0> : tensor<16xf32>
  %y = tfm.relu %x : tensor<16xf32>
  %c = tfm.compare gt, %y, %zero : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xi1>
  %g = tfm.gelu %d : tensor<16xf32>
  %s = tfm.select %c, %g, %zero : (tensor<16xi1>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %s : tensor<16xf32>
}

// -----

// Tests the CPU's views around attention: a packed QKV projection stores
// its three parts in one buffer of 2·4·12 floats, each part a column window
// of it (rows 12 apart); the reshapes of the parts stay views, the
// transposes feeding the strided matmul are views with permuted strides,
// and the transpose after the second matmul is written by it directly (the
// matmul's storage gets the transposed strides, the transpose is a dense
// view of it). Without the CPU's kernels, the same transposes are copies.
// CHECK-LABEL: func.func @attention_views
// CHECK: tfm.qkv_projection {{.*}}{tfm.plan = [#tfm.arena<offset = [[QKV:[0-9]+]], bytes = 384, strides = [48, 12, 1]>, #tfm.view<result = 0, offset = 4, strides = [48, 12, 1]>, #tfm.view<result = 0, offset = 8, strides = [48, 12, 1]>]}
// CHECK: tfm.reshape %{{.+}}#0 {tfm.plan = [#tfm.view<operand = 0, offset = 0, strides = [48, 12, 2, 1]>]}
// CHECK: tfm.reshape %{{.+}}#1 {tfm.plan = [#tfm.view<operand = 0, offset = 4, strides = [48, 12, 2, 1]>]}
// CHECK: tfm.transpose {{.*}}{tfm.plan = [#tfm.view<operand = 0, offset = 0, strides = [48, 2, 12, 1]>]}
// CHECK: tfm.transpose {{.*}}{tfm.plan = [#tfm.view<operand = 0, offset = 4, strides = [48, 2, 12, 1]>]}
// CHECK: tfm.matmul {{.*}}{tfm.plan = [#tfm.arena<offset = {{[0-9]+}}>]}
// CHECK: tfm.matmul {{.*}}{tfm.plan = [#tfm.arena<offset = {{[0-9]+}}, strides = [16, 2, 4, 1]>]}
// CHECK-NEXT: tfm.transpose {{.*}}{tfm.plan = [#tfm.view<operand = 0, offset = 0, strides = [16, 4, 2, 1]>]}
// GENERIC-LABEL: func.func @attention_views
// GENERIC: tfm.qkv_projection {{.*}}{tfm.plan = [#tfm.arena<offset = {{[0-9]+}}>, #tfm.arena<offset = {{[0-9]+}}>, #tfm.arena<offset = {{[0-9]+}}>]}
// GENERIC: tfm.transpose {{.*}}{tfm.plan = [#tfm.arena<offset = {{[0-9]+}}>]}
func.func @attention_views(%x: tensor<2x4x8xf32>, %w: tensor<12x8xf32>) -> tensor<2x4x4xf32> {
  %q, %k, %v = tfm.qkv_projection %x, %w sizes = [4, 4, 4] : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  %q4 = tfm.reshape %q : tensor<2x4x4xf32> -> tensor<2x4x2x2xf32>
  %k4 = tfm.reshape %k : tensor<2x4x4xf32> -> tensor<2x4x2x2xf32>
  %v4 = tfm.reshape %v : tensor<2x4x4xf32> -> tensor<2x4x2x2xf32>
  %qt = tfm.transpose %q4 permutation = [0, 2, 1, 3] : tensor<2x4x2x2xf32> -> tensor<2x2x4x2xf32>
  %kt = tfm.transpose %k4 permutation = [0, 2, 1, 3] : tensor<2x4x2x2xf32> -> tensor<2x2x4x2xf32>
  %vt = tfm.transpose %v4 permutation = [0, 2, 1, 3] : tensor<2x4x2x2xf32> -> tensor<2x2x4x2xf32>
  %s = tfm.matmul %qt, %kt transpose_rhs : (tensor<2x2x4x2xf32>, tensor<2x2x4x2xf32>) -> tensor<2x2x4x4xf32>
  %p = tfm.softmax %s : tensor<2x2x4x4xf32>
  %o = tfm.matmul %p, %vt : (tensor<2x2x4x4xf32>, tensor<2x2x4x2xf32>) -> tensor<2x2x4x2xf32>
  %ot = tfm.transpose %o permutation = [0, 2, 1, 3] : tensor<2x2x4x2xf32> -> tensor<2x4x2x2xf32>
  %r = tfm.reshape %ot : tensor<2x4x2x2xf32> -> tensor<2x4x4xf32>
  %y = tfm.relu %r : tensor<2x4x4xf32>
  return %y : tensor<2x4x4xf32>
}

// -----

// Tests that an op works in place only over storage read densely from its
// start: a packed part is a strided window, so the relu over %k gets a
// buffer of its own though %k dies there.
// CHECK-LABEL: func.func @no_in_place_over_window
// CHECK: tfm.relu %{{.+}}#1 {tfm.plan = [#tfm.arena<offset = {{[0-9]+}}>]}
func.func @no_in_place_over_window(%x: tensor<2x4xf32>, %w: tensor<8x4xf32>) -> tensor<2x4xf32> {
  %q, %k = tfm.qkv_projection %x, %w sizes = [4, 4] : (tensor<2x4xf32>, tensor<8x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  %r = tfm.relu %k : tensor<2x4xf32>
  %y = tfm.add %r, %q : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Tests the heads of a packed projection unbound as an exporter writes
// them (reshape to [1, B, S, 3, E], the 3 moved to the front, the unit
// dimension dropped, Q, K and V each a gather of one constant index, then
// the heads split by a reshape and a transpose): where every step ends in
// a reader that takes its operand strided (the GPU's attention), each one
// is a view of the projection's storage, and nothing is copied. Where the
// keys are also added to something (a reader that wants them dense), the
// permuted projection is not a view, and only its slices are.
// GPU-LABEL: func.func @unbound_heads
// GPU: tfm.linear {{.*}}{tfm.plan = [#tfm.arena<offset = [[P:[0-9]+]]>]}
// GPU-NEXT: tfm.reshape {{.*}}{tfm.plan = [#tfm.view<operand = 0, offset = 0, strides = [1, 96, 24, 8, 1]>]}
// GPU-NEXT: tfm.transpose {{.*}}{tfm.plan = [#tfm.view<operand = 0, offset = 0, strides = [8, 96, 24, 1, 1]>]}
// GPU-NEXT: tfm.reshape {{.*}}{tfm.plan = [#tfm.view<operand = 0, offset = 0, strides = [8, 96, 24, 1]>]}
// GPU: tfm.gather {{.*}}{tfm.plan = [#tfm.view<operand = 0, offset = 0, strides = [96, 24, 1]>]}
// GPU-NEXT: tfm.gather {{.*}}{tfm.plan = [#tfm.view<operand = 0, offset = 8, strides = [96, 24, 1]>]}
// GPU-NEXT: tfm.gather {{.*}}{tfm.plan = [#tfm.view<operand = 0, offset = 16, strides = [96, 24, 1]>]}
// GPU: tfm.transpose {{.*}}{tfm.plan = [#tfm.view<operand = 0, offset = 8, strides = [96, 4, 24, 1]>]}
// GPU-LABEL: func.func @unbound_heads_read_densely
// GPU: tfm.transpose {{.*}}permutation = [3, 1, 2, 0, 4]{{.*}}{tfm.plan = [#tfm.arena<offset = {{[0-9]+}}>]}
// GPU: tfm.gather {{.*}}{tfm.plan = [#tfm.view<operand = 0, offset = 0, strides = [32, 8, 1]>]}
// GPU-NEXT: tfm.gather {{.*}}{tfm.plan = [#tfm.arena<offset = {{[0-9]+}}>]}
func.func @unbound_heads(%x: tensor<2x4x8xf32>, %w: tensor<24x8xf32>) -> tensor<2x2x4x4xf32> {
  %p = tfm.linear %x, %w : (tensor<2x4x8xf32>, tensor<24x8xf32>) -> tensor<2x4x24xf32>
  %r = tfm.reshape %p : tensor<2x4x24xf32> -> tensor<1x2x4x3x8xf32>
  %t = tfm.transpose %r permutation = [3, 1, 2, 0, 4] : tensor<1x2x4x3x8xf32> -> tensor<3x2x4x1x8xf32>
  %u = tfm.reshape %t : tensor<3x2x4x1x8xf32> -> tensor<3x2x4x8xf32>
  %c0 = arith.constant dense<0> : tensor<i64>
  %c1 = arith.constant dense<1> : tensor<i64>
  %c2 = arith.constant dense<2> : tensor<i64>
  %q = tfm.gather %u, %c0 axis = 0 : (tensor<3x2x4x8xf32>, tensor<i64>) -> tensor<2x4x8xf32>
  %k = tfm.gather %u, %c1 axis = 0 : (tensor<3x2x4x8xf32>, tensor<i64>) -> tensor<2x4x8xf32>
  %v = tfm.gather %u, %c2 axis = 0 : (tensor<3x2x4x8xf32>, tensor<i64>) -> tensor<2x4x8xf32>
  %qh = tfm.reshape %q : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %kh = tfm.reshape %k : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %vh = tfm.reshape %v : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %qt = tfm.transpose %qh permutation = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %kt = tfm.transpose %kh permutation = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %vt = tfm.transpose %vh permutation = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %o = tfm.attention %qt, %kt, %vt : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  return %o : tensor<2x2x4x4xf32>
}

func.func @unbound_heads_read_densely(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %y: tensor<2x4x8xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x4x8xf32>) {
  %p = tfm.linear %x, %w : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %r = tfm.reshape %p : tensor<2x4x16xf32> -> tensor<1x2x4x2x8xf32>
  %t = tfm.transpose %r permutation = [3, 1, 2, 0, 4] : tensor<1x2x4x2x8xf32> -> tensor<2x2x4x1x8xf32>
  %u = tfm.reshape %t : tensor<2x2x4x1x8xf32> -> tensor<2x2x4x8xf32>
  %c0 = arith.constant dense<0> : tensor<i64>
  %c1 = arith.constant dense<1> : tensor<i64>
  %q = tfm.gather %u, %c0 axis = 0 : (tensor<2x2x4x8xf32>, tensor<i64>) -> tensor<2x4x8xf32>
  %k = tfm.gather %u, %c1 axis = 0 : (tensor<2x2x4x8xf32>, tensor<i64>) -> tensor<2x4x8xf32>
  %qh = tfm.reshape %q : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %kh = tfm.reshape %k : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %qt = tfm.transpose %qh permutation = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %kt = tfm.transpose %kh permutation = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %o = tfm.attention %qt, %kt, %kt : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %s = tfm.add %k, %y : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o, %s : tensor<2x2x4x4xf32>, tensor<2x4x8xf32>
}
