//===- Binding.cpp - A run's tensors, matched to its entry and placed -----===//

#include "Binding.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

using namespace tfm::runtime;

namespace {

/// Whether a kernel may take the caller's device memory as it is: the GPU
/// kernels read and write entry arguments in 16-byte vectors, which the
/// compiler proves aligned from TFM_BUFFER_ALIGNMENT alone. Memory at any
/// other address is copied on the device into the entry's staging first.
bool kernelAligned(const tfm_tensor_t *t) {
  return reinterpret_cast<uintptr_t>(t->buffer.ptr.get()) %
             TFM_BUFFER_ALIGNMENT ==
         0;
}

/// "'a', 'b'", or "none".
std::string names(const tfm_abi_tensor_desc_t *descs, size_t n) {
  std::string list;
  for (size_t i = 0; i < n; ++i)
    list += (i ? ", '" : "'") + std::string(descs[i].name) + "'";
  return list.empty() ? std::string("none") : list;
}

/// The position of each named tensor among `descs`.
tfm_status_t resolve(const char *entry, const char *const *given, size_t count,
                     const tfm_abi_tensor_desc_t *descs, size_t n,
                     const char *what, std::vector<size_t> &slot) {
  slot.assign(count, 0);
  std::vector<bool> seen(n, false);
  for (size_t i = 0; i < count; ++i) {
    if (!given[i])
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "entry '{}': {} name {} is NULL", entry, what, i);
    size_t j = 0;
    while (j < n && std::strcmp(descs[j].name, given[i]) != 0)
      ++j;
    if (j == n)
      return makeStatus(TFM_STATUS_NOT_FOUND,
                        "entry '{}' has no {} '{}'; its {}s are: {}", entry,
                        what, given[i], what, names(descs, n));
    if (seen[j])
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "entry '{}': {} '{}' is named twice", entry, what,
                        given[i]);
    seen[j] = true;
    slot[i] = j;
  }
  return nullptr;
}

/// Whether `got` has the dims `want`, where a dim of -1 (a dynamic entry's)
/// takes any size when `anySize`.
bool sameShape(const tfm_tensor_t *got, const tfm_abi_tensor_desc_t &want,
               bool anySize) {
  return got->dims.size() == static_cast<size_t>(want.rank) &&
         std::equal(got->dims.begin(), got->dims.end(), want.dims,
                    [&](int64_t size, int64_t dim) {
                      return (anySize && dim < 0) || size == dim;
                    });
}

/// Checks that tensor `t`, for the entry's `what` ("input") `name`, lives
/// where the session computes: on the host, or in the memory of the
/// session's device.
tfm_status_t checkDevice(const tfm_session_s &session, const char *entry,
                         const char *what, const char *name,
                         const tfm_tensor_t *t) {
  if (t->onHost())
    return nullptr;
  if (t->device != session.deviceName)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "entry '{}': {} '{}' is on {}, but the session "
                      "computes on {}; give a tensor on the host or on {}",
                      entry, what, name, t->device, session.deviceName,
                      session.deviceName);
  std::string why =
      session.device->checkMemory(t->buffer.ptr.get(), t->buffer.size);
  if (!why.empty())
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "entry '{}': {} '{}' is not a tensor of {}: {}", entry,
                      what, name, session.deviceName, why);
  return nullptr;
}

/// Whether two tensors share memory: only tensors on one device can.
bool overlaps(const tfm_tensor_t *a, const tfm_tensor_t *b) {
  auto *p = static_cast<const char *>(a->buffer.ptr.get());
  auto *q = static_cast<const char *>(b->buffer.ptr.get());
  return a->device == b->device && a->buffer.size && b->buffer.size &&
         p < q + b->buffer.size && q < p + a->buffer.size;
}

} // namespace

tfm_status_t tfm::runtime::bindArguments(
    const tfm_session_s &session, const EntryPorts &entry,
    const char *const *inputNames, tfm_tensor_t *const *inputs,
    size_t numInputs, const char *const *outputNames,
    tfm_tensor_t *const *outputs, size_t numOutputs, Binding &out) {
  const char *name = entry.name;
  const tfm_abi_tensor_desc_t *ins = entry.inputs, *outs = entry.outputs;
  size_t wantInputs = entry.numInputs, wantOutputs = entry.numOutputs;
  if (numInputs != wantInputs)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "entry '{}' takes {} inputs ({}) but {} were given", name,
                      wantInputs, names(ins, wantInputs), numInputs);
  out.inputs.assign(wantInputs, nullptr);
  if (inputNames) {
    std::vector<size_t> slot;
    if (tfm_status_t st = resolve(name, inputNames, numInputs, ins, wantInputs,
                                  "input", slot))
      return st;
    for (size_t i = 0; i < numInputs; ++i)
      out.inputs[slot[i]] = inputs[i];
  } else {
    std::copy(inputs, inputs + numInputs, out.inputs.begin());
  }
  if (outputNames) {
    if (tfm_status_t st = resolve(name, outputNames, numOutputs, outs,
                                  wantOutputs, "output", out.source))
      return st;
  } else {
    if (numOutputs < wantOutputs)
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "entry '{}' returns {} outputs but room for {} was "
                        "given",
                        name, wantOutputs, numOutputs);
    out.source.clear();
    for (size_t i = 0; i < wantOutputs; ++i)
      out.source.push_back(i);
  }
  for (size_t i = 0; i < wantInputs; ++i) {
    const tfm_tensor_t *got = out.inputs[i];
    const tfm_abi_tensor_desc_t &want = ins[i];
    if (!got)
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "entry '{}': input {} ('{}') is NULL", name, i,
                        want.name);
    if (!entry.dynamic &&
        (got->dtype != want.dtype || !sameShape(got, want, false)))
      return makeStatus(
          TFM_STATUS_INVALID_ARGUMENT,
          "entry '{}': input {} ('{}') must be {} {} but is {} {}", name, i,
          want.name, dtypeName(want.dtype),
          shapeString(want.dims, static_cast<size_t>(want.rank)),
          dtypeName(got->dtype),
          shapeString(got->dims.data(), got->dims.size()));
    if (tfm_status_t st = checkDevice(session, name, "input", want.name, got))
      return st;
  }
  // Outputs the caller gave: each must match its descriptor (a dynamic
  // entry's sizes are checked once they are known) and may not share
  // memory with an input or another output.
  out.given.assign(wantOutputs, nullptr);
  for (size_t i = 0; i < out.source.size(); ++i) {
    tfm_tensor_t *t = outputs[i];
    if (!t)
      continue;
    const tfm_abi_tensor_desc_t &want = outs[out.source[i]];
    if (t->dtype != want.dtype || !sameShape(t, want, true))
      return makeStatus(
          TFM_STATUS_INVALID_ARGUMENT,
          "entry '{}': the tensor given for output '{}' is {} {} but the "
          "output is {} {}",
          name, want.name, dtypeName(t->dtype),
          shapeString(t->dims.data(), t->dims.size()), dtypeName(want.dtype),
          shapeString(want.dims, static_cast<size_t>(want.rank)));
    if (tfm_status_t st = checkDevice(session, name, "output", want.name, t))
      return st;
    for (size_t j = 0; j < wantInputs; ++j)
      if (overlaps(t, out.inputs[j]))
        return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                          "entry '{}': the tensor given for output '{}' "
                          "shares memory with input '{}'",
                          name, want.name, ins[j].name);
    for (size_t j = 0; j < wantOutputs; ++j)
      if (out.given[j] && overlaps(t, out.given[j]))
        return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                          "entry '{}': the tensors given for outputs '{}' "
                          "and '{}' share memory",
                          name, outs[j].name, want.name);
    out.given[out.source[i]] = t;
  }
  return nullptr;
}

tfm_status_t tfm::runtime::placeTensors(tfm_session_s &session,
                                        const tfm_abi_entry_t &e,
                                        tfm_tensor_t *const *inputs,
                                        tfm_tensor_t *const *outputs,
                                        bool replays, RunAddresses &at) {
  size_t numIn = static_cast<size_t>(e.num_inputs);
  size_t numOut = static_cast<size_t>(e.num_outputs);
  at.in.resize(numIn);
  at.inBytes.resize(numIn);
  at.out.resize(numOut);
  at.outBytes.resize(numOut);
  for (size_t i = 0; i < numIn; ++i) {
    at.in[i] = inputs[i]->buffer.ptr.get();
    at.inBytes[i] = inputs[i]->buffer.size;
  }
  for (size_t i = 0; i < numOut; ++i) {
    at.out[i] = outputs[i]->buffer.ptr.get();
    at.outBytes[i] = outputs[i]->buffer.size;
  }
  Device &device = *session.device;
  if (device.hostAddressable())
    return nullptr;
  tfm_session_s::EntryStaging &staging =
      session.staging[&e - session.module->model->entries];
  if (staging.device.empty()) {
    // One page-locked block for every tensor of the entry, each at an
    // aligned offset.
    size_t hostBytes = 0;
    for (size_t io = 0; io < 2; ++io)
      for (size_t i = 0; i < (io ? numOut : numIn); ++i) {
        const tfm_abi_tensor_desc_t &d = io ? e.outputs[i] : e.inputs[i];
        uint64_t bytes = tensorBytes(d);
        staging.hostOffsets.push_back(hostBytes);
        hostBytes += (bytes + TFM_BUFFER_ALIGNMENT - 1) / TFM_BUFFER_ALIGNMENT *
                     TFM_BUFFER_ALIGNMENT;
        staging.device.push_back(device.allocate(bytes));
        if (!staging.device.back().get()) {
          staging = tfm_session_s::EntryStaging();
          return makeStatus(TFM_STATUS_RESOURCE_EXHAUSTED,
                            "entry '{}': {} cannot allocate {} bytes for "
                            "'{}'",
                            e.name, session.deviceName, bytes, d.name);
        }
      }
    staging.host = StagingBuffer(&device, device.allocateStaging(hostBytes));
    if (!staging.host.get()) {
      staging = tfm_session_s::EntryStaging();
      return makeStatus(TFM_STATUS_RESOURCE_EXHAUSTED,
                        "entry '{}': cannot allocate {} bytes of host "
                        "memory to stage its tensors",
                        e.name, hostBytes);
    }
  }
  // The last run, ordered on a caller's stream, may still be copying out
  // of the staging memory this run's host inputs are written to; a run of
  // device tensors alone need not wait for it.
  bool hostInputs =
      std::any_of(inputs, inputs + numIn,
                  [](const tfm_tensor_t *t) { return t->onHost(); });
  if (session.devicePending && hostInputs) {
    device.synchronize();
    session.devicePending = false;
  }
  for (size_t i = 0; i < numIn; ++i) {
    const tfm_tensor_t *t = inputs[i];
    void *staged = staging.device[i].get();
    if (t->onHost()) {
      char *host = staging.host.get() + staging.hostOffsets[i];
      std::memcpy(host, t->buffer.ptr.get(), t->buffer.size);
      device.copyToDevice(staged, host, t->buffer.size);
    } else if (replays || !kernelAligned(t)) {
      device.copyOnDevice(staged, t->buffer.ptr.get(), t->buffer.size);
    } else {
      continue;
    }
    at.in[i] = staged;
  }
  for (size_t i = 0; i < numOut; ++i)
    if (outputs[i]->onHost() || replays || !kernelAligned(outputs[i]))
      at.out[i] = staging.device[numIn + i].get();
  return nullptr;
}

void tfm::runtime::collectOutputs(tfm_session_s &session,
                                  const tfm_abi_entry_t &e,
                                  tfm_tensor_t *const *outputs,
                                  const RunAddresses &at) {
  Device &device = *session.device;
  if (device.hostAddressable())
    return;
  tfm_session_s::EntryStaging &staging =
      session.staging[&e - session.module->model->entries];
  size_t numIn = static_cast<size_t>(e.num_inputs);
  for (size_t i = 0; i < at.out.size(); ++i) {
    tfm_tensor_t *t = outputs[i];
    void *dst = t->buffer.ptr.get();
    if (at.out[i] == dst)
      continue;
    if (!t->onHost()) {
      device.copyOnDevice(dst, at.out[i], at.outBytes[i]);
      continue;
    }
    char *host = staging.host.get() + staging.hostOffsets[numIn + i];
    device.copyToHost(host, at.out[i], at.outBytes[i]);
    std::memcpy(dst, host, at.outBytes[i]);
  }
}
