"""ImageFolder JPEGs through NVIDIA DALI (``input_path: dali``), the input path of NVIDIA's own ResNet-50 training.

On a GPU, DALI's ``mixed`` decoder decodes only each image's random crop (nvJPEG, on the GPU's hardware JPEG
decoder where it has one: A100, H100), then resizes, flips and normalises on the GPU and hands the trainer
float32 batches already on the device, in NHWC (channels_last) or NCHW. Host cores only read the files and
finish the Huffman stage of the images the hardware decoder does not take. Without a GPU the same graph runs
on DALI's CPU threads (the tests, and a local run that asks for it).

The augmentation is the Pillow path's (``data.ImageFolderImages``): RandomResizedCrop (area 0.08-1, aspect
3/4-4/3) to ``image_size``, a horizontal flip with probability 1/2, ImageNet's mean and std. The samples, their
classes and each step's file list are the Pillow path's too: step ``n`` after the start position reads the
same shuffled slice (``data.nth_slice``), so a run resumed with another world size continues in place.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any, NamedTuple

from core.catalog.pins import dali_pin
from workloads.train.common.data import IMAGENET_MEAN, IMAGENET_STD, Position, epoch_order, nth_slice, rank_indices
from workloads.train.common.parent_death import follow_parent

# nvJPEG's buffers sized once for full-size ImageNet images, so they never grow mid-run (NVIDIA's DALI
# ResNet-50 example, docs/examples/use_cases/pytorch/resnet50); the share of each batch given to the
# hardware decoder, the rest decoded by CUDA with host threads (the example's value for A100-class GPUs).
DEVICE_MEMORY_PADDING = 211_025_920
HOST_MEMORY_PADDING = 140_544_512
HW_DECODER_LOAD = 0.65


def available() -> str | None:
    """None where DALI and its PyTorch plugin import, else why not (one line, naming the wheel for this torch's
    CUDA, for the trainer's error)."""
    try:
        import nvidia.dali  # noqa: F401
        import nvidia.dali.plugin.pytorch  # noqa: F401
    except ImportError as e:
        import torch

        wheel = dali_pin(torch.version.cuda or "13.0")  # a CPU-only torch: the pinned image's
        return f"input_path: dali needs NVIDIA DALI (pip install {wheel}), which does not import here: {e}"
    return None


class FileList(NamedTuple):
    """An ImageFolder's samples as DALI's readers get them: ``root`` as bytes, each path relative to it as bytes,
    each label as int32 (ImageNet's 1.28 M samples as Python tuples would be ~200 MB in every reader process)."""
    root: bytes
    paths: Any
    labels: Any

    @classmethod
    def of(cls, root: Path, samples: list[tuple[str, int]]) -> FileList:
        """``samples`` as ImageFolder lists them under ``root`` (with ``~`` expanded, as ImageFolder does)."""
        import numpy as np

        prefix = os.path.join(str(Path(root).expanduser()), "")
        if not all(path.startswith(prefix) for path, _ in samples):
            raise ValueError(f"a sample outside {prefix}")
        return cls(os.fsencode(prefix), np.array([os.fsencode(path[len(prefix):]) for path, _ in samples]),
                   np.array([label for _, label in samples], dtype=np.int32))


class FolderBatches:
    """DALI's external source for one rank: step ``info.iteration`` -> (the JPEG files' bytes, their labels).

    Picklable and stateless but for a cached epoch order, so DALI's worker processes can each serve any step.
    The file list (``FileList``) travels to each worker as two arrays.
    Unpickled in a worker process, it ties that process to the training process: DALI's workers do not exit
    when their parent is killed (``kill -9``, the OOM killer), so the kernel's parent-death signal does it.
    """

    def __init__(self, files: FileList, *, start: Position, global_batch: int, rank: int, batch: int, seed: int):
        self.root, self.paths, self.labels = files
        self.start, self.gb, self.rank, self.batch, self.seed = start, global_batch, rank, batch, seed
        self._order: tuple[int, Any] = (-1, None)
        self._parent = os.getpid()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if os.getpid() != self._parent:  # in a reader process
            follow_parent(signal.SIGKILL, self._parent)

    def indices(self, n: int) -> list[int]:
        at = nth_slice(len(self.labels), self.start, self.gb, n)
        if self._order[0] != at.epoch:
            self._order = (at.epoch, epoch_order(len(self.labels), at.epoch, self.seed))
        return rank_indices(self._order[1], at, self.rank, self.batch)

    def __call__(self, info: Any) -> tuple[list[Any], Any]:
        import numpy as np

        picked = self.indices(info.iteration)
        return ([np.fromfile(os.path.join(self.root, self.paths[i]), dtype=np.uint8) for i in picked],
                self.labels[picked].astype(np.int64))


# A JPEG's bytes, for the readers' shared memory: ImageNet's average is ~110 kB; a larger one grows it once.
JPEG_BYTES_HINT = 150_000


def _graph(source: FolderBatches, *, image_size: int, gpu: bool, channels_last: bool, readers: int) -> Any:
    """The pipeline's operators (called inside ``pipeline_def``). With ``readers`` processes, as many batches are
    read ahead: each batch goes whole to one reader, and DALI's default of one in flight left the others idle."""
    from nvidia.dali import fn, types

    parallel = {"parallel": True, "prefetch_queue_depth": max(2, readers),
                "bytes_per_sample_hint": JPEG_BYTES_HINT} if readers else {}
    jpegs, labels = fn.external_source(source=source, num_outputs=2, batch=True, batch_info=True,
                                       dtype=[types.UINT8, types.INT64], **parallel)
    decoder = {"device": "mixed", "device_memory_padding": DEVICE_MEMORY_PADDING,
               "host_memory_padding": HOST_MEMORY_PADDING, "hw_decoder_load": HW_DECODER_LOAD} if gpu else \
        {"device": "cpu"}
    images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB, random_area=[0.08, 1.0],
                                           random_aspect_ratio=[3 / 4, 4 / 3], num_attempts=10, **decoder)
    images = fn.resize(images, resize_x=image_size, resize_y=image_size, antialias=True)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="HWC" if channels_last else "CHW",
                                      mean=[m * 255 for m in IMAGENET_MEAN], std=[s * 255 for s in IMAGENET_STD],
                                      mirror=fn.random.coin_flip(probability=0.5))
    return images, (labels.gpu() if gpu else labels)


def reader_processes(workers: int) -> int:
    """Of a rank's ``workers`` host cores, the processes that read files (the rest are DALI's threads); 0: read on
    the training thread. Reading is cheap next to decoding: a quarter, at most 4."""
    return 0 if workers <= 0 else min(4, max(1, workers // 4))


class DaliImages:
    """``<data-dir>/<dataset>/train/<class>/*.JPEG`` decoded and augmented by DALI; the trainer's data source
    (``.size``, ``.num_classes``, ``reseed``, ``start``, ``batch``, ``close``), like ``data.ImageFolderImages``."""

    def __init__(self, root: Path, *, image_size: int, device: Any, channels_last: bool, workers: int):
        import torchvision

        why = available()
        if why:
            raise RuntimeError(why)
        folder = torchvision.datasets.ImageFolder(str(root))  # lists the files and classes; opens none
        self.files = FileList.of(root, folder.samples)
        self.size, self.num_classes = len(folder), len(folder.classes)
        self.image_size, self.device, self.channels_last, self.workers = image_size, device, channels_last, workers
        self._seed = 0
        self._pipe: Any = None
        self._it: Any = None

    def reseed(self, value: int) -> None:
        self._seed = value % 2**31

    def start(self, pos: Position, *, global_batch: int, rank: int, batch: int, seed: int) -> None:
        from nvidia.dali import pipeline_def
        from nvidia.dali.plugin.pytorch import DALIGenericIterator

        self.close()
        gpu = self.device.type == "cuda"
        readers = reader_processes(self.workers)
        source = FolderBatches(self.files, start=pos, global_batch=global_batch, rank=rank, batch=batch, seed=seed)
        # spawn, not fork: the training process already holds a CUDA context, which a forked child cannot use
        extra = {"py_num_workers": readers, "py_start_method": "spawn"} if readers else {}
        graph = pipeline_def(_graph, enable_conditionals=False)
        self._pipe = graph(source, image_size=self.image_size, gpu=gpu, channels_last=self.channels_last,
                           readers=readers, batch_size=batch, num_threads=max(1, self.workers - readers),
                           device_id=(self.device.index or 0) if gpu else None, seed=self._seed,
                           prefetch_queue_depth=2, **extra)
        self._pipe.build()
        self._it = DALIGenericIterator([self._pipe], ["x", "y"])

    def batch(self, start: Position) -> tuple[Any, Any]:
        out = next(self._it)[0]
        x = out["x"].permute(0, 3, 1, 2) if self.channels_last else out["x"]  # NHWC memory, NCHW shape
        return x, out["y"].view(-1)

    def close(self) -> None:
        """Stop the pipeline and its reader processes now, rather than whenever the garbage collector gets to
        them: DALI's own clean exit (``Pipeline.__del__``) and its worker pool's ``close``."""
        self._it = None
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            pipe._shutdown()
            if pipe._py_pool is not None:
                pipe._py_pool.close()
