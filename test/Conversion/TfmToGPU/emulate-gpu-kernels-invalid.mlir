// RUN: tfm-opt %s -tfm-emulate-gpu-kernels -split-input-file -verify-diagnostics

// Tests that a barrier the emulation cannot run in phases is refused,
// naming the op that holds it.
func.func @barrier_in_a_branch(%p: i1) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    // expected-error @below {{holds a gpu.barrier or a warp collective inside its regions}}
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
    // expected-error @below {{runs around a gpu.barrier or a warp collective with bounds that may differ between threads}}
    scf.for %k = %c0 to %tx step %c1 {
      gpu.barrier
    }
    gpu.terminator
  }
  return
}

// -----

// Tests that an mma.sync of a form the kernels do not use (f16
// accumulators) is refused rather than run with the wrong fragments.
func.func @mma_into_f16(%a: vector<4x2xf16>, %b: vector<2x2xf16>, %c: vector<2x2xf16>) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    // expected-error @below {{is not one of the emulated forms}}
    %d = nvgpu.mma.sync(%a, %b, %c) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf16>) -> vector<2x2xf16>
    gpu.terminator
  }
  return
}

// -----

// Tests that a GPU op the emulation has no meaning for is named.
func.func @subgroup_id(%out: memref<32xindex>) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    // expected-error @below {{is not run by the emulation of GPU kernels}}
    %w = gpu.subgroup_id : index
    memref.store %w, %out[%tx] : memref<32xindex>
    gpu.terminator
  }
  return
}


// -----

// Tests that an asynchronous copy into a stage chosen per iteration by a
// subview is refused: a wait completes copies by their indices into memrefs
// that stay the same for the launch.
func.func @async_copy_into_a_subview(%src: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%stages : memref<2x4xf32, #gpu.address_space<workgroup>>) {
    scf.for %k = %c0 to %c2 step %c1 {
      %stage = memref.subview %stages[%k, 0] [1, 4] [1, 1] : memref<2x4xf32, #gpu.address_space<workgroup>> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
      // expected-error @below {{copies from or to a memref that differs between threads or iterations}}
      %cp = nvgpu.device_async_copy %src[%c0], %stage[%c0], 4 : memref<64xf32> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
      %g = nvgpu.device_async_create_group %cp
      nvgpu.device_async_wait %g
    }
    gpu.terminator
  }
  return
}

// -----

// Tests that a copy's token carried around a loop is refused: the
// emulation follows tokens into groups and waits only.
func.func @async_token_carried(%src: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%buf : memref<4xf32, #gpu.address_space<workgroup>>) {
    %cp0 = nvgpu.device_async_copy %src[%c0], %buf[%c0], 4 : memref<64xf32> to memref<4xf32, #gpu.address_space<workgroup>>
    %g0 = nvgpu.device_async_create_group %cp0
    // expected-error @below {{takes an asynchronous copy's token}}
    %last = scf.for %k = %c0 to %c2 step %c1 iter_args(%g = %g0) -> (!nvgpu.device.async.token) {
      nvgpu.device_async_wait %g
      %cp = nvgpu.device_async_copy %src[%k], %buf[%c0], 4 : memref<64xf32> to memref<4xf32, #gpu.address_space<workgroup>>
      %next = nvgpu.device_async_create_group %cp
      scf.yield %next : !nvgpu.device.async.token
    }
    gpu.terminator
  }
  return
}

// -----

// Tests that an mbarrier wait that not every thread may reach is refused:
// the emulation runs a wait as a barrier of the whole block.
!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>
func.func @wait_in_a_branch(%p: i1) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %c0 = arith.constant 0 : index
    %ticks = arith.constant 1000 : index
    %even = arith.constant false
    %bars = nvgpu.mbarrier.create -> !bars
    nvgpu.mbarrier.init %bars[%c0], %c1 : !bars
    scf.if %p {
      // expected-error @below {{waits inside a region that not every thread may enter}}
      nvgpu.mbarrier.try_wait.parity %bars[%c0], %even, %ticks : !bars
    }
    gpu.terminator
  }
  return
}

// -----

// Tests that an arrival whose token is used is refused: the emulation runs
// waits by phase parity.
!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>
func.func @token_used() {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %c0 = arith.constant 0 : index
    %bars = nvgpu.mbarrier.create -> !bars
    nvgpu.mbarrier.init %bars[%c0], %c1 : !bars
    // expected-error @below {{has its token used}}
    %token = nvgpu.mbarrier.arrive %bars[%c0] : !bars -> !nvgpu.mbarrier.token
    %done = nvgpu.mbarrier.test.wait %bars[%c0], %token : !bars, !nvgpu.mbarrier.token
    gpu.terminator
  }
  return
}

// -----

// Tests that dynamic shared memory of a size only known at run time is
// refused: the emulation allocates it once per launch.
func.func @dynamic_size(%bytes: i32) {
  %c1 = arith.constant 1 : index
  // expected-error @below {{takes dynamic shared memory of a size that is not a constant}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             dynamic_shared_memory_size %bytes {
    gpu.terminator
  }
  return
}

// -----

// Tests that a TMA load whose tensor map is not a pointer made outside the
// launch is refused, naming the load.
!map = !nvgpu.tensormap.descriptor<tensor = memref<8x32xf32, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>
func.func @map_argument(%map: !map) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%tile : memref<8x32xf32, #gpu.address_space<workgroup>>) {
    %c0 = arith.constant 0 : index
    %bars = nvgpu.mbarrier.create -> !bars
    // expected-error @below {{reads a tensor map that is not a pointer made outside the launch}}
    nvgpu.tma.async.load %map[%c0, %c0], %bars[%c0] to %tile : !map, !bars -> memref<8x32xf32, #gpu.address_space<workgroup>>
    gpu.terminator
  }
  return
}
