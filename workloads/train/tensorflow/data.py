"""The TensorFlow trainer's input pipelines (``tf.data``), one per workload, the same data as PyTorch's.

Each builder returns ``(dataset_fn, size, num_classes)``: ``dataset_fn(input_context)`` is what
``strategy.distribute_datasets_from_function`` calls once per worker (its own shard, batches of
``--batch-size`` per replica, as PyTorch's per-process batch); ``size`` is the training set's
length (None: synthetic).

- resnet50 + synthetic: one random NHWC batch, repeated (PyTorch's ``SyntheticImages``).
- resnet50 + ImageFolder (``<data-dir>/<dataset>/train/<class>/*``, ``data.image_folder_root``):
  decode, random-resized crop (area 0.08-1, aspect 3/4-4/3) and flip, ImageNet mean/std.
- cifar10: the CIFAR batches (``cifar.read_arrays``), 4-pixel padded random crop and flip, CIFAR
  mean/std.
"""

from __future__ import annotations

from typing import Any, Callable

from core.contract.train_args import TrainArgs
from workloads.train.common import cifar
from workloads.train.common.data import IMAGENET_MEAN, IMAGENET_STD, image_folder_root

# torchvision.datasets.folder.IMG_EXTENSIONS, less the formats tf.io.decode_image cannot read.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp")
SHUFFLE_BUFFER = 10_000


def _normalize(tf: Any, x: Any, mean: tuple[float, ...], std: tuple[float, ...]) -> Any:
    return (tf.cast(x, tf.float32) / 255.0 - tf.constant(mean)) / tf.constant(std)


def _pipeline(tf: Any, ds: Any, ctx: Any, a: TrainArgs, augment: Callable[[Any, Any], Any]) -> Any:
    """This worker's shard, shuffled every epoch, augmented and batched per replica."""
    ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
    ds = ds.shuffle(SHUFFLE_BUFFER, seed=a.seed, reshuffle_each_iteration=True).repeat()
    ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(a.batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def synthetic(tf: Any, a: TrainArgs) -> tuple[Callable[[Any], Any], int | None, int]:
    classes = 1000

    def fn(ctx: Any) -> Any:
        g = tf.random.Generator.from_seed(a.seed + ctx.input_pipeline_id)
        x = g.normal((a.batch_size, a.image_size, a.image_size, 3))
        y = g.uniform((a.batch_size,), 0, classes, dtype=tf.int64)
        return tf.data.Dataset.from_tensors((x, y)).repeat()
    return fn, None, classes


def image_folder(tf: Any, a: TrainArgs) -> tuple[Callable[[Any], Any], int | None, int]:
    root = image_folder_root(a.data_dir, a.dataset)
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    files = [(str(f), label) for label, c in enumerate(classes) for f in sorted((root / c).rglob("*"))
             if f.suffix.lower() in IMAGE_EXTENSIONS]
    if not files:
        raise FileNotFoundError(f"no images under {root}/<class>/ ({', '.join(IMAGE_EXTENSIONS)})")

    def augment(path: Any, label: Any) -> Any:
        image = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.shape(image), tf.zeros((0, 0, 4)), area_range=(0.08, 1.0), aspect_ratio_range=(3 / 4, 4 / 3),
            min_object_covered=0.0, use_image_if_no_bounding_boxes=True, max_attempts=10)
        image = tf.image.resize(tf.slice(image, begin, size), (a.image_size, a.image_size), antialias=True)
        return _normalize(tf, tf.image.random_flip_left_right(image), IMAGENET_MEAN, IMAGENET_STD), label

    def fn(ctx: Any) -> Any:
        paths, labels = zip(*files)
        return _pipeline(tf, tf.data.Dataset.from_tensor_slices((list(paths), list(labels))), ctx, a, augment)
    return fn, len(files), len(classes)


def cifar10(tf: Any, a: TrainArgs) -> tuple[Callable[[Any], Any], int | None, int]:
    x, y, classes = cifar.read_arrays(a.data_dir, train=True)
    x = x.transpose(0, 2, 3, 1)  # NCHW bytes -> NHWC

    def augment(image: Any, label: Any) -> Any:
        image = tf.image.random_crop(tf.pad(image, [[4, 4], [4, 4], [0, 0]]), (32, 32, 3))
        return _normalize(tf, tf.image.random_flip_left_right(image), cifar.MEAN, cifar.STD), label

    def fn(ctx: Any) -> Any:
        return _pipeline(tf, tf.data.Dataset.from_tensor_slices((x, y)), ctx, a, augment)
    return fn, len(y), len(classes)


def resnet50(tf: Any, a: TrainArgs) -> tuple[Callable[[Any], Any], int | None, int]:
    return synthetic(tf, a) if a.dataset == "synthetic" else image_folder(tf, a)


# The workloads this trainer runs (workloads.framework_support.SUPPORTED["tensorflow"]) -> input pipeline.
SOURCES: dict[str, Callable[[Any, TrainArgs], tuple[Callable[[Any], Any], int | None, int]]] = {
    "resnet50": resnet50, "cifar10": cifar10}
