//===- GPUMathLibrary.cpp - tfm-gpu-math-library --------------------------===//
//
// MLIR's NVVM conversion turns the math that has a PTX instruction (sqrt,
// abs, floor, ceil, rounding) into calls of libdevice's functions, which
// come with a CUDA toolkit that a build of tfm does not need, and which the
// driver cannot link at load time. So the kernel module defines those
// functions itself, each as its one PTX instruction, before the conversion
// looks them up; the functions without an instruction (exp, log, erf, ...)
// are polynomial approximations by then (tfm-approximate-math{all}).
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_GPUMATHLIBRARYPASS
#include "tfm/Conversion/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// A libdevice function and the PTX instruction that computes it.
struct MathFunction {
  const char *name;
  bool f64;
  unsigned arity;
  const char *ptx;
};

// Each is what libdevice computes: IEEE sqrt (not the approximate one),
// the four rounding modes of cvt, and exp2f's ex2.approx.
constexpr MathFunction kFunctions[] = {
    {"__nv_sqrtf", false, 1, "sqrt.rn.f32 $0, $1;"},
    {"__nv_sqrt", true, 1, "sqrt.rn.f64 $0, $1;"},
    {"__nv_fabsf", false, 1, "abs.f32 $0, $1;"},
    {"__nv_fabs", true, 1, "abs.f64 $0, $1;"},
    {"__nv_floorf", false, 1, "cvt.rmi.f32.f32 $0, $1;"},
    {"__nv_floor", true, 1, "cvt.rmi.f64.f64 $0, $1;"},
    {"__nv_ceilf", false, 1, "cvt.rpi.f32.f32 $0, $1;"},
    {"__nv_ceil", true, 1, "cvt.rpi.f64.f64 $0, $1;"},
    {"__nv_rintf", false, 1, "cvt.rni.f32.f32 $0, $1;"},
    {"__nv_rint", true, 1, "cvt.rni.f64.f64 $0, $1;"},
    {"__nv_truncf", false, 1, "cvt.rzi.f32.f32 $0, $1;"},
    {"__nv_trunc", true, 1, "cvt.rzi.f64.f64 $0, $1;"},
    // copysign(x, y): PTX's copysign takes the sign from its first source.
    {"__nv_copysignf", false, 2, "copysign.f32 $0, $2, $1;"},
    {"__nv_copysign", true, 2, "copysign.f64 $0, $2, $1;"},
    {"__nv_fmaf", false, 3, "fma.rn.f32 $0, $1, $2, $3;"},
    // exp2f is the special function unit's approximation (2 ulp); only
    // kernels that ask for math.exp2 get it, the others' exponentials
    // being polynomials by then.
    {"__nv_exp2f", false, 1, "ex2.approx.f32 $0, $1;"},
    {"__nv_fma", true, 3, "fma.rn.f64 $0, $1, $2, $3;"},
};

struct GPUMathLibraryPass
    : public mlir::tfm::impl::GPUMathLibraryPassBase<GPUMathLibraryPass> {
  void runOnOperation() override {
    gpu::GPUModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    b.setInsertionPoint(module.getBody()->getTerminator());
    Location loc = module.getLoc();
    for (const MathFunction &f : kFunctions) {
      Type t = f.f64 ? Type(b.getF64Type()) : Type(b.getF32Type());
      SmallVector<Type> params(f.arity, t);
      auto type = LLVM::LLVMFunctionType::get(t, params);
      // A declaration already there (from a conversion run earlier) gets
      // the body; a definition stays as it is.
      auto fn = module.lookupSymbol<LLVM::LLVMFuncOp>(f.name);
      if (fn && (!fn.isExternal() || fn.getFunctionType() != type))
        continue;
      if (!fn && module.lookupSymbol(f.name))
        continue;
      if (!fn)
        fn = b.create<LLVM::LLVMFuncOp>(loc, f.name, type,
                                        LLVM::Linkage::Internal);
      fn.setLinkage(LLVM::Linkage::Internal);
      Block *body = fn.addEntryBlock(b);
      OpBuilder fb = OpBuilder::atBlockEnd(body);
      std::string constraints = f.f64 ? "=d" : "=f";
      for (unsigned i = 0; i < f.arity; ++i)
        constraints += f.f64 ? ",d" : ",f";
      auto asmOp = fb.create<LLVM::InlineAsmOp>(
          loc, t, body->getArguments(), f.ptx, constraints,
          /*has_side_effects=*/false, /*is_align_stack=*/false,
          LLVM::AsmDialectAttr(), ArrayAttr());
      fb.create<LLVM::ReturnOp>(loc, asmOp.getResult(0));
    }
  }
};

} // namespace
