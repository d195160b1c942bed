//===- WarpSemanticsTest.cpp - The warp ops' lane maps against the ISA ----===//
//
// Every expected coordinate here is read off the PTX ISA's fragment figures
// and shfl.sync pseudo-code by hand. Two tables written apart must also
// agree where kernels rely on it: ldmatrix.x4 yields exactly the m16n8k16
// A fragment, and ldmatrix.x2.trans the B fragment.
//
//===----------------------------------------------------------------------===//

#include "tfm/Conversion/GPUEmulation/WarpSemantics.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>

namespace {

using namespace mlir::tfm::warp;

std::pair<int, int> at(MmaShape s, MmaOperand o, int lane, int i) {
  Coord c = fragmentCoord(s, o, lane, i);
  return {c.row, c.col};
}

TEST(WarpSemantics, Mma16x8x16FragmentsAsTheISADrawsThem) {
  using P = std::pair<int, int>;
  const auto s = MmaShape::M16N8K16;
  // Lane 5: groupID 1, threadID_in_group 1.
  EXPECT_EQ(at(s, MmaOperand::A, 5, 0), P(1, 2));
  EXPECT_EQ(at(s, MmaOperand::A, 5, 1), P(1, 3));
  EXPECT_EQ(at(s, MmaOperand::A, 5, 2), P(9, 2));
  EXPECT_EQ(at(s, MmaOperand::A, 5, 3), P(9, 3));
  EXPECT_EQ(at(s, MmaOperand::A, 5, 4), P(1, 10));
  EXPECT_EQ(at(s, MmaOperand::A, 5, 5), P(1, 11));
  EXPECT_EQ(at(s, MmaOperand::A, 5, 6), P(9, 10));
  EXPECT_EQ(at(s, MmaOperand::A, 5, 7), P(9, 11));
  // Lane 31: groupID 7, threadID_in_group 3.
  EXPECT_EQ(at(s, MmaOperand::A, 31, 7), P(15, 15));
  EXPECT_EQ(at(s, MmaOperand::B, 31, 0), P(6, 7));
  EXPECT_EQ(at(s, MmaOperand::B, 31, 1), P(7, 7));
  EXPECT_EQ(at(s, MmaOperand::B, 31, 2), P(14, 7));
  EXPECT_EQ(at(s, MmaOperand::B, 31, 3), P(15, 7));
  EXPECT_EQ(at(s, MmaOperand::C, 31, 0), P(7, 6));
  EXPECT_EQ(at(s, MmaOperand::C, 31, 1), P(7, 7));
  EXPECT_EQ(at(s, MmaOperand::C, 31, 2), P(15, 6));
  EXPECT_EQ(at(s, MmaOperand::C, 31, 3), P(15, 7));
  EXPECT_EQ(at(s, MmaOperand::C, 0, 0), P(0, 0));
  EXPECT_EQ(at(s, MmaOperand::B, 0, 0), P(0, 0));
}

TEST(WarpSemantics, Tf32FragmentsAsTheISADrawsThem) {
  using P = std::pair<int, int>;
  // m16n8k8: a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4);
  // b0 (t, g), b1 (t + 4, g).
  EXPECT_EQ(at(MmaShape::M16N8K8, MmaOperand::A, 5, 0), P(1, 1));
  EXPECT_EQ(at(MmaShape::M16N8K8, MmaOperand::A, 5, 1), P(9, 1));
  EXPECT_EQ(at(MmaShape::M16N8K8, MmaOperand::A, 5, 2), P(1, 5));
  EXPECT_EQ(at(MmaShape::M16N8K8, MmaOperand::A, 5, 3), P(9, 5));
  EXPECT_EQ(at(MmaShape::M16N8K8, MmaOperand::B, 5, 0), P(1, 1));
  EXPECT_EQ(at(MmaShape::M16N8K8, MmaOperand::B, 5, 1), P(5, 1));
  // m16n8k4: a0 (g, t), a1 (g + 8, t); b0 (t, g).
  EXPECT_EQ(at(MmaShape::M16N8K4, MmaOperand::A, 30, 0), P(7, 2));
  EXPECT_EQ(at(MmaShape::M16N8K4, MmaOperand::A, 30, 1), P(15, 2));
  EXPECT_EQ(at(MmaShape::M16N8K4, MmaOperand::B, 30, 0), P(2, 7));
  EXPECT_EQ(at(MmaShape::M16N8K8, MmaOperand::C, 30, 3), P(15, 5));
}

TEST(WarpSemantics, EveryElementHasOneLane) {
  for (MmaShape s : {MmaShape::M16N8K16, MmaShape::M16N8K8, MmaShape::M16N8K4})
    for (MmaOperand o : {MmaOperand::A, MmaOperand::B, MmaOperand::C}) {
      int rows = o == MmaOperand::B ? mmaK(s) : mmaM(s);
      int cols = o == MmaOperand::A ? mmaK(s) : mmaN(s);
      std::set<std::pair<int, int>> seen;
      for (int lane = 0; lane < kWarpSize; ++lane)
        for (int i = 0; i < fragmentSize(s, o); ++i) {
          auto [r, c] = at(s, o, lane, i);
          EXPECT_TRUE(r >= 0 && r < rows && c >= 0 && c < cols);
          EXPECT_TRUE(seen.insert({r, c}).second)
              << "(" << r << ", " << c << ") twice";
        }
      EXPECT_EQ(seen.size(), size_t(rows * cols));
    }
}

TEST(WarpSemantics, LdmatrixX4GivesTheAFragment) {
  // A 16 x 16 tile as four 8 x 8 matrices: rows 0-7 and 8-15 of columns
  // 0-7, then of columns 8-15; register j comes from matrix j.
  for (int lane = 0; lane < kWarpSize; ++lane)
    for (int i = 0; i < 8; ++i) {
      int j = i / 2, e = i % 2;
      Coord in = ldmatrixCoord(lane, e, /*transpose=*/false);
      Coord tile{8 * (j % 2) + in.row, 8 * (j / 2) + in.col};
      EXPECT_EQ(tile, fragmentCoord(MmaShape::M16N8K16, MmaOperand::A, lane, i))
          << "lane " << lane << " element " << i;
    }
}

TEST(WarpSemantics, LdmatrixX2TransGivesTheBFragment) {
  // B (K x N) stored by rows of K: matrix j holds k = 8j to 8j + 7, and
  // .trans hands each lane a column of it.
  for (int lane = 0; lane < kWarpSize; ++lane)
    for (int i = 0; i < 4; ++i) {
      int j = i / 2, e = i % 2;
      Coord in = ldmatrixCoord(lane, e, /*transpose=*/true);
      Coord tile{8 * j + in.row, in.col};
      EXPECT_EQ(tile, fragmentCoord(MmaShape::M16N8K16, MmaOperand::B, lane, i))
          << "lane " << lane << " element " << i;
    }
  EXPECT_EQ(ldmatrixAddressLane(2, 5), 21);
}

TEST(WarpSemantics, ShflSyncFollowsTheISAPseudoCode) {
  auto src = [](ShuffleMode m, int lane, int b, int c) {
    ShuffleSource s = shflSync(m, lane, b, c);
    return std::make_pair(s.lane, s.valid);
  };
  using P = std::pair<int, bool>;
  // A whole warp, as CUDA's intrinsics pass it: c = 0x1f (0 for .up).
  EXPECT_EQ(src(ShuffleMode::Xor, 5, 1, 0x1f), P(4, true));
  EXPECT_EQ(src(ShuffleMode::Xor, 31, 16, 0x1f), P(15, true));
  EXPECT_EQ(src(ShuffleMode::Down, 3, 4, 0x1f), P(7, true));
  EXPECT_EQ(src(ShuffleMode::Down, 30, 4, 0x1f), P(30, false));
  EXPECT_EQ(src(ShuffleMode::Up, 6, 4, 0), P(2, true));
  EXPECT_EQ(src(ShuffleMode::Up, 2, 4, 0), P(2, false));
  EXPECT_EQ(src(ShuffleMode::Idx, 9, 3, 0x1f), P(3, true));
  // Segments of 16 (c = (32 - 16) << 8 | 0x1f, or 16 << 8 for .up).
  EXPECT_EQ(src(ShuffleMode::Idx, 20, 3, 0x101f), P(19, true));
  EXPECT_EQ(src(ShuffleMode::Down, 12, 4, 0x101f), P(12, false));
  EXPECT_EQ(src(ShuffleMode::Down, 28, 2, 0x101f), P(30, true));
  EXPECT_EQ(src(ShuffleMode::Up, 17, 2, 0x1000), P(17, false));
  EXPECT_EQ(src(ShuffleMode::Up, 19, 2, 0x1000), P(17, true));
}

TEST(WarpSemantics, GpuShuffleWidthKeepsTheFirstLanes) {
  // MLIR's lowering passes no segment mask: a width of 16 makes lanes 0-15
  // the participants, not each half-warp.
  const int c16 = gpuShuffleClamp(ShuffleMode::Xor, 16);
  EXPECT_EQ(c16, 15);
  EXPECT_TRUE(shflSync(ShuffleMode::Xor, 3, 8, c16).valid);
  EXPECT_EQ(shflSync(ShuffleMode::Xor, 3, 8, c16).lane, 11);
  EXPECT_FALSE(shflSync(ShuffleMode::Down, 12, 4, c16).valid);
  EXPECT_FALSE(shflSync(ShuffleMode::Idx, 3, 20, c16).valid);
  EXPECT_EQ(gpuShuffleClamp(ShuffleMode::Up, 32), 0);
  EXPECT_EQ(gpuShuffleClamp(ShuffleMode::Down, 32), 31);
}

} // namespace
