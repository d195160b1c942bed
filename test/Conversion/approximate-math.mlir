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
