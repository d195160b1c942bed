// Dropout in training mode belongs in training graphs (issue 6).
func.func @infer(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = tfm.dropout %x training {rate = 1.0e-01, seed = 7 : i64} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
