//===- Buckets.cpp - One artifact for a range of sizes --------------------===//
//
// `--shape sequence=1..512` compiles the model once per bucket size, each a
// static function of its own (`infer.sequence128`), into one module that
// tfm-exact-padding then proves and annotates. The importer folds each
// bucket from the same graph, so shape arithmetic in exporter output needs
// no symbolic form. Which axes a symbol sizes is read off the buckets
// themselves: an input axis is the symbol's when its length is the
// bucket's size of the symbol in every bucket.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "mlir/IR/SymbolTable.h"
#include "tfm/Frontends/ONNX/Importer.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::tfmc;

std::optional<SizeRange> mlir::tfm::tfmc::parseSizeRange(StringRef spec,
                                                         std::string &error) {
  auto [name, value] = spec.rsplit('=');
  auto [lo, hi] = value.split("..");
  if (hi.data() == nullptr || !value.contains(".."))
    return std::nullopt;
  SizeRange r{name.str(), 0, 0};
  if (name.empty() || lo.getAsInteger(10, r.min) ||
      hi.getAsInteger(10, r.max) || r.min < 1 || r.min > r.max) {
    error = "--shape " + spec.str() +
            ": a range is SYMBOL=LO..HI with 1 <= LO <= HI";
    return std::nullopt;
  }
  return r;
}

SmallVector<int64_t> mlir::tfm::tfmc::bucketSizes(const SizeRange &range,
                                                  unsigned perOctave,
                                                  bool everySizeTo16) {
  // Every size up to 16 (where a run costs little more than its overhead,
  // and odd sizes run no faster than the next even one); above, `perOctave`
  // evenly spaced sizes per doubling, so a run pads by at most a factor of
  // 1 + 1/perOctave. Without every size to 16, the doublings start at 1.
  SmallVector<int64_t> sizes;
  for (int64_t s = range.min; s <= range.max;) {
    sizes.push_back(s);
    int64_t octave = 1;
    while (octave * 2 <= s)
      octave *= 2;
    int64_t step =
        everySizeTo16 && s < 16 ? 1 : std::max<int64_t>(1, octave / perOctave);
    s = (s / step + 1) * step;
  }
  if (sizes.back() != range.max)
    sizes.push_back(range.max);
  return sizes;
}

namespace {

/// How many buckets make a compile long enough to say so first.
constexpr size_t kBucketsWorthANote = 32;
/// Sizes per doubling above 16 where one range is given and the user did
/// not choose.
constexpr unsigned kDefaultBucketsPerOctave = 8;
/// The most buckets several ranges get where the user did not choose: a
/// compile in well under 30 s for a model of GPT-2's size class.
constexpr size_t kBucketBudget = 64;

std::string bucketName(StringRef entry, ArrayRef<SizeRange> ranges,
                       ArrayRef<int64_t> sizes) {
  std::string name = entry.str();
  for (auto [r, s] : llvm::zip(ranges, sizes))
    name += "." + r.symbol + std::to_string(s);
  return name;
}

} // namespace

OwningOpRef<ModuleOp>
mlir::tfm::tfmc::importBuckets(MLIRContext *context, StringRef path,
                               const onnx_import::ImportOptions &base,
                               ArrayRef<SizeRange> ranges,
                               std::optional<unsigned> perOctave) {
  // Every combination of the ranges' bucket sizes. Each bucket is a compile
  // of the whole model (two ranges of a GPT-2 made 576 at the single
  // range's default and took over two minutes), so unless the user chose,
  // several ranges get as many sizes per doubling as keeps them within a
  // budget.
  auto gridOf = [&](unsigned n, bool everySizeTo16) {
    SmallVector<SmallVector<int64_t>> perRange;
    for (const SizeRange &r : ranges)
      perRange.push_back(bucketSizes(r, n, everySizeTo16));
    return perRange;
  };
  auto count = [](ArrayRef<SmallVector<int64_t>> perRange) {
    size_t n = 1;
    for (const auto &sizes : perRange)
      n *= sizes.size();
    return n;
  };
  unsigned chosen = perOctave.value_or(kDefaultBucketsPerOctave);
  SmallVector<SmallVector<int64_t>> perRange = gridOf(chosen, true);
  bool lowered = false;
  if (!perOctave && count(perRange) > kBucketBudget) {
    for (unsigned n : {4u, 2u, 1u}) {
      chosen = n;
      perRange = gridOf(n, false);
      lowered = true;
      if (count(perRange) <= kBucketBudget)
        break;
    }
  }
  SmallVector<SmallVector<int64_t>> grid{{}};
  for (auto &sizes : perRange) {
    SmallVector<SmallVector<int64_t>> next;
    for (auto &row : grid)
      for (int64_t s : sizes) {
        next.push_back(row);
        next.back().push_back(s);
      }
    grid = std::move(next);
  }
  // Say what the ranges cost before paying, on a terminal or not.
  if (grid.size() >= kBucketsWorthANote || lowered) {
    std::string sizes, flags;
    for (auto [r, range] : llvm::enumerate(ranges)) {
      sizes += (r ? " x " : "") + std::to_string(perRange[r].size());
      flags += (r ? ", " : "") + range.symbol + "=" +
               std::to_string(range.min) + ".." + std::to_string(range.max);
    }
    llvm::raw_ostream &note = llvm::WithColor::note(llvm::errs(), "tfmc");
    note << "--shape " << flags << " makes " << grid.size() << " buckets ("
         << sizes << "), each a compile of the whole model";
    if (lowered)
      note << "; to keep " << ranges.size() << " ranges within "
           << kBucketBudget << " buckets, " << chosen
           << " per doubling of each size, so a run pads by at most "
           << llvm::format("%.2g", 1.0 + 1.0 / chosen)
           << "x (--buckets-per-octave N chooses N per doubling above 16)\n";
    else
      note << "; narrower ranges or a smaller --buckets-per-octave (now "
           << chosen << ") make fewer\n";
  }
  bool progress = grid.size() > 1;
  SmallVector<OwningOpRef<ModuleOp>> modules;
  // The file and its weights are read once for every bucket.
  onnx_import::ImportOptions shared = base;
  shared.cache = onnx_import::makeImportCache();
  for (auto [k, sizes] : llvm::enumerate(grid)) {
    if (progress)
      showProgress("tfmc: importing bucket " + std::to_string(k + 1) +
                   " of " + std::to_string(grid.size()));
    onnx_import::ImportOptions options = shared;
    for (auto [r, s] : llvm::zip(ranges, sizes))
      options.inputShapes[r.symbol] = {s};
    OwningOpRef<ModuleOp> m = onnx_import::importFile(context, path, options);
    if (!m) {
      std::string at;
      for (auto [r, s] : llvm::zip(ranges, sizes))
        at += (at.empty() ? "" : ", ") + r.symbol + "=" + std::to_string(s);
      error() << "importing the bucket " << at << " failed\n";
      return {};
    }
    modules.push_back(std::move(m));
  }
  clearProgress();

  ModuleOp merged = *modules.front();
  Builder b(context);
  SmallVector<func::FuncOp> entries;
  for (auto fn : merged.getOps<func::FuncOp>())
    entries.push_back(fn);
  for (func::FuncOp fn : entries)
    if (!fn.isPublic()) {
      fn.emitError() << "a range of sizes compiles public functions only";
      return {};
    }
  for (func::FuncOp entry : entries) {
    StringRef name = entry.getName();
    SmallVector<func::FuncOp> buckets;
    for (auto [k, m] : llvm::enumerate(modules)) {
      auto fn = m->lookupSymbol<func::FuncOp>(name);
      if (!fn) {
        merged.emitError() << "a bucket lacks @" << name;
        return {};
      }
      buckets.push_back(fn);
    }
    // The symbol of each input axis: its length is the bucket's size of
    // the symbol in every bucket (with two or more sizes to tell by).
    for (unsigned i = 0; i < entry.getNumArguments(); ++i) {
      auto type = dyn_cast<RankedTensorType>(entry.getArgument(i).getType());
      if (!type)
        continue;
      SmallVector<Attribute> symbols(type.getRank(), b.getStringAttr(""));
      bool any = false;
      for (int64_t a = 0; a < type.getRank(); ++a)
        for (auto [r, range] : llvm::enumerate(ranges)) {
          if (perRange[r].size() < 2)
            continue;
          bool tracks = true;
          for (auto [k, fn] : llvm::enumerate(buckets)) {
            auto t = cast<RankedTensorType>(fn.getArgument(i).getType());
            tracks = tracks && t.getRank() == type.getRank() &&
                     t.getDimSize(a) == grid[k][r];
          }
          if (tracks) {
            symbols[a] = b.getStringAttr(range.symbol);
            any = true;
            break;
          }
        }
      if (any)
        for (func::FuncOp fn : buckets)
          fn.setArgAttr(i, "tfm.symbols", b.getArrayAttr(symbols));
    }
    for (auto [k, fn] : llvm::enumerate(buckets)) {
      fn->setAttr("tfm.bucket_of", b.getStringAttr(name));
      fn.setSymName(bucketName(name, ranges, grid[k]));
      if (k > 0)
        fn->moveBefore(merged.getBody(), merged.getBody()->end());
    }
  }
  // The first module's functions were renamed in place; the others' moved.
  SmallVector<NamedAttribute> bounds;
  for (const SizeRange &r : ranges)
    bounds.push_back(b.getNamedAttr(
        r.symbol, b.getDenseI64ArrayAttr({r.min, r.max})));
  merged->setAttr("tfm.symbol_ranges", b.getDictionaryAttr(bounds));
  return std::move(modules.front());
}
