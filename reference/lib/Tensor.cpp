//===- Tensor.cpp - Host tensors of the reference interpreter -------------===//

#include "tfm/Reference/Tensor.h"

#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <limits>

using namespace mlir::tfm::reference;

const char *mlir::tfm::reference::elementKindName(ElementKind kind) {
  switch (kind) {
  case ElementKind::F32:
    return "f32";
  case ElementKind::F16:
    return "f16";
  case ElementKind::BF16:
    return "bf16";
  case ElementKind::F64:
    return "f64";
  case ElementKind::I1:
    return "i1";
  case ElementKind::I32:
    return "i32";
  case ElementKind::I64:
    return "i64";
  case ElementKind::I8:
    return "i8";
  case ElementKind::I16:
    return "i16";
  case ElementKind::U8:
    return "ui8";
  case ElementKind::U16:
    return "ui16";
  case ElementKind::U32:
    return "ui32";
  case ElementKind::U64:
    return "ui64";
  case ElementKind::I4:
    return "i4";
  case ElementKind::U4:
    return "ui4";
  }
  return "?";
}

double mlir::tfm::reference::roundToKind(double v, ElementKind kind) {
  auto viaAPFloat = [&](const llvm::fltSemantics &sem) {
    bool losesInfo = false;
    llvm::APFloat f(v);
    f.convert(sem, llvm::RoundingMode::NearestTiesToEven, &losesInfo);
    f.convert(llvm::APFloat::IEEEdouble(),
              llvm::RoundingMode::NearestTiesToEven, &losesInfo);
    return f.convertToDouble();
  };
  switch (kind) {
  case ElementKind::F64:
    return v;
  case ElementKind::F32:
    return static_cast<float>(v);
  case ElementKind::F16:
    return viaAPFloat(llvm::APFloat::IEEEhalf());
  case ElementKind::BF16:
    return viaAPFloat(llvm::APFloat::BFloat());
  case ElementKind::I1:
    return v != 0 ? 1.0 : 0.0;
  default:
    return std::trunc(v);
  }
}

int64_t mlir::tfm::reference::wrapToKind(int64_t v, ElementKind kind) {
  auto bits = static_cast<uint64_t>(v);
  switch (kind) {
  case ElementKind::I8:
    return static_cast<int8_t>(static_cast<uint8_t>(bits));
  case ElementKind::I16:
    return static_cast<int16_t>(static_cast<uint16_t>(bits));
  case ElementKind::I32:
    return static_cast<int32_t>(static_cast<uint32_t>(bits));
  case ElementKind::U8:
    return static_cast<uint8_t>(bits);
  case ElementKind::U16:
    return static_cast<uint16_t>(bits);
  case ElementKind::U32:
    return static_cast<uint32_t>(bits);
  case ElementKind::I4:
    return static_cast<int64_t>((bits & 0xF) ^ 0x8) - 8;
  case ElementKind::U4:
    return static_cast<int64_t>(bits & 0xF);
  default:
    return v;
  }
}

std::pair<int64_t, int64_t> mlir::tfm::reference::integerRange(ElementKind kind) {
  switch (kind) {
  case ElementKind::I4:
    return {-8, 7};
  case ElementKind::U4:
    return {0, 15};
  case ElementKind::I8:
    return {-128, 127};
  case ElementKind::U8:
    return {0, 255};
  case ElementKind::I16:
    return {-32768, 32767};
  case ElementKind::U16:
    return {0, 65535};
  case ElementKind::I32:
    return {std::numeric_limits<int32_t>::min(),
            std::numeric_limits<int32_t>::max()};
  case ElementKind::U32:
    return {0, std::numeric_limits<uint32_t>::max()};
  default:
    return {std::numeric_limits<int64_t>::min(),
            std::numeric_limits<int64_t>::max()};
  }
}

namespace {
/// A double truncated to an integer, saturating where it lies outside
/// int64 (a plain cast would be undefined there) and 0 for NaN.
int64_t saturatingTrunc(double v) {
  if (std::isnan(v))
    return 0;
  if (v >= 9223372036854775807.0)
    return std::numeric_limits<int64_t>::max();
  if (v <= -9223372036854775808.0)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}
} // namespace

Tensor::Tensor(ElementKind kind, std::vector<int64_t> shape)
    : kind(kind), shape(std::move(shape)) {
  if (isInt())
    ints.assign(numElementsOf(this->shape), 0);
  else
    data.assign(numElementsOf(this->shape), 0.0);
}

Tensor::Tensor(ElementKind kind, std::vector<int64_t> shape,
               std::vector<double> values)
    : kind(kind), shape(std::move(shape)) {
  if (!isInt()) {
    data = std::move(values);
    return;
  }
  ints.reserve(values.size());
  for (double v : values)
    ints.push_back(wrapToKind(saturatingTrunc(v), kind));
}

Tensor Tensor::ofInts(ElementKind kind, std::vector<int64_t> shape,
                      std::vector<int64_t> values) {
  Tensor t;
  t.kind = kind;
  t.shape = std::move(shape);
  t.ints = std::move(values);
  return t;
}

int64_t Tensor::getInt(int64_t i) const {
  return isInt() ? ints[i] : saturatingTrunc(data[i]);
}

void Tensor::set(int64_t i, double v) {
  if (!isInt())
    data[i] = v;
  else if (kind == ElementKind::U64 && v >= 9223372036854775808.0)
    ints[i] = v >= 18446744073709551615.0
                  ? -1
                  : static_cast<int64_t>(static_cast<uint64_t>(v));
  else
    ints[i] = wrapToKind(saturatingTrunc(v), kind);
}

void Tensor::setInt(int64_t i, int64_t v) {
  if (isInt())
    ints[i] = wrapToKind(v, kind);
  else
    data[i] = static_cast<double>(v);
}

std::vector<double> Tensor::asDoubles() const {
  if (!isInt())
    return data;
  std::vector<double> out(ints.size());
  for (size_t i = 0; i < ints.size(); ++i)
    out[i] = get(static_cast<int64_t>(i));
  return out;
}

std::string Tensor::typeString() const {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + elementKindName(kind) + ">";
}
