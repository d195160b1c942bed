// Integer division where the hardware would trap (x / 0, INT_MIN / -1) and
// where signedness decides the quotient (ui8 200 / 3 = 66, not -18 / 3).
func.func @infer(%a: tensor<4xi32>, %b: tensor<4xi32>, %c: tensor<3xui8>,
                 %d: tensor<3xui8>) -> (tensor<4xi32>, tensor<3xui8>) {
  %q = tfm.div %a, %b : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %u = tfm.div %c, %d : (tensor<3xui8>, tensor<3xui8>) -> tensor<3xui8>
  return %q, %u : tensor<4xi32>, tensor<3xui8>
}
