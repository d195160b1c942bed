"""For every exported model: compile it unfused and fused, run both with the
reference interpreter on the same random inputs, and require agreement; run
the fused graph against PyTorch's outputs too. Usage:
check_equivalence.py TFMC MODELS_DIR WORK_DIR"""
import os
import subprocess
import sys

tfmc, models, work = sys.argv[1:4]
failures = []
names = sorted(d for d in os.listdir(models)
               if os.path.isfile(os.path.join(models, d, "model.onnx")))


def run(args):
    p = subprocess.run([tfmc] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return p.returncode, p.stdout.decode(errors="replace")


for name in names:
    model = os.path.join(models, name, "model.onnx")
    shape = ["--shape", "input_ids=2x8", "--shape", "attention_mask=2x8"] if name.startswith("bert") else []
    unfused, fused = os.path.join(work, name + ".mlir"), os.path.join(work, name + "_fused.mlir")
    case = os.path.join(work, name + "_case")
    steps = [
        ["compile", model, "--emit=tfm", "-o", unfused] + shape,
        ["compile", model, "--emit=fused", "-o", fused] + shape,
        ["run", unfused, "--reference", "--seed", "5", "--output-dir", case],
        ["run", fused, "--reference", "--test-data-dir", case, "--rtol", "1e-6", "--atol", "1e-6"],
        ["run", fused, "--reference", "--test-data-dir",
         os.path.join(models, name, "test_data_set_0")],
    ]
    for step in steps:
        code, out = run(step)
        if code != 0:
            failures.append(f"{name}: tfmc {' '.join(step[:2])} exited {code}:\n{out}")
            break

for f in failures:
    print("FAIL", f)
if failures:
    sys.exit(1)
print(f"{len(names)} models: fused and unfused agree")
