// Convolutions the CUDA target runs as a GEMM over their patches
// (cuda-conv.test): with bias, strides and uneven pads over two images;
// grouped and dilated; and the 3 x 3 "same" convolution of the first input.
func.func @infer(%x: tensor<2x4x9x7xf32> {tfm.name = "x"}, %x1: tensor<1x6x8x8xf32> {tfm.name = "x1"}) -> (tensor<2x6x5x4xf32>, tensor<1x4x4x4xf32>, tensor<2x6x9x7xf32>) {
  %w = arith.constant dense<[[[[0.5, -0.25, 0.125], [1.0, -1.0, 0.75], [0.0, 0.25, -0.5]], [[1.0, 0.5, -0.5], [0.25, 0.0, -0.75], [0.5, -1.0, 0.125]], [[-0.125, 0.25, 1.0], [-0.5, 0.5, 0.0], [-0.25, 0.75, 1.0]], [[0.0, 1.0, 0.25], [-0.25, 0.75, 0.5], [-1.0, 0.125, 0.5]]]]> : tensor<1x4x3x3xf32>
  %w6 = tfm.concat %w, %w, %w, %w, %w, %w axis = 0 : (tensor<1x4x3x3xf32>, tensor<1x4x3x3xf32>, tensor<1x4x3x3xf32>, tensor<1x4x3x3xf32>, tensor<1x4x3x3xf32>, tensor<1x4x3x3xf32>) -> tensor<6x4x3x3xf32>
  %b = arith.constant dense<[0.1, -0.2, 0.3, -0.4, 0.5, -0.6]> : tensor<6xf32>
  %y = tfm.conv2d %x, %w6, %b strides = [2, 2] pads = [1, 2, 1, 0] dilations = [1, 1] group = 1 : (tensor<2x4x9x7xf32>, tensor<6x4x3x3xf32>, tensor<6xf32>) -> tensor<2x6x5x4xf32>
  %wg = arith.constant dense<0.5> : tensor<4x3x2x2xf32>
  %z = tfm.conv2d %x1, %wg strides = [2, 2] pads = [1, 1, 1, 1] dilations = [2, 2] group = 2 : (tensor<1x6x8x8xf32>, tensor<4x3x2x2xf32>) -> tensor<1x4x4x4xf32>
  %v = tfm.conv2d %x, %w6 strides = [1, 1] pads = [1, 1, 1, 1] dilations = [1, 1] group = 1 : (tensor<2x4x9x7xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x9x7xf32>
  return %y, %z, %v : tensor<2x6x5x4xf32>, tensor<1x4x4x4xf32>, tensor<2x6x9x7xf32>
}
