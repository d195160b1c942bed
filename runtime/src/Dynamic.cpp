//===- Dynamic.cpp - Entries that serve a range of sizes ------------------===//
//
// A dynamic entry is served by static buckets (tfm/abi.h): a run takes the
// cheapest bucket that holds its sizes, pads its inputs with zeros to the
// bucket's sizes, fills one key mask per masked symbol (0 below the run's
// size, -inf from it on), and cuts the outputs back to the run's sizes.
// The compiler proved that padding exact (tfm-exact-padding); a run of a
// bucket's own sizes is passed through untouched.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <cstring>
#include <limits>

using namespace tfm::runtime;

namespace {

/// Copies the leading block `common` (per axis, at most either shape) of a
/// row-major `src` of `srcDims` into `dst` of `dstDims`.
void copyBlock(const char *src, const std::vector<int64_t> &srcDims,
               char *dst, const std::vector<int64_t> &dstDims,
               const std::vector<int64_t> &common, size_t width) {
  size_t rank = common.size();
  if (rank == 0) {
    std::memcpy(dst, src, width);
    return;
  }
  for (int64_t c : common)
    if (c == 0)
      return;
  // Element strides of both tensors.
  std::vector<int64_t> srcStride(rank, 1), dstStride(rank, 1);
  for (size_t r = rank - 1; r > 0; --r) {
    srcStride[r - 1] = srcStride[r] * srcDims[r];
    dstStride[r - 1] = dstStride[r] * dstDims[r];
  }
  size_t run = static_cast<size_t>(common.back()) * width;
  // An odometer over the outer axes; each reading copies one row.
  std::vector<int64_t> index(rank - 1, 0);
  while (true) {
    int64_t s = 0, d = 0;
    for (size_t r = 0; r + 1 < rank; ++r) {
      s += index[r] * srcStride[r];
      d += index[r] * dstStride[r];
    }
    std::memcpy(dst + d * width, src + s * width, run);
    int64_t r = static_cast<int64_t>(rank) - 2;
    while (r >= 0 && ++index[r] == common[r])
      index[r--] = 0;
    if (r < 0)
      return;
  }
}

struct TensorDeleter {
  void operator()(tfm_tensor_t *t) const { tfm_tensor_release(t); }
};
using TensorPtr = std::unique_ptr<tfm_tensor_t, TensorDeleter>;

} // namespace

tfm_status_t tfm::runtime::runDynamic(tfm_session_t *session,
                                      const tfm_abi_dynamic_entry_t &d,
                                      tfm_tensor_t *const *inputs,
                                      size_t num_inputs,
                                      tfm_tensor_t **out_outputs) {
  const tfm_abi_model_t *m = session->module->model;
  const char *entry = d.name;
  int32_t n = d.num_symbols;
  // The run's size of each symbol, and the input and axis that set it.
  std::vector<int64_t> sizes(n, -1);
  std::vector<std::pair<size_t, int32_t>> setBy(n);
  auto where = [&](std::pair<size_t, int32_t> at) {
    return fmt::format("input '{}' axis {}", d.inputs[at.first].name,
                       at.second);
  };
  for (size_t i = 0; i < num_inputs; ++i) {
    const tfm_abi_tensor_desc_t &want = d.inputs[i];
    const tfm_tensor_t *got = inputs[i];
    if (!got)
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "entry '{}': input {} ('{}') is NULL", entry, i,
                        want.name);
    bool fits = got->dtype == want.dtype &&
                got->dims.size() == static_cast<size_t>(want.rank);
    for (int32_t r = 0; fits && r < want.rank; ++r)
      fits = want.dims[r] < 0 || got->dims[r] == want.dims[r];
    if (!fits) {
      std::string shape;
      for (int32_t r = 0; r < want.rank; ++r)
        shape += (r ? ", " : "") +
                 (want.dims[r] >= 0 ? std::to_string(want.dims[r])
                                    : std::string(d.symbols[-1 - want.dims[r]]));
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "entry '{}': input {} ('{}') must be {} [{}] but is "
                        "{} {}",
                        entry, i, want.name, dtypeName(want.dtype), shape,
                        dtypeName(got->dtype),
                        shapeString(got->dims.data(), got->dims.size()));
    }
    for (int32_t r = 0; r < want.rank; ++r) {
      if (want.dims[r] >= 0)
        continue;
      int32_t s = static_cast<int32_t>(-1 - want.dims[r]);
      if (sizes[s] >= 0 && sizes[s] != got->dims[r])
        return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                          "entry '{}': '{}' is {} by {} but {} by {}", entry,
                          d.symbols[s], sizes[s], where(setBy[s]),
                          got->dims[r], where({i, r}));
      sizes[s] = got->dims[r];
      setBy[s] = {i, r};
    }
  }
  for (int32_t s = 0; s < n; ++s) {
    if (sizes[s] < 0)
      sizes[s] = d.max_sizes[s]; // no input has it: the bucket decides
    else if (sizes[s] < d.min_sizes[s] || sizes[s] > d.max_sizes[s])
      return makeStatus(TFM_STATUS_OUT_OF_RANGE,
                        "entry '{}': '{}' is {} ({}), outside the range "
                        "{}..{} the model was compiled for",
                        entry, d.symbols[s], sizes[s], where(setBy[s]),
                        d.min_sizes[s], d.max_sizes[s]);
  }
  // The cheapest bucket that holds the run: buckets come cheapest first.
  int32_t chosen = -1;
  for (int32_t b = 0; b < d.num_buckets && chosen < 0; ++b) {
    bool holds = true;
    for (int32_t s = 0; s < n; ++s)
      holds = holds && d.bucket_sizes[int64_t(b) * n + s] >= sizes[s];
    if (holds)
      chosen = b;
  }
  if (chosen < 0)
    return makeStatus(TFM_STATUS_INTERNAL,
                      "entry '{}': no bucket holds the run's sizes", entry);
  const tfm_abi_entry_t &e = m->entries[d.buckets[chosen]];
  const int64_t *bucket = d.bucket_sizes + int64_t(chosen) * n;
  bool exact = true;
  for (int32_t s = 0; s < n; ++s)
    exact = exact && bucket[s] == sizes[s];

  return guarded("tfm_session_run", [&]() -> tfm_status_t {
    std::vector<TensorPtr> owned;
    std::vector<tfm_tensor_t *> in(inputs, inputs + num_inputs);
    if (!exact)
      for (size_t i = 0; i < num_inputs; ++i) {
        const tfm_abi_tensor_desc_t &t = e.inputs[i];
        tfm_tensor_t *padded;
        if (tfm_status_t s =
                tfm_tensor_create(static_cast<tfm_dtype_t>(t.dtype), t.dims,
                                  static_cast<size_t>(t.rank), &padded))
          return s;
        owned.emplace_back(padded);
        copyBlock(static_cast<const char *>(inputs[i]->buffer.ptr.get()),
                  inputs[i]->dims,
                  static_cast<char *>(padded->buffer.ptr.get()), padded->dims,
                  inputs[i]->dims, tfm_dtype_size(padded->dtype));
        in[i] = padded;
      }
    for (int32_t k = 0; k < d.num_key_masks; ++k) {
      int32_t s = d.key_masks[k];
      int64_t length = bucket[s];
      tfm_tensor_t *mask;
      if (tfm_status_t st =
              tfm_tensor_create(TFM_DTYPE_F32, &length, 1, &mask))
        return st;
      owned.emplace_back(mask);
      auto *values = static_cast<float *>(mask->buffer.ptr.get());
      for (int64_t j = sizes[s]; j < length; ++j)
        values[j] = -std::numeric_limits<float>::infinity();
      in.push_back(mask);
    }
    std::vector<tfm_tensor_t *> out(e.num_outputs, nullptr);
    if (tfm_status_t s = runEntry(session, &e, in.data(), in.size(), out.data()))
      return s;
    std::vector<TensorPtr> results;
    for (tfm_tensor_t *t : out)
      results.emplace_back(t);
    if (!exact)
      for (int32_t j = 0; j < d.num_outputs; ++j) {
        const tfm_abi_tensor_desc_t &want = d.outputs[j];
        std::vector<int64_t> dims(want.dims, want.dims + want.rank);
        for (int64_t &dim : dims)
          if (dim < 0)
            dim = sizes[-1 - dim];
        tfm_tensor_t *cut;
        if (tfm_status_t s = tfm_tensor_create(
                static_cast<tfm_dtype_t>(want.dtype), dims.data(), dims.size(),
                &cut))
          return s;
        TensorPtr full = std::move(results[j]);
        results[j].reset(cut);
        copyBlock(static_cast<const char *>(full->buffer.ptr.get()),
                  full->dims, static_cast<char *>(cut->buffer.ptr.get()),
                  cut->dims, cut->dims, tfm_dtype_size(cut->dtype));
      }
    for (size_t j = 0; j < results.size(); ++j)
      out_outputs[j] = results[j].release();
    return nullptr;
  });
}
