// RUN: tfm-opt %s --tfm-approximate-math | FileCheck %s

// f32 erf and tanh become arithmetic (polynomials, clamps and selects) that
// the loop vectorizer can widen; f64 keeps its math ops, for libm.
// CHECK-LABEL: func.func @glue
// CHECK-NOT: math.erf %{{.+}} : f32
// CHECK-NOT: math.tanh %{{.+}} : f32
// CHECK: math.erf %{{.+}} : f64
// CHECK: math.tanh %{{.+}} : f64
func.func @glue(%x: f32, %y: f64) -> (f32, f32, f64, f64) {
  %0 = math.erf %x : f32
  %1 = math.tanh %x : f32
  %2 = math.erf %y : f64
  %3 = math.tanh %y : f64
  return %0, %1, %2, %3 : f32, f32, f64, f64
}

// RUN: tfm-opt %s --tfm-approximate-math=all | FileCheck %s --check-prefix=ALL
// With `all` (GPU kernels, which have no libm or libdevice): the f32 log
// of a widened f32 value is approximated, then widened; an f64 log of an
// f64 value is left as it is (and the module then names the function it
// lacks).
// ALL-LABEL: func.func @widened
// ALL-NOT: math.log
// ALL: arith.extf %{{.+}} : f32 to f64
// ALL: math.log %{{.+}} : f64
// ALL-NOT: math.log
func.func @widened(%x: f32, %y: f64) -> (f64, f64) {
  %w = arith.extf %x : f32 to f64
  %0 = math.log %w : f64
  %1 = math.log %y : f64
  return %0, %1 : f64, f64
}
