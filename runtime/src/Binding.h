//===- Binding.h - A run's tensors, matched to its entry and placed -*- C++
//-*-===//
//
// A call of tfm_session_run_with gives its tensors by name or by position,
// on the host or on the session's device. Binding matches them to the
// entry's inputs and outputs and checks each against its descriptor and
// the device; placing puts each where compiled code reads it, which on a
// GPU means staging the host's through page-locked memory.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_RUNTIME_SRC_BINDING_H
#define TFM_RUNTIME_SRC_BINDING_H

#include "Internal.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tfm::runtime {

/// An entry's inputs and outputs as the C API lists them: a static entry's,
/// or a dynamic one's (whose dims are -1 where they vary).
struct EntryPorts {
  const char *name;
  const tfm_abi_tensor_desc_t *inputs, *outputs;
  size_t numInputs, numOutputs;
  /// Its inputs' sizes are checked against its ranges when it runs.
  bool dynamic;
};

/// The tensors of one call, in the entry's order.
struct Binding {
  std::vector<tfm_tensor_t *> inputs;
  /// The call's outputs[i] receives the entry's output source[i].
  std::vector<size_t> source;
  /// The tensor the caller gave for each of the entry's outputs to be
  /// written into; null where the run makes a new one.
  std::vector<tfm_tensor_t *> given;
};

/// Matches a call's tensors to `entry` (names may be null: by position),
/// checking their count, names, dtypes, shapes (an input's exactly, unless
/// the entry is dynamic), devices and overlaps.
tfm_status_t
bindArguments(const tfm_session_s &session, const EntryPorts &entry,
              const char *const *inputNames, tfm_tensor_t *const *inputs,
              size_t numInputs, const char *const *outputNames,
              tfm_tensor_t *const *outputs, size_t numOutputs, Binding &out);

/// Where compiled code finds a run's tensors, and their sizes.
struct RunAddresses {
  std::vector<const void *> in;
  std::vector<uint64_t> inBytes;
  std::vector<void *> out;
  std::vector<uint64_t> outBytes;
};

/// Puts the tensors of a run of `e` where its code reads them: in place on
/// a device that reads their memory, else in the entry's device buffers
/// (allocated at its first run), host tensors copied through page-locked
/// memory and the device's own on the device. `replays`: the run replays a
/// graph recorded on the buffers' addresses, so the device's own tensors
/// are copied too.
tfm_status_t placeTensors(tfm_session_s &session, const tfm_abi_entry_t &e,
                          tfm_tensor_t *const *inputs,
                          tfm_tensor_t *const *outputs, bool replays,
                          RunAddresses &out);

/// After a successful run: copies the outputs placeTensors staged into
/// their tensors.
void collectOutputs(tfm_session_s &session, const tfm_abi_entry_t &e,
                    tfm_tensor_t *const *outputs, const RunAddresses &at);

} // namespace tfm::runtime

#endif // TFM_RUNTIME_SRC_BINDING_H
