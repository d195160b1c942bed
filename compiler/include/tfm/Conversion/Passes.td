//===- Passes.td - tfm conversions --------------------------*- tablegen -*-===//

#ifndef TFM_CONVERSION_PASSES_TD
#define TFM_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerToCPUPass : Pass<"tfm-lower-to-cpu", "::mlir::ModuleOp"> {
  let summary = "Lowers planned tfm functions to kernel calls and linalg on buffers.";
  let description = [{
    Each public function, after `tfm-plan-memory`, becomes
    `@__tfm_entry_<name>(%host, %arena, %weights, %state, inputs...,
    outputs...) -> i32` on memrefs. Tensors live where the plan put them
    (`tfm.plan`): arena views, strided views of other tensors' storage, the
    caller's output buffers; constants in the weights blob, parameters in
    the session state. GEMMs, masked softmax, layer norm and the optimizers
    become `tfm.kernel_call`s, the rest `linalg.generic`; the entry returns
    the first non-zero status. The module gets `tfm.entries`, `tfm.states`,
    `tfm.checks` and the weights layout (`tfm.weights`,
    `tfm.weight_offsets`, `tfm.weights_bytes`), from which the artifact
    emitter writes the metadata table and the weights blob.
  }];
  let options = [
    Option<"computeType", "compute-type", "::mlir::tfm::ComputeType",
           /*default=*/"::mlir::tfm::ComputeType::F32",
           "The type the LINEAR kernels multiply in (f32 accumulation)",
           "::mlir::tfm::computeTypeValues()">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::cf::ControlFlowDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tfm::TfmDialect"];
}

def LowerKernelCallsPass : Pass<"tfm-lower-kernel-calls", "::mlir::ModuleOp"> {
  let summary = "Turns tfm.kernel_call into calls through host->run_kernel.";
  let description = [{
    Collects the descriptors of every `tfm.kernel_call` into the module's
    kernel table `tfm.kernels` (one entry per distinct descriptor, which a
    session creates once), and replaces each call by a call of
    `__tfm_run_kernel(host, index, args)` on an array of the buffers'
    pointers; the artifact emitter defines that function. A descriptor all
    of whose calls have `fallback` gets `TFM_KERNEL_FLAG_FALLBACK` in
    `tfm.kernel_flags`.

    ```mlir
    %rc = tfm.kernel_call %host, #tfm.kernel<...>(%x, %y) : ...
      =>  (stores of %x's and %y's addresses into %args)
          %rc = llvm.call @__tfm_run_kernel(%host, %c0_i32, %args)
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect"];
}

def ParallelizeGluePass : Pass<"tfm-parallelize-glue", "::mlir::ModuleOp"> {
  let summary = "Runs the large linalg ops of CPU entries on the session's threads.";
  let description = [{
    The glue of a CPU entry (the linalg no kernel runs) would otherwise run
    on the calling thread alone between kernels that use every thread. Each
    linalg op of an entry with at least `min-iterations` iterations, one of
    whose parallel loops every operand indexes by that loop alone, is
    outlined into `@__tfm_glue_N(buffers..., %begin, %end)`, which runs the
    op on the iterations [begin, end) of that loop, and replaced by a call
    of `__tfm_parallel_for(host, @__tfm_glue_N_task, args, n)` on the
    buffers' aligned pointers. The artifact emitter defines both: the task
    unpacks `args`, and `__tfm_parallel_for` hands [0, n) to
    `host->parallel_for`, or runs it whole for a host without one.

    ```mlir
    linalg.generic ... ins(%a : memref<64x512xf32>) outs(%b : memref<64x512xf32>)
      =>  (stores of %a's and %b's aligned pointers into %args)
          llvm.call @__tfm_parallel_for(%host, %task, %args, %c64)
    ```
  }];
  let options = [
    Option<"minIterations", "min-iterations", "int64_t", /*default=*/"65536",
           "The iterations an op needs to be run in parallel (0: none is)">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect"];
}

def ApproximateMathPass : Pass<"tfm-approximate-math"> {
  let summary = "Rewrites math.erf and math.tanh as polynomial approximations.";
  let description = [{
    erf and tanh have no LLVM intrinsic, so they would become a libm call
    per element, which the loop vectorizer cannot widen: GELU and its
    gradient would run at libm's scalar speed (about half of a GPT
    training step's time). Their polynomial approximations (accurate to a
    few ulp in f32) are plain arithmetic, which vectorizes.

    With `all`, every f32 function the math dialect can approximate goes
    too (exp, log, sin, cos, and powf through exp and log): GPU kernels
    cannot call libm, and libdevice is part of a CUDA toolkit, which a
    build of tfm does not need. So does arith.remf, which NVPTX lacks
    (powf's expansion tests odd exponents with it): a - b * trunc(a / b).
    And an f64 function of a widened f32 value (a loss accumulated in f64
    takes each row's log-sum-exp so) is taken in f32 and widened, which
    loses nothing the value held.
  }];
  let options = [
    Option<"all", "all", "bool", /*default=*/"false",
           "Approximate every f32 function, not only erf and tanh">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

//===----------------------------------------------------------------------===//
// The CUDA target
//===----------------------------------------------------------------------===//

def LowerToGPUPass : Pass<"tfm-lower-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lowers planned tfm functions to linalg on device buffers.";
  let description = [{
    Each public function, after `tfm-plan-memory{target=cuda}`, becomes
    `@__tfm_entry_<name>(%host, %arena, %weights, %state, inputs...,
    outputs...) -> i32` on memrefs of device memory, every op lowered by the
    backend-neutral TfmToLinalg lowerings. The module gets the same tables
    as for the CPU (`tfm.entries`, `tfm.states`, `tfm.checks`, the weights
    layout). GEMMs (linear, matmul, and convolutions as im2col + batched
    matmul) become `tfm.kernel_call`s that the runtime runs in cuBLASLt,
    each with a generated fallback. Index checks write their outcome to
    their slot in the state (`tfm.check_slots_offset`), which the runtime
    reads after the run.

    Which kernel each op gets is chosen in one place
    (`TfmToGPU/KernelStrategy.h`); with `remarks`, each op that has a
    choice says which it got, and, where it misses a better one, which and
    why: `tfm-gpu-kernel: tfm.layer_norm: loops; not warp-rows: its shape
    is not static`.
  }];
  let options = [
    Option<"computeType", "compute-type", "::mlir::tfm::ComputeType",
           /*default=*/"::mlir::tfm::ComputeType::F32",
           "The type GEMMs multiply in (f32, bf16 or f16; f32 accumulation)",
           "::mlir::tfm::computeTypeValues()">,
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Emit a remark naming the kernel of every op that has a choice">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::cf::ControlFlowDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tfm::TfmDialect",
                           "::mlir::nvgpu::NVGPUDialect",
                           "::mlir::vector::VectorDialect"];
}

def TileGPUMatmulPass : Pass<"tfm-tile-gpu-matmul", "::mlir::func::FuncOp"> {
  let summary = "Gives each GPU thread a register tile of a GEMM's outputs.";
  let description = [{
    Runs on linalg on buffers, before `convert-linalg-to-parallel-loops`.
    Each contraction `linalg.generic` (two inputs, parallel loops then one
    reduction, the output indexed by the parallel loops, some input
    independent of each of the two innermost ones) becomes an
    `scf.parallel` over tiles of `tile-m` × `tile-n` outputs of its two
    innermost parallel loops. A tile's accumulators are the `iter_args` of
    one `scf.for` over the reduction, which loads each input once per row
    or column it varies along and clones the generic's body per output; a
    fill of the output just before the generic (`linalg.fill`, or a
    generic that yields a constant) becomes the accumulators' start. Each output folds the body over the reduction in
    the generic's order; the body's arithmetic may be contracted (FMA).

    A contraction of f16 or bf16 operands into f32 (`acc + extf(a) *
    extf(b)`, the neutral lowering's GEMM under compute type f16 or bf16)
    whose M and K are
    multiples of 16 and N of 8, started by a constant fill, becomes instead
    an `scf.parallel {tfm.lanes = 32}` over warp tiles of up to 32 x 32:
    `vector.contract` ops of 16 x 16 by 8 x 16 into 16 x 8 f32, the shape
    of one `mma.sync` m16n8k16, which `convert-vector-to-gpu{use-nvgpu}`
    distributes over the warp's lanes. When M and N are at least 64 and K
    at least 32, and each operand's rows start 16-byte aligned, it becomes
    instead one `gpu.launch` of the staged kernel (`StagedGemm.cpp`):
    128 x 128 output tiles of 4 warps, operand tiles copied into three
    shared-memory stages by `nvgpu.device_async_copy`, read by
    `nvgpu.ldmatrix` into `nvgpu.mma.sync`, with the epilogue (an
    elementwise op that rewrites the output in place right after) applied
    to the accumulators before their stores. With `warpgroup-mma` (sm_90a)
    such a GEMM becomes instead the warpgroup kernel (`WgmmaGemm.cpp`): the
    same tiles and stages in dynamic shared memory, laid out as wgmma reads
    them, multiplied by `nvgpu.warpgroup.mma`, the accumulators staged
    through shared memory to the epilogue; with `tma` as well, its tiles
    are loaded by `nvgpu.tma.async.load` (boxes of 64 x 64 of tensor maps
    made in the host code before the launch, an mbarrier per stage) where
    each operand's memref ends in the two dims it is read along.

    With `remarks`, each GEMM gets a remark at its op's location naming
    the kernel it got and, where it misses the best one the architecture
    has (`warpgroup-mma` on sm_90a, `staged-mma` elsewhere), why
    (`GemmKernel` in `TfmToGPU/KernelStrategy.h`); `tfmc --fusion-report`
    counts them.
  }];
  let options = [
    Option<"tileM", "tile-m", "int64_t", /*default=*/"4",
           "Rows of outputs per thread">,
    Option<"tileN", "tile-n", "int64_t", /*default=*/"4",
           "Columns of outputs per thread">,
    Option<"warpgroupMma", "warpgroup-mma", "bool", /*default=*/"false",
           "Build 16-bit GEMMs of at least 64 x 64 with wgmma (sm_90a)">,
    Option<"tma", "tma", "bool", /*default=*/"false",
           "With warpgroup-mma, load the tiles by TMA where the operands allow">,
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Remark on each GEMM the kernel it gets, and why not a better one">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::nvgpu::NVGPUDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def FuseElementwiseBuffersPass : Pass<"tfm-fuse-elementwise-buffers", "::mlir::func::FuncOp"> {
  let summary = "Merges consecutive elementwise linalg ops on buffers into one.";
  let description = [{
    Runs on linalg on buffers, in the GPU schedule after
    `tfm-tile-gpu-matmul`. Two `linalg.generic` ops in a row (nothing
    between them touching memory), both all-parallel over the same static
    ranges and each writing one output through the identity, become one
    generic that writes both outputs (one, when the second rewrites the
    first's in place): the second's body reads the first's result from a
    register where it read the first's output through the identity. Each
    op becomes a kernel, so a chain of n such ops launches once instead of
    n times and reads its intermediate values from memory not at all.

    Fusion must not change what any element reads: no other operand of the
    second op may overlap the first's output, and the second's output may
    overlap none of the first's operands, except the very same buffer read
    through the identity. Buffers are compared by their place in the entry's
    arguments (a view at a constant byte offset, or an argument); anything
    whose place is unknown is assumed to overlap everything.
  }];
}

def WidenContractionsPass : Pass<"tfm-widen-contractions"> {
  let summary = "Extends a vector.contract's narrower operands to its "
                "accumulator's type.";
  let description = [{
    For the CPU check of the GPU schedule: MLIR lowers `vector.contract`
    for the CPU only when its operands have the accumulator's element type,
    and the tensor-core tiles multiply f16 into f32. The operands are
    extended with `arith.extf`, which, like the tensor cores' products, is
    exact.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def FoldFillsIntoReductionsPass : Pass<"tfm-fold-fills-into-reductions", "::mlir::func::FuncOp"> {
  let summary = "Starts a reduction at its fill's value instead of "
                "launching the fill.";
  let description = [{
    The neutral lowering writes a reduction as a fill of its output (0 for
    a sum, -inf for a maximum) and a linalg.generic that accumulates into
    it; on the GPU each is a kernel. A training step's backward pass has
    two such fills for every norm (its scale's and bias's gradients) and
    one for every bias. This pass drops a fill whose buffer the next
    generic to touch it reduces into, every element of it, and makes that
    generic's body read the fill's value in place of the output where all
    its reduction indices are 0, the first visit of each element in the
    order the loops run. Nothing between the two may touch the buffer: only
    ops free of memory effects and generics whose operands and loads miss
    it (by their places) may lie between. Generics under a `gpu.launch`
    are left alone.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect"];
}

def ParallelDimsFirstPass : Pass<"tfm-parallel-dims-first", "::mlir::func::FuncOp"> {
  let summary = "Puts a linalg.generic's parallel dimensions before its "
                "reductions, so that the GPU's threads take them.";
  let description = [{
    `convert-linalg-to-parallel-loops` nests the loops in the order of the
    iterators, and `tfm-map-to-gpu` maps the outermost `scf.parallel` to
    the grid: a generic that reduces over its first dimension (a column
    sum, such as a norm's scale gradient over the rows) became a serial
    loop around its parallel one, all of it run by one thread. This pass
    interchanges such a generic's dimensions, parallel ones first in their
    order, then the reductions in theirs, so that each thread takes an
    output and walks the reduction; each output's sum runs in the same
    order as before. Generics under a `gpu.launch` (the kernels built
    whole) are left alone.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def VectorizeGPULoopsPass : Pass<"tfm-vectorize-gpu-loops", "::mlir::func::FuncOp"> {
  let summary = "Gives each thread of an elementwise loop 16 bytes of "
                "elements, read and written as vectors.";
  let description = [{
    Runs on the top-level `scf.parallel` nests of a GPU entry, before
    `tfm-map-to-gpu`. A nest whose body is straight-line code, with every
    load before the first store, steps its innermost dimension by V, the
    elements of 16 bytes of the widest type it reads or writes
    contiguously (halved until V divides the dimension), and its body is
    repeated for the V elements. A load or store whose innermost index is
    that dimension, with unit stride and an address proven a multiple of
    the vector's bytes (from the buffer's place and the layout's offset
    and strides), becomes one `vector.load` or `vector.store` carrying
    `tfm.alignment`; any other access is made element by element. i1 is
    never loaded as a vector: LLVM packs its vectors into bits.

    A row kernel's `scf.for` over a row's columns marked
    `tfm.column_pass` (the row's threads share the columns and combine
    what they carry) is treated alike: each thread takes V consecutive
    columns from V times its first on, what the loop carries flows through
    the V elements in order, and stores may sit under a guard the same
    for every element.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::vector::VectorDialect"];
}

def LowerAlignedVectorAccessPass : Pass<"tfm-lower-aligned-vector-access", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Lowers vector accesses to LLVM with their proven alignment.";
  let description = [{
    A `vector.load` or `vector.store` carrying `tfm.alignment` (bytes)
    becomes an `llvm.load` or `llvm.store` of that alignment, at the
    address upstream's lowering computes. MLIR 19 states only the
    element's alignment, and the NVPTX backend splits such an access into
    one per element.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def CheckVectorAlignmentPass : Pass<"tfm-check-vector-alignment"> {
  let summary = "Makes, in the CPU emulation, a vector access off its "
                "claimed alignment read or write poison.";
  let description = [{
    For the GPU schedule run on the CPU: a `vector.load` or `vector.store`
    carrying `tfm.alignment` whose address is not a multiple of that many
    bytes reads, or writes, poison (NaN; 0x5eed5eed for integers). On a GPU
    a wrong claim faults; on the CPU it would pass unseen, so every value
    check of the GPU schedule on the CPU tests the proofs too.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def MapToGPUPass : Pass<"tfm-map-to-gpu", "::mlir::func::FuncOp"> {
  let summary = "Maps the loop nests of a GPU entry to blocks and threads.";
  let description = [{
    Runs after `convert-linalg-to-parallel-loops`. Each top-level
    `scf.parallel` is flattened, row-major, into one index over a grid of
    blocks of `threads` threads (`#gpu.loop_dim_map` block_x, thread_x), so
    that consecutive threads write consecutive elements; a top-level
    `scf.for` nest (a reduction to a scalar) runs on one thread.
    `convert-parallel-loops-to-gpu` then makes each one a `gpu.launch`.
    What remains on the host must not touch memory: an op that does is an
    error.
  }];
  let options = [
    Option<"threads", "threads", "int64_t", /*default=*/"256",
           "Threads per block">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::scf::SCFDialect"];
}

def ReverseGridPass : Pass<"tfm-reverse-grid", "::mlir::func::FuncOp"> {
  let summary = "Runs a mapped grid's blocks and threads in descending order.";
  let description = [{
    Runs after `tfm-map-to-gpu`, in the schedule compiled for the CPU
    (`--gpu-schedule-on-cpu --reverse-grid`), where a grid runs as serial
    loops. Every loop mapped to blocks or threads visits its indices from
    the last to the first. A kernel whose threads never read what another
    thread of the same launch writes computes the same result in either
    order; one that does (a race on the GPU, where threads run at once)
    gives another result in one of the two orders, and the schedule checks
    then fail on the CPU as the kernel would on a GPU.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def EmulateGPUKernelsPass : Pass<"tfm-emulate-gpu-kernels"> {
  let summary = "Runs GPU kernels on the CPU, their threads in phases between barriers and warp collectives.";
  let description = [{
    First puts each outlined kernel back at its `gpu.launch_func` as a
    `gpu.launch` (its ids, sizes and `gpu.lane_id` mapped), so that what
    runs is the code the GPU runs, and erases the `gpu.module`s.

    Then replaces every `gpu.launch` by loops over its blocks. Within a
    block, the body is cut at each top-level `gpu.barrier` and warp
    collective into phases, and each phase runs for every thread of its
    range before the next begins. Values that a later phase uses are kept
    per thread; each workgroup attribution becomes one buffer per block,
    filled first with NaN (integers: 0x5eed5eed), so that a read the
    kernel never wrote, such as one a missing barrier allows, shows in the
    result. Between two barriers, the steps that hold warp collectives run
    warp by warp, since a collective waits only for its own warp.

    A barrier or collective may also sit in an `scf.for` whose bounds are
    the same for every thread (a deadlock on a GPU otherwise, refused
    here); what the loop carries is kept per thread. Its last phase and the
    next iteration's first run together per thread, as nothing orders them
    on a GPU either, so a tile buffer overwritten before the other threads
    have read it shows too. A barrier in a branch is refused for now.

    The collectives compute what their PTX instructions compute, from the
    lane maps of `WarpSemantics.h`: `gpu.shuffle` (constant offset and
    width), `nvgpu.ldmatrix` (x1, x2, x4, with or without .trans) and
    `nvgpu.mma.sync` (m16n8k16 on f16, or bf16 where the launch carries
    `tfm.mma_operand_type`, and m16n8k8 and m16n8k4 on tf32, into f32).

    `nvgpu.device_async_copy` runs with cp.async's timing: its destination
    reads as poison until the `nvgpu.device_async_wait` whose group count
    covers the copy's group (`cp.async.wait_group N`), which does the copy
    with its zero fill.

    mbarriers (`nvgpu.mbarrier.create`, `init`, `arrive`,
    `arrive.nocomplete`, `arrive.expect_tx`) keep their state per block:
    arrivals pending and expected, transaction bytes, phase. A
    `nvgpu.mbarrier.try_wait.parity` becomes a `gpu.barrier` and a check
    that the phase of that parity has completed, a `cf.assert` that stops
    the run where a GPU would hang; every thread of the block must reach it.
    `nvgpu.tma.async.load` poisons its destination and lands at a wait on
    its barrier, read through the emulation's tensor map
    (`EmulatedTensorMapWord`), swizzled, zeros outside the tensor.
    The warpgroup ops (`generate.descriptor`, `mma`, `mma.store`,
    `mma.init.accumulator`, `nvvm.wgmma.wait.group.sync.aligned`) compute
    what MLIR 19's NVVM lowering and the hardware compute, reading the
    tiles through the descriptors' canonical layouts; the accumulators
    become vectors of each thread's fragment. Dynamic shared memory of a
    constant size is one more workgroup buffer.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::cf::ControlFlowDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def MergeGPULaunchesPass : Pass<"tfm-merge-gpu-launches", "::mlir::func::FuncOp"> {
  let summary = "Runs neighbouring kernels that touch disjoint memory as one "
                "launch.";
  let description = [{
    Runs on `gpu.launch` ops, after `convert-parallel-loops-to-gpu` and
    before outlining. Launches in a row (nothing between them touching
    memory), each a one-dimensional grid of one-dimensional blocks with no
    shared memory and no barrier, become one launch when none writes what
    another reads or writes: their grids end to end, the block as wide as
    the widest part. A block runs the part its index falls in, with the
    block index rebased and the part's grid and block sizes as before;
    threads past a narrower part's block do nothing. A part with warp
    shuffles or subgroup reductions keeps its own width. Buffers are
    compared by their place in the entry's arguments, as in
    `tfm-fuse-elementwise-buffers`; an unknown place overlaps everything,
    and an op with effects on no named buffer keeps its launch alone.

    A training step's optimizer updates, one per parameter, become one
    launch this way, as do the fills that start its gradients.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::scf::SCFDialect"];
  let statistics = [
    Statistic<"numMerged", "merged-launches", "Launches made of several">,
    Statistic<"numParts", "parts", "Launches merged into them">
  ];
}

def LowerTensorMapsPass : Pass<"tfm-lower-tensor-maps", "::mlir::ModuleOp"> {
  let summary = "Makes each TMA tensor map an entry asks for through the "
                "runtime.";
  let description = [{
    Each `nvgpu.tma.create.descriptor` in an entry function (host code,
    which the kernel builders put before the launch that reads the map)
    becomes a call of `__tfm_tensor_map(host, desc, base, &map)`: `desc` a
    constant `tfm_abi_tensor_map_desc_t` (`tfm/abi.h`) of the tensor's
    static shape and strides, innermost first, its element type, the box
    of the descriptor's type and its swizzle; `base` the address of the
    tensor's first element. The entry returns the call's status if it is
    not 0; the map's address stands for the descriptor, which a GPU's TMA
    loads read as a `CUtensorMap` and the emulation as its words. Upstream
    would instead call its own GPU runtime library, which a model library
    does not link.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::cf::ControlFlowDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
}

def OutlineGPUKernelsPass : Pass<"tfm-outline-gpu-kernels", "::mlir::ModuleOp"> {
  let summary = "Outlines each gpu.launch as gpu-kernel-outlining does, "
                "keeping its NVVM attributes.";
  let description = [{
    Runs `gpu-kernel-outlining`, which makes a `gpu.func` of each launch's
    body but drops the launch's attributes. A kernel builder that must hint
    ptxas (`nvvm.minctasm`, `nvvm.maxnreg`: what the fused attention uses
    to keep its values in registers) sets them on its `gpu.launch`; this
    puts each launch's `nvvm.` attributes on the kernel it became.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::DLTIDialect"];
}

def MergeGPUModulesPass : Pass<"tfm-merge-gpu-modules", "::mlir::ModuleOp"> {
  let summary = "Gathers the outlined kernels into one gpu.module.";
  let description = [{
    `gpu-kernel-outlining` makes a `gpu.module` per kernel; this moves every
    kernel into one module, `@tfm_kernels`, renaming clashes and the
    launches with them, so that the device code is one PTX module that the
    driver compiles once.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def RetypeBF16TilesPass : Pass<"tfm-retype-bf16-tiles", "::mlir::ModuleOp"> {
  let summary = "Reads the bf16 tensor-core tiles' operands as 16-bit "
                "patterns that vector-to-nvgpu distributes.";
  let description = [{
    Runs on the outlined kernels, before `convert-vector-to-gpu`, which
    distributes f16 tiles over a warp's lanes but refuses bf16 ones. In
    mma.sync m16n8k16 a bf16 fragment sits in the lanes' registers exactly
    as an f16 one does, so each bf16 operand of a tensor-core tile is read
    as f16: the kernel's argument, its reads and the host's view of the
    same arena bytes change type, no bit changes. The kernel gets
    `tfm.mma_operand_type = bf16`, for `tfm-lower-bf16-mma-sync`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def LowerBF16MmaSyncPass : Pass<"tfm-lower-bf16-mma-sync", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Multiplies the mma.sync ops of bf16 kernels as bf16.";
  let description = [{
    Runs after `convert-vector-to-gpu`. In a kernel that
    `tfm-retype-bf16-tiles` marked, each `nvgpu.mma.sync` (m16n8k16, f32
    accumulators), and elsewhere each one that carries
    `tfm.mma_operand_type = bf16` itself (the kernels built whole, such as
    the flash attention), becomes the NVVM intrinsic of the bf16 instruction, its
    fragments' register pairs passed as 32-bit words. MLIR 19's own
    lowerings cannot: nvgpu's deduces no bf16 operand type, and NVVM's
    `mma.sync` translates bf16 with f16 vector operands, which the
    intrinsic does not take.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::vector::VectorDialect"];
}

def GPUMathLibraryPass : Pass<"tfm-gpu-math-library", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Defines the libdevice functions that are one PTX instruction.";
  let description = [{
    MLIR's NVVM conversion calls libdevice for `math.sqrt`, `math.absf`,
    `math.floor`, `math.ceil`, `math.roundeven`, `math.trunc`,
    `math.copysign` and `math.fma`. libdevice comes with a CUDA toolkit,
    which tfm does not need, and the driver cannot link it at load time, so
    the kernel module defines these functions itself, each as its PTX
    instruction in inline assembly, before the conversion looks them up.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def LowerGPULaunchesPass : Pass<"tfm-lower-gpu-launches", "::mlir::ModuleOp"> {
  let summary = "Launches kernels through the runtime; records the PTX.";
  let description = [{
    Runs after MLIR's NVVM pipeline. Each `gpu.launch_func` becomes a call
    of `__tfm_launch_kernel(host, kernel, grid, block, shared_bytes, args)`
    (which the artifact defines over `host->launch`) followed by a return
    of its status if it is not 0. The `gpu.binary`'s PTX goes to
    `tfm.device_code`, its chip to `tfm.device_arch`, and the launched
    kernels' names, in the order of their indices, to
    `tfm.device_kernels`. Device code that calls a function it does not
    define (a libdevice function) is an error. A module without kernels
    gets empty device code for `arch`.
  }];
  let options = [
    Option<"arch", "arch", "std::string", /*default=*/"\"sm_80\"",
           "The architecture recorded for a module without kernels">
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // TFM_CONVERSION_PASSES_TD
