//===- FuzzModelMetadata.cpp - The model loader on corrupted metadata -----===//
//
// A tfmc-compiled model.so whose metadata table is patched by the input,
// then loaded, described and given a session: every corruption must end
// in a status (DATA_LOSS, INCOMPATIBLE, ...), never a crash or a read
// outside the library.
//
// The input is a list of patches, each [where][offset: 4 bytes][length]
// [bytes...]. `where` picks what is patched:
//   0: .data.rel.ro, where the metadata's structs lie (counts, ranks,
//      dtypes, sizes; their pointers are rewritten by relocations at load,
//      so patching them there has no effect);
//   1: the addend of a relocation that fills a pointer in .data.rel.ro:
//      the metadata's pointers, to anywhere;
//   2: .rodata: the names, dims and tables the pointers point to.
// Relocations of anything else (the loader's own tables) are left alone:
// corrupting those breaks the loader, not tfm.
//
//===----------------------------------------------------------------------===//

#include "tfm/runtime.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <elf.h>
#include <unistd.h>

namespace {

struct Library {
  std::vector<uint8_t> bytes;
  // File ranges [begin, end) of the patchable parts.
  size_t relroBegin = 0, relroEnd = 0, rodataBegin = 0, rodataEnd = 0;
  std::vector<size_t> addends; // file offsets of the relocations' addends
};

const Library &library() {
  static const Library lib = [] {
    const char *path = std::getenv("TFM_FUZZ_MODEL");
    std::ifstream in(path ? path : TFM_LENGTHS_SO, std::ios::binary);
    Library l;
    l.bytes.assign(std::istreambuf_iterator<char>(in), {});
    if (l.bytes.size() < sizeof(Elf64_Ehdr)) {
      std::fprintf(stderr, "fuzz-model-metadata: cannot read the model\n");
      std::abort();
    }
    auto *eh = reinterpret_cast<const Elf64_Ehdr *>(l.bytes.data());
    auto *sh = reinterpret_cast<const Elf64_Shdr *>(l.bytes.data() + eh->e_shoff);
    const char *names =
        reinterpret_cast<const char *>(l.bytes.data() + sh[eh->e_shstrndx].sh_offset);
    const Elf64_Shdr *rela = nullptr;
    Elf64_Addr relroAddr = 0;
    for (int i = 0; i < eh->e_shnum; ++i) {
      std::string name = names + sh[i].sh_name;
      if (name == ".data.rel.ro") {
        l.relroBegin = sh[i].sh_offset;
        l.relroEnd = sh[i].sh_offset + sh[i].sh_size;
        relroAddr = sh[i].sh_addr;
      } else if (name == ".rodata") {
        l.rodataBegin = sh[i].sh_offset;
        l.rodataEnd = sh[i].sh_offset + sh[i].sh_size;
      } else if (name == ".rela.dyn") {
        rela = &sh[i];
      }
    }
    if (!rela || l.relroEnd == l.relroBegin || l.rodataEnd == l.rodataBegin) {
      std::fprintf(stderr, "fuzz-model-metadata: the model lacks .data.rel.ro, "
                           ".rodata or .rela.dyn\n");
      std::abort();
    }
    size_t relroSize = l.relroEnd - l.relroBegin;
    for (size_t at = rela->sh_offset; at + sizeof(Elf64_Rela) <= rela->sh_offset + rela->sh_size;
         at += sizeof(Elf64_Rela)) {
      auto *r = reinterpret_cast<const Elf64_Rela *>(l.bytes.data() + at);
      if (ELF64_R_TYPE(r->r_info) == R_X86_64_RELATIVE &&
          r->r_offset >= relroAddr && r->r_offset < relroAddr + relroSize)
        l.addends.push_back(at + offsetof(Elf64_Rela, r_addend));
    }
    return l;
  }();
  return lib;
}

uint32_t read32(const uint8_t *p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
         uint32_t(p[3]) << 24;
}

/// Loads, describes and opens a session of the library at `path`.
void exercise(const char *path) {
  static tfm_context_t *context = [] {
    tfm_context_t *c = nullptr;
    if (tfm_context_create(nullptr, &c))
      std::abort();
    return c;
  }();
  tfm_module_t *module = nullptr;
  if (tfm_status_t s = tfm_module_load(context, path, &module)) {
    tfm_status_free(s);
    return;
  }
  for (size_t e = 0, n = tfm_module_num_entries(module); e < n; ++e) {
    const char *entry = tfm_module_entry_name(module, e);
    for (int isOutput = 0; isOutput < 2; ++isOutput) {
      size_t count = 0;
      tfm_status_free(tfm_module_entry_num_io(module, entry, isOutput, &count));
      for (size_t i = 0; i < count; ++i) {
        tfm_tensor_desc_t d;
        if (tfm_status_t s = tfm_module_entry_io(module, entry, isOutput, i, &d)) {
          tfm_status_free(s);
          continue;
        }
        std::vector<int64_t> lo(d.rank + 1), hi(d.rank + 1);
        tfm_status_free(tfm_module_entry_io_range(module, entry, isOutput, i,
                                                  lo.data(), hi.data()));
      }
    }
  }
  tfm_module_generation_max_length(module);
  tfm_session_t *session = nullptr;
  if (tfm_status_t s = tfm_session_create(module, nullptr, &session))
    tfm_status_free(s);
  for (size_t i = 0, n = session ? tfm_session_num_parameters(session) : 0;
       i < n; ++i)
    tfm_session_parameter_name(session, i);
  tfm_session_release(session);
  tfm_module_release(module);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const Library &lib = library();
  std::vector<uint8_t> bytes = lib.bytes;
  for (size_t at = 0; at + 6 <= size;) {
    uint8_t where = data[at] % 3;
    uint32_t offset = read32(data + at + 1);
    size_t length = data[at + 5];
    at += 6;
    length = std::min(length, size - at);
    size_t begin, span;
    if (where == 1) {
      begin = lib.addends[offset % lib.addends.size()];
      span = 8;
    } else {
      size_t lo = where == 0 ? lib.relroBegin : lib.rodataBegin;
      size_t hi = where == 0 ? lib.relroEnd : lib.rodataEnd;
      begin = lo + offset % (hi - lo);
      span = hi - begin;
    }
    std::memcpy(bytes.data() + begin, data + at, std::min(length, span));
    at += length;
  }
  static const std::string path =
      "/tmp/tfm-fuzz-model-" + std::to_string(getpid()) + ".so";
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    std::abort();
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  exercise(path.c_str());
  std::remove(path.c_str());
  return 0;
}
