//===- Module.cpp - Loaded model libraries --------------------------------===//
//
// A model library is untrusted input: a truncated file, a library of another
// ABI version, or corrupt metadata must each end in a status that says so,
// never in a crash. So the file is checked before dlopen maps it, the ABI
// version before any other field is read, and the metadata whole
// (Validation.cpp) before anything uses it.
//
//===----------------------------------------------------------------------===//

#include "CpuFeatures.h"
#include "Internal.h"

#include <dlfcn.h>
#include <elf.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

using namespace tfm::runtime;

namespace {
/// Loads and unloads take this lock. The loader's own lock orders them
/// already, but ThreadSanitizer cannot see inside the loader: without this
/// one, a library's program headers read while one thread loads it, then
/// freed by another thread's last dlclose, look like a race.
std::mutex &loaderMutex() {
  static std::mutex m;
  return m;
}
} // namespace

tfm_module_s::~tfm_module_s() {
  if (handle) {
    std::lock_guard<std::mutex> lock(loaderMutex());
    dlclose(handle);
  }
  if (context)
    context->release();
}

const tfm_abi_entry_t *tfm_module_s::findEntry(const char *name) const {
  for (int32_t i = 0; i < model->num_entries; ++i)
    if (std::strcmp(model->entries[i].name, name) == 0)
      return &model->entries[i];
  return nullptr;
}

const tfm_module_s::PublicEntry *
tfm_module_s::findPublic(const char *name) const {
  for (const PublicEntry &e : publicEntries)
    if (std::strcmp(e.name, name) == 0)
      return &e;
  return nullptr;
}

std::string tfm_module_s::entryNames() const {
  std::string names;
  for (const PublicEntry &e : publicEntries)
    names += (names.empty() ? "" : ", ") + std::string(e.name);
  return names;
}

namespace {

/// The entries the C API lists: the static ones that serve no dynamic
/// entry, then the dynamic ones with -1 for each dim of a symbol.
void listPublicEntries(tfm_module_s &m) {
  const tfm_abi_model_t *model = m.model;
  std::vector<bool> bucket(model->num_entries, false);
  for (int32_t i = 0; i < numDynamicEntries(model); ++i) {
    const tfm_abi_dynamic_entry_t &d = model->dynamic_entries[i];
    for (int32_t b = 0; b < d.num_buckets; ++b)
      bucket[d.buckets[b]] = true;
  }
  for (int32_t i = 0; i < model->num_entries; ++i)
    if (!bucket[i])
      m.publicEntries.push_back({model->entries[i].name, &model->entries[i],
                                 nullptr, {}, {}});
  for (int32_t i = 0; i < numDynamicEntries(model); ++i) {
    const tfm_abi_dynamic_entry_t &d = model->dynamic_entries[i];
    tfm_module_s::PublicEntry e{d.name, nullptr, &d, {}, {}};
    for (int io = 0; io < 2; ++io)
      for (int32_t j = 0; j < (io ? d.num_outputs : d.num_inputs); ++j) {
        const tfm_abi_tensor_desc_t &t = io ? d.outputs[j] : d.inputs[j];
        std::vector<int64_t> dims(t.dims, t.dims + t.rank);
        for (int64_t &dim : dims)
          dim = std::max<int64_t>(dim, -1);
        (io ? e.outputDims : e.inputDims).push_back(std::move(dims));
      }
    m.publicEntries.push_back(std::move(e));
  }
}

/// dlopen maps a truncated library without complaint and the process dies of
/// SIGBUS on first touch of the missing pages; so check, before dlopen, that
/// the file holds everything its ELF headers promise. Only the headers are
/// read: a library with embedded weights is mostly weights (1.2 GB for a
/// 24-layer d1024 encoder), which dlopen maps rather than reads.
tfm_status_t checkElf(const std::string &path) {
  auto corrupt = [&](const char *why) {
    return makeStatus(TFM_STATUS_DATA_LOSS,
                      "'{}' is not a loadable model library (truncated or "
                      "corrupt): {}",
                      path, why);
  };
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return corrupt("it cannot be read");
  uint64_t size = static_cast<uint64_t>(in.tellg());
  // [offset, offset + bytes) of the file into `out`, when it is there.
  auto read = [&](uint64_t offset, void *out, uint64_t bytes) {
    if (offset > size || bytes > size - offset)
      return false;
    in.seekg(static_cast<std::streamoff>(offset));
    return static_cast<bool>(
        in.read(static_cast<char *>(out), static_cast<std::streamsize>(bytes)));
  };
  Elf64_Ehdr eh;
  if (!read(0, &eh, sizeof(eh)))
    return corrupt("shorter than an ELF header");
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return corrupt("not an ELF file");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN)
    return corrupt("not a 64-bit shared library");
  if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
      eh.e_phoff + uint64_t(eh.e_phnum) * sizeof(Elf64_Phdr) > size)
    return corrupt("its program headers lie past the end of the file");
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (!read(eh.e_phoff + uint64_t(i) * sizeof(Elf64_Phdr), &ph, sizeof(ph)))
      return corrupt("its program headers cannot be read");
    if (ph.p_type == PT_LOAD &&
        (ph.p_offset > size || ph.p_filesz > size - ph.p_offset))
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
    const char *err = nullptr;
    {
      std::lock_guard<std::mutex> lock(loaderMutex());
      m->handle = dlopen(full.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!m->handle)
        err = dlerror();
    }
    if (!m->handle) {
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
    // Before any of its code runs: on a CPU without a feature it was
    // generated for, it would die on an illegal instruction.
    if (const char *features = modelCpuFeatures(m->model)) {
      std::vector<std::string> missing = missingCpuFeatures(features);
      if (!missing.empty()) {
        m->cpuRefusal = fmt::format(
            "'{}' was compiled for CPU '{}' and uses {}, which this CPU "
            "lacks; recompile it for a CPU this one covers (tfmc compile "
            "--cpu={}, a portable level this CPU has, or --cpu=native on "
            "this machine)",
            path, m->model->cpu, fmt::join(missing, ", "), portableCpuLevel());
        if (!context->inspectOnly)
          return makeStatus(TFM_STATUS_INCOMPATIBLE, "{}", m->cpuRefusal);
      }
    }
    listPublicEntries(*m);
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
  return module ? module->publicEntries.size() : 0;
}

const char *tfm_module_entry_name(const tfm_module_t *module, size_t index) {
  if (index >= tfm_module_num_entries(module))
    return nullptr;
  return module->publicEntries[index].name;
}

namespace {

/// The public entry `entry` of `module`, or a NOT_FOUND status naming the
/// ones there are.
tfm_status_t findPublicEntry(const tfm_module_t *module, const char *entry,
                             const tfm_module_s::PublicEntry *&out) {
  out = module->findPublic(entry);
  if (out)
    return nullptr;
  return makeStatus(TFM_STATUS_NOT_FOUND,
                    "'{}' has no entry point '{}'; it has: {}", module->path,
                    entry, module->entryNames());
}

int32_t ioCount(const tfm_module_s::PublicEntry &e, int isOutput) {
  if (e.fixed)
    return isOutput ? e.fixed->num_outputs : e.fixed->num_inputs;
  return isOutput ? e.dynamic->num_outputs : e.dynamic->num_inputs;
}

/// Input or output `index` of `e`, which must exist.
const tfm_abi_tensor_desc_t &ioDesc(const tfm_module_s::PublicEntry &e,
                                    int isOutput, size_t index) {
  if (e.fixed)
    return isOutput ? e.fixed->outputs[index] : e.fixed->inputs[index];
  return isOutput ? e.dynamic->outputs[index] : e.dynamic->inputs[index];
}

/// Input or output `index` of the public entry `entry`, or a NOT_FOUND
/// status naming what there is.
tfm_status_t findIO(const tfm_module_t *module, const char *entry,
                    int isOutput, size_t index,
                    const tfm_module_s::PublicEntry *&e,
                    const tfm_abi_tensor_desc_t *&desc) {
  if (tfm_status_t s = findPublicEntry(module, entry, e))
    return s;
  int32_t count = ioCount(*e, isOutput);
  if (index >= static_cast<size_t>(count)) {
    const char *kind = isOutput ? "output" : "input";
    return makeStatus(TFM_STATUS_NOT_FOUND,
                      "entry '{}' has {} {}s; there is no {} {}", entry, count,
                      kind, kind, index);
  }
  desc = &ioDesc(*e, isOutput, index);
  return nullptr;
}

} // namespace

tfm_status_t tfm_module_entry_num_io(const tfm_module_t *module,
                                     const char *entry, int is_output,
                                     size_t *out_count) {
  if (!module || !entry || !out_count)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_module_entry_num_io: NULL argument");
  const tfm_module_s::PublicEntry *e;
  if (tfm_status_t s = findPublicEntry(module, entry, e))
    return s;
  *out_count = static_cast<size_t>(ioCount(*e, is_output));
  return nullptr;
}

tfm_status_t tfm_module_entry_io(const tfm_module_t *module, const char *entry,
                                 int is_output, size_t index,
                                 tfm_tensor_desc_t *out_desc) {
  if (!module || !entry || !out_desc)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_module_entry_io: NULL argument");
  const tfm_module_s::PublicEntry *e;
  const tfm_abi_tensor_desc_t *desc;
  if (tfm_status_t s = findIO(module, entry, is_output, index, e, desc))
    return s;
  const tfm_abi_tensor_desc_t &d = *desc;
  const int64_t *dims =
      e->fixed ? d.dims
               : (is_output ? e->outputDims : e->inputDims)[index].data();
  *out_desc = tfm_tensor_desc_t{d.name, static_cast<tfm_dtype_t>(d.dtype),
                                static_cast<size_t>(d.rank), dims};
  return nullptr;
}

tfm_status_t tfm_module_entry_io_range(const tfm_module_t *module,
                                       const char *entry, int is_output,
                                       size_t index, int64_t *out_min_dims,
                                       int64_t *out_max_dims) {
  if (!module || !entry)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_module_entry_io_range: NULL argument");
  const tfm_module_s::PublicEntry *e;
  const tfm_abi_tensor_desc_t *desc;
  if (tfm_status_t s = findIO(module, entry, is_output, index, e, desc))
    return s;
  const tfm_abi_tensor_desc_t &d = *desc;
  // A scalar has no dims to write.
  if (d.rank > 0 && (!out_min_dims || !out_max_dims))
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_module_entry_io_range: NULL argument");
  for (int32_t r = 0; r < d.rank; ++r) {
    int64_t dim = d.dims[r];
    out_min_dims[r] = dim >= 0 ? dim : e->dynamic->min_sizes[-1 - dim];
    out_max_dims[r] = dim >= 0 ? dim : e->dynamic->max_sizes[-1 - dim];
  }
  return nullptr;
}

tfm_status_t tfm_module_entry_io_symbol(const tfm_module_t *module,
                                        const char *entry, int is_output,
                                        size_t index, size_t dim,
                                        const char **out_symbol) {
  if (!module || !entry || !out_symbol)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_module_entry_io_symbol: NULL argument");
  const tfm_module_s::PublicEntry *e;
  const tfm_abi_tensor_desc_t *desc;
  if (tfm_status_t s = findIO(module, entry, is_output, index, e, desc))
    return s;
  if (dim >= static_cast<size_t>(desc->rank))
    return makeStatus(TFM_STATUS_OUT_OF_RANGE,
                      "entry '{}': '{}' has rank {}; there is no dim {}", entry,
                      desc->name, desc->rank, dim);
  int64_t d = desc->dims[dim];
  *out_symbol = e->dynamic && d < 0 ? e->dynamic->symbols[-1 - d] : "";
  return nullptr;
}

tfm_status_t tfm_module_entry_input_values(const tfm_module_t *module,
                                           const char *entry, size_t index,
                                           tfm_input_values_t *out_kind,
                                           int64_t *out_lower,
                                           int64_t *out_upper) {
  if (!module || !entry || !out_kind || !out_lower || !out_upper)
    return makeStatus(TFM_STATUS_INVALID_ARGUMENT,
                      "tfm_module_entry_input_values: NULL argument");
  const tfm_module_s::PublicEntry *e;
  const tfm_abi_tensor_desc_t *desc;
  if (tfm_status_t s = findIO(module, entry, 0, index, e, desc))
    return s;
  *out_kind = TFM_INPUT_VALUES_ANY;
  *out_lower = *out_upper = 0;
  const tfm_abi_model_t *m = module->model;
  const int64_t *values = inputValueTable(m);
  if (!values)
    return nullptr;
  // A range of sizes takes what its buckets take, the first's inputs.
  const tfm_abi_entry_t *fixed =
      e->fixed ? e->fixed : &m->entries[e->dynamic->buckets[0]];
  for (const tfm_abi_entry_t *before = m->entries; before != fixed; ++before)
    values += 3 * before->num_inputs;
  values += 3 * index;
  *out_kind = static_cast<tfm_input_values_t>(values[0]);
  *out_lower = values[1];
  *out_upper = values[2];
  return nullptr;
}

} // extern "C"

const char *tfm_module_target(const tfm_module_t *module) {
  if (!module || !module->model)
    return "";
  return module->model->target == TFM_TARGET_CUDA ? "cuda" : "cpu";
}

const char *tfm_module_cpu(const tfm_module_t *module) {
  const char *cpu = module && module->model ? modelCpu(module->model) : nullptr;
  return cpu ? cpu : "";
}

const char *tfm_module_cpu_features(const tfm_module_t *module) {
  const char *features =
      module && module->model ? modelCpuFeatures(module->model) : nullptr;
  return features ? features : "";
}
