//===- TfmOps.h - Operations of the tfm dialect -----------------*- C++ -*-===//

#ifndef TFM_IR_TFMOPS_H
#define TFM_IR_TFMOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tfm/IR/TfmDialect.h"
#include "tfm/IR/TfmEnums.h.inc"

#define GET_OP_CLASSES
#include "tfm/IR/TfmOps.h.inc"

#endif // TFM_IR_TFMOPS_H
