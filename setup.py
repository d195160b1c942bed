"""`pip install .`: the package built by the project's CMake build.

The build folder is $TFM_BUILD_DIR, else build/ beside this file, the one
./tfm.sh uses: after `./tfm.sh test` the install builds nothing new. The
wheel holds the package (tfm/), its extension, the runtime (tfm/lib/) and
tfmc (tfm/bin/), laid out as an install prefix is, so that their RUNPATHs
($ORIGIN/../lib, $ORIGIN/lib) find the runtime; LLVM's library comes from
Debian's llvm-19."""

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("TFM_BUILD_DIR") or os.path.join(ROOT, "build")
os.makedirs(os.path.join(ROOT, "build", "setuptools"), exist_ok=True)


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        for line in f:
            if line.startswith("project(tfm VERSION "):
                return line.split()[2]
    raise RuntimeError("CMakeLists.txt names no version")


def run(*cmd):
    print("tfm setup:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


class BuildWithCMake(build_py):
    """Configures (when the build folder has none) and builds the runtime,
    tfmc and the extension for this interpreter, then installs them into a
    staging prefix and lays the wheel's package out from it."""

    def run(self):
        if not os.path.exists(os.path.join(BUILD, "build.ninja")):
            run("cmake", "-G", "Ninja", "-S", ROOT, "-B", BUILD,
                "-DCMAKE_BUILD_TYPE=Release",
                "-DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir",
                f"-DTFM_PYTHON={sys.executable}")
        configured = self.configured_python()
        if os.path.realpath(configured) != os.path.realpath(sys.executable):
            raise RuntimeError(
                f"{BUILD} builds the extension for {configured}, not for "
                f"{sys.executable}, which runs this install: install with "
                f"{configured} -m pip, or set TFM_BUILD_DIR to another folder")
        run("cmake", "--build", BUILD, "--target", "tfm_runtime", "tfmc",
            "tfm_python_ext", "-j", str(os.cpu_count() or 2))
        super().run()
        package = os.path.join(self.build_lib, "tfm")
        with tempfile.TemporaryDirectory() as prefix:
            run("cmake", "--install", BUILD, "--prefix", prefix)
            purelib = glob.glob(os.path.join(prefix, "lib", "python*",
                                             "dist-packages", "tfm"))[0]
            for f in glob.glob(os.path.join(purelib, "_tfm*.so")):
                shutil.copy2(f, package)
            os.makedirs(os.path.join(package, "lib"), exist_ok=True)
            # The SONAME alone: a wheel holds no links, and nothing in it
            # links against the unversioned name.
            (runtime,) = glob.glob(os.path.join(prefix, "lib*",
                                                "libtfm_runtime.so.[0-9]"))
            shutil.copy2(runtime, os.path.join(package, "lib"))
            # tfmc opens it under mpirun, where Open MPI was found at build.
            for mpi in glob.glob(os.path.join(prefix, "lib*",
                                              "libtfm_mpi.so.[0-9]")):
                shutil.copy2(mpi, os.path.join(package, "lib"))
            os.makedirs(os.path.join(package, "bin"), exist_ok=True)
            shutil.copy2(os.path.join(prefix, "bin", "tfmc"),
                         os.path.join(package, "bin"))
        with open(os.path.join(package, "_config.py"), "w") as f:
            f.write("import os\n\n\ndef tfmc_candidates(package_dir):\n"
                    "    return [os.path.join(package_dir, \"bin\", \"tfmc\")]\n")

    def configured_python(self):
        with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("TFM_PYTHON:"):
                    return line.split("=", 1)[1].strip()
        return sys.executable


class BinaryDistribution(Distribution):
    """A wheel for this platform and interpreter: it holds an extension."""

    def has_ext_modules(self):
        return True


setup(version=project_version(), cmdclass={"build_py": BuildWithCMake},
      distclass=BinaryDistribution)
