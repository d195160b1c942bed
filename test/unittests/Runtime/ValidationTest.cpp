//===- ValidationTest.cpp - Corrupt model libraries end in a status -------===//
//
// Takes a tfmc-compiled library (tiny_train.mlir), changes one field of its
// metadata table in a copy of the file, and loads and runs the copy: every
// corruption must end in DATA_LOSS, at load or at the run, and never in a
// crash or a wrong answer. Fields that hold pointers are relocated by the
// loader, so they are corrupted in hand-written libraries (fake_model.c)
// instead.
//
//===----------------------------------------------------------------------===//

#include "tfm/abi.h"
#include "tfm/runtime.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

namespace {

const std::string kModel = TFM_TINY_TRAIN_SO;
const std::string kCudaModel = TFM_TINY_TRAIN_CUDA_SO;
const std::string kFakeDir = TFM_FAKE_MODEL_DIR;

std::pair<tfm_status_code_t, std::string> take(tfm_status_t s) {
  std::pair<tfm_status_code_t, std::string> r{tfm_status_code(s),
                                              tfm_status_message(s)};
  tfm_status_free(s);
  return r;
}

/// The library loaded in this process, to find where each metadata field
/// lies in the file: the loaded segment that holds it and that segment's
/// file offset.
class LoadedModel {
public:
  explicit LoadedModel(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    file.assign(std::istreambuf_iterator<char>(in), {});
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      return;
    auto get = reinterpret_cast<tfm_abi_model_fn_t>(
        dlsym(handle, TFM_ABI_MODEL_SYMBOL));
    model = get ? get() : nullptr;
    struct link_map *map = nullptr;
    dlinfo(handle, RTLD_DI_LINKMAP, &map);
    base = map->l_addr;
    dl_iterate_phdr(
        [](struct dl_phdr_info *info, size_t, void *data) {
          auto *self = static_cast<LoadedModel *>(data);
          if (info->dlpi_addr != self->base)
            return 0;
          for (int i = 0; i < info->dlpi_phnum; ++i)
            if (info->dlpi_phdr[i].p_type == PT_LOAD)
              self->segments.push_back(info->dlpi_phdr[i]);
          return 1;
        },
        this);
  }
  ~LoadedModel() {
    if (handle)
      dlclose(handle);
  }

  /// Writes a copy of the library with the bytes of `field` set to
  /// `value`, and returns its path.
  template <typename T>
  std::string patched(const T *field, T value, const std::string &name) {
    auto at = reinterpret_cast<uintptr_t>(field) - base;
    std::vector<char> copy = file;
    for (const ElfW(Phdr) &ph : segments)
      if (at >= ph.p_vaddr && at + sizeof(T) <= ph.p_vaddr + ph.p_filesz) {
        std::memcpy(copy.data() + ph.p_offset + (at - ph.p_vaddr), &value,
                    sizeof(T));
        std::string path = ::testing::TempDir() + "tfm_patched_" + name + ".so";
        std::ofstream(path, std::ios::binary | std::ios::trunc)
            .write(copy.data(), copy.size());
        return path;
      }
    ADD_FAILURE() << "the field lies in no loaded segment of the file";
    return "";
  }

  const tfm_abi_model_t *model = nullptr;

private:
  std::vector<char> file;
  void *handle = nullptr;
  ElfW(Addr) base = 0;
  std::vector<ElfW(Phdr)> segments;
};

/// Loads `path`, creates a session and runs "infer" (or with `train`,
/// "train_step") on zero inputs; the first failure's code and message.
std::pair<tfm_status_code_t, std::string> loadAndRun(const std::string &path,
                                                     bool train = false) {
  tfm_context_t *ctx = nullptr;
  tfm_context_create(nullptr, &ctx);
  tfm_module_t *module = nullptr;
  tfm_session_t *session = nullptr;
  tfm_tensor_t *x = nullptr, *labels = nullptr, *y = nullptr;
  std::pair<tfm_status_code_t, std::string> result{TFM_STATUS_OK, ""};
  if (auto r = take(tfm_module_load(ctx, path.c_str(), &module));
      r.first != TFM_STATUS_OK)
    result = r;
  else if (auto r = take(tfm_session_create(module, nullptr, &session));
           r.first != TFM_STATUS_OK)
    result = r;
  else {
    const int64_t dims[] = {4, 3}, labelDims[] = {4};
    tfm_tensor_create(TFM_DTYPE_F32, dims, 2, &x);
    tfm_tensor_create(TFM_DTYPE_I64, labelDims, 1, &labels);
    tfm_tensor_t *inputs[] = {x, labels};
    result = take(tfm_session_run(session, train ? "train_step" : "infer",
                                  inputs, train ? 2 : 1, &y, 1));
  }
  tfm_tensor_release(labels);
  tfm_tensor_release(y);
  tfm_tensor_release(x);
  tfm_session_release(session);
  tfm_module_release(module);
  tfm_context_release(ctx);
  return result;
}

struct Corrupted : ::testing::Test {
  void SetUp() override { ASSERT_TRUE(lib.model) << "cannot load " << kModel; }
  const tfm_abi_entry_t &entry(const char *name) {
    for (int32_t i = 0; i < lib.model->num_entries; ++i)
      if (std::strcmp(lib.model->entries[i].name, name) == 0)
        return lib.model->entries[i];
    ADD_FAILURE() << "no entry " << name;
    return lib.model->entries[0];
  }
  LoadedModel lib{kModel};
};

TEST_F(Corrupted, TheUnchangedLibraryRuns) {
  auto [code, msg] = loadAndRun(kModel);
  EXPECT_EQ(code, TFM_STATUS_OK) << msg;
}

TEST_F(Corrupted, AKernelLargerThanEveryBufferIsRefusedAtLoad) {
  auto [code, msg] = loadAndRun(lib.patched(&lib.model->kernels[0].params[0],
                                            int64_t(1) << 20, "kernel_size"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("kernel 0"), std::string::npos) << msg;
}

TEST_F(Corrupted, AStaticInputOutOfRangeIsRefusedAtLoad) {
  // Kernel 0 made a QUANTIZED_LINEAR whose static input's zero point is
  // past uint8, then one whose scale is 0: the kernel would quantize to
  // values its product does not hold, or divide by zero.
  tfm_abi_kernel_desc_t q = lib.model->kernels[0];
  q.kind = TFM_KERNEL_QUANTIZED_LINEAR;
  const int64_t params[TFM_QUANTIZED_LINEAR_NUM_PARAMS] = {
      4, 3, 2, 0, 0, TFM_QUANTIZED_LINEAR_STATIC_INPUT, 0, 256};
  std::copy(std::begin(params), std::end(params), q.params);
  q.fparams[0] = 0.5;
  for (auto [zp, scale] : {std::pair<int64_t, double>{256, 0.5}, {10, 0.0}}) {
    q.params[TFM_QUANTIZED_LINEAR_INPUT_ZERO_POINT] = zp;
    q.fparams[0] = scale;
    auto [code, msg] = loadAndRun(
        lib.patched(&lib.model->kernels[0], q, "static_input"));
    EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
    EXPECT_NE(msg.find("kernel 0 (quantized_linear): a static input needs"),
              std::string::npos)
        << msg;
  }
}

TEST_F(Corrupted, AKernelLargerThanItsArgumentStopsTheRun) {
  // The classifier's LINEAR reads x[M=4, K=3]; with M = 5 it would read past
  // the input, though not past the model's largest buffer.
  const tfm_abi_kernel_desc_t *linear = nullptr;
  for (int32_t i = 0; i < lib.model->num_kernels; ++i)
    if (lib.model->kernels[i].kind == TFM_KERNEL_LINEAR &&
        lib.model->kernels[i].params[0] == 4)
      linear = &lib.model->kernels[i];
  ASSERT_TRUE(linear);
  auto [code, msg] =
      loadAndRun(lib.patched(&linear->params[0], int64_t(5), "kernel_arg"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("(linear) was handed"), std::string::npos) << msg;
}

TEST_F(Corrupted, AStridedKernelPastItsBufferIsRefused) {
  for (int32_t i = 0; i < lib.model->num_kernels; ++i) {
    const tfm_abi_kernel_desc_t &k = lib.model->kernels[i];
    // A stride of the first operand along a dimension longer than 1.
    const int64_t *dims = k.kind == TFM_KERNEL_BATCH_MATMUL ? k.params
                          : k.kind == TFM_KERNEL_REORDER    ? k.params + 1
                                                            : nullptr;
    if (!dims)
      continue;
    for (int d = 0; d < 4; ++d) {
      if (dims[d] <= 1)
        continue;
      auto [code, msg] = loadAndRun(
          lib.patched(&k.strides[d], int64_t(1) << 40, "kernel_stride"));
      EXPECT_EQ(code, TFM_STATUS_DATA_LOSS) << msg;
      EXPECT_NE(msg.find("more than the model's largest buffer"),
                std::string::npos)
          << msg;
      return;
    }
  }
  ADD_FAILURE() << "tiny_train.mlir must compile to a strided kernel for "
                   "this test to patch";
}

TEST_F(Corrupted, TooManyKernelsIsRefusedAtLoad) {
  auto [code, msg] = loadAndRun(
      lib.patched(&lib.model->num_kernels, int32_t(1) << 30, "num_kernels"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("kernels lie outside the library"), std::string::npos)
      << msg;
}

// A feature this runtime cannot check (a newer compiler's, or a corrupt
// name) counts as one this CPU lacks: the library is not run on a guess.
TEST_F(Corrupted, AnUnknownCpuFeatureIsRefusedAtLoad) {
  ASSERT_NE(lib.model->cpu_features, nullptr);
  ASSERT_EQ(std::string(lib.model->cpu_features).rfind("sse3,", 0), 0u)
      << lib.model->cpu_features;
  auto [code, msg] =
      loadAndRun(lib.patched(&lib.model->cpu_features[0], 'X', "cpu_features"));
  EXPECT_EQ(code, TFM_STATUS_INCOMPATIBLE);
  EXPECT_NE(msg.find("and uses Xse3, which this CPU lacks; recompile it"),
            std::string::npos)
      << msg;
}

// An inspect_only context reads a library for a CPU this one does not
// cover (`tfmc inspect` of one built for another machine): the load
// succeeds and says what it was built for, and the refusal moves to the
// session, before any of the library's code could run.
TEST_F(Corrupted, AnInspectOnlyContextLoadsALibraryThisCpuCannotRun) {
  std::string path =
      lib.patched(&lib.model->cpu_features[0], 'X', "cpu_features_inspect");
  tfm_context_options_t co;
  tfm_context_options_init(&co);
  co.inspect_only = 1;
  tfm_context_t *ctx = nullptr;
  ASSERT_EQ(take(tfm_context_create(&co, &ctx)).first, TFM_STATUS_OK);
  EXPECT_EQ(tfm_context_inspect_only(ctx), 1);
  tfm_module_t *module = nullptr;
  auto [code, msg] = take(tfm_module_load(ctx, path.c_str(), &module));
  ASSERT_EQ(code, TFM_STATUS_OK) << msg;
  EXPECT_EQ(std::string(tfm_module_cpu_features(module)).rfind("Xse3,", 0),
            0u);
  EXPECT_GT(tfm_module_num_entries(module), 0u);
  tfm_session_t *session = nullptr;
  std::tie(code, msg) = take(tfm_session_create(module, nullptr, &session));
  EXPECT_EQ(code, TFM_STATUS_INCOMPATIBLE);
  EXPECT_EQ(session, nullptr);
  EXPECT_NE(msg.find("and uses Xse3, which this CPU lacks; recompile it"),
            std::string::npos)
      << msg;
  tfm_module_release(module);
  tfm_context_release(ctx);
}

// What the inputs take (labels in [0, 5) for train_step): a kind this
// runtime does not know, or an empty range, is corruption.
TEST_F(Corrupted, InputValuesOfNoKnownKindAreRefusedAtLoad) {
  const int64_t *values = lib.model->input_values;
  ASSERT_NE(values, nullptr);
  int64_t count = 0;
  for (int32_t e = 0; e < lib.model->num_entries; ++e)
    count += 3 * lib.model->entries[e].num_inputs;
  const int64_t *labels =
      std::find(values, values + count, int64_t(TFM_INPUT_VALUES_INDICES));
  ASSERT_NE(labels, values + count);
  EXPECT_EQ(labels[1], 0);
  EXPECT_EQ(labels[2], 5);
  for (auto [at, value] :
       {std::pair{labels, int64_t(7)}, std::pair{labels + 2, int64_t(0)}}) {
    auto [code, msg] = loadAndRun(lib.patched(at, value, "input_values"));
    EXPECT_EQ(code, TFM_STATUS_DATA_LOSS) << msg;
    EXPECT_NE(msg.find("of no known kind"), std::string::npos) << msg;
  }
}

TEST_F(Corrupted, TooManyEntriesIsRefusedAtLoad) {
  auto [code, msg] = loadAndRun(
      lib.patched(&lib.model->num_entries, int32_t(1000), "num_entries"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS) << msg;
}

TEST_F(Corrupted, ASmallerArenaStopsTheRun) {
  ASSERT_GT(entry("train_step").arena_bytes, 0u);
  EXPECT_EQ(loadAndRun(kModel, /*train=*/true).first, TFM_STATUS_OK);
  // Every entry's arena shrinks, so the session's is too small for the
  // training step.
  std::string path = kModel;
  for (int32_t i = 0; i < lib.model->num_entries; ++i) {
    LoadedModel from(path);
    path = from.patched(&from.model->entries[i].arena_bytes, uint64_t(64),
                        "arena" + std::to_string(i));
  }
  auto [code, msg] = loadAndRun(path, /*train=*/true);
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("its code needs other buffer sizes than its metadata"),
            std::string::npos)
      << msg;
}

TEST_F(Corrupted, AnOutputShapeTheCodeDoesNotHaveStopsTheRun) {
  const tfm_abi_entry_t &e = entry("infer");
  auto [code, msg] =
      loadAndRun(lib.patched(&e.outputs[0].dims[0], int64_t(4000), "output"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("its code needs other buffer sizes"), std::string::npos)
      << msg;
}

TEST_F(Corrupted, AHugeDimensionIsRefusedAtLoad) {
  const tfm_abi_entry_t &e = entry("infer");
  auto [code, msg] = loadAndRun(
      lib.patched(&e.inputs[0].dims[0], int64_t(1) << 62, "input_dim"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("has the invalid shape"), std::string::npos) << msg;
}

TEST_F(Corrupted, AStateSlotOutsideTheStateIsRefusedAtLoad) {
  ASSERT_GT(lib.model->num_states, 0);
  auto [code, msg] =
      loadAndRun(lib.patched(&lib.model->states[0].offset,
                             lib.model->state_bytes, "state_offset"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("lies outside the state"), std::string::npos) << msg;
}

TEST_F(Corrupted, AnEmptyCheckRangeIsRefusedAtLoad) {
  ASSERT_GT(lib.model->num_checks, 0) << "the labels of train_step are checked";
  auto [code, msg] = loadAndRun(
      lib.patched(&lib.model->checks[0].lower, int64_t(100), "check"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("check 0 is invalid"), std::string::npos) << msg;
}

// The target and the device code (ABI 5).

TEST_F(Corrupted, AnUnknownTargetIsRefusedAtLoad) {
  auto [code, msg] =
      loadAndRun(lib.patched(&lib.model->target, int32_t(7), "target"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("unknown target 7"), std::string::npos) << msg;
}

TEST_F(Corrupted, ACPUModelCalledAGPUModelIsRefusedAtLoad) {
  auto [code, msg] = loadAndRun(
      lib.patched(&lib.model->target, int32_t(TFM_TARGET_CUDA), "to_cuda"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  // Its training step's optimizer and layer norms run on the CPU only (a
  // GPU runs only the GEMM descriptors, through cuBLASLt).
  EXPECT_NE(msg.find("a model for CUDA GPUs carries kernel"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("which runs on the CPU only"), std::string::npos) << msg;
}

TEST_F(Corrupted, ACPUModelWithDeviceKernelsIsRefusedAtLoad) {
  auto [code, msg] = loadAndRun(lib.patched(&lib.model->num_device_kernels,
                                            int32_t(3), "device_kernels"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("a model for the CPU carries device code"),
            std::string::npos)
      << msg;
}

struct CorruptedGPU : ::testing::Test {
  void SetUp() override {
    ASSERT_TRUE(lib.model) << "cannot load " << kCudaModel;
    ASSERT_EQ(lib.model->target, TFM_TARGET_CUDA);
    ASSERT_GT(lib.model->num_device_kernels, 0);
    // No GPU in this process: sessions fail cleanly after a good load.
    setenv("TFM_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  }
  LoadedModel lib{kCudaModel};
};

TEST_F(CorruptedGPU, TheUnchangedLibraryLoadsAndWantsADriver) {
  auto [code, msg] = loadAndRun(kCudaModel);
  EXPECT_EQ(code, TFM_STATUS_UNAVAILABLE) << msg;
  EXPECT_NE(msg.find("the CUDA driver (/nonexistent/libcuda.so.1) cannot be "
                     "loaded"),
            std::string::npos)
      << msg;
}

TEST_F(CorruptedGPU, DeviceCodePastTheLibraryIsRefusedAtLoad) {
  auto [code, msg] = loadAndRun(lib.patched(
      &lib.model->device_code_bytes, uint64_t(1) << 40, "code_bytes"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("the device code"), std::string::npos) << msg;
}

TEST_F(CorruptedGPU, UnterminatedDeviceCodeIsRefusedAtLoad) {
  // One byte short: the last byte counted is PTX text, not the NUL.
  auto [code, msg] = loadAndRun(
      lib.patched(&lib.model->device_code_bytes,
                  lib.model->device_code_bytes - 1, "code_unterminated"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("is not terminated"), std::string::npos) << msg;
}

TEST_F(CorruptedGPU, UnknownKernelFlagsAreRefusedAtLoad) {
  // Every GEMM of a GPU model has its generated fallback; its training
  // step's exchanges (ALL_REDUCE) are the session's, and have none.
  ASSERT_GT(lib.model->num_kernels, 0);
  ASSERT_NE(lib.model->kernel_flags, nullptr);
  ASSERT_EQ(lib.model->kernels[0].kind, TFM_KERNEL_LINEAR);
  for (int32_t i = 0; i < lib.model->num_kernels; ++i)
    EXPECT_EQ(lib.model->kernel_flags[i],
              lib.model->kernels[i].kind == TFM_KERNEL_ALL_REDUCE
                  ? 0u
                  : uint32_t(TFM_KERNEL_FLAG_FALLBACK))
        << "kernel " << i;
  auto [code, msg] = loadAndRun(
      lib.patched(&lib.model->kernel_flags[0], uint32_t(6), "flags"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("kernel 0 has unknown flags 0x6"), std::string::npos)
      << msg;
}

TEST_F(CorruptedGPU, NarrowOperandsOfAnF32GemmAreRefusedAtLoad) {
  // This model multiplies in f32: 16-bit operands would be read as halves
  // of f32 ones.
  ASSERT_EQ(lib.model->kernels[0].dtype, TFM_DTYPE_F32);
  auto [code, msg] = loadAndRun(lib.patched(
      &lib.model->kernel_flags[0],
      uint32_t(TFM_KERNEL_FLAG_FALLBACK | TFM_KERNEL_FLAG_NARROW_OPERANDS),
      "narrow"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("reads narrow operands, which only a bf16 or f16 LINEAR "
                     "or BATCH_MATMUL does"),
            std::string::npos)
      << msg;
}

// A GPU model's checks write their outcomes to slots past its state's
// slots, which the runtime reads after each run.
TEST_F(CorruptedGPU, CheckSlotsOutsideTheStateAreRefusedAtLoad) {
  ASSERT_GT(lib.model->num_checks, 0) << "the labels of train_step are checked";
  ASSERT_EQ(lib.model->check_mode, TFM_CHECKS_IN_STATE);
  EXPECT_EQ(lib.model->check_slots_offset +
                uint64_t(TFM_CHECK_SLOT_BYTES) * lib.model->num_checks,
            lib.model->state_bytes);
  auto [code, msg] = loadAndRun(lib.patched(
      &lib.model->check_slots_offset, lib.model->state_bytes - 8, "slots"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("checks at"), std::string::npos) << msg;
  std::tie(code, msg) =
      loadAndRun(lib.patched(&lib.model->check_mode, int32_t(7), "check_mode"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("its checks report in the unknown mode 7"),
            std::string::npos)
      << msg;
}

TEST_F(CorruptedGPU, TooManyDeviceKernelsIsRefusedAtLoad) {
  auto [code, msg] = loadAndRun(lib.patched(&lib.model->num_device_kernels,
                                            int32_t(1) << 30, "kernels"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("device kernels lie outside the library"),
            std::string::npos)
      << msg;
}

// The table of an entry compiled for a range of lengths (DynamicTest.cpp's
// library): every bucket must be an entry of the library, of the sizes the
// table gives, and the last must hold the largest size.
struct CorruptedDynamic : ::testing::Test {
  void SetUp() override {
    ASSERT_TRUE(lib.model) << "cannot load " << TFM_LENGTHS_SO;
    ASSERT_EQ(lib.model->num_dynamic_entries, 1);
  }
  const tfm_abi_dynamic_entry_t &d() { return lib.model->dynamic_entries[0]; }
  LoadedModel lib{TFM_LENGTHS_SO};
};

TEST_F(CorruptedDynamic, ABucketThatIsNoEntryIsRefusedAtLoad) {
  auto [code, msg] =
      loadAndRun(lib.patched(&d().buckets[0], int32_t(1000), "bucket"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("dynamic entry 'infer': bucket 0 is no entry"),
            std::string::npos)
      << msg;
}

TEST_F(CorruptedDynamic, ABucketOfOtherSizesIsRefusedAtLoad) {
  auto [code, msg] =
      loadAndRun(lib.patched(&d().bucket_sizes[0], int64_t(3), "sizes"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("input 0 does not match"), std::string::npos) << msg;
}

TEST_F(CorruptedDynamic, ARangePastTheLastBucketIsRefusedAtLoad) {
  auto [code, msg] =
      loadAndRun(lib.patched(&d().max_sizes[0], int64_t(41), "range"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("no bucket holds 'sequence' = 41"), std::string::npos)
      << msg;
}

// The library's longer buckets compute attention on the ATTENTION kernel
// (and its shortest, of at most TFM_ATTENTION_FEW_QUERIES positions, whose
// single key row would hide a stride): the one with the most keys.
const tfm_abi_kernel_desc_t *firstAttention(const tfm_abi_model_t *model) {
  const tfm_abi_kernel_desc_t *longest = nullptr;
  for (int32_t i = 0; i < model->num_kernels; ++i)
    if (model->kernels[i].kind == TFM_KERNEL_ATTENTION &&
        (!longest || model->kernels[i].params[TFM_ATTENTION_SK] >
                         longest->params[TFM_ATTENTION_SK]))
      longest = &model->kernels[i];
  return longest;
}

TEST_F(CorruptedDynamic, UnknownAttentionFlagsAreRefusedAtLoad) {
  const tfm_abi_kernel_desc_t *k = firstAttention(lib.model);
  ASSERT_TRUE(k) << "the encoder's long buckets must use ATTENTION";
  auto [code, msg] =
      loadAndRun(lib.patched(&k->params[6], int64_t(8192), "attention_flags"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("its flags are 8192"), std::string::npos) << msg;
}

// How to read the rotary tables, with nothing said to be rotated.
TEST_F(CorruptedDynamic, RotaryTablesWithoutARotationAreRefusedAtLoad) {
  const tfm_abi_kernel_desc_t *k = firstAttention(lib.model);
  ASSERT_TRUE(k) << "the encoder's long buckets must use ATTENTION";
  int64_t flags = k->params[TFM_ATTENTION_FLAGS] | TFM_ATTENTION_ROTARY_POS;
  auto [code, msg] = loadAndRun(
      lib.patched(&k->params[TFM_ATTENTION_FLAGS], flags, "rotary_tables"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("its flags are " + std::to_string(flags)),
            std::string::npos)
      << msg;
}

// GROUPED with no group (the encoder's attention has none, so the group
// param is 0) would divide by it.
TEST_F(CorruptedDynamic, AGroupedAttentionWithoutGroupsIsRefusedAtLoad) {
  const tfm_abi_kernel_desc_t *k = firstAttention(lib.model);
  ASSERT_TRUE(k) << "the encoder's long buckets must use ATTENTION";
  ASSERT_EQ(k->params[TFM_ATTENTION_KV_GROUP], 0);
  auto [code, msg] = loadAndRun(lib.patched(
      &k->params[TFM_ATTENTION_FLAGS],
      k->params[TFM_ATTENTION_FLAGS] | TFM_ATTENTION_GROUPED, "grouped"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("do not form groups of 0"), std::string::npos) << msg;
}

// kᵀ keys are read for few queries only, and never rotated.
TEST_F(CorruptedDynamic, TransposedKeysForManyQueriesAreRefusedAtLoad) {
  const tfm_abi_kernel_desc_t *k = firstAttention(lib.model);
  ASSERT_TRUE(k) << "the encoder's long buckets must use ATTENTION";
  ASSERT_GT(k->params[TFM_ATTENTION_SQ], TFM_ATTENTION_FEW_QUERIES);
  int64_t flags =
      k->params[TFM_ATTENTION_FLAGS] | TFM_ATTENTION_KEYS_TRANSPOSED;
  auto [code, msg] = loadAndRun(
      lib.patched(&k->params[TFM_ATTENTION_FLAGS], flags, "transposed"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("its flags are " + std::to_string(flags)),
            std::string::npos)
      << msg;
}

TEST_F(CorruptedDynamic, AnAttentionRowStridePastItsBufferIsRefused) {
  const tfm_abi_kernel_desc_t *k = firstAttention(lib.model);
  ASSERT_TRUE(k) << "the encoder's long buckets must use ATTENTION";
  // The key's row stride (operand 1: strides 3..5).
  auto [code, msg] = loadAndRun(
      lib.patched(&k->strides[5], int64_t(1) << 40, "attention_stride"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("more than the model's largest buffer"),
            std::string::npos)
      << msg;
}

TEST(CorruptPointers, ANameOutsideTheLibraryIsRefusedAtLoad) {
  auto [code, msg] = loadAndRun(kFakeDir + "/libfake_model_bad_name.so");
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("entry point 0 has no name"), std::string::npos) << msg;
}

TEST(CorruptPointers, AnEntryPointIntoDataIsRefusedAtLoad) {
  auto [code, msg] = loadAndRun(kFakeDir + "/libfake_model_bad_code.so");
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("has no code in the library"), std::string::npos) << msg;
}

} // namespace

/// The same classifier compiled with --shard-optimizer: its ADAM kernels
/// name their moments' slots, which the runtime keeps.
struct CorruptedSharded : ::testing::Test {
  void SetUp() override {
    ASSERT_TRUE(lib.model) << "cannot load " << TFM_TINY_TRAIN_SHARDED_SO;
    for (int32_t i = 0; i < lib.model->num_kernels; ++i)
      if (lib.model->kernels[i].kind == TFM_KERNEL_ADAM)
        adam = &lib.model->kernels[i];
    ASSERT_TRUE(adam && adam->params[TFM_OPTIMIZER_SHARDED] == 1);
  }
  LoadedModel lib{TFM_TINY_TRAIN_SHARDED_SO};
  const tfm_abi_kernel_desc_t *adam = nullptr;
};

TEST_F(CorruptedSharded, TheUnchangedLibraryTrains) {
  auto [code, msg] = loadAndRun(TFM_TINY_TRAIN_SHARDED_SO, /*train=*/true);
  EXPECT_EQ(code, TFM_STATUS_OK) << msg;
}

TEST_F(CorruptedSharded, AnUpdateNamingAnotherSlotIsRefusedAtLoad) {
  // Slot 0 is a parameter, not a sharded first moment.
  auto [code, msg] = loadAndRun(lib.patched(
      &adam->params[TFM_OPTIMIZER_MOMENTS], int64_t(0), "adam_moments"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("no sharded first moment of its size"), std::string::npos)
      << msg;
}

TEST_F(CorruptedSharded, AnUnknownOptimizerFlagIsRefusedAtLoad) {
  auto [code, msg] = loadAndRun(lib.patched(
      &adam->params[TFM_OPTIMIZER_SHARDED], int64_t(2), "adam_sharded"));
  EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
  EXPECT_NE(msg.find("(adam)"), std::string::npos) << msg;
}

TEST_F(CorruptedSharded, AShardedMomentWithBytesInTheStateIsRefusedAtLoad) {
  for (int32_t i = 0; i < lib.model->num_states; ++i)
    if (lib.model->states[i].kind == TFM_STATE_ADAM_M_SHARD) {
      auto [code, msg] = loadAndRun(lib.patched(&lib.model->states[i].offset,
                                                uint64_t(64), "shard_offset"));
      EXPECT_EQ(code, TFM_STATUS_DATA_LOSS);
      EXPECT_NE(msg.find("lies outside the state"), std::string::npos) << msg;
      return;
    }
  ADD_FAILURE() << "no sharded moment to patch";
}
