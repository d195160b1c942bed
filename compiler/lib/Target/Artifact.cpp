//===- Artifact.cpp - The model.so artifact -------------------------------===//
//
// The metadata table and the wrappers are built with LLVM's IR builder after
// translation rather than in the LLVM dialect: the weights blob can be
// hundreds of megabytes, and a raw ConstantDataArray holds it without the
// copies an MLIR attribute round trip would make. The parts live in
// ArtifactAbi.cpp (the ABI's types, the module's tables),
// ArtifactEntries.cpp (the runtime's calls, the entry wrappers) and
// ArtifactMetadata.cpp (the table tfm_model_v1 returns); ArtifactIR.h
// declares them.
//
//===----------------------------------------------------------------------===//

#include "tfm/Target/Artifact.h"
#include "ArtifactIR.h"
#include "tfm/IR/ConstantData.h"
#include "tfm/IR/TfmOps.h"
#include "tfm/Target/Symbols.h"
#include "tfm/Transforms/LayoutRules.h"

#include "tfm/abi.h"

#include <cstddef>
#include <iterator>
#include <numeric>

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/BinaryFormat/ELF.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/TargetParser/X86TargetParser.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

const llvm::Target *nativeTarget(std::string &error) {
  static bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)initialized;
  return llvm::TargetRegistry::lookupTarget(llvm::sys::getDefaultTargetTriple(),
                                            error);
}

std::unique_ptr<llvm::TargetMachine>
makeTargetMachine(const ArtifactOptions &options, std::string &error) {
  if (!checkTargetCpu(options.cpu, error))
    return nullptr;
  std::string triple = llvm::sys::getDefaultTargetTriple();
  const llvm::Target *target = nativeTarget(error);
  if (!target)
    return nullptr;
  std::string cpu = options.cpu, features;
  if (cpu == "native") {
    cpu = llvm::sys::getHostCPUName().str();
    llvm::SubtargetFeatures f;
    for (auto &[name, on] : llvm::sys::getHostCPUFeatures())
      f.AddFeature(name, on);
    features = f.getString();
  }
  llvm::TargetOptions to;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, cpu, features, to, llvm::Reloc::PIC_, std::nullopt,
      options.optimize ? llvm::CodeGenOptLevel::Aggressive
                       : llvm::CodeGenOptLevel::None));
  if (!tm)
    error = "cannot create a target machine for '" + triple + "' and CPU '" +
            cpu + "'";
  return tm;
}

/// Defines __truncsfbf2 in `ir`, hidden. arith-expand writes the casts to
/// bf16 as integer work, but on a CPU without bf16 conversions LLVM still
/// calls the routine when it legalizes a select, phi or vector of bf16 by
/// widening it to f32 and rounding back (the GPU emulation's bf16 tiles),
/// and the artifact's link has no compiler runtime to provide it. The
/// rounding is the expansion's: to nearest even, a NaN to the quiet 0x7fc0.
void defineBf16Rounding(llvm::Module &ir) {
  constexpr llvm::StringLiteral kName = "__truncsfbf2";
  if (llvm::Function *f = ir.getFunction(kName); f && !f->isDeclaration())
    return;
  llvm::LLVMContext &ctx = ir.getContext();
  auto *type = llvm::FunctionType::get(llvm::Type::getBFloatTy(ctx),
                                       {llvm::Type::getFloatTy(ctx)}, false);
  auto *fn = llvm::cast<llvm::Function>(
      ir.getOrInsertFunction(kName, type).getCallee());
  fn->setLinkage(llvm::GlobalValue::ExternalLinkage);
  fn->setVisibility(llvm::GlobalValue::HiddenVisibility);
  fn->setDoesNotThrow();
  fn->setMemoryEffects(llvm::MemoryEffects::none());
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  llvm::Value *x = fn->getArg(0);
  llvm::Value *bits = b.CreateBitCast(x, b.getInt32Ty());
  llvm::Value *lsb = b.CreateAnd(b.CreateLShr(bits, 16), 1);
  llvm::Value *rounded =
      b.CreateLShr(b.CreateAdd(bits, b.CreateAdd(lsb, b.getInt32(0x7fff))), 16);
  llvm::Value *half =
      b.CreateSelect(b.CreateFCmpUNO(x, x), b.getInt16(0x7fc0),
                     b.CreateTrunc(rounded, b.getInt16Ty()));
  b.CreateRet(b.CreateBitCast(half, llvm::Type::getBFloatTy(ctx)));
}

/// What the metadata says of `tm`'s CPU (artifact::CpuTarget).
artifact::CpuTarget cpuTargetOf(const llvm::TargetMachine &tm) {
  artifact::CpuTarget cpu{tm.getTargetCPU().str(), ""};
  const llvm::MCSubtargetInfo *info = tm.getMCSubtargetInfo();
#define TFM_RECORD_FEATURE(name, leaf, subleaf, reg, bit, xcr0)                \
  if (info->checkFeatures("+" name))                                           \
    cpu.features += (cpu.features.empty() ? "" : ",") + std::string(name);
  TFM_CPU_FEATURES(TFM_RECORD_FEATURE)
#undef TFM_RECORD_FEATURE
  return cpu;
}

} // namespace

bool mlir::tfm::checkTargetCpu(StringRef cpu, std::string &why) {
  if (cpu == "native")
    return true;
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  if (triple.getArch() == llvm::Triple::x86_64) {
    // LLVM takes a 32-bit CPU's name and aborts when it generates code.
    if (llvm::X86::parseArchX86(cpu, /*Only64Bit=*/true) != llvm::X86::CK_None)
      return true;
    SmallVector<StringRef> names;
    llvm::X86::fillValidCPUArchList(names, /*Only64Bit=*/true);
    why = ("unknown CPU '" + cpu +
           "'; --cpu takes 'native' (this machine), a portable level "
           "(x86-64, x86-64-v2, x86-64-v3, x86-64-v4) or an x86-64 CPU: " +
           llvm::join(names, ", "))
              .str();
    return false;
  }
  const llvm::Target *target = nativeTarget(why);
  if (!target)
    return false;
  std::unique_ptr<llvm::MCSubtargetInfo> info(
      target->createMCSubtargetInfo(triple.str(), "", ""));
  if (info && info->isCPUStringValid(cpu))
    return true;
  why = ("unknown CPU '" + cpu + "' for " + triple.str()).str();
  return false;
}

bool mlir::tfm::targetCpuHas(StringRef cpu, StringRef feature) {
  if (cpu == "native") {
    llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
    auto it = host.find(feature);
    return it != host.end() && it->second;
  }
  std::string why;
  const llvm::Target *target = nativeTarget(why);
  if (!target || !checkTargetCpu(cpu, why))
    return false;
  std::unique_ptr<llvm::MCSubtargetInfo> info(target->createMCSubtargetInfo(
      llvm::sys::getDefaultTargetTriple(), cpu, ""));
  return info && info->checkFeatures(("+" + feature).str());
}

FailureOr<WeightsBlob> mlir::tfm::weightsBlob(ModuleOp module) {
  auto values = module->getAttrOfType<ArrayAttr>("tfm.weights");
  auto offsets = module->getAttrOfType<DenseI64ArrayAttr>("tfm.weight_offsets");
  auto total = module->getAttrOfType<IntegerAttr>("tfm.weights_bytes");
  if (!values || !offsets || !total || total.getInt() < 0 ||
      values.size() != static_cast<size_t>(offsets.size()))
    return module.emitError("no weights layout: run tfm-lower-to-cpu first");
  return WeightsBlob{values, offsets,
                       static_cast<uint64_t>(total.getInt())};
}

LogicalResult mlir::tfm::writeWeights(const WeightsBlob &layout,
                                      llvm::raw_ostream &os,
                                      std::string &error) {
  // Streamed from the attributes: a blob of a large model's weights would
  // be one more copy of them, and its fresh pages cost seconds to fault in.
  ArrayAttr values = layout.values;
  ArrayRef<int64_t> offsets = layout.offsets.asArrayRef();
  SmallVector<unsigned> order(values.size());
  std::iota(order.begin(), order.end(), 0u);
  llvm::stable_sort(order, [&](unsigned a, unsigned b) {
    return offsets[a] < offsets[b];
  });
  uint64_t at = 0;
  std::vector<char> expanded;
  for (unsigned i : order) {
    auto dense = dyn_cast<DenseElementsAttr>(values[i]);
    if (!dense) {
      error = "weights must be dense elements attributes";
      return failure();
    }
    Type elem = dense.getElementType();
    int64_t n = dense.getNumElements();
    size_t width = elementBytes(elem);
    uint64_t offset = offsets[i], size = n * width;
    if (offsets[i] < 0 || offset < at || offset + size > layout.bytes) {
      error = "weight " + std::to_string(i) + " does not fit the weights layout";
      return failure();
    }
    os.write_zeros(offset - at);
    ArrayRef<char> raw = dense.getRawData();
    if (elem.isInteger(1)) {
      expanded.assign(size, 0);
      int64_t k = 0;
      for (bool v : dense.getValues<bool>())
        expanded[k++] = v ? 1 : 0;
      os.write(expanded.data(), size);
    } else if (elem.getIntOrFloatBitWidth() < 8) {
      // A 4-bit element is a byte in a buffer, read as an i8 that holds
      // its value (raw data keeps only its bits).
      expanded.resize(size);
      int64_t k = 0;
      for (const APInt &v : dense.getValues<APInt>())
        expanded[k++] = static_cast<char>(
            elem.isUnsignedInteger() ? v.getZExtValue() : v.getSExtValue());
      os.write(expanded.data(), size);
    } else if (dense.isSplat()) {
      expanded.resize(size);
      for (int64_t k = 0; k < n; ++k)
        std::memcpy(expanded.data() + k * width, raw.data(), width);
      os.write(expanded.data(), size);
    } else {
      os.write(raw.data(), size);
    }
    at = offset + size;
  }
  os.write_zeros(layout.bytes - at);
  return success();
}

FailureOr<std::unique_ptr<llvm::Module>>
mlir::tfm::translateToArtifactIR(ModuleOp module,
                                 llvm::LLVMContext &llvmContext,
                                 const ArtifactOptions &options) {
  // The tables first: the translation rejects the tfm.* attributes, which
  // the tables keep alive.
  FailureOr<artifact::ModuleTables> tables =
      artifact::ModuleTables::read(module);
  if (failed(tables))
    return failure();
  artifact::dropTables(module);

  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  module.getContext()->appendDialectRegistry(registry);
  std::unique_ptr<llvm::Module> m =
      translateModuleToLLVMIR(module, llvmContext, "tfm_model");
  if (!m)
    return module.emitError("translation to LLVM IR failed");

  std::string error;
  auto tm = makeTargetMachine(options, error);
  if (!tm)
    return module.emitError(error);
  m->setDataLayout(tm->createDataLayout());
  m->setTargetTriple(tm->getTargetTriple().str());

  FailureOr<artifact::AbiTypes> abi =
      artifact::AbiTypes::get(llvmContext, m->getDataLayout(), error);
  if (failed(abi))
    return module.emitError(error);
  if (failed(artifact::defineHostCalls(module, *m, *abi)))
    return failure();
  FailureOr<SmallVector<llvm::Constant *>> entries =
      artifact::wrapEntries(module, *m, *abi, *tables);
  if (failed(entries) ||
      failed(artifact::emitMetadata(module, *m, *abi, *tables, *entries,
                                    options, cpuTargetOf(*tm))))
    return failure();

  std::string verifyErrors;
  llvm::raw_string_ostream vs(verifyErrors);
  if (llvm::verifyModule(*m, &vs))
    return module.emitError("the artifact's LLVM IR is invalid: ")
           << verifyErrors;

  if (!options.optimize)
    return m;
  // O2: inlining and the loop vectorizer over the glue loops. O3 took 3.5 s
  // more on one encoder layer and made the code no faster, since the
  // kernels dominate.
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  // No unrolling or interleaving: the glue loops are copies and
  // elementwise maps bound by memory, and unrolled they tripled the code
  // and its generation time.
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = false;
  tuning.LoopInterleaving = false;
  llvm::PassBuilder pb(tm.get(), tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm =
      pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2);
  mpm.run(*m, mam);
  return m;
}

LogicalResult mlir::tfm::writeWeightsObject(const WeightsBlob &layout,
                                            StringRef path,
                                            std::string &error) {
  // A relocatable ELF object with one read-only section and one hidden
  // symbol over it, written directly: code generation through LLVM would
  // copy and hash the weights several times, seconds for a large model.
  const uint64_t blobSize = layout.bytes;
  namespace E = llvm::ELF;
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  uint16_t machine = triple.getArch() == llvm::Triple::x86_64    ? E::EM_X86_64
                     : triple.getArch() == llvm::Triple::aarch64 ? E::EM_AARCH64
                                                                 : 0;
  if (!machine || !triple.isLittleEndian()) {
    error = "embedded weights are written for x86-64 and AArch64 only; use "
            "--external-weights";
    return failure();
  }
  const char shstrtab[] = "\0.rodata.tfm_weights\0.symtab\0.strtab\0.shstrtab";
  const uint32_t nameRodata = 1, nameSymtab = 21, nameStrtab = 29,
                 nameShstrtab = 37;
  std::string strtab = std::string("\0", 1) + kWeightsSymbol + '\0';
  auto align = [](uint64_t v, uint64_t a) { return (v + a - 1) / a * a; };
  uint64_t dataOff = align(sizeof(E::Elf64_Ehdr), 64);
  uint64_t symOff = align(dataOff + blobSize, 8);
  uint64_t strOff = symOff + 2 * sizeof(E::Elf64_Sym);
  uint64_t shstrOff = strOff + strtab.size();
  uint64_t shOff = align(shstrOff + sizeof(shstrtab), 8);

  E::Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, E::ElfMagic, 4);
  eh.e_ident[E::EI_CLASS] = E::ELFCLASS64;
  eh.e_ident[E::EI_DATA] = E::ELFDATA2LSB;
  eh.e_ident[E::EI_VERSION] = E::EV_CURRENT;
  eh.e_type = E::ET_REL;
  eh.e_machine = machine;
  eh.e_version = E::EV_CURRENT;
  eh.e_shoff = shOff;
  eh.e_ehsize = sizeof(E::Elf64_Ehdr);
  eh.e_shentsize = sizeof(E::Elf64_Shdr);
  eh.e_shnum = 5;
  eh.e_shstrndx = 4;

  E::Elf64_Sym syms[2]{};
  syms[1].st_name = 1;
  syms[1].setBindingAndType(E::STB_GLOBAL, E::STT_OBJECT);
  syms[1].st_other = E::STV_HIDDEN;
  syms[1].st_shndx = 1;
  syms[1].st_size = blobSize;

  E::Elf64_Shdr sh[5]{};
  sh[1] = {nameRodata, E::SHT_PROGBITS, E::SHF_ALLOC, 0, dataOff, blobSize,
           0, 0, 64, 0};
  sh[2] = {nameSymtab, E::SHT_SYMTAB, 0, 0, symOff, 2 * sizeof(E::Elf64_Sym),
           3, 1, 8, sizeof(E::Elf64_Sym)};
  sh[3] = {nameStrtab, E::SHT_STRTAB, 0, 0, strOff, strtab.size(), 0, 0, 1, 0};
  sh[4] = {nameShstrtab, E::SHT_STRTAB, 0, 0, shstrOff, sizeof(shstrtab), 0, 0,
           1, 0};

  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    error = "cannot write '" + path.str() + "': " + ec.message();
    return failure();
  }
  auto pad = [&](uint64_t to) { os.write_zeros(to - os.tell()); };
  os.write(reinterpret_cast<const char *>(&eh), sizeof(eh));
  pad(dataOff);
  if (failed(writeWeights(layout, os, error)))
    return failure();
  pad(symOff);
  os.write(reinterpret_cast<const char *>(syms), sizeof(syms));
  os << strtab;
  os.write(shstrtab, sizeof(shstrtab));
  pad(shOff);
  os.write(reinterpret_cast<const char *>(sh), sizeof(sh));
  os.close();
  if (os.has_error()) {
    error = "cannot write '" + path.str() + "': " + os.error().message();
    os.clear_error();
    return failure();
  }
  return success();
}

LogicalResult mlir::tfm::writeObjectFile(llvm::Module &ir,
                                         const ArtifactOptions &options,
                                         StringRef path, std::string &error) {
  auto tm = makeTargetMachine(options, error);
  if (!tm)
    return failure();
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write '" + path.str() + "': " + ec.message();
    return failure();
  }
  defineBf16Rounding(ir);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, out.os(), nullptr,
                              llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return failure();
  }
  pm.run(ir);
  out.os().flush();
  if (out.os().has_error()) {
    error = "cannot write '" + path.str() + "'";
    out.os().clear_error();
    return failure();
  }
  out.keep();
  return success();
}

LogicalResult mlir::tfm::linkSharedLibrary(ArrayRef<std::string> objects,
                                           StringRef soPath, bool relocatable,
                                           std::string &error) {
  auto linker = llvm::sys::findProgramByName("ld.lld");
  if (!linker)
    linker = llvm::sys::findProgramByName("ld.lld-19");
  if (!linker) {
    error = "cannot find the linker ld.lld (Debian package lld)";
    return failure();
  }
  // libm for erf and tanh, libc for malloc, libgcc_s for the conversions
  // the target has no instruction for (f64 to f16); linked by name so that
  // the library also loads into processes that did not load them globally,
  // and only where used (--as-needed).
  std::string multiarch = llvm::Triple(llvm::sys::getDefaultTargetTriple())
                              .getArchName()
                              .str() +
                          "-linux-gnu";
  SmallVector<std::string> args = {*linker, "-o", soPath.str()};
  if (relocatable) {
    args.push_back("-r");
    args.append(objects.begin(), objects.end());
  } else {
    for (const char *a :
         {"-shared", "--no-undefined", "--as-needed", "-z", "noexecstack",
          "-z", "relro", "--hash-style=both"})
      args.push_back(a);
    args.push_back("-L/lib/" + multiarch);
    args.push_back("-L/usr/lib/" + multiarch);
    args.append(objects.begin(), objects.end());
    args.push_back("-l:libm.so.6");
    args.push_back("-l:libc.so.6");
    args.push_back("-l:libgcc_s.so.1");
  }
  SmallVector<StringRef> argv(args.begin(), args.end());
  SmallString<128> errFile;
  if (llvm::sys::fs::createTemporaryFile("tfm-link", "txt", errFile)) {
    error = "cannot create a temporary file";
    return failure();
  }
  std::optional<StringRef> redirects[] = {std::nullopt, errFile.str(),
                                          errFile.str()};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(*linker, argv, std::nullopt, redirects,
                                     0, 0, &execError);
  auto log = llvm::MemoryBuffer::getFile(errFile);
  llvm::sys::fs::remove(errFile);
  if (rc != 0) {
    error = "linking '" + soPath.str() + "' failed" +
            (execError.empty() ? "" : ": " + execError);
    if (log && !(*log)->getBuffer().empty())
      error += ":\n" + (*log)->getBuffer().str();
    return failure();
  }
  return success();
}
