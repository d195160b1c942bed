//===- ModelGraph.cpp - tfmc inspect --dot --------------------------------===//
//
// The model after fusion as a Graphviz graph that reads like the model's
// own: each node is named by the ONNX node it came from (name and kind), a
// fused op lists every node it absorbed, and a node where a fusion was
// missed is outlined in red with the reason. MLIR's op graph names ops and
// SSA values instead, which a model's author does not know.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "tfm/Conversion/TfmToGPU/KernelStrategy.h"
#include "tfm/IR/TfmOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using mlir::tfm::tfmc::FusionSite;

namespace {

/// An ONNX node, as the importer locates the ops it makes:
/// NameLoc(node name, NameLoc(op type)).
struct Node {
  std::string name, kind;
};

void collectNodes(Location loc, SmallVectorImpl<Node> &nodes) {
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location l : fused.getLocations())
      collectNodes(l, nodes);
    return;
  }
  Node n;
  if (auto name = dyn_cast<NameLoc>(loc)) {
    n.name = name.getName().str();
    if (auto kind = dyn_cast<NameLoc>(name.getChildLoc()))
      n.kind = kind.getName().str();
  } else if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    n.name = llvm::formatv("{0}:{1}", llvm::sys::path::filename(
                                          file.getFilename().getValue()),
                           file.getLine())
                 .str();
  } else if (auto call = dyn_cast<CallSiteLoc>(loc)) {
    collectNodes(call.getCallee(), nodes);
    return;
  } else {
    return;
  }
  if (llvm::none_of(nodes, [&](const Node &o) { return o.name == n.name; }))
    nodes.push_back(std::move(n));
}

/// The ONNX nodes at `loc`, anchor first; file:line for MLIR input.
SmallVector<Node> nodesAt(Location loc) {
  SmallVector<Node> nodes;
  collectNodes(loc, nodes);
  return nodes;
}

/// `s` as the inside of a Graphviz string: quotes and backslashes escaped,
/// newlines as centered line breaks.
std::string escape(StringRef s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string typeText(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (auto t = dyn_cast<RankedTensorType>(type)) {
    os << t.getElementType() << "[";
    llvm::interleave(t.getShape(), os, [&](int64_t d) {
      if (ShapedType::isDynamic(d))
        os << "?";
      else
        os << d;
    }, "x");
    os << "]";
  } else {
    os << type;
  }
  return s;
}

bool isFusedOp(Operation *op) {
  return isa<tfm::QKVProjectionOp, tfm::MaskedSoftmaxOp, tfm::AttentionOp,
             tfm::AddLayerNormOp, tfm::GatedLinearOp, tfm::RotaryOp>(op) ||
         (isa<tfm::LinearOp>(op) && isa<FusedLoc>(op->getLoc()));
}

/// A graph input or output: its ONNX name (or `fallback`) and type.
void writeTerminal(raw_ostream &os, StringRef id, StringAttr name,
                   const std::string &fallback, Type type, StringRef fill) {
  os << llvm::formatv("    {0} [shape=box, style=\"rounded,filled\", "
                      "fillcolor=\"{1}\", label=\"{2}\\n{3}\"];\n",
                      id, fill, escape(name ? name.str() : fallback),
                      escape(typeText(type)));
}

/// The graph of one entry function, as a cluster of `os`'s digraph.
void writeEntry(func::FuncOp fn, unsigned index, ArrayRef<FusionSite> sites,
                raw_ostream &os) {
  std::string prefix = llvm::formatv("e{0}_", index).str();
  os << llvm::formatv("  subgraph cluster_{0} {{\n    label=\"@{1}\";\n",
                      index, escape(fn.getSymName()));
  llvm::DenseMap<Value, std::string> source;
  for (auto [i, arg] : llvm::enumerate(fn.getArguments())) {
    std::string id = prefix + "in" + std::to_string(i);
    writeTerminal(os, id, fn.getArgAttrOfType<StringAttr>(i, "tfm.name"),
                  "arg" + std::to_string(i), arg.getType(), "#e8f5e9");
    source[arg] = id;
  }
  unsigned n = 0;
  for (Operation &op : fn.getBody().getOps()) {
    if (isa<arith::ConstantOp>(op))
      continue; // weights and scalars: part of the node that reads them
    std::string id = prefix + "n" + std::to_string(n++);
    for (Value r : op.getResults())
      source[r] = id;
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        std::string out = prefix + "out" + std::to_string(i);
        writeTerminal(os, out, fn.getResultAttrOfType<StringAttr>(i, "tfm.name"),
                      "result" + std::to_string(i), v.getType(), "#fff3e0");
        if (source.count(v))
          os << llvm::formatv("    {0} -> {1};\n", source[v], out);
      }
      continue;
    }
    SmallVector<Node> nodes = nodesAt(op.getLoc());
    std::string label, tooltip, style = "filled", fill = "white",
                                color = "black";
    StringRef opName = op.getName().getStringRef();
    if (isFusedOp(&op)) {
      // The fused op first, then the nodes it replaced, a few per line.
      fill = "#bbdefb";
      label = opName.str();
      tooltip = opName.str() + " fused from:";
      for (auto [i, node] : llvm::enumerate(nodes)) {
        tooltip += "\n" + node.name + (node.kind.empty() ? "" : " (" + node.kind + ")");
        if (i < 6)
          label += "\n" + node.name + (node.kind.empty() ? "" : " (" + node.kind + ")");
      }
      if (nodes.size() > 6)
        label += llvm::formatv("\n+ {0} more", nodes.size() - 6).str();
    } else if (!nodes.empty()) {
      label = nodes.front().name + "\n" +
              (nodes.front().kind.empty() ? opName.str() : nodes.front().kind);
      tooltip = opName.str();
    } else {
      label = opName.str();
    }
    if (op.getNumResults() == 1)
      label += "\n" + typeText(op.getResult(0).getType());
    // Misses are reported at the op's anchor location.
    for (const FusionSite &site : sites) {
      if (site.fused || site.loc != op.getLoc())
        continue;
      color = "red";
      style = "filled,bold";
      label += "\nmissed: " + site.kind;
      tooltip += "\nmissed " + site.kind + ": " + site.reason;
    }
    os << llvm::formatv("    {0} [shape=box, style=\"{1}\", fillcolor=\"{2}\", "
                        "color=\"{3}\", label=\"{4}\", tooltip=\"{5}\"];\n",
                        id, style, fill, color, escape(label), escape(tooltip));
    for (Value v : op.getOperands())
      if (source.count(v))
        os << llvm::formatv("    {0} -> {1};\n", source[v], id);
  }
  os << "  }\n";
}

} // namespace

void mlir::tfm::tfmc::writeModelGraph(ModuleOp module, StringRef title,
                                      ArrayRef<FusionSite> sites,
                                      raw_ostream &os) {
  os << "digraph model {\n"
     << llvm::formatv("  label=\"{0}\";\n  labelloc=t;\n", escape(title))
     << "  node [fontname=\"Helvetica\", fontsize=10];\n"
     << "  edge [arrowsize=0.6];\n";
  unsigned index = 0;
  for (func::FuncOp fn : module.getOps<func::FuncOp>())
    if (!fn.isDeclaration())
      writeEntry(fn, index++, sites, os);
  os << "}\n";
}

mlir::tfm::tfmc::FusionRemarkCollector::FusionRemarkCollector(
    MLIRContext *context, std::vector<FusionSite> &sites,
    std::vector<KernelSite> *kernels)
    : handler(context, [&sites, kernels](Diagnostic &d) {
        std::string text = d.str();
        StringRef msg = text;
        if (d.getSeverity() != DiagnosticSeverity::Remark)
          return failure();
        if (kernels && msg.consume_front(kGPUKernelRemarkPrefix)) {
          // "<op>: <kernel>", then "; not <better>: <why>".
          auto [op, rest] = msg.split(": ");
          auto [kernel, miss] = rest.split("; not ");
          auto [better, reason] = miss.split(": ");
          kernels->push_back({op.str(), kernel.str(), better.str(),
                              reason.str(), d.getLocation()});
          return success();
        }
        if (kernels && msg.consume_front(kGemmKernelRemarkPrefix)) {
          // "<kernel>", then "; not <better>: <why>".
          auto [kernel, miss] = msg.split("; not ");
          auto [better, reason] = miss.split(": ");
          kernels->push_back({"gemm", kernel.str(), better.str(), reason.str(),
                              d.getLocation(), /*gemm=*/true});
          return success();
        }
        // The fusions' sites, and --quantize's layers (tfm-quantize).
        if (!msg.starts_with("tfm-fuse-") && !msg.starts_with("tfm-quantize: "))
          return failure();
        auto [flag, rest] = msg.split(": ");
        flag.consume_front("tfm-fuse-");
        flag.consume_front("tfm-");
        FusionSite site{flag.str(), d.getLocation(), "", rest == "fused"};
        if (!site.fused)
          site.reason = rest.drop_front(strlen("missed: ")).str();
        sites.push_back(std::move(site));
        return success();
      }) {}
