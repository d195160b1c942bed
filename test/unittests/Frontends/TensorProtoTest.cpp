//===- TensorProtoTest.cpp - TensorProto I/O and narrow float codecs ------===//
//
// Bit patterns come from the IEEE 754 binary16 and bfloat16 definitions.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontends/ONNX/TensorProto.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

using namespace mlir::tfm::onnx_io;
using mlir::tfm::reference::ElementKind;
using mlir::tfm::reference::Tensor;

namespace {

TEST(Half, DecodesKnownBitPatterns) {
  EXPECT_EQ(halfBitsToDouble(0x3C00), 1.0);
  EXPECT_EQ(halfBitsToDouble(0xC000), -2.0);
  EXPECT_EQ(halfBitsToDouble(0x7BFF), 65504.0);
  EXPECT_EQ(halfBitsToDouble(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(halfBitsToDouble(0x0400), std::ldexp(1.0, -14));
  EXPECT_TRUE(std::isinf(halfBitsToDouble(0x7C00)));
  EXPECT_TRUE(std::isnan(halfBitsToDouble(0x7E00)));
}

TEST(Half, EncodesWithRoundToNearestEven) {
  EXPECT_EQ(doubleToHalfBits(1.0), 0x3C00);
  EXPECT_EQ(doubleToHalfBits(-2.0), 0xC000);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to even (1).
  EXPECT_EQ(doubleToHalfBits(1.0 + std::ldexp(1.0, -11)), 0x3C00);
  // 1 + 3·2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: to even (0x3C02).
  EXPECT_EQ(doubleToHalfBits(1.0 + 3 * std::ldexp(1.0, -11)), 0x3C02);
  EXPECT_EQ(doubleToHalfBits(1e6), 0x7C00);
  EXPECT_EQ(doubleToHalfBits(std::ldexp(1.0, -24)), 0x0001);
  EXPECT_EQ(doubleToHalfBits(std::ldexp(1.0, -26)), 0x0000);
}

TEST(BFloat16, RoundTrip) {
  EXPECT_EQ(bf16BitsToDouble(0x3F80), 1.0);
  EXPECT_EQ(doubleToBf16Bits(1.0), 0x3F80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even.
  EXPECT_EQ(doubleToBf16Bits(1.0 + std::ldexp(1.0, -8)), 0x3F80);
  EXPECT_EQ(doubleToBf16Bits(1.0 + 3 * std::ldexp(1.0, -8)), 0x3F82);
  EXPECT_EQ(doubleToBf16Bits(-3.0), 0xC040);
}

TEST(TensorProtoFile, RoundTripsEveryKind) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("tfm-tensorproto-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (ElementKind kind :
       {ElementKind::F32, ElementKind::F16, ElementKind::BF16, ElementKind::F64,
        ElementKind::I1, ElementKind::I8, ElementKind::I16, ElementKind::I32,
        ElementKind::I64, ElementKind::U8, ElementKind::U16, ElementKind::U32,
        ElementKind::U64}) {
    Tensor t(kind, {2, 2}, {1, 0, -2, 4});
    if (mlir::tfm::reference::isUnsignedKind(kind))
      t = Tensor(kind, {2, 2}, {1, 0, 200, 4});
    if (kind == ElementKind::I1)
      t.data = {1, 0, 1, 1};
    std::string path = (dir / "t.pb").string(), err;
    ASSERT_TRUE(writeTensorProtoFile(path, {"t", t}, err)) << err;
    NamedTensor back;
    ASSERT_TRUE(readTensorProtoFile(path, back, err)) << err;
    EXPECT_EQ(back.name, "t");
    EXPECT_EQ(back.tensor.kind, kind);
    EXPECT_EQ(back.tensor.shape, t.shape);
    EXPECT_EQ(back.tensor.asDoubles(), t.asDoubles());
  }
  std::filesystem::remove_all(dir);
}

TEST(TensorProtoFile, KeepsEveryInt64Exactly) {
  // 2^53 + 1 and INT64_MAX (ONNX's "to the end") have no double.
  std::vector<int64_t> values = {(int64_t(1) << 53) + 1,
                                 std::numeric_limits<int64_t>::max(),
                                 std::numeric_limits<int64_t>::min(), -1};
  std::string path = (std::filesystem::temp_directory_path() /
                      ("tfm-int64-" + std::to_string(::getpid()) + ".pb"))
                         .string(),
              err;
  ASSERT_TRUE(writeTensorProtoFile(
      path, {"t", Tensor::ofInts(ElementKind::I64, {4}, values)}, err))
      << err;
  NamedTensor back;
  ASSERT_TRUE(readTensorProtoFile(path, back, err)) << err;
  std::filesystem::remove(path);
  EXPECT_EQ(back.tensor.ints, values);
}

// ONNX keeps 8- and 16-bit integers in int32_data and UINT32/UINT64 in
// uint64_data; raw data is little-endian at the type's width.
TEST(TensorProtoFile, ReadsNarrowAndUnsignedIntegersFromTheirFields) {
  auto parse = [](const onnx::TensorProto &p) {
    NamedTensor t;
    std::string err;
    EXPECT_TRUE(parseTensorProto(p.SerializeAsString(), t, err)) << err;
    return t.tensor;
  };
  onnx::TensorProto p;
  p.set_data_type(onnx::TensorProto::INT8);
  p.add_dims(2);
  p.add_int32_data(-128);
  p.add_int32_data(127);
  Tensor i8 = parse(p);
  EXPECT_EQ(i8.kind, ElementKind::I8);
  EXPECT_EQ(i8.ints, (std::vector<int64_t>{-128, 127}));

  p.Clear();
  p.set_data_type(onnx::TensorProto::UINT64);
  p.add_dims(2);
  p.add_uint64_data(std::numeric_limits<uint64_t>::max());
  p.add_uint64_data(7);
  Tensor u64 = parse(p);
  EXPECT_EQ(u64.kind, ElementKind::U64);
  EXPECT_EQ(u64.get(0), 18446744073709551615.0);
  EXPECT_EQ(u64.get(1), 7.0);

  p.Clear();
  p.set_data_type(onnx::TensorProto::UINT16);
  p.add_dims(2);
  p.set_raw_data(std::string("\xff\xff\x01\x00", 4));
  Tensor u16 = parse(p);
  EXPECT_EQ(u16.ints, (std::vector<int64_t>{65535, 1}));

  p.Clear();
  p.set_data_type(onnx::TensorProto::INT16);
  p.add_dims(1);
  p.set_raw_data(std::string("\x00\x80", 2));
  EXPECT_EQ(parse(p).ints, (std::vector<int64_t>{-32768}));
}

TEST(TensorProtoFile, RejectsCorruptAndMissingFiles) {
  NamedTensor t;
  std::string err;
  EXPECT_FALSE(parseTensorProto(std::string("\xff\xff\xff\x0f garbage", 12), t, err));
  EXPECT_NE(err.find("truncated or corrupt"), std::string::npos) << err;
  EXPECT_FALSE(readTensorProtoFile("/nonexistent/x.pb", t, err));
  EXPECT_NE(err.find("cannot open '/nonexistent/x.pb'"), std::string::npos)
      << err;
}

TEST(TensorProtoFile, RejectsInconsistentSizes) {
  onnx::TensorProto proto;
  proto.set_name("w");
  proto.set_data_type(onnx::TensorProto::FLOAT);
  proto.add_dims(2);
  proto.add_dims(2);
  for (float v : {1.f, 2.f, 3.f})
    proto.add_float_data(v);
  NamedTensor t;
  std::string err;
  EXPECT_FALSE(parseTensorProto(proto.SerializeAsString(), t, err));
  EXPECT_EQ(err, "tensor 'w' of shape [2x2] needs 4 values but the file holds 3");

  // A corrupt header that claims 2^60 elements fails before allocating.
  proto.clear_dims();
  proto.add_dims(int64_t(1) << 30);
  proto.add_dims(int64_t(1) << 30);
  EXPECT_FALSE(parseTensorProto(proto.SerializeAsString(), t, err));
  EXPECT_EQ(err, "tensor 'w' is implausibly large");

  proto.set_data_type(onnx::TensorProto::STRING);
  EXPECT_FALSE(parseTensorProto(proto.SerializeAsString(), t, err));
  EXPECT_EQ(err, "unsupported TensorProto data_type 8 (STRING)");
}

} // namespace
