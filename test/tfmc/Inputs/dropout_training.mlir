// Dropout in training mode: the compiled mask must be the interpreter's,
// since both draw u(stream, i) from CounterRNG.h.
func.func @infer(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %t = arith.constant dense<12> : tensor<i64>
  %y = tfm.dropout %x training step %t {rate = 3.0e-01, seed = 7 : i64} : tensor<4x8xf32>
  %z = tfm.dropout %y training {rate = 5.0e-01, seed = 3 : i64} : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}
