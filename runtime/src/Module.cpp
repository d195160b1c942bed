//===- Module.cpp - Loaded model libraries --------------------------------===//
//
// A model library is untrusted input: a truncated file, a library of another
// ABI version, or corrupt metadata must each end in a status that says so,
// never in a crash. So the file is checked before dlopen maps it, the ABI
// version before any other field is read, and the metadata whole
// (Validation.cpp) before anything uses it.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <dlfcn.h>
#include <elf.h>

#include <cstring>
#include <filesystem>
#include <fstream>

using namespace tfm::runtime;

tfm_module_s::~tfm_module_s() {
  if (handle)
    dlclose(handle);
  if (context)
    context->release();
}

const tfm_abi_entry_t *tfm_module_s::findEntry(const char *name) const {
  for (int32_t i = 0; i < model->num_entries; ++i)
    if (std::strcmp(model->entries[i].name, name) == 0)
      return &model->entries[i];
  return nullptr;
}

namespace {

/// dlopen maps a truncated library without complaint and the process dies of
/// SIGBUS on first touch of the missing pages; so check, before dlopen, that
/// the file holds everything its ELF headers promise.
tfm_status_t checkElf(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  auto corrupt = [&](const char *why) {
    return makeStatus(TFM_STATUS_DATA_LOSS,
                      "'{}' is not a loadable model library (truncated or "
                      "corrupt): {}",
                      path, why);
  };
  Elf64_Ehdr eh;
  if (bytes.size() < sizeof(eh))
    return corrupt("shorter than an ELF header");
  std::memcpy(&eh, bytes.data(), sizeof(eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return corrupt("not an ELF file");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN)
    return corrupt("not a 64-bit shared library");
  uint64_t size = bytes.size();
  if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
      eh.e_phoff + uint64_t(eh.e_phnum) * sizeof(Elf64_Phdr) > size)
    return corrupt("its program headers lie past the end of the file");
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + i * sizeof(Elf64_Phdr),
                sizeof(ph));
    if (ph.p_type == PT_LOAD && ph.p_offset + ph.p_filesz > size)
      return corrupt("a loadable segment lies past the end of the file");
  }
  if (eh.e_shoff + uint64_t(eh.e_shnum) * eh.e_shentsize > size)
    return corrupt("its section headers lie past the end of the file");
  return nullptr;
}

/// The version fields, which every ABI version keeps first, lie in the
/// library.
tfm_status_t validateVersionField(const std::string &path, const void *handle,
                                  const tfm_abi_model_t *m) {
  if (!pointsIntoLibrary(handle, m, 2 * sizeof(uint32_t)))
    return makeStatus(TFM_STATUS_DATA_LOSS,
                      "'{}': corrupt metadata: the model description lies "
                      "outside the library",
                      path);
  return nullptr;
}

} // namespace

extern "C" {

tfm_status_t tfm_module_load(tfm_context_t *context, const char *path,
                             tfm_module_t **out_module) {
  if (!context || !path || !out_module)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_module_load: context, path and out_module must "
                      "not be NULL");
  *out_module = nullptr;
  return guarded("tfm_module_load", [&]() -> tfm_status_t {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      return makeStatus(TFM_STATUS_NOT_FOUND, "'{}': no such model file",
                        path);
    std::unique_ptr<tfm_module_s, void (*)(tfm_module_s *)> m(
        new tfm_module_s, [](tfm_module_s *p) { p->release(); });
    m->path = path;
    m->context = context;
    context->retain();
    if (tfm_status_t s = checkElf(path))
      return s;
    // An absolute or explicit path keeps dlopen from searching elsewhere.
    std::string full = std::filesystem::absolute(path, ec).string();
    m->handle = dlopen(full.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!m->handle) {
      const char *err = dlerror();
      return makeStatus(TFM_STATUS_DATA_LOSS,
                        "'{}' is not a loadable model library (truncated or "
                        "corrupt?): {}",
                        path, err ? err : "unknown error");
    }
    auto get = reinterpret_cast<tfm_abi_model_fn_t>(
        dlsym(m->handle, TFM_ABI_MODEL_SYMBOL));
    if (!get)
      return makeStatus(TFM_STATUS_INCOMPATIBLE,
                        "'{}' does not export {}: it is not a tfm model, or "
                        "one built for another ABI version (this runtime "
                        "reads version {})",
                        path, TFM_ABI_MODEL_SYMBOL, TFM_ABI_VERSION);
    m->model = get();
    if (!m->model)
      return makeStatus(TFM_STATUS_DATA_LOSS, "'{}' returned no model", path);
    // The version comes first: a library of another version may lay the
    // rest out differently.
    if (tfm_status_t s = validateVersionField(path, m->handle, m->model))
      return s;
    if (m->model->abi_version != TFM_ABI_VERSION)
      return makeStatus(TFM_STATUS_INCOMPATIBLE,
                        "'{}' was built for model ABI version {}; this "
                        "runtime reads version {}; recompile it with this "
                        "tfmc",
                        path, m->model->abi_version, TFM_ABI_VERSION);
    if (m->model->struct_size < TFM_ABI_MODEL_MIN_SIZE)
      return makeStatus(TFM_STATUS_INCOMPATIBLE,
                        "'{}': model description of {} bytes is shorter than "
                        "this ABI's {}",
                        path, m->model->struct_size, TFM_ABI_MODEL_MIN_SIZE);
    if (tfm_status_t s = validateModel(path, m->handle, m->model))
      return s;
    int32_t target;
    int ordinal;
    if (!context->device.empty() &&
        parseDeviceName(context->device, target, ordinal) &&
        target != m->model->target)
      return makeStatus(TFM_STATUS_INCOMPATIBLE,
                        "'{}' was compiled for {}; it cannot run on {}, the "
                        "context's device",
                        path, targetName(m->model->target), context->device);
    m->weights = m->model->weights;
    if (m->model->external_weights) {
      auto file = std::filesystem::path(full).parent_path() /
                  m->model->external_weights;
      std::ifstream in(file, std::ios::binary);
      if (!in)
        return makeStatus(TFM_STATUS_NOT_FOUND,
                          "'{}': cannot open its weights file '{}'", path,
                          file.string());
      m->externalWeights.assign(std::istreambuf_iterator<char>(in), {});
      if (m->externalWeights.size() != m->model->weights_bytes)
        return makeStatus(TFM_STATUS_DATA_LOSS,
                          "'{}': weights file '{}' holds {} bytes, the model "
                          "expects {}",
                          path, file.string(), m->externalWeights.size(),
                          m->model->weights_bytes);
      m->weights = m->externalWeights.data();
    }
    *out_module = m.release();
    return nullptr;
  });
}

void tfm_module_release(tfm_module_t *module) {
  if (module)
    module->release();
}

size_t tfm_module_num_entries(const tfm_module_t *module) {
  return module ? static_cast<size_t>(module->model->num_entries) : 0;
}

const char *tfm_module_entry_name(const tfm_module_t *module, size_t index) {
  if (index >= tfm_module_num_entries(module))
    return nullptr;
  return module->model->entries[index].name;
}

tfm_status_t tfm_module_entry_num_io(const tfm_module_t *module,
                                     const char *entry, int is_output,
                                     size_t *out_count) {
  if (!module || !entry || !out_count)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_module_entry_num_io: NULL argument");
  const tfm_abi_entry_t *e = module->findEntry(entry);
  if (!e)
    return makeStatus(TFM_STATUS_NOT_FOUND, "'{}' has no entry point '{}'",
                      module->path, entry);
  *out_count = static_cast<size_t>(is_output ? e->num_outputs : e->num_inputs);
  return nullptr;
}

tfm_status_t tfm_module_entry_io(const tfm_module_t *module, const char *entry,
                                 int is_output, size_t index,
                                 tfm_tensor_desc_t *out_desc) {
  if (!module || !entry || !out_desc)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_module_entry_io: NULL argument");
  const tfm_abi_entry_t *e = module->findEntry(entry);
  if (!e)
    return makeStatus(TFM_STATUS_NOT_FOUND, "'{}' has no entry point '{}'",
                      module->path, entry);
  int32_t count = is_output ? e->num_outputs : e->num_inputs;
  if (index >= static_cast<size_t>(count))
    return makeStatus(TFM_STATUS_NOT_FOUND,
                      "entry '{}' has {} {}s; there is no {} {}", entry,
                      count, is_output ? "output" : "input",
                      is_output ? "output" : "input", index);
  const tfm_abi_tensor_desc_t &d =
      is_output ? e->outputs[index] : e->inputs[index];
  *out_desc = tfm_tensor_desc_t{d.name, static_cast<tfm_dtype_t>(d.dtype),
                                static_cast<size_t>(d.rank), d.dims};
  return nullptr;
}

} // extern "C"
