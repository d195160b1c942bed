// tiny_train.mlir with dropout before its linear layer, compiled with
// --train for the data-parallel tests (DataParallelTest.cpp): every rank
// must draw its own masks.
func.func @infer(%x: tensor<4x3xf32> {tfm.name = "x"}) -> (tensor<4x5xf32> {tfm.name = "logits"}) {
  %w = tfm.parameter "w" {initial_value = dense<[[0.1, -0.2, 0.3], [0.0, 0.5, -0.1], [0.2, 0.2, 0.2], [-0.3, 0.1, 0.0], [0.4, -0.4, 0.1]]> : tensor<5x3xf32>} : tensor<5x3xf32>
  %b = tfm.parameter "b" {initial_value = dense<[0.1, 0.0, -0.1, 0.2, 0.0]> : tensor<5xf32>} : tensor<5xf32>
  %d = tfm.dropout %x training {rate = 0.5 : f64, seed = 3 : i64} : tensor<4x3xf32>
  %y = tfm.linear %d, %w, %b : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}
