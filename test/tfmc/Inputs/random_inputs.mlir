// A BERT-like embedding and attention in the idiom of exported models: token
// ids and token types index tables of 50 and 2 rows, and an integer
// attention mask becomes an additive one, (1 - mask) * float's minimum, as
// Hugging Face's models write it. Random token types of 2 or more fail the
// index check, and a random mask of 2 or more overflows to +inf and turns
// the softmax to NaN.
func.func @infer(%ids: tensor<2x8xi64> {tfm.name = "input_ids"},
                 %types: tensor<2x8xi64> {tfm.name = "token_type_ids"},
                 %mask: tensor<2x8xi64> {tfm.name = "attention_mask"})
    -> (tensor<2x8x8xf32> {tfm.name = "probs"}) {
  %words = arith.constant dense<0.125> : tensor<50x4xf32>
  %kinds = arith.constant dense<0.5> : tensor<2x4xf32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %min = arith.constant dense<-3.40282347E+38> : tensor<f32>
  %e = tfm.embedding %words, %ids : (tensor<50x4xf32>, tensor<2x8xi64>) -> tensor<2x8x4xf32>
  %t = tfm.embedding %kinds, %types : (tensor<2x4xf32>, tensor<2x8xi64>) -> tensor<2x8x4xf32>
  %x = tfm.add %e, %t : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %m3 = tfm.reshape %mask : tensor<2x8xi64> -> tensor<2x1x8xi64>
  %mf = tfm.cast %m3 : tensor<2x1x8xi64> -> tensor<2x1x8xf32>
  %keep = tfm.sub %one, %mf : (tensor<f32>, tensor<2x1x8xf32>) -> tensor<2x1x8xf32>
  %bias = tfm.mul %keep, %min : (tensor<2x1x8xf32>, tensor<f32>) -> tensor<2x1x8xf32>
  %s = tfm.matmul %x, %x transpose_rhs : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x8xf32>
  %b = tfm.add %s, %bias : (tensor<2x8x8xf32>, tensor<2x1x8xf32>) -> tensor<2x8x8xf32>
  %p = tfm.softmax %b : tensor<2x8x8xf32>
  return %p : tensor<2x8x8xf32>
}
