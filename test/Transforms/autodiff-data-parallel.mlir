// RUN: tfm-opt %s --tfm-autodiff="optimizer=sgd lr=0.1 bucket-mb=0.0001" | FileCheck %s
// RUN: %tfmc_bin compile %s --train --optimizer=sgd --emit=linalg -o - | FileCheck %s --check-prefix=CPU
// RUN: tfm-opt %s --tfm-autodiff="optimizer=adam shard-optimizer=true" | FileCheck %s --check-prefix=SHARD
// RUN: %tfmc_bin compile %s --train --optimizer=adam --shard-optimizer --emit=linalg -o - | FileCheck %s --check-prefix=SHARDCPU

// Tests where tfm-autodiff puts a data-parallel step's averages: the
// weight (the labels the loss counts), the loss's start in bucket 0 right
// after it, each gradient's start right after the op that completes it,
// in buckets of at most 104 bytes (0.0001 MB) filled in that order (w2's
// 100 bytes alone; w's 60 and b's 20 together), and the waits right
// before the updates, which read the averages.
func.func @infer(%x: tensor<4x3xf32> {tfm.name = "x"}) -> (tensor<4x5xf32> {tfm.name = "logits"}) {
  %w = tfm.parameter "w" {initial_value = dense<0.1> : tensor<5x3xf32>} : tensor<5x3xf32>
  %b = tfm.parameter "b" {initial_value = dense<0.0> : tensor<5xf32>} : tensor<5xf32>
  %w2 = tfm.parameter "w2" {initial_value = dense<0.2> : tensor<5x5xf32>} : tensor<5x5xf32>
  %y = tfm.linear %x, %w, %b : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %z = tfm.linear %y, %w2 : (tensor<4x5xf32>, tensor<5x5xf32>) -> tensor<4x5xf32>
  return %z : tensor<4x5xf32>
}

// CHECK-LABEL: func.func @train_step
// CHECK:      %[[LOSS:.+]] = tfm.cross_entropy
// CHECK:      %[[IGNORED:.+]] = arith.constant dense<-100> : tensor<i64>
// CHECK:      %[[COUNTED:.+]] = tfm.compare ne, %arg1, %[[IGNORED]]
// CHECK:      %[[ONES:.+]] = tfm.cast %[[COUNTED]] : tensor<4xi1> -> tensor<4xf32>
// CHECK:      %[[N:.+]] = tfm.reduce sum %[[ONES]] axes = [0] : tensor<4xf32> -> tensor<f32>
// CHECK-NEXT: %[[PL:.+]] = tfm.all_reduce_start %[[LOSS]], %[[N]] {bucket = 0 : i64}
// CHECK:      %[[DW2:.+]] = tfm.matmul %{{.+}}, %{{.+}} transpose_lhs : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<5x5xf32>
// CHECK-NEXT: %[[P2:.+]] = tfm.all_reduce_start %[[DW2]], %[[N]] {bucket = 1 : i64}
// CHECK-NEXT: %[[DW:.+]] = tfm.matmul {{.+}} -> tensor<5x3xf32>
// CHECK-NEXT: %[[PW:.+]] = tfm.all_reduce_start %[[DW]], %[[N]] {bucket = 2 : i64}
// CHECK-NEXT: %[[DB:.+]] = tfm.reduce sum
// CHECK-NEXT: %[[PB:.+]] = tfm.all_reduce_start %[[DB]], %[[N]] {bucket = 2 : i64}
// CHECK-NEXT: %[[W:.+]] = tfm.all_reduce_wait %[[PW]] {bucket = 2 : i64}
// CHECK-NEXT: %[[B:.+]] = tfm.all_reduce_wait %[[PB]] {bucket = 2 : i64}
// CHECK-NEXT: %[[W2:.+]] = tfm.all_reduce_wait %[[P2]] {bucket = 1 : i64}
// CHECK-NEXT: %[[L:.+]] = tfm.all_reduce_wait %[[PL]] {bucket = 0 : i64}
// CHECK-NEXT: tfm.sgd_update "w", %[[W]]
// CHECK-NEXT: tfm.sgd_update "b", %[[B]]
// CHECK-NEXT: tfm.sgd_update "w2", %[[W2]]
// CHECK-NEXT: return %[[L]]

// On the CPU, with the default buckets of 4 MB: the loss alone in bucket 0,
// and the three gradients in bucket 1 in the order the backward pass
// completes them (w2's 25 elements at 0, w's 15 at 25, b's 5 at 40, of
// 45), each an ALL_REDUCE on the gradient's own storage: params N, bucket,
// phase (0 start, 1 wait), offset, the bucket's elements and members. The
// waits pass no weight.
// CPU-LABEL: func.func @__tfm_entry_train_step
// CPU:       kind = all_reduce, dtype = f32, params = [1, 0, 0, 0, 1, 1, 0]>(%{{.+}}, %{{.+}})
// CPU:       kind = all_reduce, dtype = f32, params = [25, 1, 0, 0, 45, 3, 0]>(%{{.+}}, %{{.+}})
// CPU:       kind = all_reduce, dtype = f32, params = [15, 1, 0, 25, 45, 3, 0]>(%{{.+}}, %{{.+}})
// CPU:       kind = all_reduce, dtype = f32, params = [5, 1, 0, 40, 45, 3, 0]>(%{{.+}}, %{{.+}})
// CPU:       kind = all_reduce, dtype = f32, params = [15, 1, 1, 25, 45, 3, 0]>(%{{.+}}) {slots = array<i64: 0>}
// CPU:       kind = all_reduce, dtype = f32, params = [5, 1, 1, 40, 45, 3, 0]>(%{{.+}}) {slots = array<i64: 0>}
// CPU:       kind = all_reduce, dtype = f32, params = [25, 1, 1, 0, 45, 3, 0]>(%{{.+}}) {slots = array<i64: 0>}
// CPU:       kind = all_reduce, dtype = f32, params = [1, 0, 1, 0, 1, 1, 0]>(%{{.+}}) {slots = array<i64: 0>}

// Tests that --shard-optimizer marks every Adam update sharded, after the
// same averages.
// SHARD-LABEL: func.func @train_step
// SHARD:      %[[W:.+]] = tfm.all_reduce_wait %{{.+}} : tensor<5x3xf32>
// SHARD:      tfm.adam_update "w", %[[W]], %{{.+}} {{{.*}}sharded{{.*}}} : tensor<5x3xf32>
// SHARD-NEXT: tfm.adam_update "b", %{{.+}} {{{.*}}sharded{{.*}}} : tensor<5xf32>
// SHARD-NEXT: tfm.adam_update "w2", %{{.+}} {{{.*}}sharded{{.*}}} : tensor<5x5xf32>

// Tests that the sharded updates' gradients travel in parts (the last
// param, TFM_ALL_REDUCE_PARTS), and the loss, which every rank returns,
// whole.
// SHARDCPU: kind = all_reduce, dtype = f32, params = [1, 0, 0, 0, 1, 1, 0]>
// SHARDCPU: kind = all_reduce, dtype = f32, params = [25, 1, 0, 0, {{[0-9]+}}, {{[0-9]+}}, 1]>
