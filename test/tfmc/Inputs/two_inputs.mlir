func.func @infer(%ids: tensor<2x3xi64> {tfm.name = "ids"}, %x: tensor<2x3x4xf32> {tfm.name = "x"}) -> tensor<2x3x4xf32> {
  %table = arith.constant dense<1.0> : tensor<5x4xf32>
  %e = tfm.embedding %table, %ids : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %0 = tfm.add %e, %x : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}
