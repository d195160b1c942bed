//===- DetachedData.cpp - Large initializers left in the model's bytes ----===//
//
// Parsing a model copies every initializer's raw_data into a string of the
// parsed message, and the importer then copies it again into an attribute:
// for a model with a gigabyte of weights, a gigabyte of fresh pages that
// cost seconds to fault in, and a gigabyte more at the peak. The wire
// format is walked here instead, down to the graph's initializers, and the
// model is re-encoded without their large raw_data fields; each such
// tensor refers to its bytes in the model as external data does to a file,
// so the importer copies them once, from the model's mapping.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

using namespace mlir;
using namespace mlir::tfm::onnx_import;

namespace {

// Field numbers of onnx.proto, the ones the walk looks into.
constexpr uint64_t kModelGraph = 7;
constexpr uint64_t kGraphInitializer = 5;
constexpr uint64_t kTensorRawData = 9;
constexpr uint64_t kTensorExternalData = 13;
constexpr uint64_t kTensorDataLocation = 14;
constexpr uint64_t kEntryKey = 1, kEntryValue = 2;
constexpr unsigned kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5;

// Smaller tensors stay in the message: the copy costs nothing there, and
// the opset converter's shape inference reads small constants (shapes).
constexpr size_t kDetachFrom = 4096;

bool readVarint(StringRef &in, uint64_t &v) {
  v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (in.empty())
      return false;
    auto byte = static_cast<uint8_t>(in.front());
    in = in.drop_front();
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80))
      return true;
  }
  return false;
}

void writeVarint(std::string &out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void writeBytesField(std::string &out, uint64_t field, StringRef bytes) {
  writeVarint(out, field << 3 | kBytes);
  writeVarint(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

/// One field of a message: its number, its wire type, its whole encoding
/// (tag included) and, for a length-delimited field, its payload.
struct Field {
  uint64_t number;
  unsigned wireType;
  StringRef encoding, payload;
};

/// Reads the next field of `in`; false when the bytes are not a message
/// this walk understands (groups included), which the parser then reports.
bool nextField(StringRef &in, Field &f) {
  const char *start = in.data();
  uint64_t tag;
  if (!readVarint(in, tag))
    return false;
  f.number = tag >> 3;
  f.wireType = tag & 7;
  uint64_t value;
  switch (f.wireType) {
  case kVarint:
    if (!readVarint(in, value))
      return false;
    break;
  case kFixed64:
  case kFixed32: {
    size_t n = f.wireType == kFixed64 ? 8 : 4;
    if (in.size() < n)
      return false;
    in = in.drop_front(n);
    break;
  }
  case kBytes:
    if (!readVarint(in, value) || value > in.size())
      return false;
    f.payload = in.take_front(value);
    in = in.drop_front(value);
    break;
  default:
    return false;
  }
  f.encoding = StringRef(start, in.data() - start);
  return true;
}

class Detacher {
public:
  explicit Detacher(StringRef model) : model(model) {}

  /// `message` re-encoded into `out`, with `rewrite` deciding for each
  /// length-delimited field numbered `field` whether to re-encode its
  /// payload (it returns false on malformed bytes).
  template <typename Rewrite>
  bool rewriteFields(StringRef message, std::string &out, uint64_t field,
                     Rewrite rewrite) {
    Field f;
    while (!message.empty()) {
      if (!nextField(message, f))
        return false;
      if (f.number != field || f.wireType != kBytes) {
        out.append(f.encoding.data(), f.encoding.size());
        continue;
      }
      std::string inner;
      if (!rewrite(f.payload, inner))
        return false;
      writeBytesField(out, field, inner);
    }
    return true;
  }

  bool rewriteModel(StringRef bytes, std::string &out) {
    return rewriteFields(bytes, out, kModelGraph,
                         [&](StringRef graph, std::string &inner) {
                           return rewriteGraph(graph, inner);
                         });
  }

  size_t detached = 0;

private:
  bool rewriteGraph(StringRef bytes, std::string &out) {
    return rewriteFields(bytes, out, kGraphInitializer,
                         [&](StringRef tensor, std::string &inner) {
                           return rewriteTensor(tensor, inner);
                         });
  }

  bool rewriteTensor(StringRef bytes, std::string &out) {
    // The parser keeps the last raw_data; a tensor that already names
    // where its data lives is left as it is.
    StringRef raw;
    bool hasRaw = false, located = false;
    Field f;
    for (StringRef rest = bytes; !rest.empty();) {
      if (!nextField(rest, f))
        return false;
      if (f.number == kTensorRawData && f.wireType == kBytes) {
        raw = f.payload;
        hasRaw = true;
      }
      located |= f.number == kTensorExternalData ||
                 f.number == kTensorDataLocation;
    }
    if (!hasRaw || located || raw.size() < kDetachFrom) {
      out.append(bytes.data(), bytes.size());
      return true;
    }
    for (StringRef rest = bytes; !rest.empty();) {
      nextField(rest, f);
      if (f.number != kTensorRawData)
        out.append(f.encoding.data(), f.encoding.size());
    }
    writeVarint(out, kTensorDataLocation << 3 | kVarint);
    writeVarint(out, 1); // TensorProto::EXTERNAL
    auto entry = [&](StringRef key, StringRef value) {
      std::string kv;
      writeBytesField(kv, kEntryKey, key);
      writeBytesField(kv, kEntryValue, value);
      writeBytesField(out, kTensorExternalData, kv);
    };
    entry("location", kInModelLocation);
    entry("offset", std::to_string(raw.data() - model.data()));
    entry("length", std::to_string(raw.size()));
    ++detached;
    return true;
  }

  StringRef model;
};

} // namespace

std::optional<std::string>
mlir::tfm::onnx_import::detachInitializerData(StringRef model) {
  Detacher detacher(model);
  std::string out;
  if (!detacher.rewriteModel(model, out) || !detacher.detached)
    return std::nullopt;
  return out;
}
