//===- Passes.td - tfm conversions --------------------------*- tablegen -*-===//

#ifndef TFM_CONVERSION_PASSES_TD
#define TFM_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerToCPUPass : Pass<"tfm-lower-to-cpu", "::mlir::ModuleOp"> {
  let summary = "Lowers planned tfm functions to oneDNN kernel calls and linalg on buffers.";
  let description = [{
    Each public function, after `tfm-plan-memory`, becomes
    `@__tfm_entry_<name>(%host, %arena, %weights, inputs..., outputs...) -> i32`
    on memrefs. Tensors live where the plan put them (arena views), in the
    weights blob (constants), or straight in the caller's output buffers
    (returned values). GEMMs, masked softmax and layer norm become calls
    through `host->run_kernel`, described in the module attribute
    `tfm.kernels`; the rest becomes `linalg.generic`. The module also gets
    `tfm.entries`, `tfm.weights`, `tfm.weight_offsets` and
    `tfm.weights_bytes`, which the artifact emitter turns into the metadata
    table and the weights blob.
  }];
  let options = [
    Option<"bf16", "bf16", "bool", /*default=*/"false",
           "Multiply in the LINEAR kernels in bf16 with f32 accumulation">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
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
