//===- Module.cpp - Contexts and loaded model libraries -------------------===//
//
// A model library is untrusted input: a truncated file, a library of another
// ABI version, or corrupt metadata must each end in a status that says so,
// never in a crash. So the ABI version is checked before any other field is
// read, and the metadata is validated once, at load.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"

#include <dlfcn.h>
#include <elf.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

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

tfm_status_t validateDescs(const std::string &path, const char *entry,
                           const char *kind, int32_t count,
                           const tfm_abi_tensor_desc_t *descs) {
  if (count < 0 || (count > 0 && !descs))
    return makeStatus(TFM_STATUS_DATA_LOSS,
                      "'{}': corrupt metadata: entry '{}' has {} {}", path,
                      entry, count, kind);
  for (int32_t i = 0; i < count; ++i) {
    const tfm_abi_tensor_desc_t &d = descs[i];
    if (!d.name || tfm_dtype_size(static_cast<tfm_dtype_t>(d.dtype)) == 0 ||
        d.rank < 0 || (d.rank > 0 && !d.dims))
      return makeStatus(TFM_STATUS_DATA_LOSS,
                        "'{}': corrupt metadata: {} {} of entry '{}'", path,
                        kind, i, entry);
    for (int32_t r = 0; r < d.rank; ++r)
      if (d.dims[r] < 0)
        return makeStatus(TFM_STATUS_DATA_LOSS,
                          "'{}': corrupt metadata: {} '{}' of entry '{}' has "
                          "a negative dimension",
                          path, kind, d.name, entry);
  }
  return nullptr;
}

} // namespace

uint64_t tfm::runtime::tensorBytes(const tfm_abi_tensor_desc_t &d) {
  uint64_t n = tfm_dtype_size(static_cast<tfm_dtype_t>(d.dtype));
  for (int32_t i = 0; i < d.rank; ++i)
    n *= static_cast<uint64_t>(d.dims[i]);
  return n;
}

namespace {

tfm_status_t validateModel(const std::string &path,
                           const tfm_abi_model_t *m) {
  if (m->num_kernels < 0 || (m->num_kernels > 0 && !m->kernels))
    return makeStatus(TFM_STATUS_DATA_LOSS,
                      "'{}': corrupt metadata: {} kernels", path,
                      m->num_kernels);
  if (m->num_entries < 0 || (m->num_entries > 0 && !m->entries))
    return makeStatus(TFM_STATUS_DATA_LOSS,
                      "'{}': corrupt metadata: {} entry points", path,
                      m->num_entries);
  for (int32_t i = 0; i < m->num_entries; ++i) {
    const tfm_abi_entry_t &e = m->entries[i];
    if (!e.name || !e.fn)
      return makeStatus(TFM_STATUS_DATA_LOSS,
                        "'{}': corrupt metadata: entry point {} has no name "
                        "or no code",
                        path, i);
    if (tfm_status_t s =
            validateDescs(path, e.name, "input", e.num_inputs, e.inputs))
      return s;
    if (tfm_status_t s =
            validateDescs(path, e.name, "output", e.num_outputs, e.outputs))
      return s;
  }
  if (m->num_states < 0 || (m->num_states > 0 && !m->states))
    return makeStatus(TFM_STATUS_DATA_LOSS,
                      "'{}': corrupt metadata: {} state slots", path,
                      m->num_states);
  for (int32_t i = 0; i < m->num_states; ++i) {
    const tfm_abi_state_desc_t &st = m->states[i];
    if (tfm_status_t s = validateDescs(path, "state", "slot", 1, &st.tensor))
      return s;
    uint64_t bytes = tensorBytes(st.tensor);
    bool fits = st.offset <= m->state_bytes && bytes <= m->state_bytes - st.offset;
    bool initFits = st.init_offset < 0 ||
                    (static_cast<uint64_t>(st.init_offset) <= m->weights_bytes &&
                     bytes <= m->weights_bytes - st.init_offset);
    if (st.kind < TFM_STATE_PARAMETER || st.kind > TFM_STATE_STEP || !fits ||
        !initFits)
      return makeStatus(TFM_STATUS_DATA_LOSS,
                        "'{}': corrupt metadata: state slot {} ('{}') lies "
                        "outside the state or the weights",
                        path, i, st.tensor.name);
  }
  if (m->num_checks < 0 || (m->num_checks > 0 && !m->checks))
    return makeStatus(TFM_STATUS_DATA_LOSS,
                      "'{}': corrupt metadata: {} checks", path,
                      m->num_checks);
  for (int32_t i = 0; i < m->num_checks; ++i) {
    const tfm_abi_check_desc_t &c = m->checks[i];
    if (!c.op || !c.tensor || c.input < -1 || c.lower > c.upper)
      return makeStatus(TFM_STATUS_DATA_LOSS,
                        "'{}': corrupt metadata: check {}", path, i);
  }
  return nullptr;
}

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

} // namespace

extern "C" {

void tfm_context_options_init(tfm_context_options_t *options) {
  *options = tfm_context_options_t{};
  options->struct_size = sizeof(tfm_context_options_t);
}

tfm_status_t tfm_context_create(const tfm_context_options_t *options,
                                tfm_context_t **out_context) {
  if (!out_context)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_context_create: out_context is NULL");
  *out_context = nullptr;
  tfm_context_options_t opts;
  tfm_context_options_init(&opts);
  if (options) {
    if (options->struct_size < offsetof(tfm_context_options_t, num_threads) +
                                   sizeof(int32_t))
      return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                        "tfm_context_create: options->struct_size {} is too "
                        "small; call tfm_context_options_init",
                        options->struct_size);
    opts.num_threads = options->num_threads;
  }
  if (opts.num_threads < 0)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_context_create: num_threads is negative ({})",
                      opts.num_threads);
  return guarded("tfm_context_create", [&]() -> tfm_status_t {
    auto *ctx = new tfm_context_s;
    unsigned hw = std::thread::hardware_concurrency();
    ctx->numThreads =
        opts.num_threads ? opts.num_threads : static_cast<int32_t>(hw ? hw : 1);
    *out_context = ctx;
    return nullptr;
  });
}

void tfm_context_release(tfm_context_t *context) {
  if (context)
    context->release();
}

int32_t tfm_context_num_threads(const tfm_context_t *context) {
  return context->numThreads;
}

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
    if (m->model->abi_version != TFM_ABI_VERSION)
      return makeStatus(TFM_STATUS_INCOMPATIBLE,
                        "'{}' was built for model ABI version {}; this "
                        "runtime reads version {}; recompile it with this "
                        "tfmc",
                        path, m->model->abi_version, TFM_ABI_VERSION);
    if (m->model->struct_size < sizeof(tfm_abi_model_t))
      return makeStatus(TFM_STATUS_INCOMPATIBLE,
                        "'{}': model description of {} bytes is shorter than "
                        "this ABI's {}",
                        path, m->model->struct_size, sizeof(tfm_abi_model_t));
    if (tfm_status_t s = validateModel(path, m->model))
      return s;
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
  return static_cast<size_t>(module->model->num_entries);
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
                                 const tfm_abi_tensor_desc_t **out_desc) {
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
  *out_desc = is_output ? &e->outputs[index] : &e->inputs[index];
  return nullptr;
}

} // extern "C"
