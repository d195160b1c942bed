"""Training and generation from Python: the loss trajectory of a step loop
against `tfmc train` and against PyTorch (trajectory.json), parameters and
checkpoints, and generated tokens against PyTorch's, streamed or not."""

import json
import os
import subprocess

import numpy as np
import pytest

import tfm
from conftest import SOURCE, UNITTESTS, built, read_pb

GPT = os.path.join(SOURCE, "test", "models", "training", "gpt_opset13")


def test_a_training_loop_follows_tfmc_train_and_pytorch():
    with open(os.path.join(GPT, "trajectory.json")) as f:
        fixture = json.load(f)
    run = next(r for r in fixture["runs"] if r["optimizer"] == "adam")
    options = {"optimizer": "adam", "lr": run["lr"],
               "label_smoothing": run["label_smoothing"]}
    module = tfm.compile(os.path.join(GPT, "model.onnx"), train=options)
    session = module.session()
    x = read_pb(os.path.join(GPT, "data", "input_0.pb"))
    labels = read_pb(os.path.join(GPT, "data", "labels.pb"))
    losses = [session.train_step(x, labels) for _ in range(fixture["steps"])]
    assert session.step_count == fixture["steps"]

    r = subprocess.run(
        [tfm.tfmc_path(), "train", os.path.join(GPT, "model.onnx"), "--data",
         os.path.join(GPT, "data"), "--steps", str(fixture["steps"]),
         "--optimizer=adam", f"--lr={run['lr']!r}",
         f"--label-smoothing={run['label_smoothing']!r}", "--quiet"],
        capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cli = [float(line.split()[3]) for line in r.stdout.splitlines()
           if line.startswith("step ")]
    # The same compiled code on the same batches: the same numbers.
    np.testing.assert_allclose(losses, cli, rtol=1e-6)
    np.testing.assert_allclose(losses, run["losses"], rtol=1e-3)


def test_parameters_and_checkpoints(tmp_path):
    module = tfm.load(built(os.path.join(UNITTESTS, "tiny_train.so")))
    a = module.session()
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    labels = np.array([1, 4, 0, 2], np.int64)
    params = a.parameters()
    assert list(params) == ["w", "b"]
    for _ in range(3):
        a.train_step({"x": x}, labels)
    assert not np.array_equal(a.parameters()["w"], params["w"])
    ckpt = tmp_path / "run.ckpt"
    a.save_checkpoint(ckpt)
    b = module.session()
    b.load_checkpoint(ckpt)
    assert b.step_count == 3
    assert a.train_step(x, labels) == b.train_step(x, labels)
    b.set_parameter("b", np.zeros(5, np.float32))
    np.testing.assert_array_equal(b.parameters()["b"], np.zeros(5))
    with pytest.raises(tfm.InvalidArgument):
        b.set_parameter("b", np.zeros(4, np.float32))


def expected_generations():
    with open(os.path.join(SOURCE, "test", "models", "generation", "gpt",
                           "expected.txt")) as f:
        for line in f:
            if line.startswith("greedy "):
                _, prompt, tokens = line.split()
                yield [int(t) for t in prompt.split(",")], [
                    int(t) for t in tokens.split(",")]


def test_greedy_generation_equals_pytorch_streamed_or_not():
    module = tfm.load(built(os.path.join(UNITTESTS, "generation_gpt.so")))
    session = module.session()
    cases = list(expected_generations())
    assert cases
    for prompt, want in cases:
        got = session.generate(prompt, max_new_tokens=len(want))
        assert got.tokens == want
        streamed = [step[0] for step in
                    session.generate(prompt, max_new_tokens=len(want),
                                     stream=True)]
        assert streamed == want


def test_a_stream_closed_early_stops_the_generation():
    session = tfm.load(built(os.path.join(UNITTESTS,
                                          "generation_gpt.so"))).session()
    stream = session.generate([5, 17, 3], max_new_tokens=12, stream=True)
    first = [next(stream), next(stream)]
    stream.close()
    assert len(first) == 2
    # The session is free again.
    assert len(session.generate([5, 17, 3], max_new_tokens=4).tokens) == 4


def test_sampling_is_reproducible_and_beam_search_runs():
    session = tfm.load(built(os.path.join(UNITTESTS,
                                          "generation_gpt.so"))).session()
    a = session.generate([5, 17], max_new_tokens=8, temperature=0.8, top_k=5,
                         seed=7)
    b = session.generate([5, 17], max_new_tokens=8, temperature=0.8, top_k=5,
                         seed=7)
    assert a.tokens == b.tokens
    beams = session.generate([5, 17], max_new_tokens=6, beam=3)
    assert len(beams.sequences) == 3 and beams.scores[0] >= beams.scores[-1]
    with pytest.raises(tfm.InvalidArgument):
        session.generate([5, 17], beam=2, temperature=0.5)
    with pytest.raises(tfm.InvalidArgument):
        session.generate([], max_new_tokens=4)


DATA_PARALLEL_RANK = """
import json, sys
import numpy as np
import tfm
from conftest import read_pb
gpt, options, ckpt = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
world = tfm.mpi_communicator()
session = tfm.compile(gpt + "/model.onnx", train=options).session(threads=1)
x = read_pb(gpt + "/data/input_0.pb")
labels = read_pb(gpt + "/data/labels.pb")
# This rank's row of the batch, the other row a copy whose labels the loss
# skips (what tfmc train's sharding does).
mine = np.repeat(x[world.rank:world.rank + 1], 2, axis=0)
kept = np.full_like(labels, -100)
kept[0] = labels[world.rank]
losses = [session.train_step(mine, kept, communicator=world) for _ in range(5)]
session.compare_parameters()
# Every rank takes part (sharded moments come whole); rank 0 writes.
session.save_checkpoint(ckpt if world.rank == 0 else None)
if world.rank == 0:
    print(json.dumps({"size": world.size, "losses": losses}))
"""


@pytest.mark.parametrize("sharded", [False, True])
def test_data_parallel_ranks_step_as_one_process(tmp_path, sharded):
    # Two processes under mpirun, each on one row of the batch, against this
    # process on both rows; with sharded Adam moments too. Their checkpoint
    # resumes here, unsharded, with this process's sixth step.
    options = {"optimizer": "adam", "lr": 0.002, "label_smoothing": 0.1}
    model = tfm.compile(os.path.join(GPT, "model.onnx"), train=options)
    session = model.session()
    x = read_pb(os.path.join(GPT, "data", "input_0.pb"))
    labels = read_pb(os.path.join(GPT, "data", "labels.pb"))
    alone = [session.train_step(x, labels) for _ in range(6)]
    ckpt = tmp_path / "ranks.ckpt"
    if sharded:
        options = dict(options, shard_optimizer=True)

    script = tmp_path / "rank.py"
    script.write_text(DATA_PARALLEL_RANK)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none",
               PYTHONPATH=os.pathsep.join(
                   [os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")]))
    import sys
    r = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", sys.executable,
                        str(script), GPT, json.dumps(options), str(ckpt)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["size"] == 2
    np.testing.assert_allclose(result["losses"], alone[:5], rtol=1e-5)
    resumed = model.session()
    resumed.load_checkpoint(ckpt)
    np.testing.assert_allclose(resumed.train_step(x, labels), alone[5], rtol=1e-5)
