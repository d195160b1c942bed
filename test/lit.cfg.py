# -*- Python -*-
# lit configuration of the tfm test suite.

import os
import shutil

import lit.formats
from lit.llvm import llvm_config

config.name = "TFM"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tfm_obj_root, "test")
# Inputs/ holds files that RUN lines read; fixtures are data, not tests.
config.excludes = ["Inputs", "fixtures", "unittests", "python", "CMakeLists.txt", "lit.cfg.py"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%tfm_src_root", config.tfm_src_root))

# Every buffer the CPU runtime allocates starts as NaNs (and -1s), so that
# generated code reading memory it never wrote fails the value checks.
config.environment["TFM_POISON_MEMORY"] = "1"

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["tfm-opt", "tfmc", "tfm-seq2seq", "tfm-gpt"],
                                   [config.tfm_tools_dir, config.llvm_tools_dir])

# `%expect_exit N cmd ...` checks an exact exit code of the CLI contract.
config.substitutions.append(
    ("%expect_exit",
     f"{config.python_executable} {os.path.join(config.test_source_root, 'tfmc', 'Inputs', 'expect_exit.py')}"))
config.substitutions.append(("%fixtures", os.path.join(config.tfm_src_root, "test", "fixtures", "reference")))
# Before %fake_cuda, which is a prefix of it.
# The runtime library of mlir-cpu-runner's printMemref*, beside LLVM's tools.
config.substitutions.append(("%mlir_runner_utils", os.path.join(config.llvm_tools_dir, "..", "lib", "libmlir_runner_utils.so")))
# ... and of vector.print's scalars and strings.
config.substitutions.append(("%mlir_c_runner_utils", os.path.join(config.llvm_tools_dir, "..", "lib", "libmlir_c_runner_utils.so")))
config.substitutions.append(("%fake_nccl", os.path.join(config.tfm_obj_root, "lib", "libfake_nccl.so")))
config.substitutions.append(("%fake_cublaslt", os.path.join(config.tfm_obj_root, "lib", "libfake_cublaslt.so")))
config.substitutions.append(("%fake_cuda", os.path.join(config.tfm_obj_root, "lib", "libfake_cuda_driver.so")))
config.substitutions.append(("%tfmc_bin", os.path.join(config.tfm_tools_dir, "tfmc")))
config.substitutions.append(("%tfm_opt_bin", os.path.join(config.tfm_tools_dir, "tfm-opt")))

# Graphviz renders `tfmc inspect --dot`; ./tfm.sh installs it.
if shutil.which("dot"):
    config.available_features.add("graphviz")
