//===- BugReport.h - Where a crash of the tools is reported -----*- C++ -*-===//
//
// LLVM's crash handler prints a stack trace with a request to report the
// bug to LLVM; a crash in tfmc or tfm-opt is tfm's to fix, so the request
// names this project.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_TOOLS_BUGREPORT_H
#define TFM_TOOLS_BUGREPORT_H

#include "llvm/Support/PrettyStackTrace.h"

namespace mlir::tfm {

inline void setBugReportMessage() {
  llvm::setBugReportMsg(
      "This is a bug in tfm (not in LLVM or MLIR). Please report it to the "
      "tfm project with the command line, the model that caused it, and the "
      "stack trace below.\n");
}

} // namespace mlir::tfm

#endif // TFM_TOOLS_BUGREPORT_H
