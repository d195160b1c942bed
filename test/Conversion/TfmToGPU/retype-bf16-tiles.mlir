// RUN: tfm-opt %s -split-input-file -verify-diagnostics --tfm-retype-bf16-tiles | FileCheck %s

// Tests that a bf16 tensor-core tile's operands are read as f16 patterns of
// the same bytes: the host passes an f16 view at the same offset of the
// arena, the kernel's argument and reads change type, and the kernel is
// marked for tfm-lower-bf16-mma-sync. The f32 argument is left alone.
// CHECK-LABEL: func.func @host
// CHECK: %[[C64:.+]] = arith.constant 64 : index
// CHECK: %[[OLD:.+]] = memref.view %[[ARENA:.+]][%[[C64]]][] : memref<2048xi8> to memref<16x16xbf16>
// CHECK: %[[NEW:.+]] = memref.view %[[ARENA]][%[[C64]]][] : memref<2048xi8> to memref<16x16xf16>
// CHECK: gpu.launch_func @kernels::@tile {{.+}} args(%[[NEW]] : memref<16x16xf16>, %{{.+}} : memref<16x8xf32>)
// CHECK: gpu.func @tile(%[[A:.+]]: memref<16x16xf16>, %[[OUT:.+]]: memref<16x8xf32>) kernel attributes {{{.*}}tfm.mma_operand_type = bf16
// CHECK: %[[PAD:.+]] = arith.constant 0.000000e+00 : f16
// CHECK: vector.transfer_read %[[A]][%{{.+}}, %{{.+}}], %[[PAD]] {{.+}} : memref<16x16xf16>, vector<16x16xf16>
// CHECK: vector.contract {{.+}} : vector<16x16xf16>, vector<8x16xf16> into vector<16x8xf32>
// CHECK: gpu.func @plain(%{{.+}}: memref<16x8xf32>) kernel
// CHECK-NOT: tfm.mma_operand_type
module attributes {gpu.container_module} {
  func.func @host(%arena: memref<2048xi8>, %out: memref<16x8xf32>) {
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %c64 = arith.constant 64 : index
    %a = memref.view %arena[%c64][] : memref<2048xi8> to memref<16x16xbf16>
    gpu.launch_func @kernels::@tile blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1) args(%a : memref<16x16xbf16>, %out : memref<16x8xf32>)
    gpu.launch_func @kernels::@plain blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1) args(%out : memref<16x8xf32>)
    return
  }
  gpu.module @kernels {
    gpu.func @tile(%a: memref<16x16xbf16>, %out: memref<16x8xf32>) kernel {
      %c0 = arith.constant 0 : index
      %pad = arith.constant 0.0 : bf16
      %zero = arith.constant dense<0.0> : vector<16x8xf32>
      %x = vector.transfer_read %a[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x16xbf16>, vector<16x16xbf16>
      %y = vector.transfer_read %a[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x16xbf16>, vector<8x16xbf16>
      %r = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %x, %y, %zero : vector<16x16xbf16>, vector<8x16xbf16> into vector<16x8xf32>
      vector.transfer_write %r, %out[%c0, %c0] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x8xf32>
      gpu.return
    }
    gpu.func @plain(%out: memref<16x8xf32>) kernel {
      gpu.return
    }
  }
}

// -----

// Tests that a bf16 argument read for anything but a tile stays bf16, with
// an error: as f16 its values would change.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @tile(%a: memref<16x16xbf16>, %out: memref<16x8xf32>) kernel {
      %c0 = arith.constant 0 : index
      %pad = arith.constant 0.0 : bf16
      %zero = arith.constant dense<0.0> : vector<16x8xf32>
      %x = vector.transfer_read %a[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x16xbf16>, vector<16x16xbf16>
      %y = vector.transfer_read %a[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x16xbf16>, vector<8x16xbf16>
      %r = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %x, %y, %zero : vector<16x16xbf16>, vector<8x16xbf16> into vector<16x8xf32>
      // expected-error @+1 {{reads bf16 argument #0 of kernel 'tile' other than for a tensor-core tile}}
      %s = memref.load %a[%c0, %c0] : memref<16x16xbf16>
      gpu.return
    }
  }
}

// -----

// Tests that a tile multiplying a value the kernel made itself is an error.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @tile(%out: memref<16x8xf32>) kernel {
      %c0 = arith.constant 0 : index
      %x = arith.constant dense<1.0> : vector<16x16xbf16>
      %y = arith.constant dense<1.0> : vector<8x16xbf16>
      %zero = arith.constant dense<0.0> : vector<16x8xf32>
      // expected-error @+1 {{a bf16 tensor-core tile multiplies a value not read from its kernel's arguments}}
      %r = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %x, %y, %zero : vector<16x16xbf16>, vector<8x16xbf16> into vector<16x8xf32>
      vector.transfer_write %r, %out[%c0, %c0] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x8xf32>
      gpu.return
    }
  }
}

// -----

// Tests that a bf16 operand the host does not cut from the arena is an
// error naming the kernel.
module attributes {gpu.container_module} {
  func.func @host(%a: memref<16x16xbf16>, %out: memref<16x8xf32>) {
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    // expected-error @+1 {{passes kernel 'tile' a bf16 operand that is not a view of the arena}}
    gpu.launch_func @kernels::@tile blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1) args(%a : memref<16x16xbf16>, %out : memref<16x8xf32>)
    return
  }
  gpu.module @kernels {
    gpu.func @tile(%a: memref<16x16xbf16>, %out: memref<16x8xf32>) kernel {
      %c0 = arith.constant 0 : index
      %pad = arith.constant 0.0 : bf16
      %zero = arith.constant dense<0.0> : vector<16x8xf32>
      %x = vector.transfer_read %a[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x16xbf16>, vector<16x16xbf16>
      %y = vector.transfer_read %a[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x16xbf16>, vector<8x16xbf16>
      %r = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %x, %y, %zero : vector<16x16xbf16>, vector<8x16xbf16> into vector<16x8xf32>
      vector.transfer_write %r, %out[%c0, %c0] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x8xf32>
      gpu.return
    }
  }
}

// -----

// Tests that a window of a weight stored in bf16 (a part of a packed
// projection's rows) is passed as the same window of an f16 view.
// CHECK-LABEL: func.func @window
// CHECK: %[[W:.+]] = memref.view %[[WEIGHTS:.+]][%{{.+}}][] : memref<4096xi8> to memref<48x16xbf16>
// CHECK: %[[PART:.+]] = memref.subview %[[W]][16, 0] [16, 16] [1, 1]
// CHECK: %[[W16:.+]] = memref.view %[[WEIGHTS]][%{{.+}}][] : memref<4096xi8> to memref<48x16xf16>
// CHECK: %[[PART16:.+]] = memref.subview %[[W16]][16, 0] [16, 16] [1, 1] : memref<48x16xf16> to memref<16x16xf16, strided<[16, 1], offset: 256>>
// CHECK: gpu.launch_func @kernels::@tile {{.+}} args(%[[PART16]] : memref<16x16xf16, strided<[16, 1], offset: 256>>
module attributes {gpu.container_module} {
  func.func @window(%weights: memref<4096xi8>, %out: memref<16x8xf32>) {
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    %c0 = arith.constant 0 : index
    %w = memref.view %weights[%c0][] : memref<4096xi8> to memref<48x16xbf16>
    %part = memref.subview %w[16, 0] [16, 16] [1, 1] : memref<48x16xbf16> to memref<16x16xbf16, strided<[16, 1], offset: 256>>
    gpu.launch_func @kernels::@tile blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1) args(%part : memref<16x16xbf16, strided<[16, 1], offset: 256>>, %out : memref<16x8xf32>)
    return
  }
  gpu.module @kernels {
    gpu.func @tile(%a: memref<16x16xbf16, strided<[16, 1], offset: 256>>, %out: memref<16x8xf32>) kernel {
      %c0 = arith.constant 0 : index
      %pad = arith.constant 0.0 : bf16
      %zero = arith.constant dense<0.0> : vector<16x8xf32>
      %x = vector.transfer_read %a[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x16xbf16, strided<[16, 1], offset: 256>>, vector<16x16xbf16>
      %y = vector.transfer_read %a[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x16xbf16, strided<[16, 1], offset: 256>>, vector<8x16xbf16>
      %r = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %x, %y, %zero : vector<16x16xbf16>, vector<8x16xbf16> into vector<16x8xf32>
      vector.transfer_write %r, %out[%c0, %c0] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x8xf32>
      gpu.return
    }
  }
}
