// RUN: tfm-opt %s -tfm-emulate-gpu-kernels -split-input-file -verify-diagnostics

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

// -----

// Tests that a loop around a barrier whose trip count depends on the thread
// (a deadlock on a GPU) is refused.
func.func @divergent_loop() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    // expected-error @below {{runs around a gpu.barrier with bounds that may differ between threads}}
    scf.for %k = %c0 to %tx step %c1 {
      gpu.barrier
    }
    gpu.terminator
  }
  return
}

// -----

// Tests that values carried around a barrier are refused for now.
func.func @carried_around_a_barrier() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    // expected-error @below {{carries values around a gpu.barrier}}
    %r = scf.for %k = %c0 to %c4 step %c1 iter_args(%a = %c0) -> index {
      gpu.barrier
      scf.yield %a : index
    }
    gpu.terminator
  }
  return
}
