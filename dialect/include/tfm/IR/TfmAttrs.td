//===- TfmAttrs.td - Attributes of the tfm dialect ----------*- tablegen -*-===//
//
// Enumerations carried by tfm ops, and the typed attributes that carry the
// contracts between passes: the memory plan (where each tensor lives), the
// runtime kernels a backend calls, and the metadata the artifact's table is
// written from. The dialect verifies all of them.
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
      I32EnumAttrCase<"gelu_tanh", 3>,
      I32EnumAttrCase<"silu", 4>]> {
  let cppNamespace = "::mlir::tfm";
}

def Tfm_InputQuantization : I32EnumAttr<"InputQuantization",
    "how a quantized linear reads its input", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"dynamic", 1>,
      I32EnumAttrCase<"static_", 2, "static">,
      I32EnumAttrCase<"blocked", 3>]> {
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

def Tfm_ScatterReduction : I32EnumAttr<"ScatterReduction",
    "how a scatter combines an update with the element it lands on", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"add", 1>,
      I32EnumAttrCase<"mul", 2>,
      I32EnumAttrCase<"max", 3>,
      I32EnumAttrCase<"min", 4>]> {
  let cppNamespace = "::mlir::tfm";
}

def Tfm_LRSchedule : I32EnumAttr<"LRSchedule",
    "how an optimizer's learning rate follows the step count", [
      I32EnumAttrCase<"constant", 0>,
      I32EnumAttrCase<"noam", 1>]> {
  let cppNamespace = "::mlir::tfm";
}

//===----------------------------------------------------------------------===//
// The runtime's contract (runtime/include/tfm/abi.h)
//===----------------------------------------------------------------------===//

// The values are tfm_kernel_kind_t's; TfmAttrs.cpp asserts that they agree.
def Tfm_KernelKind : I32EnumAttr<"KernelKind",
    "a kernel the runtime provides", [
      I32EnumAttrCase<"linear", 1>,
      I32EnumAttrCase<"batch_matmul", 2>,
      I32EnumAttrCase<"masked_softmax", 3>,
      I32EnumAttrCase<"layer_norm", 4>,
      I32EnumAttrCase<"reorder", 5>,
      I32EnumAttrCase<"adam", 6>,
      I32EnumAttrCase<"sgd", 7>,
      I32EnumAttrCase<"layer_norm_backward", 8>,
      I32EnumAttrCase<"conv_2d", 9>,
      I32EnumAttrCase<"attention", 10>,
      I32EnumAttrCase<"rms_norm", 11>,
      I32EnumAttrCase<"rms_norm_backward", 12>,
      I32EnumAttrCase<"all_reduce", 13>,
      I32EnumAttrCase<"quantized_linear", 14>]> {
  let cppNamespace = "::mlir::tfm";
}

// The values are tfm_state_kind_t's.
def Tfm_StateKind : I32EnumAttr<"StateKind",
    "what a slot of the session state holds", [
      I32EnumAttrCase<"parameter", 1>,
      I32EnumAttrCase<"adam_m", 2>,
      I32EnumAttrCase<"adam_v", 3>,
      I32EnumAttrCase<"step", 4>,
      I32EnumAttrCase<"cache", 5>,
      I32EnumAttrCase<"source", 6>,
      I32EnumAttrCase<"rank", 7>,
      I32EnumAttrCase<"adam_m_shard", 8>,
      I32EnumAttrCase<"adam_v_shard", 9>]> {
  let cppNamespace = "::mlir::tfm";
}

//===----------------------------------------------------------------------===//
// Attribute definitions
//===----------------------------------------------------------------------===//

class Tfm_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Tfm_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
  let assemblyFormat = "`<` struct(params) `>`";
}

//===----------------------------------------------------------------------===//
// The memory plan: `tfm.plan` on an op holds one of these per result
//===----------------------------------------------------------------------===//

def Tfm_ArenaAttr : Tfm_Attr<"Arena", "arena"> {
  let summary = "a tensor's own storage in the activation arena";
  let description = [{
    The tensor is written at byte `offset` of the arena. `bytes`, when set,
    is the storage's size where it exceeds the tensor's (a packed
    projection whose other results are views of it); `strides`, when set,
    are the element strides the tensor is written with (a matmul that
    writes the transposed layout its user wants). `reuses` names the
    operand whose storage the op overwrites in place, which the plan may
    do when that operand dies at the op.

    ```mlir
    %y = tfm.relu %x {tfm.plan = [#tfm.arena<offset = 0, reuses = 0>]}
    ```
  }];
  let parameters = (ins "int64_t":$offset,
                        OptionalParameter<"int64_t">:$bytes,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr">:$strides,
                        DefaultValuedParameter<"int64_t", "-1">:$reuses);
  let genVerifyDecl = 1;
}

def Tfm_ViewAttr : Tfm_Attr<"View", "view"> {
  let summary = "a tensor read in place from another's storage";
  let description = [{
    The tensor has no storage of its own: element i lies at
    `offset + Σ i_d · strides[d]` (in elements) of the storage that holds
    operand `operand` of the op, or result `result` of the same op. Offset
    and strides count from that storage's first element, however many views
    lie between.

    ```mlir
    %t = tfm.transpose %k permutation = [0, 2, 1]
           {tfm.plan = [#tfm.view<operand = 0, offset = 0, strides = [256, 1, 16]>]}
    ```
  }];
  let parameters = (ins DefaultValuedParameter<"int64_t", "-1">:$operand,
                        DefaultValuedParameter<"int64_t", "-1">:$result,
                        "int64_t":$offset,
                        "::mlir::DenseI64ArrayAttr":$strides);
  let genVerifyDecl = 1;
}

def Tfm_InlineAttr : Tfm_Attr<"Inline", "inline"> {
  let summary = "a tensor computed where it is read, never stored";
  let description = [{
    A compare whose only users are selects of its shape: each select
    computes it element by element, so the i1 tensor needs no storage.
  }];
  let assemblyFormat = "";
}

def Tfm_OutputAttr : Tfm_Attr<"Output", "output"> {
  let summary = "a tensor written straight into the caller's output buffer";
  let parameters = (ins "int64_t":$index);
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Kernel calls and the artifact's metadata
//===----------------------------------------------------------------------===//

def Tfm_KernelAttr : Tfm_Attr<"Kernel", "kernel"> {
  let summary = "the descriptor of one runtime kernel";
  let description = [{
    What `tfm_abi_kernel_desc_t` holds: the kind, the element type it
    computes in, and its parameters, as tfm/abi.h documents for each kind.
    The arrays may be shorter than the ABI's, never longer.

    ```mlir
    #tfm.kernel<kind = linear, dtype = f32, params = array<i64: 6, 8, 4, 1, 2, 0, 1>>
    ```
  }];
  let parameters = (ins "KernelKind":$kind, "::mlir::Type":$dtype,
                        "::mlir::DenseI64ArrayAttr":$params,
                        OptionalParameter<"::mlir::DenseF64ArrayAttr">:$fparams,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr">:$strides);
  let genVerifyDecl = 1;
}

def Tfm_TensorDescAttr : Tfm_Attr<"TensorDesc", "tensor_desc"> {
  let summary = "a named tensor at an entry point's boundary";
  let parameters = (ins StringRefParameter<"the name">:$name,
                        "::mlir::RankedTensorType":$type);
}

def Tfm_EntryAttr : Tfm_Attr<"Entry", "entry"> {
  let summary = "an entry point of the artifact";
  let description = [{
    `symbol` is the lowered function; `inputs` and `outputs` are
    `#tfm.tensor_desc`s in order; `arena_bytes` is the scratch memory a run
    needs; `input_values`, three per input, what each takes
    (tfm_abi_model_t.input_values), absent when no input says anything.
  }];
  let parameters = (ins StringRefParameter<"the entry's name">:$name,
                        "::mlir::FlatSymbolRefAttr":$symbol,
                        "::mlir::ArrayAttr":$inputs,
                        "::mlir::ArrayAttr":$outputs,
                        "int64_t":$arena_bytes,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr">:$input_values);
  let genVerifyDecl = 1;
}

def Tfm_StateSlotAttr : Tfm_Attr<"StateSlot", "state_slot"> {
  let summary = "a slot of the session state";
  let description = [{
    At byte `offset` of the state; a parameter starts from the weights at
    `init_offset`, the other kinds from zeros (`init_offset` = -1).
  }];
  let parameters = (ins StringRefParameter<"the parameter's name">:$name,
                        "StateKind":$kind,
                        "::mlir::RankedTensorType":$type,
                        "int64_t":$offset,
                        DefaultValuedParameter<"int64_t", "-1">:$init_offset);
  let genVerifyDecl = 1;
}

def Tfm_IndexCheckAttr : Tfm_Attr<"IndexCheck", "index_check"> {
  let summary = "a run-time check that indices lie in their range";
  let description = [{
    Compiled code checks the indices an op reads (token ids, labels)
    against [`lower`, `upper`) and, at the first one outside, stops the run
    with a status that names `op` (where the op came from) and `tensor`
    (what holds the index: an entry input, numbered `input`, or a value
    computed by the model, `input` = -1).
  }];
  let parameters = (ins StringRefParameter<"the op">:$op,
                        StringRefParameter<"the tensor">:$tensor,
                        DefaultValuedParameter<"int64_t", "-1">:$input,
                        "int64_t":$lower, "int64_t":$upper);
  let genVerifyDecl = 1;
}

def Tfm_DynamicEntryAttr : Tfm_Attr<"DynamicEntry", "dynamic_entry"> {
  let summary = "an entry point that serves a range of sizes from buckets";
  let description = [{
    The entry `name` takes every size from `min_sizes[s]` to `max_sizes[s]`
    for each dimension symbol `symbols[s]`. `inputs` and `outputs` give,
    for each axis of each of the entry's tensors, the symbol it has (an
    index into `symbols`) or -1. `buckets` are the static functions that
    serve it, by increasing size, and `bucket_sizes` their sizes (one row of
    `symbols.size()` per bucket); each bucket takes the entry's inputs and
    then one additive key mask per element of `key_masks` (the symbol it
    masks). tfm-exact-padding writes it, after proving that padding each
    bucket's inputs with zeros changes none of the outputs' rows within
    the run's sizes.
  }];
  let parameters = (ins StringRefParameter<"the entry's name">:$name,
                        "::mlir::ArrayAttr":$symbols,
                        "::mlir::DenseI64ArrayAttr":$min_sizes,
                        "::mlir::DenseI64ArrayAttr":$max_sizes,
                        "::mlir::ArrayAttr":$inputs,
                        "::mlir::ArrayAttr":$outputs,
                        "::mlir::DenseI64ArrayAttr":$key_masks,
                        "::mlir::ArrayAttr":$buckets,
                        "::mlir::DenseI64ArrayAttr":$bucket_sizes);
  let genVerifyDecl = 1;
}

#endif // TFM_IR_TFMATTRS_TD
