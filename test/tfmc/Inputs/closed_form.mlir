// softmax of [0, ln 3] is [1/4, 3/4]; relu of [-1, 2] is [0, 2].
func.func @infer() -> (tensor<2xf32> {tfm.name = "probs"}, tensor<2xf32>) {
  %s = arith.constant dense<[0.0, 1.0986122886681098]> : tensor<2xf32>
  %x = arith.constant dense<[-1.0, 2.0]> : tensor<2xf32>
  %0 = tfm.softmax %s : tensor<2xf32>
  %1 = tfm.relu %x : tensor<2xf32>
  return %0, %1 : tensor<2xf32>, tensor<2xf32>
}
