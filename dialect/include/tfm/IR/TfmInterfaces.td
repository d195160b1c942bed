//===- TfmInterfaces.td - Interfaces of the tfm dialect -----*- tablegen -*-===//
//
// The differentiation interface: each op states its own vector-Jacobian
// product, so `tfm-autodiff` is a plain reverse sweep that never needs to
// know one op from another. The axis-map interface: each op states how its
// results' axes follow its operands', so the passes that follow one axis
// through a model (tfm-exact-padding, tfm-derive-kv-cache) share one rule
// per op.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_IR_TFMINTERFACES_TD
#define TFM_IR_TFMINTERFACES_TD

include "mlir/IR/OpBase.td"

def Tfm_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mlir::tfm";
  let description = [{
    An op with a reverse-mode gradient rule. Given the gradients of the loss
    with respect to the op's results, the rule builds, at the builder's
    insertion point, the gradients with respect to its operands.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the gradient of each operand `i` for which `wanted[i]` holds
        and stores it in `operandGradients[i]` (resized to the operand
        count by the caller, entries null). `resultGradients[j]` is the
        gradient of result `j`, or null where no gradient reaches that
        result, which means zero. A wanted operand may be left null where it
        has no gradient by definition (a mask, an index). Fails, with a
        diagnostic at the op, when a case has no rule.
      }],
      "::llvm::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultGradients,
           "::llvm::ArrayRef<bool>":$wanted,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGradients)>
  ];
}

def Tfm_Differentiable
    : DeclareOpInterfaceMethods<Tfm_DifferentiableOpInterface>;

def Tfm_AxisMapOpInterface : OpInterface<"AxisMapOpInterface"> {
  let cppNamespace = "::mlir::tfm";
  let description = [{
    An op that states, for its static shapes, which operand axes each
    result axis is read from and which operand axes it reads across
    (tfm/IR/AxisMap.h).
  }];
  let methods = [
    InterfaceMethod<[{
        The op's axis map.
      }],
      "::mlir::tfm::AxisMap", "getAxisMap", (ins)>
  ];
}

def Tfm_AxisMapped : DeclareOpInterfaceMethods<Tfm_AxisMapOpInterface>;

#endif // TFM_IR_TFMINTERFACES_TD
