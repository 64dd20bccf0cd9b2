"""Real data paths of the training script: ImageFolder JPEGs, CIFAR batches by epochs with time to accuracy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.image_folder import write_image_folder
from tests.workloads.conftest import child_env, run_training
from workloads.train.common.cifar import read_split, write_standin
from workloads.train.common.dali_input import FolderBatches
from workloads.train.common.metrics import read_jsonl, read_rank_metrics
from workloads.train.harness.collect import collect_metrics


def train(*args: str) -> subprocess.CompletedProcess:
    return run_training([sys.executable, "-m", "workloads.train.pytorch", "--precision=fp32", "--warmup-steps=1",
                         "--log-every=1", *args], env=child_env(2))


def test_standin_has_torchvision_cifar_layout(tmp_path):
    d = write_standin(tmp_path, train=23, test=7)
    assert d == tmp_path / "cifar10" / "cifar-10-batches-py"
    assert sorted(p.name for p in d.iterdir()) == ["batches.meta", "data_batch_1", "data_batch_2", "data_batch_3",
                                                   "data_batch_4", "data_batch_5", "test_batch"]
    x, y, classes = read_split(tmp_path, train=True)
    assert tuple(x.shape) == (23, 3, 32, 32) and len(y) == 23 and classes[0] == "airplane"
    assert read_split(tmp_path, train=False)[0].shape[0] == 7


@pytest.mark.local_run
def test_resnet50_trains_on_an_image_folder(tmp_path):
    write_image_folder(tmp_path / "data")  # 2 classes x 4 images
    done = train("--workload=resnet50", "--dataset=tiny", f"--data-dir={tmp_path / 'data'}", "--batch-size=4",
                 "--steps=3", "--image-size=32", "--width-per-group=4", "--workers=1",
                 f"--results-dir={tmp_path / 'r'}")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = read_rank_metrics(tmp_path / "r")[0]
    assert [r["step"] for r in lines] == [1, 2, 3]
    assert [r["epoch"] for r in lines] == [0, 0, 1]  # 8 images, batch 4


@pytest.mark.local_run
def test_cifar10_by_epochs_tracks_accuracy_and_time_to_target(tmp_path):
    write_standin(tmp_path / "data", train=64, test=40)
    done = train("--workload=cifar10", "--dataset=cifar10", f"--data-dir={tmp_path / 'data'}", "--batch-size=16",
                 "--epochs=2", "--steps=1", "--width-per-group=4", "--target-accuracy=0.0",
                 "--checkpoint-every=0", f"--results-dir={tmp_path / 'r'}")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = read_rank_metrics(tmp_path / "r")[0]
    assert [r["step"] for r in lines] == list(range(1, 9))  # 2 epochs x 64/16 steps; --steps ignored
    evals = read_jsonl(tmp_path / "r" / "metrics" / "eval.jsonl")
    assert [(e["step"], e["epoch"]) for e in evals] == [(4, 0), (8, 1)]
    figures = collect_metrics(tmp_path / "r", 0.0)
    assert figures["accuracy"]["time_to_accuracy_s"] == evals[0]["elapsed_s"]
    assert figures["accuracy"]["time_to_accuracy_epoch"] == 0


@pytest.mark.parametrize("gpu_decode", [False, True], ids=["pillow-workers", "nvjpeg-decode_jpeg"])
def test_image_folder_hands_uint8_to_the_device_and_normalises_there(tmp_path, monkeypatch, gpu_decode):
    import numpy as np
    import torch
    from PIL import Image

    from workloads.train.common import data

    rng = np.random.default_rng(0)
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        for i in range(3):
            Image.fromarray(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)).save(tmp_path / cls / f"{i}.JPEG")
    seen = []
    real = data.normalize_on_device

    def spy(x, **kw):
        seen.append(x.dtype)
        return real(x, **kw)

    monkeypatch.setattr(data, "normalize_on_device", spy)
    src = data.ImageFolderImages(tmp_path, image_size=32, device=torch.device("cpu"), channels_last=True, workers=0,
                                 gpu_decode=gpu_decode)
    src.start(data.Position(), global_batch=4, rank=0, batch=4, seed=0)
    x, y = src.batch(data.Position())
    src.close()
    assert seen and all(d == torch.uint8 for d in seen)  # the loader's batches are uint8
    assert x.dtype == torch.float32 and tuple(x.shape) == (4, 3, 32, 32)
    assert x.is_contiguous(memory_format=torch.channels_last) and y.dtype == torch.int64
    assert -2.2 < float(x.min()) and float(x.max()) < 2.7  # ImageNet mean/std normalisation of 0..255


@pytest.mark.local_run
def test_resnet50_trains_on_an_image_folder_through_dali(tmp_path):
    write_image_folder(tmp_path / "data")
    done = train("--workload=resnet50", "--dataset=tiny", f"--data-dir={tmp_path / 'data'}", "--batch-size=4",
                 "--steps=3", "--image-size=32", "--width-per-group=4", "--workers=4", "--input-path=dali",
                 f"--results-dir={tmp_path / 'r'}")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = read_rank_metrics(tmp_path / "r")[0]
    assert [(r["step"], r["epoch"]) for r in lines] == [(1, 0), (2, 0), (3, 1)]
    assert all(r["loss"] == r["loss"] for r in lines)  # finite: the batches are normalised images


@pytest.mark.parametrize("workers", [0, 4], ids=["training-thread", "reader-process"])
def test_dali_reads_the_pillow_paths_samples_in_its_order_and_normalises_on_the_device(tmp_path, workers):
    """Step n after a start position reads the same files as the Pillow path, across an epoch's end and from a
    resumed position; batches come out normalised float32 in channels_last; close() stops the reader processes."""
    import multiprocessing

    import torch

    from workloads.train.common import data
    from workloads.train.common.dali_input import DaliImages

    root = write_image_folder(tmp_path, per_class=5) / "tiny" / "train"  # 10 images, 2 steps of 4 per epoch
    cpu = torch.device("cpu")
    dali = DaliImages(root, image_size=24, device=cpu, channels_last=True, workers=workers)
    pillow = data.ImageFolderImages(root, image_size=24, device=cpu, channels_last=True, workers=0)
    assert (dali.size, dali.num_classes) == (pillow.size, pillow.num_classes) == (10, 2)
    start = data.Position(epoch=1, offset=4)  # a run resumed mid-epoch, rank 1 of 2
    for src in (dali, pillow):
        src.reseed(5)
        src.start(start, global_batch=4, rank=1, batch=2, seed=3)
    got = [dali.batch(start) for _ in range(5)]
    assert [y.tolist() for _, y in got] == [pillow.batch(start)[1].tolist() for _ in range(5)]
    x = got[0][0]
    assert x.dtype == torch.float32 and tuple(x.shape) == (2, 3, 24, 24)
    assert x.is_contiguous(memory_format=torch.channels_last)
    assert -2.2 < float(x.min()) and float(x.max()) < 2.7 and float(x.std()) > 0.3  # ImageNet mean/std of 0..255
    assert bool((multiprocessing.active_children() != []) == (workers > 0))
    dali.close()
    pillow.close()
    assert multiprocessing.active_children() == []


class SlowFolderBatches(FolderBatches):
    """A DALI source whose every batch takes 0.3 s to read (a slow file system), to time the readers' overlap."""

    def __call__(self, info):
        import time

        time.sleep(0.3)
        return super().__call__(info)


def test_dali_reads_ahead_with_every_reader_process(tmp_path, monkeypatch):
    """Each batch goes whole to one reader process; with DALI's default of one batch in flight the other readers sat
    idle, so 8 batches of a 0.3 s read took 2.4 s however many readers there were. Now they overlap."""
    import time

    import torch

    from workloads.train.common import dali_input
    from workloads.train.common.data import Position

    monkeypatch.setattr(dali_input, "FolderBatches", SlowFolderBatches)
    src = dali_input.DaliImages(write_image_folder(tmp_path) / "tiny" / "train", image_size=16,
                                device=torch.device("cpu"), channels_last=False, workers=16)  # 4 readers
    src.start(Position(), global_batch=2, rank=0, batch=2, seed=0)
    try:
        src.batch(Position())  # the readers' start-up: not timed
        t0 = time.perf_counter()
        for _ in range(8):
            src.batch(Position())
        took = time.perf_counter() - t0
    finally:
        src.close()
    assert took < 1.6, f"8 batches of a 0.3 s read took {took:.2f} s with 4 reader processes"


DALI_READERS = """
import multiprocessing, sys, time, torch
from workloads.train.common.dali_input import DaliImages
from workloads.train.common.data import Position
if __name__ == "__main__":
    src = DaliImages(sys.argv[1], image_size=24, device=torch.device("cpu"), channels_last=True, workers=8)
    src.start(Position(), global_batch=4, rank=0, batch=4, seed=0)
    src.batch(Position())
    print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
    time.sleep(600)
"""


def test_dali_reader_processes_die_with_a_killed_trainer(tmp_path):
    """Nothing we start outlives us: DALI's reader processes do not exit when their parent is killed with
    SIGKILL (they lingered), so each follows its parent with the kernel's parent-death signal."""
    import os
    import signal
    import time

    root = write_image_folder(tmp_path) / "tiny" / "train"
    (tmp_path / "readers.py").write_text(DALI_READERS)
    proc = subprocess.Popen([sys.executable, str(tmp_path / "readers.py"), str(root)], stdout=subprocess.PIPE,
                            text=True, env=child_env(1))
    try:
        readers = [int(p) for p in proc.stdout.readline().split()]
        assert len(readers) == 2, readers  # reader_processes(8)
    finally:
        proc.kill()
        proc.wait()

    def alive(pid):
        try:
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"
    deadline = time.monotonic() + 15
    while any(alive(p) for p in readers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in readers if alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"DALI reader processes {left} outlived their killed parent"


def test_without_dali_the_dali_path_fails_at_once_saying_how_to_get_it(tmp_path, monkeypatch):
    import torch

    from workloads.train.common.dali_input import DaliImages

    monkeypatch.setitem(sys.modules, "nvidia.dali", None)  # what an image without DALI gives
    wheel = f"nvidia-dali-cuda{(torch.version.cuda or '13.0').split('.')[0]}0==2.4.0"  # for this torch's CUDA
    with pytest.raises(RuntimeError, match=rf"input_path: dali needs NVIDIA DALI \(pip install {wheel}\)"):
        DaliImages(write_image_folder(tmp_path) / "tiny" / "train", image_size=24, device=torch.device("cpu"),
                   channels_last=True, workers=0)


def test_a_run_that_stops_stepping_fails_naming_where_it_stood(tmp_path):
    cmd = [sys.executable, "-c", "import time; time.sleep(60)", f"--results-dir={tmp_path}"]
    with pytest.raises(AssertionError, match="no new metrics line for 1s"):
        run_training(cmd, env=child_env(1), startup_s=1)


def old_imagenet_normalize(x, *, channels_last):
    """normalize_on_device as it was, building its mean and std on the device for every batch."""
    import torch

    from workloads.train.common.data import IMAGENET_MEAN, IMAGENET_STD

    mean = torch.tensor(IMAGENET_MEAN, device=x.device).view(1, 3, 1, 1) * 255
    std = torch.tensor(IMAGENET_STD, device=x.device).view(1, 3, 1, 1) * 255
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    return ((x.float() - mean) / std).contiguous(memory_format=fmt)


def old_cifar_normalize(x):
    import torch

    from workloads.train.common.cifar import MEAN, STD

    mean, std = torch.tensor(MEAN).view(1, 3, 1, 1), torch.tensor(STD).view(1, 3, 1, 1)
    return (x.float() / 255.0 - mean) / std


def count_tensor_constructions(monkeypatch) -> list:
    import torch

    made, real = [], torch.tensor

    def counted(*a, **k):
        made.append(a[0] if a else None)
        return real(*a, **k)
    monkeypatch.setattr(torch, "tensor", counted)
    return made


def test_the_normalisations_make_their_mean_and_std_once_per_device_and_give_the_same_bits(monkeypatch):
    """Made per batch on a GPU, each mean/std was a blocking copy from pageable memory: a host sync per batch."""
    import torch

    from workloads.train.common import cifar, data

    g = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, 256, (4, 3, 8, 8), dtype=torch.uint8, generator=g) for _ in range(3)]
    expected = [(old_imagenet_normalize(x, channels_last=True), old_cifar_normalize(x)) for x in batches]
    data.channel_stats.cache_clear()
    made = count_tensor_constructions(monkeypatch)
    for x, (imagenet, cifar10) in zip(batches, expected):
        a, b = data.normalize_on_device(x, channels_last=True), cifar.normalize(x)
        assert torch.equal(a, imagenet) and a.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(b, cifar10)
    assert len(made) == 4  # mean and std, ImageNet's and CIFAR's, once each for the three batches


def test_cifar_batches_are_the_same_bits_and_pinned_only_for_a_gpu(tmp_path, monkeypatch):
    import torch

    from workloads.train.common.cifar import CifarImages, augment, write_standin
    from workloads.train.common.data import Position, epoch_order, rank_indices

    write_standin(tmp_path, train=32, test=4)
    src = CifarImages(tmp_path, device=torch.device("cpu"), channels_last=True, seed=3, rank=1, batch=4)
    assert src.pin is False  # page-locked memory needs a GPU; a CPU run allocates as before
    src.reseed(7)
    x, y = src.batch(Position(0, 8))
    # as it was: index, augment, normalise
    idx = rank_indices(epoch_order(32, 0, 3), Position(0, 8), 1, 4)
    old_x = old_cifar_normalize(augment(src.x[idx], torch.Generator().manual_seed(7)))
    assert torch.equal(x, old_x.contiguous(memory_format=torch.channels_last)) and torch.equal(y, src.y[idx])
    assert x.is_contiguous(memory_format=torch.channels_last) and y.dtype == torch.int64


def test_dali_reads_a_data_root_given_under_the_home_folder(tmp_path, monkeypatch):
    """ImageFolder expands ``~`` when it lists the files; the readers join the same root back to each name."""
    import torch

    from workloads.train.common.dali_input import DaliImages
    from workloads.train.common.data import Position

    write_image_folder(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    src = DaliImages(Path("~/tiny/train"), image_size=16, device=torch.device("cpu"), channels_last=False, workers=0)
    src.start(Position(), global_batch=4, rank=0, batch=4, seed=0)
    try:
        x, y = src.batch(Position())
    finally:
        src.close()
    assert tuple(x.shape) == (4, 3, 16, 16) and len(y) == 4


def test_the_trainer_closes_its_data_source_on_the_way_out():
    """DALI's pipeline and reader processes (and the loader's workers) stop when the run closes, before the process
    group goes, not in the interpreter's teardown."""
    import types

    from workloads.train.pytorch.trainer import Run

    closed = []
    run = Run.__new__(Run)  # no device or process group: only what close() touches
    run.source = types.SimpleNamespace(close=lambda: closed.append("source"))
    run.writer = types.SimpleNamespace(close=lambda: closed.append("writer"))
    run.distributed = False
    run.close()
    assert closed == ["source", "writer"]
    bare = Run.__new__(Run)  # a run that stopped before its source was built
    bare.writer, bare.distributed = types.SimpleNamespace(close=lambda: None), False
    bare.close()

    def broken():
        raise RuntimeError("the reader pool would not stop")
    run.source = types.SimpleNamespace(close=broken)
    closed.clear()
    with pytest.raises(RuntimeError, match="would not stop"):
        run.close()
    assert closed == ["writer"]  # the checkpoint writer still finishes
