// One op for each kernel the GPU target chooses between, and for each
// reason an op misses a better one (test/tfmc/gpu-kernel-report.test).
func.func @infer(%x: tensor<2x8x16xf32> {tfm.name = "x"}, %w: tensor<32x16xf32> {tfm.name = "w"},
                 %a: tensor<2x4x8xf32> {tfm.name = "a"}, %b: tensor<1x8x5xf32> {tfm.name = "b"},
                 %q: tensor<2x4x8x16xf32> {tfm.name = "q"}, %s: tensor<6x40xf32> {tfm.name = "s"},
                 %t: tensor<4x16x40xf32> {tfm.name = "t"})
    -> (tensor<2x8x32xf32>, tensor<2x4x5xf32>, tensor<2x4x8x16xf32>, tensor<6x40xf32>,
        tensor<6x40xf32>, tensor<40xf32>, tensor<6x1xf32>, tensor<2x4xf32>, tensor<40xf32>,
        tensor<4x40xf32>) {
  %y = tfm.linear %x, %w : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %m = tfm.matmul %a, %b : (tensor<2x4x8xf32>, tensor<1x8x5xf32>) -> tensor<2x4x5xf32>
  %o = tfm.attention %q, %q, %q causal : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %p = tfm.softmax %s : tensor<6x40xf32>
  %c = tfm.softmax %s axis = 0 : tensor<6x40xf32>
  %first = tfm.reduce sum %s axes = [0] : tensor<6x40xf32> -> tensor<40xf32>
  %row = tfm.reduce max %s axes = [1] keepdims : tensor<6x40xf32> -> tensor<6x1xf32>
  %short = tfm.reduce sum %a axes = [2] : tensor<2x4x8xf32> -> tensor<2x4xf32>
  %columns = tfm.reduce sum %t axes = [0, 1] : tensor<4x16x40xf32> -> tensor<40xf32>
  %middle = tfm.reduce sum %t axes = [1] : tensor<4x16x40xf32> -> tensor<4x40xf32>
  return %y, %m, %o, %p, %c, %first, %row, %short, %columns, %middle
      : tensor<2x8x32xf32>, tensor<2x4x5xf32>, tensor<2x4x8x16xf32>, tensor<6x40xf32>,
        tensor<6x40xf32>, tensor<40xf32>, tensor<6x1xf32>, tensor<2x4xf32>, tensor<40xf32>,
        tensor<4x40xf32>
}
