// A [2, 8] tensor of fives: as an attention mask, one that the model's
// (1 - mask) * float's minimum turns to +inf.
func.func @infer() -> (tensor<2x8xi64> {tfm.name = "fives"}) {
  %f = arith.constant dense<5> : tensor<2x8xi64>
  return %f : tensor<2x8xi64>
}
