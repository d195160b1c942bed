//===- State.cpp - Parameters and checkpoints of a session ----------------===//
//
// A checkpoint is a small binary file: the magic "TFMCKPT1", a format
// version, the number of slots, then for each slot its kind, name, dtype,
// shape and bytes, and last a 64-bit FNV-1a checksum of everything before
// it. Integers are little-endian, as on every host the runtime supports.
//
//===----------------------------------------------------------------------===//

#include "Exchange.h"
#include "Internal.h"
#include "Shards.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace tfm::runtime;

namespace {

constexpr char kMagic[8] = {'T', 'F', 'M', 'C', 'K', 'P', 'T', '1'};
constexpr uint32_t kFormatVersion = 1;

template <typename T> void put(std::string &out, T v) {
  out.append(reinterpret_cast<const char *>(&v), sizeof(v));
}

/// Reads from a byte range, failing (not crashing) past its end.
struct Reader {
  const char *p, *end;
  template <typename T> bool get(T &v) {
    if (static_cast<size_t>(end - p) < sizeof(T))
      return false;
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return true;
  }
  bool bytes(size_t n, const char *&at) {
    if (static_cast<size_t>(end - p) < n)
      return false;
    at = p;
    p += n;
    return true;
  }
};

const char *kindName(int32_t kind) {
  switch (kind) {
  case TFM_STATE_PARAMETER: return "parameter";
  case TFM_STATE_ADAM_M: return "Adam first moment";
  case TFM_STATE_ADAM_V: return "Adam second moment";
  case TFM_STATE_STEP: return "step count";
  case TFM_STATE_CACHE: return "generation cache";
  case TFM_STATE_SOURCE: return "generation source";
  case TFM_STATE_RANK:
    return "process rank";
  case TFM_STATE_ADAM_M_SHARD:
    return "Adam first moment (sharded)";
  case TFM_STATE_ADAM_V_SHARD:
    return "Adam second moment (sharded)";
  default: return "?";
  }
}

bool sameShape(const tfm_abi_tensor_desc_t &d, const int64_t *dims,
               size_t rank) {
  return rank == static_cast<size_t>(d.rank) &&
         std::equal(dims, dims + rank, d.dims);
}

/// Writes `data` to `path` through a temporary file in the same folder,
/// flushed to disk before the rename that makes it visible.
tfm_status_t writeAtomically(const std::string &path, const std::string &data) {
  // A unique name, so two saves to one path never write the same file.
  std::string tmp = path + ".tmp.XXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0)
    return makeStatus(TFM_STATUS_NOT_FOUND, "cannot create '{}': {}", tmp,
                      std::strerror(errno));
  ::fchmod(fd, 0644);
  size_t done = 0;
  int err = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      err = errno;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (!err && ::fsync(fd) != 0)
    err = errno;
  if (::close(fd) != 0 && !err)
    err = errno;
  if (!err && std::rename(tmp.c_str(), path.c_str()) != 0)
    err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    bool noRoom = err == ENOSPC || err == EFBIG || err == EDQUOT;
    return makeStatus(noRoom ? TFM_STATUS_RESOURCE_EXHAUSTED
                             : TFM_STATUS_INTERNAL,
                      "cannot write the checkpoint '{}': {}", path,
                      std::strerror(err));
  }
  return nullptr;
}

} // namespace

extern "C" {

size_t tfm_session_num_parameters(const tfm_session_t *session) {
  if (!session)
    return 0;
  size_t n = 0;
  const tfm_abi_model_t *m = session->module->model;
  for (int32_t i = 0; i < m->num_states; ++i)
    n += m->states[i].kind == TFM_STATE_PARAMETER;
  return n;
}

const char *tfm_session_parameter_name(const tfm_session_t *session,
                                       size_t index) {
  if (!session)
    return nullptr;
  const tfm_abi_model_t *m = session->module->model;
  for (int32_t i = 0; i < m->num_states; ++i)
    if (m->states[i].kind == TFM_STATE_PARAMETER && index-- == 0)
      return m->states[i].tensor.name;
  return nullptr;
}

tfm_status_t tfm_session_get_parameter(tfm_session_t *session,
                                       const char *name,
                                       tfm_tensor_t **out_value) {
  if (!session || !name || !out_value)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_session_get_parameter: NULL argument");
  *out_value = nullptr;
  const tfm_abi_state_desc_t *st = session->findState(name, TFM_STATE_PARAMETER);
  if (!st)
    return makeStatus(TFM_STATUS_NOT_FOUND,
                      "'{}' has no parameter named '{}'", session->module->path,
                      name);
  SessionUse use(session);
  if (!use.acquired())
    return sessionInUse("tfm_session_get_parameter");
  tfm_status_t s = tfm_tensor_create(
      static_cast<tfm_dtype_t>(st->tensor.dtype), st->tensor.dims,
      static_cast<size_t>(st->tensor.rank), out_value);
  if (s)
    return s;
  s = guarded("tfm_session_get_parameter", [&]() -> tfm_status_t {
    session->device->copyToHost(
        (*out_value)->buffer.ptr.get(),
        static_cast<const char *>(session->state.get()) + st->offset,
        tensorBytes(st->tensor));
    return nullptr;
  });
  if (s) {
    tfm_tensor_release(*out_value);
    *out_value = nullptr;
  }
  return s;
}

tfm_status_t tfm_session_set_parameter(tfm_session_t *session,
                                       const char *name,
                                       const tfm_tensor_t *value) {
  if (!session || !name || !value)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_session_set_parameter: NULL argument");
  const tfm_abi_state_desc_t *st = session->findState(name, TFM_STATE_PARAMETER);
  if (!st)
    return makeStatus(TFM_STATUS_NOT_FOUND,
                      "'{}' has no parameter named '{}'", session->module->path,
                      name);
  if (value->dtype != st->tensor.dtype ||
      !sameShape(st->tensor, value->dims.data(), value->dims.size()))
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "parameter '{}' is {} of rank {}; the value given is {} "
                      "of another shape or type",
                      name, dtypeName(st->tensor.dtype), st->tensor.rank,
                      dtypeName(value->dtype));
  if (!value->onHost())
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_session_set_parameter: the value of '{}' is on "
                      "{}; give a host tensor",
                      name, value->device);
  SessionUse use(session);
  if (!use.acquired())
    return sessionInUse("tfm_session_set_parameter");
  return guarded("tfm_session_set_parameter", [&]() -> tfm_status_t {
    session->device->copyToDevice(
        static_cast<char *>(session->state.get()) + st->offset,
        value->buffer.ptr.get(), tensorBytes(st->tensor));
    return nullptr;
  });
}

int64_t tfm_session_step_count(const tfm_session_t *session) {
  if (!session)
    return 0;
  const tfm_abi_model_t *m = session->module->model;
  for (int32_t i = 0; i < m->num_states; ++i)
    if (m->states[i].kind == TFM_STATE_STEP) {
      int64_t step = -1;
      try {
        session->device->copyToHost(
            &step,
            static_cast<const char *>(session->state.get()) +
                m->states[i].offset,
            sizeof(step));
      } catch (...) {
        return -1;
      }
      return step;
    }
  return 0;
}

tfm_status_t tfm_session_save_checkpoint(tfm_session_t *session,
                                         const char *path) {
  // In a data-parallel run every rank may call it, and those that only
  // contribute their parts of sharded moments pass no path.
  if (!session || (!path && !session->exchange))
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_session_save_checkpoint: NULL argument");
  SessionUse use(session);
  if (!use.acquired())
    return sessionInUse("tfm_session_save_checkpoint");
  return guarded("tfm_session_save_checkpoint", [&]() -> tfm_status_t {
    const tfm_abi_model_t *m = session->module->model;
    // Generation caches hold the last sequence, not what was learned.
    uint32_t saved = 0;
    for (int32_t i = 0; i < m->num_states; ++i)
      saved += isCheckpointed(m->states[i].kind);
    if (saved == 0)
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "'{}' has no training state to save; compile it "
                        "with --train",
                        session->module->path);
    std::string out(kMagic, sizeof(kMagic));
    put(out, kFormatVersion);
    put(out, saved);
    std::vector<char> host(session->state.bytes());
    session->device->copyToHost(host.data(), session->state.get(), host.size());
    const char *state = host.data();
    const tfm_communicator_t *comm =
        session->exchange ? &session->exchange->communicator() : nullptr;
    std::vector<float> moment;
    for (int32_t i = 0; i < m->num_states; ++i) {
      const tfm_abi_state_desc_t &st = m->states[i];
      if (!isCheckpointed(st.kind))
        continue;
      // Sharded moments are saved whole, as unsharded ones, so that either
      // artifact resumes the other's checkpoints at any number of ranks.
      bool sharded = isShardedMoment(st.kind);
      if (sharded) {
        std::string why;
        if (!session->shards->whole(i, comm, moment, why))
          return makeStatus(TFM_STATUS_UNAVAILABLE,
                            "tfm_session_save_checkpoint: {}", why);
      }
      if (!path)
        continue;
      int32_t kind = st.kind == TFM_STATE_ADAM_M_SHARD   ? TFM_STATE_ADAM_M
                     : st.kind == TFM_STATE_ADAM_V_SHARD ? TFM_STATE_ADAM_V
                                                         : st.kind;
      uint32_t len = static_cast<uint32_t>(std::strlen(st.tensor.name));
      put(out, kind);
      put(out, len);
      out.append(st.tensor.name, len);
      put(out, st.tensor.dtype);
      put(out, static_cast<uint32_t>(st.tensor.rank));
      for (int32_t d = 0; d < st.tensor.rank; ++d)
        put(out, st.tensor.dims[d]);
      uint64_t bytes = tensorBytes(st.tensor);
      put(out, bytes);
      out.append(sharded ? reinterpret_cast<const char *>(moment.data())
                         : state + st.offset,
                 bytes);
    }
    if (!path)
      return nullptr;
    put(out, fnv1a(out.data(), out.size()));
    return writeAtomically(path, out);
  });
}

tfm_status_t tfm_session_load_checkpoint(tfm_session_t *session,
                                         const char *path) {
  if (!session || !path)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_session_load_checkpoint: NULL argument");
  SessionUse use(session);
  if (!use.acquired())
    return sessionInUse("tfm_session_load_checkpoint");
  return guarded("tfm_session_load_checkpoint", [&]() -> tfm_status_t {
    FILE *f = std::fopen(path, "rb");
    if (!f)
      return makeStatus(TFM_STATUS_NOT_FOUND, "cannot open checkpoint '{}': {}",
                        path, std::strerror(errno));
    std::string data;
    char chunk[1 << 16];
    size_t n;
    while ((n = std::fread(chunk, 1, sizeof(chunk), f)) > 0)
      data.append(chunk, n);
    std::fclose(f);
    auto corrupt = [&](const char *why) {
      return makeStatus(TFM_STATUS_DATA_LOSS,
                        "'{}' is not a valid checkpoint: {}", path, why);
    };
    if (data.size() < sizeof(kMagic) + 8 + 8 ||
        std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0)
      return corrupt("no checkpoint header");
    uint64_t stored;
    std::memcpy(&stored, data.data() + data.size() - 8, 8);
    if (fnv1a(data.data(), data.size() - 8) != stored)
      return corrupt("the checksum does not match (truncated or damaged)");
    Reader r{data.data() + sizeof(kMagic), data.data() + data.size() - 8};
    uint32_t version = 0, count = 0;
    r.get(version);
    r.get(count);
    if (version != kFormatVersion)
      return corrupt("an unknown format version");
    const tfm_abi_model_t *m = session->module->model;
    // Validate everything first; copy only when the whole file fits.
    std::vector<std::pair<const tfm_abi_state_desc_t *, const char *>> copies;
    for (uint32_t i = 0; i < count; ++i) {
      int32_t kind, dtype;
      uint32_t len, rank;
      const char *name;
      if (!r.get(kind) || !r.get(len) || !r.bytes(len, name) || !r.get(dtype) ||
          !r.get(rank) || rank > 64)
        return corrupt("a slot header is cut short");
      std::vector<int64_t> dims(rank);
      for (int64_t &d : dims)
        if (!r.get(d))
          return corrupt("a slot header is cut short");
      uint64_t bytes;
      const char *payload;
      if (!r.get(bytes) || !r.bytes(bytes, payload))
        return corrupt("slot data is cut short");
      std::string slotName(name, len);
      const tfm_abi_state_desc_t *st = session->findState(slotName.c_str(), kind);
      // Moments saved whole resume a sharded artifact too.
      if (!st && (kind == TFM_STATE_ADAM_M || kind == TFM_STATE_ADAM_V))
        st = session->findState(slotName.c_str(), kind == TFM_STATE_ADAM_M
                                                      ? TFM_STATE_ADAM_M_SHARD
                                                      : TFM_STATE_ADAM_V_SHARD);
      if (!st)
        return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                          "checkpoint '{}' holds the {} '{}', which the model "
                          "'{}' does not have",
                          path, kindName(kind), slotName, session->module->path);
      if (dtype != st->tensor.dtype || !sameShape(st->tensor, dims.data(), rank) ||
          bytes != tensorBytes(st->tensor))
        return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                          "checkpoint '{}': the {} '{}' has another type or "
                          "shape than the model's",
                          path, kindName(kind), slotName);
      copies.emplace_back(st, payload);
    }
    if (r.p != r.end)
      return corrupt("trailing bytes after the last slot");
    for (int32_t i = 0; i < m->num_states; ++i) {
      bool found = !isCheckpointed(m->states[i].kind);
      for (auto &c : copies)
        found |= c.first == &m->states[i];
      if (!found)
        return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                          "checkpoint '{}' lacks the {} '{}' of the model",
                          path, kindName(m->states[i].kind),
                          m->states[i].tensor.name);
    }
    auto *state = static_cast<char *>(session->state.get());
    std::vector<float> moment;
    for (auto &[st, payload] : copies) {
      if (isShardedMoment(st->kind)) {
        // Each rank keeps its part.
        moment.resize(tensorBytes(st->tensor) / sizeof(float));
        std::memcpy(moment.data(), payload, tensorBytes(st->tensor));
        session->shards->setWhole(static_cast<int32_t>(st - m->states),
                                  moment.data());
        continue;
      }
      session->device->copyToDevice(state + st->offset, payload,
                                    tensorBytes(st->tensor));
    }
    return nullptr;
  });
}

} // extern "C"
