// Smoothed cross-entropy that ignores label 1 (random labels hit it).
func.func @infer(%logits: tensor<3x5x4xf32>, %labels: tensor<3x5xi64>) -> tensor<f32> {
  %l = tfm.cross_entropy %logits, %labels {label_smoothing = 0.2, ignore_index = 1 : i64} : (tensor<3x5x4xf32>, tensor<3x5xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
