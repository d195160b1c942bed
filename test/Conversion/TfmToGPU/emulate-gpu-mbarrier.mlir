// Tests that tfm-emulate-gpu-kernels runs mbarriers with their phases: a
// wait for a phase's parity ends once every arrival the phase counts has
// happened, and a wait that nothing can end stops the run with a message
// where a GPU would hang. The expected values are worked out by hand.
// RUN: tfm-opt %s -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// The mutations, each of which a correct emulation must expose: waiting
// for the parity of the iteration rather than of the barrier's own phase
// (the second barrier's first wait then waits for its phase 1, which
// never completes), a barrier that counts one arrival more than the block
// makes, and no wait at all (a thread then reads its neighbour's element
// before the neighbour writes it).
// RUN: sed -e 's/index_cast %round :/index_cast %k :/' %s | tfm-opt -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | not --crash stdbuf -o0 mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils 2>&1 | FileCheck %s --check-prefix=HANG
// RUN: sed -e 's/nvgpu.mbarrier.init %bars\[%b\], %%sx/nvgpu.mbarrier.init %bars[%b], %c65/' %s | tfm-opt -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | not --crash stdbuf -o0 mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils 2>&1 | FileCheck %s --check-prefix=HANG
// RUN: sed -e '/the NOWAIT run deletes/d' %s | tfm-opt -tfm-emulate-gpu-kernels | mlir-opt -convert-vector-to-scf -lower-affine -convert-scf-to-cf -convert-vector-to-llvm -expand-strided-metadata -finalize-memref-to-llvm -convert-math-to-llvm -convert-arith-to-llvm -convert-index-to-llvm -convert-cf-to-llvm -convert-func-to-llvm -reconcile-unrealized-casts | mlir-cpu-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s --check-prefix=RACE
// HANG: tfm-emulate-gpu-kernels: an nvgpu.mbarrier.try_wait.parity waits for a phase that nothing left in the block can complete

// Six rounds over two barriers and two buffers of 64 floats: in round k,
// thread t writes 100 k + t into buffer k mod 2, arrives on barrier k mod
// 2, waits for that barrier's phase k / 2 (parity (k / 2) mod 2), and
// adds up the element thread t + 1 wrote: 100 (0 + ... + 5) + 6 ((t + 1)
// mod 64). A buffer is written again two rounds later, after a wait that
// every thread's arrival of the round between ends, so after every thread
// has read it.
// CHECK-LABEL: rounds
// CHECK-NEXT: ( 1506, 1512, 1518, 1524, 1530, 1536, 1542, 1548, 1554, 1560, 1566, 1572, 1578, 1584, 1590, 1596, 1602, 1608, 1614, 1620, 1626, 1632, 1638, 1644, 1650, 1656, 1662, 1668, 1674, 1680, 1686, 1692, 1698, 1704, 1710, 1716, 1722, 1728, 1734, 1740, 1746, 1752, 1758, 1764, 1770, 1776, 1782, 1788, 1794, 1800, 1806, 1812, 1818, 1824, 1830, 1836, 1842, 1848, 1854, 1860, 1866, 1872, 1878, 1500 )
// RACE-LABEL: rounds
// RACE-NEXT: {{.*}}nan
func.func @rounds(%out: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1)
             workgroup(%buf : memref<2x64xf32, #gpu.address_space<workgroup>>) {
    %c0 = arith.constant 0 : index
    %c1_ = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c6 = arith.constant 6 : index
    %c65 = arith.constant 65 : index
    %c64_ = arith.constant 64 : index
    %c100 = arith.constant 100.0 : f32
    %zero = arith.constant 0.0 : f32
    %ticks = arith.constant 10000000 : index
    %bars = nvgpu.mbarrier.create -> !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
    %first = arith.cmpi eq, %tx, %c0 : index
    scf.if %first {
      scf.for %b = %c0 to %c2 step %c1_ {
        nvgpu.mbarrier.init %bars[%b], %sx : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
      }
    }
    gpu.barrier
    %next = arith.addi %tx, %c1_ : index
    %read = arith.remui %next, %c64_ : index
    %tf = arith.index_cast %tx : index to i64
    %tval = arith.sitofp %tf : i64 to f32
    %sum = scf.for %k = %c0 to %c6 step %c1_ iter_args(%acc = %zero) -> (f32) {
      %s = arith.remui %k, %c2 : index
      %kf = arith.index_cast %k : index to i64
      %kval = arith.sitofp %kf : i64 to f32
      %base = arith.mulf %kval, %c100 : f32
      %v = arith.addf %base, %tval : f32
      memref.store %v, %buf[%s, %tx] : memref<2x64xf32, #gpu.address_space<workgroup>>
      %token = nvgpu.mbarrier.arrive %bars[%s] : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2> -> !nvgpu.mbarrier.token
      %round = arith.divui %k, %c2 : index
      %parity = arith.index_cast %round : index to i1
      nvgpu.mbarrier.try_wait.parity %bars[%s], %parity, %ticks : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2> // the NOWAIT run deletes
      %x = memref.load %buf[%s, %read] : memref<2x64xf32, #gpu.address_space<workgroup>>
      %acc2 = arith.addf %acc, %x : f32
      scf.yield %acc2 : f32
    }
    memref.store %sum, %out[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}

func.func @main() {
  %c0 = arith.constant 0 : index
  %out = memref.alloc() : memref<64xf32>
  call @rounds(%out) : (memref<64xf32>) -> ()
  vector.print str "rounds\n"
  %o = vector.load %out[%c0] : memref<64xf32>, vector<64xf32>
  vector.print %o : vector<64xf32>
  return
}
