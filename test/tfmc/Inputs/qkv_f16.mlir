// An f16 packed projection: the portable (linalg) path, rows by part.
func.func @infer(%x: tensor<2x3x8xf16>, %w: tensor<12x8xf16>, %b: tensor<12xf16>) -> (tensor<2x3x4xf16>, tensor<2x3x4xf16>, tensor<2x3x4xf16>) {
  %q, %k, %v = tfm.qkv_projection %x, %w, %b sizes = [4, 4, 4] : (tensor<2x3x8xf16>, tensor<12x8xf16>, tensor<12xf16>) -> (tensor<2x3x4xf16>, tensor<2x3x4xf16>, tensor<2x3x4xf16>)
  return %q, %k, %v : tensor<2x3x4xf16>, tensor<2x3x4xf16>, tensor<2x3x4xf16>
}
