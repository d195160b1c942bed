//===- TensorProto.cpp - Host tensors to and from ONNX TensorProto --------===//

#include "tfm/Frontends/ONNX/TensorProto.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

using mlir::tfm::reference::ElementKind;
using mlir::tfm::reference::Tensor;

namespace mlir::tfm::onnx_io {

double halfBitsToDouble(uint16_t bits) {
  int sign = bits >> 15, exp = (bits >> 10) & 0x1f, mant = bits & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(mant, -24); // subnormal
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(mant + 1024, exp - 25);
  return sign ? -v : v;
}

uint16_t doubleToHalfBits(double value) {
  // Round through float first; half's range and precision are far below it,
  // so the double rounding cannot change the nearest half.
  float f = static_cast<float>(value);
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = (x >> 16) & 0x8000;
  uint32_t exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
  if (exp == 0xff)
    return sign | 0x7c00 | (mant ? 0x200 : 0);
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31)
    return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10)
      return sign;
    mant |= 0x800000;
    int shift = 14 - e;
    uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1)))
      ++half;
    return sign | half;
  }
  uint32_t half = (e << 10) | (mant >> 13), rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
    ++half; // may carry into the exponent, which is still correct
  return sign | half;
}

double bf16BitsToDouble(uint16_t bits) {
  uint32_t x = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t doubleToBf16Bits(double value) {
  float f = static_cast<float>(value);
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f))
    return static_cast<uint16_t>((x >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

namespace {

/// The ONNX data types a host tensor can hold, with their byte widths.
struct KindInfo {
  int dataType;
  ElementKind kind;
  size_t width;
};
constexpr KindInfo kKinds[] = {
    {onnx::TensorProto::FLOAT, ElementKind::F32, 4},
    {onnx::TensorProto::FLOAT16, ElementKind::F16, 2},
    {onnx::TensorProto::BFLOAT16, ElementKind::BF16, 2},
    {onnx::TensorProto::DOUBLE, ElementKind::F64, 8},
    {onnx::TensorProto::BOOL, ElementKind::I1, 1},
    {onnx::TensorProto::INT8, ElementKind::I8, 1},
    {onnx::TensorProto::INT16, ElementKind::I16, 2},
    {onnx::TensorProto::INT32, ElementKind::I32, 4},
    {onnx::TensorProto::INT64, ElementKind::I64, 8},
    {onnx::TensorProto::UINT8, ElementKind::U8, 1},
    {onnx::TensorProto::UINT16, ElementKind::U16, 2},
    {onnx::TensorProto::UINT32, ElementKind::U32, 4},
    {onnx::TensorProto::UINT64, ElementKind::U64, 8},
};

bool kindOfDataType(int dt, ElementKind &kind) {
  for (const KindInfo &k : kKinds)
    if (k.dataType == dt) {
      kind = k.kind;
      return true;
    }
  return false;
}

int dataTypeOfKind(ElementKind kind) {
  for (const KindInfo &k : kKinds)
    if (k.kind == kind)
      return k.dataType;
  return onnx::TensorProto::UNDEFINED;
}

size_t byteWidth(ElementKind kind) {
  for (const KindInfo &k : kKinds)
    if (k.kind == kind)
      return k.width;
  return 0;
}

template <typename T> T load(const char *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

double decodeRaw(ElementKind kind, const char *p) {
  switch (kind) {
  case ElementKind::F32:
    return load<float>(p);
  case ElementKind::F64:
    return load<double>(p);
  case ElementKind::F16:
    return halfBitsToDouble(load<uint16_t>(p));
  case ElementKind::BF16:
    return bf16BitsToDouble(load<uint16_t>(p));
  case ElementKind::I1:
    return *p ? 1.0 : 0.0;
  default:
    return 0; // integers are decoded exactly by decodeRawInt
  }
}

int64_t decodeRawInt(ElementKind kind, const char *p) {
  switch (kind) {
  case ElementKind::I8: return load<int8_t>(p);
  case ElementKind::U8: return load<uint8_t>(p);
  case ElementKind::I16: return load<int16_t>(p);
  case ElementKind::U16: return load<uint16_t>(p);
  case ElementKind::I32: return load<int32_t>(p);
  case ElementKind::U32: return load<uint32_t>(p);
  default: return load<int64_t>(p); // u64 keeps its bit pattern
  }
}

/// Values of 16-bit and narrower types travel in int32_data.
double decodeInt32Field(ElementKind kind, int32_t v) {
  switch (kind) {
  case ElementKind::F16:
    return halfBitsToDouble(static_cast<uint16_t>(v));
  case ElementKind::BF16:
    return bf16BitsToDouble(static_cast<uint16_t>(v));
  case ElementKind::I1:
    return v ? 1.0 : 0.0;
  default:
    return v;
  }
}

} // namespace

bool parseTensorProto(const std::string &bytes, NamedTensor &out,
                      std::string &error) {
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) {
    error = "not a valid serialized TensorProto (truncated or corrupt)";
    return false;
  }
  ElementKind kind;
  if (!kindOfDataType(proto.data_type(), kind)) {
    error = "unsupported TensorProto data_type " +
            std::to_string(proto.data_type()) + " (" +
            onnx::TensorProto::DataType_Name(
                static_cast<onnx::TensorProto::DataType>(proto.data_type())) +
            ")";
    return false;
  }
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    error = "tensor '" + proto.name() + "' keeps its data in an external file, "
            "which is not supported here";
    return false;
  }
  std::vector<int64_t> shape;
  size_t n = 1;
  for (int64_t d : proto.dims()) {
    if (d < 0) {
      error = "negative dimension " + std::to_string(d);
      return false;
    }
    // Count before allocating: a corrupt header must not ask for exabytes.
    if (d != 0 && n > (size_t(1) << 40) / static_cast<size_t>(d)) {
      error = "tensor '" + proto.name() + "' is implausibly large";
      return false;
    }
    n *= static_cast<size_t>(d);
    shape.push_back(d);
  }
  size_t held;
  if (proto.has_raw_data())
    held = proto.raw_data().size() / byteWidth(kind);
  else if (kind == ElementKind::F32)
    held = proto.float_data_size();
  else if (kind == ElementKind::F64)
    held = proto.double_data_size();
  else if (kind == ElementKind::I64)
    held = proto.int64_data_size();
  else if (kind == ElementKind::U32 || kind == ElementKind::U64)
    held = proto.uint64_data_size();
  else
    held = proto.int32_data_size();
  bool exact = !proto.has_raw_data() ||
               proto.raw_data().size() == n * byteWidth(kind);
  if (held != n || !exact) {
    std::string dims;
    for (int64_t d : shape)
      dims += (dims.empty() ? "" : "x") + std::to_string(d);
    error = "tensor '" + proto.name() + "' of shape [" + dims + "] needs " +
            std::to_string(n) + " values but the file holds " +
            std::to_string(held);
    return false;
  }
  Tensor t(kind, shape);
  if (proto.has_raw_data()) {
    const std::string &raw = proto.raw_data();
    size_t w = byteWidth(kind);
    for (size_t i = 0; i < n; ++i) {
      const char *p = raw.data() + i * w;
      if (t.isInt())
        t.ints[i] = decodeRawInt(kind, p);
      else
        t.data[i] = decodeRaw(kind, p);
    }
  } else {
    switch (kind) {
    case ElementKind::F32:
      for (size_t i = 0; i < n; ++i)
        t.data[i] = proto.float_data(i);
      break;
    case ElementKind::F64:
      for (size_t i = 0; i < n; ++i)
        t.data[i] = proto.double_data(i);
      break;
    case ElementKind::I64:
      for (size_t i = 0; i < n; ++i)
        t.ints[i] = proto.int64_data(i);
      break;
    case ElementKind::U32:
    case ElementKind::U64:
      for (size_t i = 0; i < n; ++i)
        t.setInt(i, static_cast<int64_t>(proto.uint64_data(i)));
      break;
    default:
      for (size_t i = 0; i < n; ++i) {
        if (t.isInt())
          t.setInt(i, proto.int32_data(i));
        else
          t.data[i] = decodeInt32Field(kind, proto.int32_data(i));
      }
      break;
    }
  }
  out.name = proto.name();
  out.tensor = std::move(t);
  return true;
}

bool readTensorProtoFile(const std::string &path, NamedTensor &out,
                         std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (!parseTensorProto(buffer.str(), out, error)) {
    error = "'" + path + "': " + error;
    return false;
  }
  return true;
}

namespace {

/// Encodes `named` as a TensorProto with raw data of its own element type.
void fillTensorProto(const NamedTensor &named, onnx::TensorProto &proto) {
  const Tensor &t = named.tensor;
  proto.Clear();
  proto.set_name(named.name);
  proto.set_data_type(dataTypeOfKind(t.kind));
  for (int64_t d : t.shape)
    proto.add_dims(d);
  int64_t n = t.numElements();
  std::string raw(n * byteWidth(t.kind), '\0');
  char *p = raw.data();
  for (int64_t e = 0; e < n; ++e) {
    double v = t.isInt() ? 0.0 : t.data[e];
    switch (t.kind) {
    case ElementKind::F32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case ElementKind::F64:
      std::memcpy(p, &v, 8);
      break;
    case ElementKind::F16: {
      uint16_t h = doubleToHalfBits(v);
      std::memcpy(p, &h, 2);
      break;
    }
    case ElementKind::BF16: {
      uint16_t h = doubleToBf16Bits(v);
      std::memcpy(p, &h, 2);
      break;
    }
    case ElementKind::I1:
      *p = v != 0;
      break;
    default: {
      // Little-endian, as ONNX stores raw data: the low bytes of the value.
      uint64_t bits = static_cast<uint64_t>(t.ints[e]);
      std::memcpy(p, &bits, byteWidth(t.kind));
      break;
    }
    }
    p += byteWidth(t.kind);
  }
  proto.set_raw_data(std::move(raw));
}

/// Writes a message to a temporary name and renames it, so no half-written
/// file survives a crash or a full disk.
bool writeAtomically(const std::string &path,
                     const google::protobuf::MessageLite &message,
                     std::string &error) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !message.SerializeToOstream(&out) || !out.flush()) {
      error = "cannot write '" + path + "': " + std::strerror(errno);
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot write '" + path + "': " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

} // namespace

bool writeTensorProtoFile(const std::string &path, const NamedTensor &named,
                          std::string &error) {
  onnx::TensorProto proto;
  fillTensorProto(named, proto);
  return writeAtomically(path, proto, error);
}

bool writeModelWithInitializers(const std::string &inPath,
                                const std::string &outPath,
                                const std::vector<NamedTensor> &values,
                                std::string &error) {
  onnx::ModelProto model;
  {
    std::ifstream in(inPath, std::ios::binary);
    if (!in || !model.ParseFromIstream(&in)) {
      error = "cannot read the ONNX model '" + inPath + "'";
      return false;
    }
  }
  auto *graph = model.mutable_graph();
  for (const NamedTensor &v : values) {
    onnx::TensorProto *init = nullptr;
    for (auto &i : *graph->mutable_initializer())
      if (i.name() == v.name)
        init = &i;
    if (!init) {
      error = "'" + inPath + "' has no initializer named '" + v.name + "'";
      return false;
    }
    std::vector<int64_t> dims(init->dims().begin(), init->dims().end());
    if (dims != v.tensor.shape ||
        init->data_type() != dataTypeOfKind(v.tensor.kind)) {
      error = "initializer '" + v.name + "' of '" + inPath +
              "' has another type or shape than the trained value";
      return false;
    }
    fillTensorProto(v, *init);
  }
  return writeAtomically(outPath, model, error);
}

} // namespace mlir::tfm::onnx_io
