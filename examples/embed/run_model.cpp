// run_model.cpp - the same as run_model.c, through the C++ wrapper:
//   run_model_cpp MODEL.so [ENTRY]
#include <tfm/runtime.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.so [ENTRY]\n", argv[0]);
    return 2;
  }
  const char *entry = argc > 2 ? argv[2] : "infer";
  try {
    tfm::Context context;
    tfm::Module module(context, argv[1]);
    tfm::Session session(module);
    std::vector<tfm::Tensor> inputs;
    for (size_t i = 0;; ++i) {
      tfm_tensor_desc_t d;
      tfm_status_t s = tfm_module_entry_io(module.get(), entry, 0, i, &d);
      if (s) {
        tfm_status_free(s);
        break;
      }
      inputs.emplace_back(d.dtype, std::vector<int64_t>(d.dims, d.dims + d.rank));
    }
    std::vector<tfm::Tensor *> args;
    for (tfm::Tensor &t : inputs)
      args.push_back(&t);
    std::vector<tfm::Tensor> outputs = session.run(entry, args);
    for (size_t i = 0; i < outputs.size(); ++i) {
      tfm_tensor_desc_t d;
      tfm::check(tfm_module_entry_io(module.get(), entry, 1, i, &d));
      std::printf("%s:", d.name);
      if (outputs[i].dtype() == TFM_DTYPE_F32) {
        size_t n = tfm_tensor_byte_size(outputs[i].get()) / sizeof(float);
        for (size_t j = 0; j < n && j < 8; ++j)
          std::printf(" %g", outputs[i].data<float>()[j]);
      }
      std::printf("\n");
    }
  } catch (const tfm::Error &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
