// top_k's order where a plain comparison has none: NaN counts as larger
// than every number, and equal elements keep their order.
func.func @infer(%x: tensor<2x5xf32>) -> (tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x2xf32>, tensor<2x2xi64>) {
  %v, %i = tfm.top_k %x k = 3 axis = 1 : tensor<2x5xf32> -> tensor<2x3xf32>, tensor<2x3xi64>
  %s, %j = tfm.top_k %x k = 2 axis = -1 smallest : tensor<2x5xf32> -> tensor<2x2xf32>, tensor<2x2xi64>
  return %v, %i, %s, %j : tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x2xf32>, tensor<2x2xi64>
}
