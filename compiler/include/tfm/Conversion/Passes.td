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
    pointers; the artifact emitter defines that function.

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

def ApproximateMathPass : Pass<"tfm-approximate-math"> {
  let summary = "Rewrites math.erf and math.tanh as polynomial approximations.";
  let description = [{
    erf and tanh have no LLVM intrinsic, so they would become a libm call
    per element, which the loop vectorizer cannot widen: GELU and its
    gradient would run at libm's scalar speed (about half of a GPT
    training step's time). Their polynomial approximations (accurate to a
    few ulp in f32) are plain arithmetic, which vectorizes.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

#endif // TFM_CONVERSION_PASSES_TD
