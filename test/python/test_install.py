"""The installed package: `cmake --install` into a fresh prefix, then a
Python that sees only that prefix imports tfm, finds the installed tfmc and
runtime (no build folder on any path), compiles and runs a model."""

import os
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
