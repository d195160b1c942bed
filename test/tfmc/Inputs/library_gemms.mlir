// A linear with bias and ReLU, and a matmul of a transposed operand: GEMMs
// the CUDA target hands whole to the GEMM library (cuda-gemm.test).
func.func @infer(%x: tensor<2x4x8xf32> {tfm.name = "x"}, %a: tensor<3x4x5xf32> {tfm.name = "a"}, %c: tensor<3x4x6xf32> {tfm.name = "c"}) -> (tensor<2x4x6xf32>, tensor<3x5x6xf32>) {
  %w = arith.constant dense<[[0.5, -0.25, 0.125, 1.0, -1.0, 0.75, 0.0, 0.25], [1.0, 0.5, -0.5, 0.25, 0.0, -0.75, 0.5, -1.0], [-0.125, 0.25, 1.0, -0.5, 0.5, 0.0, -0.25, 0.75], [0.0, 1.0, 0.25, -0.25, 0.75, 0.5, -1.0, 0.125], [0.75, -0.5, 0.0, 0.5, -0.125, 1.0, 0.25, -0.25], [-1.0, 0.125, 0.5, 0.0, 0.25, -0.5, 0.75, 1.0]]> : tensor<6x8xf32>
  %b = arith.constant dense<[0.1, -0.2, 0.3, -0.4, 0.5, -0.6]> : tensor<6xf32>
  %y = tfm.linear %x, %w, %b activation = relu : (tensor<2x4x8xf32>, tensor<6x8xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
  %z = tfm.matmul %a, %c transpose_lhs : (tensor<3x4x5xf32>, tensor<3x4x6xf32>) -> tensor<3x5x6xf32>
  return %y, %z : tensor<2x4x6xf32>, tensor<3x5x6xf32>
}
