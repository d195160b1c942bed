func.func @infer(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = tfm.relu %x : tensor<2x3xf32>
  return %0 tensor<2x3xf32>
}
