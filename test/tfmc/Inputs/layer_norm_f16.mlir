// The CPU backend's layer norm is f32 only.
func.func @infer(%x: tensor<2x8xf16>, %g: tensor<8xf16>) -> tensor<2x8xf16> {
  %y = tfm.layer_norm %x, %g : (tensor<2x8xf16>, tensor<8xf16>) -> tensor<2x8xf16>
  return %y : tensor<2x8xf16>
}
