"""On a CUDA GPU, the data paths queue their copies and normalisation without a host sync per batch, and the
FLOP count runs on the meta device yet counts what a real forward and backward on the GPU count.

``torch.cuda.set_sync_debug_mode("error")`` makes every synchronising CUDA call raise: a mean/std made per
batch (a blocking copy from pageable memory) fails it, so do ``.item()`` and ``synchronize``. A copy with
``non_blocking=True`` from pageable memory is not flagged, so the pinned host batches are checked apart.
Run with ``python3 -m pytest tests/gpu -q`` on a machine with a CUDA device; elsewhere every test skips.
"""

from __future__ import annotations

import contextlib

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the GPU suite needs one")]


@contextlib.contextmanager
def no_host_sync():
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_cifar_batches_come_from_pinned_memory_with_no_host_sync(tmp_path):
    from workloads.train.common.cifar import CifarImages, write_standin
    from workloads.train.common.data import Position

    write_standin(tmp_path, train=512, test=8)
    gpu = CifarImages(tmp_path, device=torch.device("cuda", 0), channels_last=True, seed=0, rank=0, batch=64)
    cpu = CifarImages(tmp_path, device=torch.device("cpu"), channels_last=True, seed=0, rank=0, batch=64)
    gpu.reseed(1), cpu.reseed(1)
    x, y = gpu.host_batch(Position())
    assert x.is_pinned() and y.is_pinned()
    gpu.reseed(1)
    gpu.batch(Position())  # the first batch makes the device's mean and std (once)
    with no_host_sync():
        out = [gpu.batch(Position(0, 64 * k)) for k in range(1, 6)]
    torch.cuda.synchronize()
    expected = [cpu.batch(Position(0, 64 * k)) for k in range(6)][1:]
    for (gx, gy), (cx, cy) in zip(out, expected):
        torch.testing.assert_close(gx.cpu(), cx, rtol=0, atol=1e-6)
        assert torch.equal(gy.cpu(), cy) and gx.is_contiguous(memory_format=torch.channels_last)


def test_image_folder_batches_normalise_on_the_gpu_with_no_host_sync(tmp_path):
    """The Pillow path (workers decode, pinned uint8 batches, prefetched on a side stream). The nvJPEG path
    (``gpu_decode``) is left out: torchvision's GPU decode synchronises the host itself."""
    import numpy as np
    from PIL import Image

    from workloads.train.common.data import ImageFolderImages, Position, normalize_on_device

    rng = np.random.default_rng(0)
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        for i in range(16):
            Image.fromarray(rng.integers(0, 255, (64, 80, 3), dtype=np.uint8)).save(tmp_path / cls / f"{i}.JPEG")
    src = ImageFolderImages(tmp_path, image_size=32, device=torch.device("cuda", 0), channels_last=True, workers=2)
    src.start(Position(), global_batch=4, rank=0, batch=4, seed=0)
    src.batch(Position())
    u8 = torch.randint(0, 256, (4, 3, 32, 32), dtype=torch.uint8, device="cuda")
    with no_host_sync():
        for _ in range(4):
            x, y = src.batch(Position())
            normalize_on_device(u8, channels_last=True)
    src.close()
    assert x.is_cuda and x.dtype == torch.float32 and x.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("workload", ["resnet50", "cifar10"])
def test_the_meta_flop_count_is_the_gpus_own_count(workload, tmp_path, monkeypatch):
    """The issue's figure: 24.3 GFLOP a sample for ResNet-50 at 224 px, counted in 0.65 s on the meta device."""
    import copy
    import time

    from torch.utils.flop_counter import FlopCounterMode

    from core.contract.train_args import TrainArgs
    from workloads.train.common.cifar import write_standin
    from workloads.train.pytorch.trainer import Run

    monkeypatch.delenv("MASTER_ADDR", raising=False)
    write_standin(tmp_path, train=64, test=8)
    args = TrainArgs(workload=workload, dataset="cifar10" if workload == "cifar10" else "synthetic",
                     data_dir=str(tmp_path), results_dir=str(tmp_path / "r"), batch_size=8, image_size=224,
                     precision="amp-fp16", steps=1, channels_last=True)
    run = Run(args, {"rank": 0, "world_size": 1, "local_rank": 0, "restart": 0})
    try:
        run.build()
        t = time.perf_counter()
        flops, _ = run.measure_flops()
        seconds = time.perf_counter() - t
        model = copy.deepcopy(run.model).train()
        size = run.facts.flops_image_size or args.image_size
        x = torch.randn(2, 3, size, size, device="cuda").contiguous(memory_format=torch.channels_last)
        counter = FlopCounterMode(display=False)
        with counter:
            torch.nn.functional.cross_entropy(model(x), torch.zeros(2, dtype=torch.long, device="cuda")).backward()
        assert flops == counter.get_total_flops() / 2
        if workload == "resnet50":
            assert round(flops / 1e9, 1) == 24.3 and seconds < 3.0, (flops, seconds)
    finally:
        run.close()


@pytest.mark.parametrize("workers", [0, 4], ids=["training-thread", "reader-processes"])
def test_dali_decodes_on_the_gpu_the_files_the_pillow_path_reads(tmp_path, workers):
    """The GPU default for ImageFolder data: batches land on the device, normalised, channels_last, with the
    Pillow path's labels step for step (the same files), and the reader processes stop with the source."""
    pytest.importorskip("nvidia.dali", reason="DALI is not installed: pip install nvidia-dali-cuda130==2.4.0")
    import multiprocessing

    from datasets.synthetic import SyntheticSpec, generate
    from workloads.train.common.dali_input import DaliImages
    from workloads.train.common.data import ImageFolderImages, Position

    generate(SyntheticSpec(images=96, classes=4, resolution=320, val_images=0), tmp_path, workers=2)
    root, cuda = tmp_path / "train", torch.device("cuda", 0)
    dali = DaliImages(root, image_size=224, device=cuda, channels_last=True, workers=workers)
    pillow = ImageFolderImages(root, image_size=224, device=torch.device("cpu"), channels_last=True, workers=0)
    for src in (dali, pillow):
        src.reseed(1)
        src.start(Position(0, 32), global_batch=32, rank=0, batch=32, seed=0)
    first = dali.batch(Position())
    kept = first[0].clone()  # queued on torch's stream: what the first batch held when it was handed out
    got = [first] + [dali.batch(Position()) for _ in range(3)]  # across the epoch's end (96 images, 3 steps of 32)
    torch.cuda.synchronize()
    # DALI hands out its own memory (zero-copy, exec_dynamic): a batch still held must not be overwritten by the
    # batches read after it
    assert torch.equal(first[0], kept)
    assert [y.cpu().tolist() for _, y in got] == [pillow.batch(Position())[1].tolist() for _ in range(4)]
    for x, y in got:
        assert x.device == cuda and y.device == cuda and x.dtype == torch.float32 and y.dtype == torch.int64
        assert tuple(x.shape) == (32, 3, 224, 224) and x.is_contiguous(memory_format=torch.channels_last)
        assert torch.isfinite(x).all() and -2.2 < float(x.min()) and float(x.max()) < 2.7
    dali.close()
    assert multiprocessing.active_children() == []


def test_coco_batches_are_page_locked_and_scaled_on_the_device(tmp_path):
    """Mask R-CNN's COCO images cross the loader as uint8 in page-locked memory, so their copies queue without
    waiting for the GPU, and become the same [0, 1] floats on the device as on the host."""
    from tests.workloads.train.test_train_maskrcnn import write_coco
    from workloads.train.common.data import Position
    from workloads.train.pytorch.detection import CocoImages

    write_coco(tmp_path)
    gpu = CocoImages(tmp_path / "coco2017", device=torch.device("cuda", 0), workers=0)
    cpu = CocoImages(tmp_path / "coco2017", device=torch.device("cpu"), workers=0)
    for src in (gpu, cpu):
        src.start(Position(), global_batch=2, rank=0, batch=2, seed=0)
    images, targets = next(gpu._it)
    assert all(im.is_pinned() and im.dtype == torch.uint8 for im in images)
    assert all(v.is_pinned() for t in targets for v in t.values())
    gpu.start(Position(), global_batch=2, rank=0, batch=2, seed=0)
    on_device, _ = gpu.batch(Position())
    for g, c in zip(on_device, cpu.batch(Position())[0]):
        torch.testing.assert_close(g.cpu(), c, rtol=0, atol=0)


def test_gpu_decode_never_writes_memory_that_queued_kernels_still_read(tmp_path):
    """pytorch/vision#9606's pattern against the nvJPEG path's own decode (``data.decode_crop``), on the
    prefetcher's kind of side stream: fill tensors with known values, queue a long kernel then one reduction per
    tensor, free the tensors while the reductions are still queued, decode (its outputs may be given those
    blocks), and check every reduction. torchvision decodes on a pool stream that does not wait for the caller's:
    without the stream's synchronize before the decode, nvJPEG overwrites the blocks before the reductions read
    them. The decoded images are solid colours and must come out so."""
    import io

    from PIL import Image

    from workloads.train.common.data import decode_crop

    colours = [(200, 30, 60), (10, 220, 90), (40, 80, 250)]
    jpegs = []
    for c in colours:
        buf = io.BytesIO()
        Image.new("RGB", (256, 256), c).save(buf, format="JPEG", quality=95)
        jpegs.append(buf.getvalue())
    device = torch.device("cuda", 0)
    side = torch.cuda.Stream(device)
    generator = torch.Generator().manual_seed(0)
    corrupted = 0
    with torch.cuda.stream(side):
        for it in range(200):
            values = [it * 10 + k + 1 for k in range(8)]
            tensors = [torch.full((3, 256, 256), v, dtype=torch.int32, device=device) for v in values]
            torch.cuda.synchronize()
            torch.cuda._sleep(2_000_000)  # the consumer is slow: the reductions below wait behind this
            sums = [t.sum() for t in tensors]  # int64: exact
            del tensors
            images = decode_crop(jpegs * 3, image_size=64, device=device, generator=generator)
            side.synchronize()
            corrupted += sum(s.item() != v * 3 * 256 * 256 for s, v in zip(sums, values))
            means = images.float().mean(dim=(2, 3)).cpu()
            for img, c in zip(means, colours * 3):
                assert torch.allclose(img, torch.tensor(c, dtype=torch.float32), atol=6), (it, img, c)
    assert corrupted == 0, f"{corrupted} reductions read memory the decoder had overwritten"
