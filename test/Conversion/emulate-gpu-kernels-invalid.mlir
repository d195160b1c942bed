// RUN: tfm-opt %s -tfm-emulate-gpu-kernels -verify-diagnostics

// Tests that a barrier the emulation cannot run in phases is refused,
// naming the op that holds it.
func.func @barrier_in_a_branch(%p: i1) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    // expected-error @below {{holds a gpu.barrier inside its regions}}
    scf.if %p {
      gpu.barrier
    }
    gpu.terminator
  }
  return
}
