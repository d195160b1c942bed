//===- TfmDialect.td - The tfm dialect and its base classes -*- tablegen -*-===//
//
// The tfm dialect describes Transformer computations on statically shaped
// tensors. This file holds the dialect record, the op base classes and the
// type constraints every op shares.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_IR_TFMDIALECT_TD
#define TFM_IR_TFMDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Tfm_Dialect : Dialect {
  let name = "tfm";
  let summary = "a dialect of Transformer operations on static tensors";
  let description = [{
    The `tfm` dialect models the operations of encoder, decoder and
    encoder-decoder Transformers: projections, attention, normalization,
    embeddings, losses, and the fused forms that the fusion passes produce.
    Every op works on ranked tensors with static shapes. Floating-point
    element types are f32, bf16 and f16; indices are i32 or i64; boolean
    masks are i1.
  }];
  let cppNamespace = "::mlir::tfm";
  let useDefaultAttributePrinterParser = 1;
  // tfm.plan, tfm.entries, tfm.kernels, tfm.states and tfm.checks must hold
  // the typed attributes that TfmAttrs.td defines.
  let hasOperationAttrVerify = 1;
  // Folded ops (the position table) become arith.constant.
  let hasConstantMaterializer = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
}

//===----------------------------------------------------------------------===//
// Traits
//===----------------------------------------------------------------------===//

// Static shapes are a dialect-wide invariant; checking it in one trait gives
// every op the same, explicit diagnostic instead of a generic type mismatch.
// The trait also runs the op's shape rule ahead of InferTypeOpInterface.
def Tfm_ShapeRules : NativeOpTrait<"ShapeRules"> {
  let cppNamespace = "::mlir::tfm::OpTrait";
}

//===----------------------------------------------------------------------===//
// Base classes
//===----------------------------------------------------------------------===//

class Tfm_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tfm_Dialect, mnemonic, !listconcat([Tfm_ShapeRules], traits)>;

// Ops without side effects, which the greedy driver may fold, CSE and erase.
class Tfm_PureOp<string mnemonic, list<Trait> traits = []>
    : Tfm_Op<mnemonic, !listconcat(traits, [Pure])>;

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Tfm_Float : AnyTypeOf<[F32, BF16, F16, F64]>;
def Tfm_FloatTensor : RankedTensorOf<[F32, BF16, F16, F64]>;
def Tfm_IndexTensor : RankedTensorOf<[I32, I64]>;
// Signless integers are signed; unsigned ones carry their signedness in the
// type, which the backends read where it matters (division, order, casts).
def Tfm_NumericTensor : RankedTensorOf<[F32, BF16, F16, F64, I8, I16, I32, I64,
                                        UI8, UI16, UI32, UI64]>;
def Tfm_AnyTensor : RankedTensorOf<[F32, BF16, F16, F64, I8, I16, I32, I64,
                                    UI8, UI16, UI32, UI64, I1]>;
// Quantized values: what QuantizeLinear writes, DequantizeLinear also reads
// i32 (a quantized bias); a quantized weight of a linear is 4 or 8 bits;
// MatMulInteger multiplies 8-bit integers.
def Tfm_QuantizedTensor : RankedTensorOf<[I<4>, UI<4>, I8, UI8, I16, UI16]>;
def Tfm_DequantizableTensor : RankedTensorOf<[I<4>, UI<4>, I8, UI8, I16, UI16, I32]>;
def Tfm_QuantizedWeightTensor : RankedTensorOf<[I<4>, UI<4>, I8, UI8]>;
def Tfm_Integer8Tensor : RankedTensorOf<[I8, UI8]>;
// A mask is boolean (true = attend) or additive (added to the scores).
def Tfm_MaskTensor : RankedTensorOf<[I1, F32, BF16, F16]>;

// The training step count, a rank-0 i64 tensor.
def Tfm_StepTensor : 0DTensorOf<[I64]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getI64Type())">;

#endif // TFM_IR_TFMDIALECT_TD
