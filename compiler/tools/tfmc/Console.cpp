//===- Console.cpp - tfmc's messages and its one progress line ------------===//
//
// Long work (a compile's passes, the import of many buckets, training)
// redraws one line on a terminal's stderr. Every message clears it first,
// so an error never lands at the end of a half-drawn progress line.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir::tfm::tfmc;

namespace {
bool progressShown = false;
} // namespace

void mlir::tfm::tfmc::showProgress(llvm::StringRef line) {
  if (!llvm::errs().is_displayed())
    return;
  llvm::errs() << "\r\033[K" << line;
  llvm::errs().flush();
  progressShown = true;
}

void mlir::tfm::tfmc::clearProgress() {
  if (!progressShown)
    return;
  llvm::errs() << "\r\033[K";
  llvm::errs().flush();
  progressShown = false;
}

llvm::raw_ostream &mlir::tfm::tfmc::error() {
  clearProgress();
  return llvm::WithColor::error(llvm::errs(), "tfmc");
}
