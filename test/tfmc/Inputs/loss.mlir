// Cross-entropy is lowered only inside training graphs (issue 6).
func.func @infer(%logits: tensor<4x8xf32>, %labels: tensor<4xi64>) -> tensor<f32> {
  %l = tfm.cross_entropy %logits, %labels : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
