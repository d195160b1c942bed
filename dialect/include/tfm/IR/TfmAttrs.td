//===- TfmAttrs.td - Attributes of the tfm dialect ----------*- tablegen -*-===//
//
// Enumerations carried by tfm ops as attributes.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_IR_TFMATTRS_TD
#define TFM_IR_TFMATTRS_TD

include "tfm/IR/TfmDialect.td"
include "mlir/IR/EnumAttr.td"

// Enums are stored as specialized i32 attributes so that op formats print
// them as bare keywords (`activation = gelu`).

def Tfm_Activation : I32EnumAttr<"Activation",
    "an activation applied to a linear's output", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"relu", 1>,
      I32EnumAttrCase<"gelu", 2>,
      I32EnumAttrCase<"gelu_tanh", 3>]> {
  let cppNamespace = "::mlir::tfm";
}

def Tfm_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how gelu evaluates the normal CDF", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::mlir::tfm";
}

def Tfm_MaskKind : I32EnumAttr<"MaskKind",
    "how a masked softmax applies its mask", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"additive", 1>,
      I32EnumAttrCase<"boolean", 2>]> {
  let cppNamespace = "::mlir::tfm";
}

def Tfm_ComparePredicate : I32EnumAttr<"ComparePredicate",
    "an elementwise comparison", [
      I32EnumAttrCase<"eq", 0>,
      I32EnumAttrCase<"ne", 1>,
      I32EnumAttrCase<"lt", 2>,
      I32EnumAttrCase<"le", 3>,
      I32EnumAttrCase<"gt", 4>,
      I32EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::mlir::tfm";
}

def Tfm_ReduceKind : I32EnumAttr<"ReduceKind",
    "how a reduction combines elements", [
      I32EnumAttrCase<"sum", 0>,
      I32EnumAttrCase<"mean", 1>,
      I32EnumAttrCase<"max", 2>,
      I32EnumAttrCase<"min", 3>]> {
  let cppNamespace = "::mlir::tfm";
}

def Tfm_LRSchedule : I32EnumAttr<"LRSchedule",
    "how an optimizer's learning rate follows the step count", [
      I32EnumAttrCase<"constant", 0>,
      I32EnumAttrCase<"noam", 1>]> {
  let cppNamespace = "::mlir::tfm";
}

#endif // TFM_IR_TFMATTRS_TD
