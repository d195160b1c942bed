// RUN: tfm-opt %s -split-input-file --tfm-fuse-gated-mlp=remarks=true -verify-diagnostics | FileCheck %s
// RUN: %python %S/Inputs/check_pass_equivalence.py %tfm_opt_bin %tfmc_bin --tfm-fuse-gated-mlp %s %t | FileCheck %s --check-prefix=EQUIV
// EQUIV: functions equivalent after --tfm-fuse-gated-mlp, also compiled

// Tests Llama's MLP as exported: gate and up are matmuls by transposed
// constant weights, SiLU is x · sigmoid(x) with the sigmoid as
// 1 / (1 + exp(-x)), and the product feeds the down projection. The gate's
// rows come first in the packed weight.
// CHECK-LABEL: func.func @swiglu
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: %[[W:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], [0.000000e+00, 1.000000e+00, 0.000000e+00, 0.000000e+00], [0.000000e+00, 0.000000e+00, 1.000000e+00, 1.000000e+00], [5.000000e-01, 5.000000e-01, 5.000000e-01, 5.000000e-01], [-1.000000e+00, 0.000000e+00, 1.000000e+00, 0.000000e+00], [2.000000e+00, 0.000000e+00, 0.000000e+00, -1.000000e+00]]> : tensor<6x4xf32>
// CHECK: %[[G:.+]] = tfm.gated_linear %[[X]], %[[W]] activation = silu : (tensor<2x3x4xf32>, tensor<6x4xf32>) -> tensor<2x3x3xf32>
// CHECK: tfm.linear %[[G]]
func.func @swiglu(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %one = arith.constant dense<1.0> : tensor<f32>
  %wg = arith.constant dense<[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]> : tensor<4x3xf32>
  %wu = arith.constant dense<[[0.5, -1.0, 2.0], [0.5, 0.0, 0.0], [0.5, 1.0, 0.0], [0.5, 0.0, -1.0]]> : tensor<4x3xf32>
  %wd = arith.constant dense<0.25> : tensor<3x4xf32>
  %g = tfm.matmul %x, %wg : (tensor<2x3x4xf32>, tensor<4x3xf32>) -> tensor<2x3x3xf32>
  %n = arith.negf %g : tensor<2x3x3xf32>
  %e = math.exp %n : tensor<2x3x3xf32>
  %d = tfm.add %e, %one : (tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32>
  %s = tfm.div %one, %d : (tensor<f32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  %a = tfm.mul %g, %s : (tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  %u = tfm.matmul %x, %wu : (tensor<2x3x4xf32>, tensor<4x3xf32>) -> tensor<2x3x3xf32>
  // expected-remark@+1 {{tfm-fuse-gated-mlp: fused}}
  %p = tfm.mul %a, %u : (tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  %y = tfm.matmul %p, %wd : (tensor<2x3x3xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// -----

// Tests GeGLU with GELU written with Erf, the up projection on the left of
// the product, and biases on both projections (packed in the same order as
// the weights).
// CHECK-LABEL: func.func @geglu_with_bias
// CHECK: %[[B:.+]] = arith.constant dense<[1.000000e-01, 2.000000e-01, -1.000000e-01, -2.000000e-01]> : tensor<4xf32>
// CHECK: tfm.gated_linear %arg0, %{{.+}}, %[[B]] activation = gelu : (tensor<3x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<3x2xf32>
// CHECK-NOT: tfm.mul
func.func @geglu_with_bias(%x: tensor<3x4xf32>) -> tensor<3x2xf32> {
  %half = arith.constant dense<0.5> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %rt2 = arith.constant dense<1.41421354> : tensor<f32>
  %wg = arith.constant dense<[[1.0, 0.0, -1.0, 0.5], [0.0, 2.0, 0.0, -0.5]]> : tensor<2x4xf32>
  %bg = arith.constant dense<[0.1, 0.2]> : tensor<2xf32>
  %wu = arith.constant dense<[[0.5, 0.5, 0.5, 0.5], [1.0, -1.0, 1.0, -1.0]]> : tensor<2x4xf32>
  %bu = arith.constant dense<[-0.1, -0.2]> : tensor<2xf32>
  %g = tfm.linear %x, %wg, %bg : (tensor<3x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %u = tfm.linear %x, %wu, %bu : (tensor<3x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %q = tfm.div %g, %rt2 : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  %r = math.erf %q : tensor<3x2xf32>
  %t = tfm.add %r, %one : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  %h = tfm.mul %g, %half : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
  %a = tfm.mul %h, %t : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  // expected-remark@+1 {{tfm-fuse-gated-mlp: fused}}
  %p = tfm.mul %u, %a : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  return %p : tensor<3x2xf32>
}

// -----

// Tests that a training graph's gated MLP, whose weights are parameters
// (function arguments here), is a reported miss and left as it was.
// CHECK-LABEL: func.func @parameters
// CHECK-NOT: tfm.gated_linear
func.func @parameters(%x: tensor<3x4xf32>, %wg: tensor<2x4xf32>, %wu: tensor<2x4xf32>) -> tensor<3x2xf32> {
  %g = tfm.linear %x, %wg : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  %u = tfm.linear %x, %wu : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  %a = tfm.relu %g : tensor<3x2xf32>
  // expected-remark@+1 {{tfm-fuse-gated-mlp: missed: a projection's weight is not a constant (a training graph's parameter), so the two cannot be packed at compile time}}
  %p = tfm.mul %a, %u : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  return %p : tensor<3x2xf32>
}

// -----

// Tests that a gate whose activation has another reader is a reported
// miss: the fused op would drop the value that reader needs.
// CHECK-LABEL: func.func @activation_read_twice
// CHECK-NOT: tfm.gated_linear
func.func @activation_read_twice(%x: tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>) {
  %wg = arith.constant dense<0.5> : tensor<2x4xf32>
  %wu = arith.constant dense<-0.5> : tensor<2x4xf32>
  %g = tfm.linear %x, %wg : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  %u = tfm.linear %x, %wu : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  %a = tfm.relu %g : tensor<3x2xf32>
  // expected-remark@+1 {{tfm-fuse-gated-mlp: missed: the gate, its activation or the up projection has other readers, which need it unfused}}
  %p = tfm.mul %a, %u : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  return %p, %a : tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// Tests that an activation times something that is not a projection (a
// plain SiLU's own product, a mask) is not a site.
// CHECK-LABEL: func.func @not_a_gate
// CHECK-NOT: tfm.gated_linear
func.func @not_a_gate(%x: tensor<3x4xf32>, %m: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %w = arith.constant dense<0.5> : tensor<2x4xf32>
  %g = tfm.linear %x, %w : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
  %a = tfm.relu %g : tensor<3x2xf32>
  %p = tfm.mul %a, %m : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  return %p : tensor<3x2xf32>
}

// -----

// Tests a training graph's form: the exporter transposes each parameter
// for its matmul, which the linear recognition reads as a linear of the
// parameter; the two still cannot be packed, a reported miss.
// CHECK-LABEL: func.func @matmuls_by_parameters
// CHECK-NOT: tfm.gated_linear
// CHECK: tfm.linear %{{.*}}, %[[WG:.*]] :
// CHECK-NOT: tfm.gated_linear
func.func @matmuls_by_parameters(%x: tensor<3x4xf32>) -> tensor<3x2xf32> {
  %wg = tfm.parameter "gate" {initial_value = dense<0.5> : tensor<2x4xf32>} : tensor<2x4xf32>
  %wu = tfm.parameter "up" {initial_value = dense<-0.5> : tensor<2x4xf32>} : tensor<2x4xf32>
  %tg = tfm.transpose %wg permutation = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
  %tu = tfm.transpose %wu permutation = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
  %g = tfm.matmul %x, %tg : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %u = tfm.matmul %x, %tu : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %a = tfm.relu %g : tensor<3x2xf32>
  // expected-remark@+1 {{tfm-fuse-gated-mlp: missed: a projection's weight is not a constant (a training graph's parameter), so the two cannot be packed at compile time}}
  %p = tfm.mul %a, %u : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  return %p : tensor<3x2xf32>
}

// -----

// Tests that matmuls by parameters in [K, N] order, which no linear reads
// without a copy, are still a site, and a reported miss naming why.
// CHECK-LABEL: func.func @matmuls_by_untransposed_parameters
// CHECK-NOT: tfm.gated_linear
func.func @matmuls_by_untransposed_parameters(%x: tensor<3x4xf32>) -> tensor<3x2xf32> {
  %wg = tfm.parameter "gate" {initial_value = dense<0.5> : tensor<4x2xf32>} : tensor<4x2xf32>
  %wu = tfm.parameter "up" {initial_value = dense<-0.5> : tensor<4x2xf32>} : tensor<4x2xf32>
  %g = tfm.matmul %x, %wg : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %u = tfm.matmul %x, %wu : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %a = tfm.relu %g : tensor<3x2xf32>
  // expected-remark@+1 {{tfm-fuse-gated-mlp: missed: a projection is a matmul that is not a linear (its weight is neither a constant nor transposed)}}
  %p = tfm.mul %a, %u : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  return %p : tensor<3x2xf32>
}
