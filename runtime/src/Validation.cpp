//===- Validation.cpp - A model library's metadata, checked whole ---------===//
//
// A model library is untrusted input: a truncated or corrupt file, or a
// table written by something else, must end in a status that says so,
// never in a crash. So before anything reads the metadata, every pointer in
// it is checked to lie in the library's mapped image (strings terminated
// there, entry points in its code), every count and shape to be sane, and
// every kernel descriptor to describe a kernel the compiler writes, whose
// arguments fit the buffers of the model. What a descriptor cannot say (the
// buffers its arguments point to) is checked when the kernel runs
// (Session.cpp), and what the metadata says of the buffers' sizes is
// checked by the compiled code itself against its own copy of them.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <cmath>
#include <cstring>

using namespace tfm::runtime;

namespace {

/// The loaded segments of one library: [begin, end) and whether code runs
/// from it.
struct Image {
  struct Segment {
    uintptr_t begin, end;
    bool code;
  };
  std::vector<Segment> segments;

  const Segment *find(const void *p, uint64_t bytes) const {
    auto at = reinterpret_cast<uintptr_t>(p);
    for (const Segment &s : segments)
      if (at >= s.begin && at < s.end && bytes <= s.end - at)
        return &s;
    return nullptr;
  }
  bool contains(const void *p, uint64_t bytes) const {
    return p && find(p, bytes);
  }
  /// `count` elements of T wholly inside the image, at an address aligned
  /// for T (a misaligned pointer could not be read as T).
  template <typename T> bool containsArray(const T *p, int64_t count) const {
    if (count == 0)
      return true;
    return count > 0 && reinterpret_cast<uintptr_t>(p) % alignof(T) == 0 &&
           static_cast<uint64_t>(count) <= UINT64_MAX / sizeof(T) &&
           contains(p, static_cast<uint64_t>(count) * sizeof(T));
  }
  /// A NUL-terminated string wholly inside the image.
  bool containsString(const char *s) const {
    const Segment *seg = s ? find(s, 1) : nullptr;
    if (!seg)
      return false;
    return std::memchr(s, 0, seg->end - reinterpret_cast<uintptr_t>(s)) !=
           nullptr;
  }
  bool containsCode(const void *fn) const {
    const Segment *seg = fn ? find(fn, 1) : nullptr;
    return seg && seg->code;
  }
};

bool segmentsOf(const void *handle, Image &image) {
  struct link_map *map = nullptr;
  if (dlinfo(const_cast<void *>(handle), RTLD_DI_LINKMAP, &map) != 0 || !map)
    return false;
  struct Search {
    ElfW(Addr) base;
    Image *image;
    bool found;
  } search{map->l_addr, &image, false};
  dl_iterate_phdr(
      [](struct dl_phdr_info *info, size_t, void *data) {
        auto *s = static_cast<Search *>(data);
        if (info->dlpi_addr != s->base)
          return 0;
        for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr) &ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_R))
            continue;
          uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
          s->image->segments.push_back(
              {begin, begin + ph.p_memsz, (ph.p_flags & PF_X) != 0});
        }
        s->found = true;
        return 1;
      },
      &search);
  return search.found && !image.segments.empty();
}

constexpr int32_t kMaxRank = 32;
/// No tensor of a model is larger (2^48 bytes); beyond it sizes overflow.
constexpr uint64_t kMaxBytes = uint64_t(1) << 48;

/// a · b, or false when it exceeds kMaxBytes.
bool mul(uint64_t a, uint64_t b, uint64_t &out) {
  return !__builtin_mul_overflow(a, b, &out) && out <= kMaxBytes;
}

/// The dynamic entries: every bucket an entry of the model whose inputs and
/// outputs are the dynamic entry's at the bucket's sizes (then its key
/// masks), the buckets by increasing size, and the last holding every
/// largest size, so that each size in range has a bucket.
template <typename Corrupt>
tfm_status_t validateDynamicEntries(const tfm_abi_model_t *m,
                                    const Image &image,
                                    const Corrupt &corrupt) {
  int32_t count = numDynamicEntries(m);
  if (!image.containsArray(m->dynamic_entries, count))
    return corrupt(fmt::format("{} dynamic entries lie outside the library",
                               count));
  for (int32_t i = 0; i < count; ++i) {
    const tfm_abi_dynamic_entry_t &d = m->dynamic_entries[i];
    if (!image.containsString(d.name))
      return corrupt(fmt::format("dynamic entry {} has no name", i));
    auto bad = [&](const std::string &why) {
      return corrupt(fmt::format("dynamic entry '{}': {}", d.name, why));
    };
    int32_t n = d.num_symbols;
    if (n < 1 || n > kMaxRank ||
        !image.containsArray(d.symbols, n) ||
        !image.containsArray(d.min_sizes, n) ||
        !image.containsArray(d.max_sizes, n))
      return bad("its symbols lie outside the library");
    for (int32_t k = 0; k < n; ++k)
      if (!image.containsString(d.symbols[k]) || d.min_sizes[k] < 1 ||
          d.min_sizes[k] > d.max_sizes[k])
        return bad(fmt::format("symbol {} is invalid", k));
    if (d.num_buckets < 1 ||
        !image.containsArray(d.buckets, d.num_buckets) ||
        static_cast<uint64_t>(d.num_buckets) * n > kMaxBytes ||
        !image.containsArray(d.bucket_sizes, int64_t(d.num_buckets) * n) ||
        d.num_key_masks < 0 || d.num_key_masks > n ||
        !image.containsArray(d.key_masks, d.num_key_masks))
      return bad("its buckets or key masks lie outside the library");
    for (int32_t k = 0; k < d.num_key_masks; ++k)
      if (d.key_masks[k] < 0 || d.key_masks[k] >= n)
        return bad(fmt::format("key mask {} masks no symbol", k));
    for (int io = 0; io < 2; ++io) {
      int32_t num = io ? d.num_outputs : d.num_inputs;
      const tfm_abi_tensor_desc_t *descs = io ? d.outputs : d.inputs;
      if (num < 0 ||
          !image.containsArray(descs, num))
        return bad("its inputs or outputs lie outside the library");
      for (int32_t j = 0; j < num; ++j) {
        const tfm_abi_tensor_desc_t &t = descs[j];
        if (!image.containsString(t.name) || t.rank < 0 || t.rank > kMaxRank ||
            !image.containsArray(t.dims, t.rank))
          return bad(fmt::format("{} {} is invalid", io ? "output" : "input",
                                 j));
        for (int32_t r = 0; r < t.rank; ++r)
          if (t.dims[r] < -n)
            return bad(fmt::format("'{}' has an axis of no symbol", t.name));
      }
    }
    const int64_t *last = d.bucket_sizes + int64_t(d.num_buckets - 1) * n;
    for (int32_t k = 0; k < n; ++k)
      if (last[k] < d.max_sizes[k])
        return bad(fmt::format("no bucket holds '{}' = {}", d.symbols[k],
                               d.max_sizes[k]));
    for (int32_t b = 0; b < d.num_buckets; ++b) {
      if (d.buckets[b] < 0 || d.buckets[b] >= m->num_entries)
        return bad(fmt::format("bucket {} is no entry", b));
      const tfm_abi_entry_t &e = m->entries[d.buckets[b]];
      const int64_t *sizes = d.bucket_sizes + int64_t(b) * n;
      if (e.num_inputs != d.num_inputs + d.num_key_masks ||
          e.num_outputs != d.num_outputs)
        return bad(fmt::format("bucket '{}' takes other inputs or outputs",
                               e.name));
      // Each tensor as the dynamic entry describes it, at the bucket's
      // sizes.
      auto same = [&](const tfm_abi_tensor_desc_t &want,
                      const tfm_abi_tensor_desc_t &have) {
        if (want.dtype != have.dtype || want.rank != have.rank)
          return false;
        for (int32_t r = 0; r < want.rank; ++r) {
          int64_t dim = want.dims[r] >= 0 ? want.dims[r]
                                          : sizes[-1 - want.dims[r]];
          if (dim != have.dims[r])
            return false;
        }
        return true;
      };
      for (int32_t j = 0; j < d.num_inputs; ++j)
        if (!same(d.inputs[j], e.inputs[j]))
          return bad(fmt::format("bucket '{}': input {} does not match", e.name,
                                 j));
      for (int32_t j = 0; j < d.num_outputs; ++j)
        if (!same(d.outputs[j], e.outputs[j]))
          return bad(fmt::format("bucket '{}': output {} does not match",
                                 e.name, j));
      for (int32_t k = 0; k < d.num_key_masks; ++k) {
        const tfm_abi_tensor_desc_t &mask = e.inputs[d.num_inputs + k];
        if (mask.dtype != TFM_DTYPE_F32 || mask.rank != 1 ||
            mask.dims[0] != sizes[d.key_masks[k]])
          return bad(fmt::format("bucket '{}': key mask {} is not f32 [{}]",
                                 e.name, k, sizes[d.key_masks[k]]));
      }
    }
  }
  return nullptr;
}

} // namespace

bool tfm::runtime::pointsIntoLibrary(const void *handle, const void *p,
                                     uint64_t bytes) {
  Image image;
  return segmentsOf(handle, image) && image.contains(p, bytes);
}

uint64_t tfm::runtime::tensorBytes(const tfm_abi_tensor_desc_t &d) {
  uint64_t n = tfm_dtype_size(static_cast<tfm_dtype_t>(d.dtype));
  for (int32_t i = 0; i < d.rank; ++i)
    n *= static_cast<uint64_t>(d.dims[i]);
  return n;
}

bool tfm::runtime::kernelFootprint(const tfm_abi_kernel_desc_t &d,
                                   uint32_t flags,
                                   uint64_t bytes[TFM_KERNEL_MAX_ARGS],
                                   std::string &why) {
  std::fill(bytes, bytes + TFM_KERNEL_MAX_ARGS, 0);
  const int64_t *p = d.params;
  auto positive = [&](int n) {
    for (int i = 0; i < n; ++i)
      if (p[i] <= 0 || static_cast<uint64_t>(p[i]) > kMaxBytes) {
        why = fmt::format("size {} is {}", i, p[i]);
        return false;
      }
    return true;
  };
  // Elements · 4 bytes: every kernel reads and writes f32, but a GEMM's
  // narrow operands (2 bytes).
  uint64_t operandBytes = flags & TFM_KERNEL_FLAG_NARROW_OPERANDS ? 2 : 4;
  auto f32 = [&](std::initializer_list<int64_t> dims, uint64_t &out,
                 uint64_t elementBytes = 4) {
    out = elementBytes;
    for (int64_t x : dims)
      if (!mul(out, static_cast<uint64_t>(x), out)) {
        why = "its sizes overflow";
        return false;
      }
    return true;
  };
  // The extent of a strided operand: one past its last element, · 4.
  auto strided = [&](std::initializer_list<int64_t> dims, const int64_t *st,
                     uint64_t &out, uint64_t elementBytes = 4) {
    uint64_t last = 0;
    size_t i = 0;
    for (int64_t x : dims) {
      uint64_t step;
      if (st[i] < 0 || !mul(static_cast<uint64_t>(x - 1),
                            static_cast<uint64_t>(st[i]), step) ||
          __builtin_add_overflow(last, step, &last)) {
        why = "its strides overflow";
        return false;
      }
      ++i;
    }
    return mul(last + 1, elementBytes, out) ||
           (why = "its strides overflow", false);
  };
  switch (d.kind) {
  case TFM_KERNEL_LINEAR: {
    if (!positive(TFM_LINEAR_HAS_BIAS))
      return false;
    int64_t m = p[TFM_LINEAR_M], k = p[TFM_LINEAR_K], n = p[TFM_LINEAR_N];
    return f32({m, k}, bytes[0], operandBytes) &&
           f32({n, k}, bytes[1], operandBytes) &&
           (!p[TFM_LINEAR_HAS_BIAS] || f32({n}, bytes[2])) &&
           (!p[TFM_LINEAR_HAS_RESIDUAL] || f32({m, n}, bytes[3])) &&
           f32({m, n}, bytes[4]);
  }
  case TFM_KERNEL_QUANTIZED_LINEAR: {
    if (!positive(TFM_QUANTIZED_LINEAR_HAS_BIAS))
      return false;
    int64_t m = p[TFM_QUANTIZED_LINEAR_M], k = p[TFM_QUANTIZED_LINEAR_K],
            n = p[TFM_QUANTIZED_LINEAR_N];
    int64_t flags = p[TFM_QUANTIZED_LINEAR_FLAGS],
            block = p[TFM_QUANTIZED_LINEAR_BLOCK_SIZE];
    if (flags & ~int64_t(TFM_QUANTIZED_LINEAR_UNSIGNED_WEIGHTS |
                         TFM_QUANTIZED_LINEAR_PER_ROW |
                         TFM_QUANTIZED_LINEAR_HAS_ZERO_POINT |
                         TFM_QUANTIZED_LINEAR_WEIGHT_ONLY |
                         TFM_QUANTIZED_LINEAR_FOUR_BIT |
                         TFM_QUANTIZED_LINEAR_BLOCKED_INPUT |
                         TFM_QUANTIZED_LINEAR_STATIC_INPUT)) {
      why = "it has unknown flags";
      return false;
    }
    if (flags & TFM_QUANTIZED_LINEAR_STATIC_INPUT) {
      // The kernel takes the scale in f32.
      const float s = static_cast<float>(d.fparams[0]);
      const int64_t z = p[TFM_QUANTIZED_LINEAR_INPUT_ZERO_POINT];
      if ((flags & TFM_QUANTIZED_LINEAR_WEIGHT_ONLY) || !(s > 0.f) ||
          !std::isfinite(s) || z < 0 || z > 255) {
        why = "a static input needs the dynamic input's layouts, a positive "
              "finite scale and a zero point in [0, 255]";
        return false;
      }
    }
    if ((flags & TFM_QUANTIZED_LINEAR_BLOCKED_INPUT) &&
        (!(flags & TFM_QUANTIZED_LINEAR_WEIGHT_ONLY) || block <= 0 ||
         k % block != 0)) {
      why = "a blocked input needs the weight-only layouts and a block "
            "size that divides K";
      return false;
    }
    if (block < 0 || (block > 0 && !(flags & TFM_QUANTIZED_LINEAR_PER_ROW))) {
      why = "its block size is negative, or given without PER_ROW";
      return false;
    }
    if (!(flags & TFM_QUANTIZED_LINEAR_WEIGHT_ONLY) &&
        (block || (flags & TFM_QUANTIZED_LINEAR_FOUR_BIT))) {
      why = "a dynamically quantized input takes 8-bit weights without "
            "blocks";
      return false;
    }
    // A scale (and zero point) per tensor, per row, or per row and block.
    int64_t rows = flags & TFM_QUANTIZED_LINEAR_PER_ROW ? n : 1,
            blocks = block == 0 || block >= k ? 1 : (k + block - 1) / block;
    // The weights and their zero points are bytes.
    return f32({m, k}, bytes[0]) && f32({n, k}, bytes[1], 1) &&
           f32({rows, blocks}, bytes[2]) &&
           (!(flags & TFM_QUANTIZED_LINEAR_HAS_ZERO_POINT) ||
            f32({rows, blocks}, bytes[3], 1)) &&
           (!p[TFM_QUANTIZED_LINEAR_HAS_BIAS] || f32({n}, bytes[4])) &&
           f32({m, n}, bytes[5]);
  }
  case TFM_KERNEL_BATCH_MATMUL: {
    if (!positive(TFM_BATCH_MATMUL_NUM_PARAMS))
      return false;
    int64_t b1 = p[TFM_BATCH_MATMUL_B1], b2 = p[TFM_BATCH_MATMUL_B2],
            m = p[TFM_BATCH_MATMUL_M], k = p[TFM_BATCH_MATMUL_K],
            n = p[TFM_BATCH_MATMUL_N];
    return strided({b1, b2, m, k}, d.strides, bytes[0], operandBytes) &&
           strided({b1, b2, k, n}, d.strides + 4, bytes[1], operandBytes) &&
           strided({b1, b2, m, n}, d.strides + 8, bytes[2]);
  }
  case TFM_KERNEL_MASKED_SOFTMAX: {
    if (!positive(TFM_MASKED_SOFTMAX_CAUSAL))
      return false;
    int64_t g = p[TFM_MASKED_SOFTMAX_G], q = p[TFM_MASKED_SOFTMAX_Q],
            c = p[TFM_MASKED_SOFTMAX_C],
            div = p[TFM_MASKED_SOFTMAX_DIV] ? p[TFM_MASKED_SOFTMAX_DIV] : 1;
    if (!f32({g, q, c}, bytes[0]) || !f32({g, q, c}, bytes[2]))
      return false;
    if (p[TFM_MASKED_SOFTMAX_HAS_MASK]) {
      const int64_t st[] = {p[TFM_MASKED_SOFTMAX_GSTRIDE],
                            p[TFM_MASKED_SOFTMAX_QSTRIDE], 1};
      if (div <= 0 || !strided({(g - 1) / div + 1, q, c}, st, bytes[1])) {
        why = why.empty() ? "its mask strides are invalid" : why;
        return false;
      }
    }
    return true;
  }
  case TFM_KERNEL_LAYER_NORM:
  case TFM_KERNEL_RMS_NORM: {
    if (!positive(TFM_LAYER_NORM_HAS_RESIDUAL))
      return false;
    int64_t m = p[TFM_LAYER_NORM_M], n = p[TFM_LAYER_NORM_N];
    return f32({m, n}, bytes[0]) &&
           (!p[TFM_LAYER_NORM_HAS_RESIDUAL] || f32({m, n}, bytes[1])) &&
           f32({n}, bytes[2]) &&
           (!p[TFM_LAYER_NORM_HAS_BIAS] || f32({n}, bytes[3])) &&
           f32({m, n}, bytes[4]) &&
           (!p[TFM_LAYER_NORM_WRITES_SUM] || f32({m, n}, bytes[5]));
  }
  case TFM_KERNEL_LAYER_NORM_BACKWARD:
  case TFM_KERNEL_RMS_NORM_BACKWARD: {
    if (!positive(TFM_LAYER_NORM_BACKWARD_NUM_PARAMS))
      return false;
    int64_t m = p[TFM_LAYER_NORM_BACKWARD_M], n = p[TFM_LAYER_NORM_BACKWARD_N];
    return f32({m, n}, bytes[0]) && f32({n}, bytes[1]) &&
           f32({m, n}, bytes[2]) && f32({m, n}, bytes[3]) &&
           f32({n}, bytes[4]) && f32({n}, bytes[5]);
  }
  case TFM_KERNEL_REORDER: {
    int64_t rank = p[TFM_REORDER_RANK];
    if (rank < 1 || rank > TFM_REORDER_MAX_RANK) {
      why = fmt::format("a reorder of rank {}", rank);
      return false;
    }
    uint64_t extents[2];
    for (int side = 0; side < 2; ++side) {
      uint64_t last = 0;
      for (int64_t i = 0; i < rank; ++i) {
        int64_t dim = p[TFM_REORDER_DIMS + i], st = d.strides[side * TFM_REORDER_MAX_RANK + i];
        uint64_t step;
        if (dim <= 0 || st < 0 ||
            !mul(static_cast<uint64_t>(dim - 1), static_cast<uint64_t>(st),
                 step) ||
            __builtin_add_overflow(last, step, &last)) {
          why = "its sizes or strides are invalid";
          return false;
        }
      }
      if (!mul(last + 1, 4, extents[side])) {
        why = "its strides overflow";
        return false;
      }
    }
    bytes[0] = extents[0];
    bytes[1] = extents[1];
    return true;
  }
  case TFM_KERNEL_CONV_2D: {
    if (!positive(TFM_CONV_2D_NUM_PARAMS))
      return false;
    const int64_t *s = d.strides;
    int64_t n = p[TFM_CONV_2D_N], c = p[TFM_CONV_2D_C], h = p[TFM_CONV_2D_H],
            w = p[TFM_CONV_2D_W], m = p[TFM_CONV_2D_M],
            kh = p[TFM_CONV_2D_KH], kw = p[TFM_CONV_2D_KW],
            g = p[TFM_CONV_2D_GROUPS];
    for (int i = 0; i < 4; ++i)
      if (s[i] <= 0 || static_cast<uint64_t>(s[i]) > kMaxBytes) {
        why = "its strides and dilations must be positive";
        return false;
      }
    for (int i = 4; i < 8; ++i)
      if (s[i] < 0 || static_cast<uint64_t>(s[i]) > kMaxBytes) {
        why = "its pads must not be negative";
        return false;
      }
    if (c % g != 0 || m % g != 0) {
      why = fmt::format("{} groups do not divide {} and {} channels", g, c, m);
      return false;
    }
    int64_t oh = h + s[4] + s[6] - s[2] * (kh - 1) - 1,
            ow = w + s[5] + s[7] - s[3] * (kw - 1) - 1;
    if (oh < 0 || ow < 0) {
      why = "its window is larger than its padded input";
      return false;
    }
    oh = oh / s[0] + 1;
    ow = ow / s[1] + 1;
    return f32({n, c, h, w}, bytes[0]) && f32({m, c / g, kh, kw}, bytes[1]) &&
           (!s[8] || f32({m}, bytes[2])) && f32({n, m, oh, ow}, bytes[3]);
  }
  case TFM_KERNEL_ATTENTION: {
    if (!positive(TFM_ATTENTION_FLAGS))
      return false;
    int64_t b1 = p[TFM_ATTENTION_B1], b2 = p[TFM_ATTENTION_B2],
            sq = p[TFM_ATTENTION_SQ], sk = p[TFM_ATTENTION_SK],
            dq = p[TFM_ATTENTION_D], dv = p[TFM_ATTENTION_DV],
            flags = p[TFM_ATTENTION_FLAGS];
    constexpr int64_t rotary = TFM_ATTENTION_ROTARY_Q | TFM_ATTENTION_ROTARY_K;
    const bool transposed = flags & TFM_ATTENTION_KEYS_TRANSPOSED;
    const int64_t rotaryFlags = flags & (TFM_ATTENTION_KEYS_TRANSPOSED - 1);
    if (flags < 0 || flags >= 2 * TFM_ATTENTION_KEYS_TRANSPOSED ||
        (rotaryFlags >= TFM_ATTENTION_ROTARY_INTERLEAVED &&
         !(flags & rotary)) ||
        ((flags & rotary) && dq % 2 != 0) ||
        (transposed && (sq > TFM_ATTENTION_FEW_QUERIES ||
                        (flags & TFM_ATTENTION_ROTARY_K)))) {
      why = fmt::format("its flags are {}", flags);
      return false;
    }
    int64_t group =
        flags & TFM_ATTENTION_GROUPED ? p[TFM_ATTENTION_KV_GROUP] : 1;
    if (group < 1 || b2 % group != 0) {
      why =
          fmt::format("its {} query heads do not form groups of {}", b2, group);
      return false;
    }
    // Each operand's rows are strided, their elements dense.
    auto rows = [&](int operand, std::initializer_list<int64_t> dims,
                    uint64_t &out) {
      const int64_t *st = d.strides + 3 * operand;
      const int64_t four[] = {st[0], st[1], st[2], 1};
      // kᵀ: the rows dense, the columns st[2] apart.
      const int64_t columns[] = {st[0], st[1], 1, st[2]};
      return strided(dims, operand == 1 && transposed ? columns : four, out);
    };
    if (!rows(0, {b1, b2, sq, dq}, bytes[0]) ||
        !rows(1, {b1, b2 / group, sk, dq}, bytes[1]) ||
        !rows(2, {b1, b2 / group, sk, dv}, bytes[2]) ||
        !rows(3, {b1, b2, sq, dv}, bytes[4]))
      return false;
    if ((flags & TFM_ATTENTION_HAS_MASK) &&
        !f32({flags & TFM_ATTENTION_MASK_B1 ? b1 : 1,
              flags & TFM_ATTENTION_MASK_B2 ? b2 : 1,
              flags & TFM_ATTENTION_MASK_Q ? sq : 1, sk},
             bytes[3]))
      return false;
    // The tables: as many rows as the larger rotated operand reads.
    for (auto [flag, heads, rows] :
         {std::tuple{TFM_ATTENTION_ROTARY_Q, b2, sq},
          std::tuple{TFM_ATTENTION_ROTARY_K, b2 / group, sk}}) {
      uint64_t table = 0;
      if ((flags & flag) &&
          !f32({flags & TFM_ATTENTION_ROTARY_B1 ? b1 : 1,
                flags & TFM_ATTENTION_ROTARY_B2 ? heads : 1,
                flags & TFM_ATTENTION_ROTARY_POS ? rows : 1, dq},
               table))
        return false;
      bytes[5] = bytes[6] = std::max(bytes[5], table);
    }
    return true;
  }
  case TFM_KERNEL_ADAM:
    if (!positive(TFM_OPTIMIZER_SHARDED))
      return false;
    if (!f32({p[TFM_OPTIMIZER_N]}, bytes[0]))
      return false;
    if (p[TFM_OPTIMIZER_SHARDED]) {
      // The moments are the runtime's (Shards.h).
      bytes[1] = bytes[0];
      bytes[2] = 8 * 4;
      return true;
    }
    bytes[1] = bytes[2] = bytes[3] = bytes[0];
    bytes[4] = 8 * 4;
    return true;
  case TFM_KERNEL_SGD:
    if (!positive(TFM_OPTIMIZER_SHARDED))
      return false;
    if (!f32({p[TFM_OPTIMIZER_N]}, bytes[0]))
      return false;
    bytes[1] = bytes[0];
    bytes[2] = 2 * 4;
    return true;
  case TFM_KERNEL_ALL_REDUCE: {
    if (!positive(TFM_ALL_REDUCE_BUCKET))
      return false;
    int64_t n = p[TFM_ALL_REDUCE_N], offset = p[TFM_ALL_REDUCE_OFFSET],
            elements = p[TFM_ALL_REDUCE_BUCKET_ELEMENTS],
            members = p[TFM_ALL_REDUCE_BUCKET_MEMBERS],
            phase = p[TFM_ALL_REDUCE_PHASE];
    if (p[TFM_ALL_REDUCE_BUCKET] < 0 || offset < 0 || members < 1 ||
        elements < n || offset > elements - n ||
        (phase != TFM_ALL_REDUCE_START && phase != TFM_ALL_REDUCE_WAIT)) {
      why = fmt::format("its member of {} elements at {} does not fit a "
                        "bucket of {}",
                        n, offset, elements);
      return false;
    }
    if (!f32({n}, bytes[0]))
      return false;
    bytes[1] = phase == TFM_ALL_REDUCE_START ? 4 : 0;
    return true;
  }
  default:
    why = fmt::format("unknown kind {}", d.kind);
    return false;
  }
}

tfm_status_t tfm::runtime::validateModel(const std::string &path,
                                         const void *handle,
                                         const tfm_abi_model_t *m) {
  auto corrupt = [&](const std::string &what) {
    return makeStatus(TFM_STATUS_DATA_LOSS, "'{}': corrupt metadata: {}", path,
                      what);
  };
  Image image;
  if (!segmentsOf(handle, image))
    return corrupt("the library's loaded segments cannot be found");
  if (!image.contains(m, std::min<size_t>(m->struct_size,
                                          sizeof(tfm_abi_model_t))))
    return corrupt("the model description lies outside the library");
  if (m->producer && !image.containsString(m->producer))
    return corrupt("the producer string lies outside the library");

  // Tensors at the entries' boundaries and in the state.
  auto checkDesc = [&](const tfm_abi_tensor_desc_t &d, const std::string &what,
                       uint64_t &bytes) -> tfm_status_t {
    if (!image.containsString(d.name))
      return corrupt(what + ": its name lies outside the library");
    if (tfm_dtype_size(static_cast<tfm_dtype_t>(d.dtype)) == 0)
      return corrupt(fmt::format("{} ('{}'): unknown dtype {}", what, d.name,
                                 d.dtype));
    if (d.rank < 0 || d.rank > kMaxRank ||
        !image.containsArray(d.dims, d.rank))
      return corrupt(fmt::format("{} ('{}'): rank {} or its dims are invalid",
                                 what, d.name, d.rank));
    bytes = tfm_dtype_size(static_cast<tfm_dtype_t>(d.dtype));
    for (int32_t r = 0; r < d.rank; ++r)
      if (d.dims[r] < 0 || !mul(bytes, static_cast<uint64_t>(d.dims[r]), bytes))
        return corrupt(fmt::format("{} ('{}') has the invalid shape {}", what,
                                   d.name,
                                   shapeString(d.dims, static_cast<size_t>(d.rank))));
    return nullptr;
  };

  // The largest buffer a kernel may use: the arena, the weights, the state
  // or a tensor at an entry's boundary.
  uint64_t largest = std::max(m->weights_bytes, m->state_bytes);
  if (m->state_bytes > kMaxBytes)
    return corrupt(fmt::format("its state of {} bytes is larger than any "
                               "model's", m->state_bytes));
  if (!image.containsArray(m->entries, m->num_entries))
    return corrupt(fmt::format("{} entry points lie outside the library",
                               m->num_entries));
  for (int32_t i = 0; i < m->num_entries; ++i) {
    const tfm_abi_entry_t &e = m->entries[i];
    if (!image.containsString(e.name))
      return corrupt(fmt::format("entry point {} has no name", i));
    if (!image.containsCode(reinterpret_cast<const void *>(e.fn)))
      return corrupt(fmt::format("entry '{}' has no code in the library",
                                 e.name));
    if (e.arena_bytes > kMaxBytes)
      return corrupt(fmt::format("entry '{}' has an arena of {} bytes, larger "
                                 "than any model's", e.name, e.arena_bytes));
    largest = std::max(largest, e.arena_bytes);
    for (int io = 0; io < 2; ++io) {
      int32_t count = io ? e.num_outputs : e.num_inputs;
      const tfm_abi_tensor_desc_t *descs = io ? e.outputs : e.inputs;
      const char *kind = io ? "output" : "input";
      if (!image.containsArray(descs, count))
        return corrupt(fmt::format("entry '{}' has {} {}s outside the library",
                                   e.name, count, kind));
      for (int32_t j = 0; j < count; ++j) {
        uint64_t bytes;
        if (tfm_status_t s = checkDesc(
                descs[j], fmt::format("{} {} of entry '{}'", kind, j, e.name),
                bytes))
          return s;
        largest = std::max(largest, bytes);
      }
    }
  }

  if (!image.containsArray(m->states, m->num_states))
    return corrupt(fmt::format("{} state slots lie outside the library",
                               m->num_states));
  uint64_t stateEnd = 0;
  for (int32_t i = 0; i < m->num_states; ++i) {
    const tfm_abi_state_desc_t &st = m->states[i];
    uint64_t bytes;
    if (tfm_status_t s = checkDesc(st.tensor, fmt::format("state slot {}", i),
                                   bytes))
      return s;
    bool outside = isShardedMoment(st.kind);
    if (!outside)
      stateEnd = std::max(stateEnd, st.offset + bytes);
    bool fits = outside ? st.offset == 0 && st.tensor.dtype == TFM_DTYPE_F32
                        : st.offset <= m->state_bytes &&
                              bytes <= m->state_bytes - st.offset;
    bool initFits = st.init_offset < 0 ||
                    (static_cast<uint64_t>(st.init_offset) <= m->weights_bytes &&
                     bytes <= m->weights_bytes - st.init_offset);
    if (st.kind < TFM_STATE_PARAMETER || st.kind > TFM_STATE_ADAM_V_SHARD ||
        !fits || !initFits)
      return corrupt(fmt::format("state slot {} ('{}') lies outside the state "
                                 "or the weights",
                                 i, st.tensor.name));
    // The runtime writes the rank itself.
    if (st.kind == TFM_STATE_RANK &&
        (st.tensor.dtype != TFM_DTYPE_I64 || bytes != sizeof(int64_t)))
      return corrupt(
          fmt::format("state slot {} (the rank) is not one int64", i));
  }
  // The checks' outcomes, where the code writes them: past the slots, in
  // the state.
  int32_t mode = checkMode(m);
  if (mode != TFM_CHECKS_MID_RUN && mode != TFM_CHECKS_IN_STATE)
    return corrupt(
        fmt::format("its checks report in the unknown mode {}", mode));
  if (mode == TFM_CHECKS_IN_STATE) {
    uint64_t offset = m->check_slots_offset;
    uint64_t bytes = uint64_t(TFM_CHECK_SLOT_BYTES) *
                     static_cast<uint64_t>(std::max(m->num_checks, 0));
    if (offset % 8 || offset < stateEnd || offset > m->state_bytes ||
        bytes > m->state_bytes - offset)
      return corrupt(fmt::format("the slots of its {} checks at {} do not "
                                 "lie in its state past the state's slots "
                                 "({} bytes)",
                                 m->num_checks, offset, m->state_bytes));
    stateEnd = offset + bytes;
  }
  // The compiler lays the slots end to end, each padded to the buffer
  // alignment: the state holds them and nothing more. (Sessions zero it,
  // so a corrupt size would otherwise cost its memory.)
  if (m->state_bytes > stateEnd + TFM_BUFFER_ALIGNMENT)
    return corrupt(fmt::format("its state of {} bytes is larger than its "
                               "slots ({} bytes)",
                               m->state_bytes, stateEnd));

  if (!image.containsArray(m->checks, m->num_checks))
    return corrupt(fmt::format("{} checks lie outside the library",
                               m->num_checks));
  for (int32_t i = 0; i < m->num_checks; ++i) {
    const tfm_abi_check_desc_t &c = m->checks[i];
    if (!image.containsString(c.op) || !image.containsString(c.tensor) ||
        c.input < -1 || c.lower > c.upper)
      return corrupt(fmt::format("check {} is invalid", i));
  }

  if (m->external_weights) {
    if (!image.containsString(m->external_weights))
      return corrupt("the weights file's name lies outside the library");
  } else if (m->weights_bytes &&
             !image.contains(m->weights, m->weights_bytes)) {
    return corrupt(fmt::format("the weights ({} bytes) lie outside the library",
                               m->weights_bytes));
  }

  // Where each of `count` kernels came from (a table that may be NULL):
  // every string inside the library.
  auto checkOrigins = [&](const char *const *origins, int32_t count,
                          const char *what) -> tfm_status_t {
    if (!origins)
      return nullptr;
    if (!image.containsArray(origins, count))
      return corrupt(fmt::format("the origins of {} {}s lie outside the "
                                 "library",
                                 count, what));
    for (int32_t i = 0; i < count; ++i)
      if (!image.containsString(origins[i]))
        return corrupt(
            fmt::format("{} {}'s origin lies outside the library", what, i));
    return nullptr;
  };

  // Device code: a CPU model has none; a GPU model has PTX, its
  // architecture and its kernels' names, and no kernel descriptors, which
  // the runtime runs on the CPU only.
  if (m->target == TFM_TARGET_CPU) {
    if (m->device_code || m->device_arch || m->num_device_kernels ||
        deviceKernelOrigins(m))
      return corrupt("a model for the CPU carries device code");
  } else if (m->target == TFM_TARGET_CUDA) {
    // A GPU runs GEMM descriptors through cuBLASLt, and the session a
    // data-parallel step's exchanges; the others are the CPU's.
    for (int32_t i = 0; i < m->num_kernels; ++i)
      if (m->kernels[i].kind != TFM_KERNEL_LINEAR &&
          m->kernels[i].kind != TFM_KERNEL_BATCH_MATMUL &&
          m->kernels[i].kind != TFM_KERNEL_ALL_REDUCE)
        return corrupt(fmt::format("a model for CUDA GPUs carries kernel {} "
                                   "({}), which runs on the CPU only",
                                   i, kernelName(m->kernels[i].kind)));
    if (!image.containsString(m->device_arch))
      return corrupt("the device code's architecture lies outside the "
                     "library");
    if (!m->device_code_bytes ||
        !image.contains(m->device_code, m->device_code_bytes) ||
        m->device_code[m->device_code_bytes - 1] != 0)
      return corrupt(fmt::format("the device code ({} bytes) lies outside "
                                 "the library or is not terminated",
                                 m->device_code_bytes));
    if (!image.containsArray(m->device_kernels, m->num_device_kernels))
      return corrupt(fmt::format("{} device kernels lie outside the library",
                                 m->num_device_kernels));
    for (int32_t i = 0; i < m->num_device_kernels; ++i)
      if (!image.containsString(m->device_kernels[i]))
        return corrupt(fmt::format("device kernel {} has no name", i));
    if (tfm_status_t s = checkOrigins(deviceKernelOrigins(m),
                                      m->num_device_kernels, "device kernel"))
      return s;
  } else {
    return corrupt(fmt::format("unknown target {}", m->target));
  }

  if (tfm_status_t s = validateDynamicEntries(m, image, corrupt))
    return s;

  if (!image.containsArray(m->kernels, m->num_kernels))
    return corrupt(fmt::format("{} kernels lie outside the library",
                               m->num_kernels));
  if (tfm_status_t s = checkOrigins(kernelOrigins(m), m->num_kernels, "kernel"))
    return s;
  if (modelCpu(m) &&
      (!image.containsString(m->cpu) || !image.containsString(m->cpu_features)))
    return corrupt("the CPU the code was generated for lies outside the "
                   "library");
  if (const int64_t *values = inputValueTable(m)) {
    int64_t count = 0;
    for (int32_t e = 0; e < m->num_entries; ++e)
      count += 3 * int64_t(m->entries[e].num_inputs);
    if (!image.containsArray(values, count))
      return corrupt("what the inputs take lies outside the library");
    for (int64_t i = 0; i < count; i += 3) {
      int64_t kind = values[i], lower = values[i + 1], upper = values[i + 2];
      bool known = kind == TFM_INPUT_VALUES_ANY ||
                   kind == TFM_INPUT_VALUES_MASK ||
                   (kind == TFM_INPUT_VALUES_INDICES && lower < upper);
      if (!known)
        return corrupt(fmt::format("input values ({}, {}, {}) of no known "
                                   "kind",
                                   kind, lower, upper));
    }
  }
  if (const uint32_t *flags = kernelFlagTable(m)) {
    if (!image.containsArray(flags, m->num_kernels))
      return corrupt(fmt::format("the flags of {} kernels lie outside the "
                                 "library",
                                 m->num_kernels));
    for (int32_t i = 0; i < m->num_kernels; ++i) {
      if (flags[i] &
          ~uint32_t(TFM_KERNEL_FLAG_FALLBACK | TFM_KERNEL_FLAG_NARROW_OPERANDS))
        return corrupt(
            fmt::format("kernel {} has unknown flags {:#x}", i, flags[i]));
      const tfm_abi_kernel_desc_t &d = m->kernels[i];
      bool gemm =
          d.kind == TFM_KERNEL_LINEAR || d.kind == TFM_KERNEL_BATCH_MATMUL;
      bool narrowType = d.dtype == TFM_DTYPE_BF16 || d.dtype == TFM_DTYPE_F16;
      if ((flags[i] & TFM_KERNEL_FLAG_NARROW_OPERANDS) && !(gemm && narrowType))
        return corrupt(fmt::format(
            "kernel {} ({}) reads narrow operands, which only a bf16 or f16 "
            "LINEAR or BATCH_MATMUL does",
            i, kernelName(d.kind)));
    }
  }
  for (int32_t i = 0; i < m->num_kernels; ++i) {
    const tfm_abi_kernel_desc_t &d = m->kernels[i];
    uint64_t bytes[TFM_KERNEL_MAX_ARGS];
    std::string why;
    if (!kernelFootprint(d, kernelFlags(m, i), bytes, why))
      return corrupt(fmt::format("kernel {} ({}): {}", i, kernelName(d.kind),
                                 why));
    if (d.kind == TFM_KERNEL_ADAM && d.params[TFM_OPTIMIZER_SHARDED]) {
      int64_t s = d.params[TFM_OPTIMIZER_MOMENTS];
      if (d.params[TFM_OPTIMIZER_SHARDED] != 1 || s < 0 || s >= m->num_states ||
          m->states[s].kind != TFM_STATE_ADAM_M_SHARD ||
          tensorBytes(m->states[s].tensor) !=
              4 * static_cast<uint64_t>(d.params[TFM_OPTIMIZER_N]))
        return corrupt(fmt::format("kernel {} (adam) names state slot {}, "
                                   "which is no sharded first moment of its "
                                   "size",
                                   i, s));
    } else if ((d.kind == TFM_KERNEL_ADAM || d.kind == TFM_KERNEL_SGD) &&
               (d.params[TFM_OPTIMIZER_SHARDED] ||
                d.params[TFM_OPTIMIZER_MOMENTS]))
      return corrupt(fmt::format("kernel {} ({}) has unknown flags", i,
                                 kernelName(d.kind)));
    for (int a = 0; a < TFM_KERNEL_MAX_ARGS; ++a)
      if (bytes[a] > largest)
        return corrupt(fmt::format("kernel {} ({}) touches {} bytes through "
                                   "argument {}, more than the model's "
                                   "largest buffer ({} bytes)",
                                   i, kernelName(d.kind), bytes[a], a,
                                   largest));
  }
  return nullptr;
}
