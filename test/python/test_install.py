"""The installed package: `cmake --install` into a fresh prefix, then a
Python that sees only that prefix imports tfm, finds the installed tfmc and
runtime (no build folder on any path), compiles and runs a model."""

import glob
import os
import shutil
import subprocess
import sys
import textwrap

from conftest import BUILD, SOURCE


def test_an_installed_package_compiles_and_runs(tmp_path):
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", BUILD, "--prefix", str(prefix)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    site = prefix / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "dist-packages"
    script = textwrap.dedent(f"""
        import numpy as np, tfm
        assert tfm.__file__.startswith({str(prefix)!r}), tfm.__file__
        assert tfm.tfmc_path() == {str(prefix / 'bin' / 'tfmc')!r}, tfm.tfmc_path()
        m = tfm.compile({os.path.join(SOURCE, 'test', 'models', 'gpt_opset13', 'model.onnx')!r})
        y = m.session().run(np.zeros((2, 8), np.int64))["output"]
        print(y.shape)
    """)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site),
           "HOME": str(tmp_path)}
    # In a sanitized build the runtime is instrumented: the interpreter then
    # needs the sanitizer's runtime preloaded, as ctest gives it to this one.
    env.update({k: v for k, v in os.environ.items()
                if k in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")})
    r = subprocess.run([sys.executable, "-c", script], capture_output=True,
                       text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(2, 8, 50)"


def test_pip_installs_the_package_into_a_fresh_virtual_environment(tmp_path):
    # As the README says: Debian's pip, offline, into a virtual environment
    # that sees the system's numpy; the wheel is made from this build.
    venv = tmp_path / "venv"
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages",
                        str(venv)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"TFM_BUILD_DIR": BUILD, "HOME": str(tmp_path),
                "PIP_NO_CACHE_DIR": "1"})
    r = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation",
                        "--no-index", "--no-deps", "--quiet", SOURCE],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    script = textwrap.dedent(f"""
        import numpy as np, tfm
        assert tfm.__file__.startswith({str(venv)!r}), tfm.__file__
        assert tfm.tfmc_path().startswith({str(venv)!r}), tfm.tfmc_path()
        m = tfm.compile({os.path.join(SOURCE, 'test', 'models', 'gpt_opset13', 'model.onnx')!r})
        print(m.session().run(np.zeros((2, 8), np.int64))["output"].shape)
    """)
    r = subprocess.run([python, "-c", script], capture_output=True, text=True,
                       env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(2, 8, 50)"
    r = subprocess.run([str(venv / "bin" / "tfm"), "--version"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "tfmc (tfm)" in r.stdout, r.stdout + r.stderr

    # The package built for another interpreter says so on import.
    site = glob.glob(str(venv / "lib" / "python*" / "site-packages"))[0]
    other = tmp_path / "other"
    shutil.copytree(os.path.join(site, "tfm"), other / "tfm")
    for ext in glob.glob(str(other / "tfm" / "_tfm.*.so")):
        os.rename(ext, str(other / "tfm" / "_tfm.cpython-399-x86_64-linux-gnu.so"))
    r = subprocess.run([sys.executable, "-c", "import tfm"], capture_output=True,
                       text=True, env={**env, "PYTHONPATH": str(other)},
                       cwd=tmp_path)
    assert r.returncode != 0
    assert "tfm was built for another Python" in r.stderr, r.stderr
