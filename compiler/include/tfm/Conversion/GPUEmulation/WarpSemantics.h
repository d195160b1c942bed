//===- WarpSemantics.h - What the warp-collective PTX ops compute -*- C++
//-*-===//
//
// The CPU emulation of the GPU kernels runs a warp's 32 lanes together at
// each warp-collective op. What such an op computes is fixed by the PTX ISA,
// not by the kernel: which lane holds which element of an mma.sync operand,
// which lane's address gives which row of an ldmatrix, which lane a shfl.sync
// reads. Those facts are written here once, as functions of the lane, so the
// emulation builds its index tables from them and the tests check them
// against the ISA's figures, element by element.
//
// Conventions: A is M x K, B is K x N, C and D are M x N, all row-major
// coordinates (row, col). groupID = lane / 4 and threadID_in_group =
// lane % 4, as the ISA names them.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_CONVERSION_GPUEMULATION_WARPSEMANTICS_H
#define TFM_CONVERSION_GPUEMULATION_WARPSEMANTICS_H

#include <cstdint>

namespace mlir::tfm::warp {

constexpr int kWarpSize = 32;

struct Coord {
  int row, col;
  constexpr bool operator==(const Coord &o) const {
    return row == o.row && col == o.col;
  }
};

/// The mma.sync shapes the kernels use: m16n8k16 for f16 and bf16, m16n8k8
/// and m16n8k4 for tf32, all with f32 accumulators.
enum class MmaShape { M16N8K16, M16N8K8, M16N8K4 };
enum class MmaOperand { A, B, C };

constexpr int mmaM(MmaShape) { return 16; }
constexpr int mmaN(MmaShape) { return 8; }
constexpr int mmaK(MmaShape shape) {
  return shape == MmaShape::M16N8K16 ? 16 : shape == MmaShape::M16N8K8 ? 8 : 4;
}

/// The elements of `operand` that each lane holds: the operand's size over
/// the 32 lanes.
constexpr int fragmentSize(MmaShape shape, MmaOperand operand) {
  int rows = operand == MmaOperand::B ? mmaK(shape) : mmaM(shape);
  int cols = operand == MmaOperand::A ? mmaK(shape) : mmaN(shape);
  return rows * cols / kWarpSize;
}

/// Where element `i` of `lane`'s fragment of `operand` lies in the operand
/// (the ISA's "Matrix Fragments for mma.m16n8k*" figures; the D fragment is
/// C's). For 16-bit operands, elements 2j and 2j + 1 share a register.
constexpr Coord fragmentCoord(MmaShape shape, MmaOperand operand, int lane,
                              int i) {
  int group = lane / 4, inGroup = lane % 4;
  if (operand == MmaOperand::C)
    return {group + 8 * (i / 2), 2 * inGroup + i % 2};
  switch (shape) {
  case MmaShape::M16N8K16:
    // A: four registers, (rows g, g + 8) x (cols 0-7, 8-15); B: two, k 0-7
    // and 8-15 of column g.
    if (operand == MmaOperand::A)
      return {group + 8 * ((i / 2) % 2), 2 * inGroup + i % 2 + 8 * (i / 4)};
    return {2 * inGroup + i % 2 + 8 * (i / 2), group};
  case MmaShape::M16N8K8:
    if (operand == MmaOperand::A)
      return {group + 8 * (i % 2), inGroup + 4 * (i / 2)};
    return {inGroup + 4 * i, group};
  case MmaShape::M16N8K4:
    if (operand == MmaOperand::A)
      return {group + 8 * i, inGroup};
    return {inGroup, group};
  }
  return {0, 0};
}

/// ldmatrix.sync.aligned.m8n8.x{1,2,4}.b16: lanes 8j to 8j + 7 give the
/// addresses of rows 0-7 of matrix j. The lane whose address gives `row`
/// of matrix `matrix`:
constexpr int ldmatrixAddressLane(int matrix, int row) {
  return 8 * matrix + row;
}

/// Where element `e` (0 or 1) of the register that `lane` receives from
/// each 8 x 8 matrix lies in it: row lane / 4, columns 2 (lane % 4) + e, or
/// with .trans the transposed position.
constexpr Coord ldmatrixCoord(int lane, int e, bool transpose) {
  Coord c{lane / 4, 2 * (lane % 4) + e};
  return transpose ? Coord{c.col, c.row} : c;
}

/// shfl.sync's modes (.up, .down, .bfly, .idx).
enum class ShuffleMode { Up, Down, Xor, Idx };

/// The lane that shfl.sync.MODE d|p, a, b, c reads at `lane`, and whether
/// that read is valid (p); an invalid one reads the lane's own value. `b`
/// is the offset or index, `c` packs the clamp (bits 0-4) and the segment
/// mask (bits 8-12), as the ISA gives them.
struct ShuffleSource {
  int lane;
  bool valid;
};
constexpr ShuffleSource shflSync(ShuffleMode mode, int lane, int32_t b,
                                 int32_t c) {
  int bval = b & 31, clamp = c & 31, segmask = (c >> 8) & 31;
  int maxLane = (lane & segmask) | (clamp & ~segmask);
  int minLane = lane & segmask;
  int j = 0;
  bool valid = false;
  switch (mode) {
  case ShuffleMode::Up:
    j = lane - bval;
    valid = j >= maxLane;
    break;
  case ShuffleMode::Down:
    j = lane + bval;
    valid = j <= maxLane;
    break;
  case ShuffleMode::Xor:
    j = lane ^ bval;
    valid = j <= maxLane;
    break;
  case ShuffleMode::Idx:
    j = minLane | (bval & ~segmask);
    valid = j <= maxLane;
    break;
  }
  return {valid ? j : lane, valid};
}

/// The `c` operand with which MLIR 19's gpu.shuffle lowering to NVVM calls
/// shfl.sync for a `width`: `32 - width` for up, else `width - 1`, with no
/// segment mask, so that only the first `width` lanes take part.
constexpr int32_t gpuShuffleClamp(ShuffleMode mode, int32_t width) {
  return mode == ShuffleMode::Up ? kWarpSize - width : width - 1;
}

} // namespace mlir::tfm::warp

#endif // TFM_CONVERSION_GPUEMULATION_WARPSEMANTICS_H
