#!/usr/bin/env python3
"""Data-parallel training against one process, for the fixture models of
test/models/training.

For each family given and each of its runs (trajectory.json: 10 SGD steps,
10 Adam steps with label smoothing), the step is compiled once; then
`tfmc train` in one process on the fixture's batch is the oracle, and
`mpirun -np 2` and `-np 3` train the same artifact with every rank taking
its rows of that batch (with 3 ranks one rank has none: its weight is 0).
Each step's loss must agree within 1e-5 relative, and every rank must end
with the same parameters (tfmc says so on rank 0). The Adam runs train a
second artifact too, compiled with --shard-optimizer (each rank keeps its
part of the moments), against the same one-process oracle in 1, 2 and 3
processes.

Then, for the first family: a checkpoint written by 2 ranks after 5 steps
resumes in one process with the loss the one process had at step 6, and
so does one of 2 ranks with sharded moments, resumed by the unsharded
artifact, and one of the unsharded artifact, resumed by 3 sharded ranks;
SGD with --shard-optimizer compiles with a warning that it shards nothing; a
model compiled on each rank from the ONNX file gives the same library on
every rank; a rank killed mid-run ends the whole job, with a message
naming it, well within the timeout; and a rank stopped mid-run is named
by the other when its exchange times out, which ends the job.

usage: check_data_parallel.py TFMC TRAINING_DIR OUT_DIR FAMILY...
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

RTOL = 1e-5


def mpirun(n):
    return ["mpirun", "--oversubscribe", "-np", str(n)]


def environment():
    env = dict(os.environ)
    # CI runs as root; the shared-memory transport's single-copy mode needs
    # ptrace rights a container may not give.
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none",
               OMPI_MCA_rmaps_base_oversubscribe="1",
               # A rank waiting in a collective yields its core instead of
               # polling: lit runs other tests beside this one.
               OMPI_MCA_mpi_yield_when_idle="1")
    return env


def losses(stdout):
    return [float(line.split()[3]) for line in stdout.splitlines()
            if line.startswith("step ")]


def run(cmd, env, timeout=600):
    return subprocess.run(cmd, capture_output=True, text=True, env=env,
                          timeout=timeout)


def worst(got, want):
    return max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(got, want))


def main():
    tfmc, root, out = sys.argv[1], sys.argv[2], sys.argv[3]
    families = sys.argv[4:]
    env = environment()
    os.makedirs(out, exist_ok=True)
    matched = failed = 0

    def check(ok, label, detail=""):
        nonlocal matched, failed
        print(f"{'ok  ' if ok else 'FAIL'} {label}{': ' + detail if detail else ''}")
        matched += ok
        failed += not ok

    for family in families:
        folder = os.path.join(root, family)
        with open(os.path.join(folder, "trajectory.json")) as f:
            fixture = json.load(f)
        data = os.path.join(folder, "data")
        for r in fixture["runs"]:
            opts = ["--optimizer=" + r["optimizer"], "--lr=%r" % r["lr"],
                    "--label-smoothing=%r" % r["label_smoothing"]]
            so = os.path.join(out, f"{family}-{r['optimizer']}.so")
            c = run([tfmc, "compile", os.path.join(folder, "model.onnx"),
                     "--train", "-o", so] + opts, env)
            if c.returncode != 0:
                check(False, f"{family} {r['optimizer']}", "compile\n" + c.stderr)
                continue
            steps = ["--steps", str(fixture["steps"]), "--quiet"]
            one = run([tfmc, "train", so, "--data", data] + steps, env)
            base = losses(one.stdout)
            if one.returncode != 0 or len(base) != fixture["steps"]:
                check(False, f"{family} {r['optimizer']}", "one process\n" + one.stderr)
                continue
            variants = [(so, "", (2, 3))]
            # The GPU step's form of the exchanges (its kernels scheduled
            # on this CPU), for the first family.
            if family == families[0]:
                gpu = os.path.join(out, f"{family}-{r['optimizer']}-gpu.so")
                c = run([tfmc, "compile", os.path.join(folder, "model.onnx"),
                         "--train", "--target=cuda", "--gpu-schedule-on-cpu",
                         "-o", gpu] + opts, env)
                if c.returncode != 0:
                    check(False, f"{family} {r['optimizer']} GPU schedule",
                          "compile\n" + c.stderr)
                else:
                    variants.append((gpu, " GPU schedule", (2, 3)))
            if r["optimizer"] == "adam":
                sharded = os.path.join(out, f"{family}-adam-sharded.so")
                c = run([tfmc, "compile", os.path.join(folder, "model.onnx"),
                         "--train", "--shard-optimizer", "-o", sharded] + opts,
                        env)
                if c.returncode != 0:
                    check(False, f"{family} adam sharded", "compile\n" + c.stderr)
                else:
                    variants.append((sharded, " sharded", (1, 2, 3)))
            for artifact, kind, counts in variants:
                for n in counts:
                    launch = mpirun(n) if n > 1 else []
                    p = run(launch + [tfmc, "train", artifact, "--data", data]
                            + steps, env)
                    got = losses(p.stdout)
                    label = (f"{family} {r['optimizer']}{kind} {n} "
                             f"process{'es' if n > 1 else ''}")
                    if p.returncode != 0 or len(got) != len(base):
                        check(False, label,
                              f"exit {p.returncode}\n{p.stdout}{p.stderr}")
                        continue
                    same = (n == 1 or
                            f"parameters identical on all {n} processes" in p.stdout)
                    err = worst(got, base)
                    check(err <= RTOL and same, label,
                          f"{len(got)} steps, largest relative error {err:.2e}"
                          + ("" if same else ", parameters not reported identical"))

    if not families:
        print("no family given")
        sys.exit(1)
    family = families[0]
    folder = os.path.join(root, family)
    data = os.path.join(folder, "data")
    so = os.path.join(out, f"{family}-sgd.so")
    with open(os.path.join(folder, "trajectory.json")) as f:
        sgd = next(r for r in json.load(f)["runs"] if r["optimizer"] == "sgd")
    base = losses(run([tfmc, "train", so, "--data", data, "--steps", "6",
                       "--quiet"], env).stdout)

    # Ranks on one machine share its hardware threads out among them,
    # unless --threads says otherwise.
    for n, extra, want in ((3, [], max(1, (os.cpu_count() or 1) // 3)),
                           (2, ["--threads", "1"], 1)):
        p = run(mpirun(n) + [tfmc, "train", so, "--data", data, "--steps", "1"]
                + extra, env)
        line = next((l for l in p.stdout.splitlines()
                     if l.startswith("data-parallel:")), "")
        check(p.returncode == 0 and
              f"{n} processes on {want} thread{'' if want == 1 else 's'} each"
              in line,
              f"{n} processes{' ' + ' '.join(extra) if extra else ''} "
              f"take {want} thread{'' if want == 1 else 's'} each",
              line or p.stdout + p.stderr)

    # A checkpoint of 2 ranks resumes in one process.
    ckpt = os.path.join(out, "two-ranks.ckpt")
    p = run(mpirun(2) + [tfmc, "train", so, "--data", data, "--steps", "5",
                         "--quiet", "--checkpoint", ckpt], env)
    q = run([tfmc, "train", so, "--data", data, "--steps", "1", "--quiet",
             "--resume", ckpt], env)
    resumed = losses(q.stdout)
    check(p.returncode == 0 and q.returncode == 0 and len(resumed) == 1
          and len(base) == 6 and worst(resumed, base[5:]) <= RTOL
          and "step 6/6" in q.stdout,
          "checkpoint of 2 processes resumed by 1",
          f"next loss {resumed} against {base[5:]}\n{p.stderr}{q.stderr}"
          if not resumed or q.returncode else
          f"step 6 loss {resumed[0]:.6f}, one process {base[5]:.6f}")

    # Sharded moments are saved whole: either artifact resumes the other's
    # checkpoints at any number of ranks.
    adam = os.path.join(out, f"{family}-adam.so")
    sharded = os.path.join(out, f"{family}-adam-sharded.so")
    adamBase = losses(run([tfmc, "train", adam, "--data", data, "--steps", "6",
                           "--quiet"], env).stdout)
    for writer, wn, reader, rn, label in (
            (sharded, 2, adam, 1,
             "checkpoint of 2 processes with sharded moments resumed by 1 "
             "unsharded"),
            (adam, 1, sharded, 3,
             "checkpoint of 1 unsharded process resumed by 3 with sharded "
             "moments")):
        ckpt = os.path.join(out, f"resume-{wn}-{rn}.ckpt")
        p = run((mpirun(wn) if wn > 1 else []) +
                [tfmc, "train", writer, "--data", data, "--steps", "5",
                 "--quiet", "--checkpoint", ckpt], env)
        q = run((mpirun(rn) if rn > 1 else []) +
                [tfmc, "train", reader, "--data", data, "--steps", "1",
                 "--quiet", "--resume", ckpt], env)
        resumed = losses(q.stdout)
        good = (p.returncode == 0 and q.returncode == 0 and len(resumed) == 1
                and len(adamBase) == 6)
        check(good and worst(resumed, adamBase[5:]) <= RTOL, label,
              f"step 6 loss {resumed[0]:.6f}, one process {adamBase[5]:.6f}"
              if good else f"{p.stderr}{q.stdout}{q.stderr}")

    # SGD keeps no moments: sharding them does nothing, and says so.
    c = run([tfmc, "compile", os.path.join(folder, "model.onnx"), "--train",
             "--optimizer=sgd", "--shard-optimizer", "-o",
             os.path.join(out, "sgd-sharded.so")], env)
    check(c.returncode == 0 and "warning: --shard-optimizer" in c.stderr
          and "nothing to shard" in c.stderr,
          "SGD with --shard-optimizer compiles, warning that it shards nothing",
          c.stderr.strip())

    # Compiled on every rank from the model file: the same library.
    p = run(mpirun(2) + [tfmc, "train", os.path.join(folder, "model.onnx"),
                         "--data", data, "--steps", "3", "--quiet",
                         "--optimizer=sgd", "--lr=%r" % sgd["lr"]], env)
    got = losses(p.stdout)
    check(p.returncode == 0 and len(got) == 3 and worst(got, base[:3]) <= RTOL,
          "compiled from the ONNX file on each of 2 processes",
          f"exit {p.returncode} {got}\n{p.stderr}" if p.returncode else
          f"3 steps, largest relative error {worst(got, base[:3]):.2e}")

    def rank_one():
        """The pid of rank 1 of the job just started, once it trains."""
        deadline = time.time() + 60
        while time.time() < deadline:
            time.sleep(0.5)
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        environ = f.read().split(b"\0")
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmdline = f.read()
                except OSError:
                    continue
                if (b"OMPI_COMM_WORLD_RANK=1" in environ and b"train" in cmdline
                        and os.path.basename(tfmc).encode() in cmdline):
                    return int(pid)
        return None

    def ended_by(sig, label, message, job_env):
        """Starts a long job, sends rank 1 `sig` well into training, and
        checks that the job ends with `message` in its output."""
        job = subprocess.Popen(mpirun(2) + [tfmc, "train", so, "--data", data,
                                            "--steps", "100000000", "--quiet"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=job_env, start_new_session=True)
        victim = rank_one()
        if victim is not None:
            time.sleep(1)  # well into training
            os.kill(victim, sig)
        start = time.time()
        try:
            text, _ = job.communicate(timeout=120)
            ended = True
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            text, _ = job.communicate()
            ended = False
        named = message in text
        check(victim is not None and ended and job.returncode != 0 and named,
              label,
              f"ended after {time.time() - start:.1f} s with exit {job.returncode}, "
              f"the output {'says' if named else 'does not say'} '{message}'"
              + ("" if named and ended else "\n" + text[-2000:]))

    # A rank that dies ends the job, and the message names it.
    ended_by(signal.SIGKILL, "a killed rank ends the job", "rank 1", env)
    # A rank that hangs (stopped) is named by the other when the exchange
    # times out, and the job ends.
    ended_by(signal.SIGSTOP, "a hung rank is named and the job ends",
             "rank(s) 1 of 2 stopped answering",
             dict(env, TFM_COLLECTIVE_TIMEOUT="3"))

    print(f"{matched} data-parallel checks pass, {failed} fail")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
