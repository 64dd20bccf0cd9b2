"""Each workload's training code, keyed by workload name: its data source, model and loss, and its
per-epoch evaluation where it has one; or, for a workload that trains no model (the all-reduce
benchmark), its own ``run`` loop in place of the training loop. The plain facts (input size, datasets, learning-rate rule,
whether it evaluates) are the same name's entry in ``core.catalog.workload_facts``; adding a workload is
one entry in each. ``workloads.train.pytorch.trainer.Run`` asks these entries instead of branching on the
workload's name. torch, torchvision and the data modules are imported inside the builders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from core.contract.train_args import TrainArgs


@dataclass(frozen=True)
class Built:
    """What a workload's builder gives the trainer (the source is built first, then the model)."""
    source: Any  # .batch(position), .size, and optionally .start(...) and .reseed(seed)
    model: Any
    loss_fn: Callable[[Any, Any, Any], Any]  # (model, inputs, targets) -> scalar loss
    num_classes: int | None = None  # recorded in checkpoints (the evaluation rebuilds the model from it)
    note: str | None = None  # said once at start-up, e.g. where the weights came from


# (args, device, rank, channels_last) -> Built
Builder = Callable[[TrainArgs, Any, int, bool], Built]


# (num_classes, width_per_group) -> an untrained classifier
Model = Callable[[int, int], Any]


@dataclass(frozen=True)
class WorkloadCode:
    build: Builder | None = None  # a model trained by workloads.train.pytorch.trainer.Run.train
    # ... or its own loop: (the trainer's Run, process group up) -> steps done; build is then None
    run: Callable[[Any], int] | None = None
    # (model, data_dir, *, device, autocast[, batch]) -> {"accuracy": ..., ...}; with spec's ``evaluates``
    evaluate: Callable[..., dict[str, Any]] | None = None
    # a classifier's model alone: the evaluation rebuilds it to load a checkpoint into
    model: Model | None = None
    # ... or a language model's parts (args, *, rank, world, local_world, precision) -> a
    # workloads.train.pytorch.language_model.LanguageModel: it builds, parallelises, counts and validates itself
    language_model: Callable[..., Any] | None = None


def image_folder_source(root: Any, input_path: str, *, image_size: int, device: Any, channels_last: bool,
                        workers: int) -> Any:
    """The trainer's data source for an ImageFolder at ``root``, decoded as ``input_path`` says (TrainArgs'
    ``pillow``, ``nvjpeg`` or ``dali``)."""
    if input_path == "dali":
        from workloads.train.common.dali_input import DaliImages

        return DaliImages(root, image_size=image_size, device=device, channels_last=channels_last, workers=workers)
    from workloads.train.common.data import ImageFolderImages

    return ImageFolderImages(root, image_size=image_size, device=device, channels_last=channels_last,
                             workers=workers, gpu_decode=input_path == "nvjpeg")


def _resnet50_source(a: TrainArgs, device: Any, rank: int, channels_last: bool) -> tuple[Any, int]:
    """Synthetic tensors, or an ImageFolder under --data-dir (decoded as --input-path says)."""
    if a.dataset == "synthetic":
        from workloads.train.common.data import SyntheticImages

        return SyntheticImages(batch=a.batch_size, image_size=a.image_size, num_classes=1000, device=device,
                               channels_last=channels_last, seed=a.seed + rank), 1000
    from workloads.train.common.data import image_folder_root

    src = image_folder_source(image_folder_root(a.data_dir, a.dataset), a.input_path, image_size=a.image_size,
                              device=device, channels_last=channels_last, workers=a.workers)
    return src, src.num_classes


def _cifar10_source(a: TrainArgs, device: Any, rank: int, channels_last: bool) -> tuple[Any, int]:
    from workloads.train.common.cifar import CifarImages

    src = CifarImages(a.data_dir, device=device, channels_last=channels_last, seed=a.seed, rank=rank,
                      batch=a.batch_size)
    return src, len(src.classes)


def _resnet50_model(num_classes: int, width_per_group: int) -> Any:
    from workloads.train.pytorch.models import resnet50

    return resnet50(num_classes=num_classes, width_per_group=width_per_group)


def _cifar10_model(num_classes: int, width_per_group: int) -> Any:
    from workloads.train.pytorch.models import cifar_resnet

    return cifar_resnet(num_classes=num_classes, width=width_per_group)


def classifier(source: Callable[[TrainArgs, Any, int, bool], tuple[Any, int]], model: Model,
               evaluate: Callable[..., dict[str, Any]] | None = None) -> WorkloadCode:
    """An image classifier: ``model`` (workloads.train.pytorch.models) on ``source``'s images, trained with cross-entropy."""
    def build(a: TrainArgs, device: Any, rank: int, channels_last: bool) -> Built:
        import torch

        src, num_classes = source(a, device, rank, channels_last)
        ce = torch.nn.CrossEntropyLoss()
        return Built(src, model(num_classes, a.width_per_group), lambda m, x, y: ce(m(x), y), num_classes)
    return WorkloadCode(build=build, evaluate=evaluate, model=model)


def _maskrcnn(a: TrainArgs, device: Any, rank: int, channels_last: bool) -> Built:
    """torchvision's Mask R-CNN on COCO or synthetic detection data; its loss is the sum of its losses."""
    from workloads.train.pytorch.detection import detection_source
    from workloads.train.pytorch.models import build_maskrcnn

    src = detection_source(a, device=device, rank=rank)
    model, backbone = build_maskrcnn(num_classes=src.num_classes, image_size=a.image_size, data_dir=a.data_dir)
    return Built(src, model, lambda m, x, y: sum(m(x, y).values()), note=f"backbone {backbone or 'random init'}")


def _allreduce(run: Any) -> int:
    from workloads.train.pytorch.allreduce import run_allreduce

    return run_allreduce(run)


def _cifar10_accuracy(model: Any, data_dir: str, *, device: Any, autocast: Any, **kw: Any) -> dict[str, Any]:
    from workloads.train.common.cifar import accuracy

    return accuracy(model, data_dir, device=device, autocast=autocast, **kw)


def _llama3(args: TrainArgs, **where: Any) -> Any:
    from workloads.train.pytorch.language_model import LanguageModel

    return LanguageModel(args, **where)


WORKLOADS: dict[str, WorkloadCode] = {
    "resnet50": classifier(_resnet50_source, _resnet50_model),
    "cifar10": classifier(_cifar10_source, _cifar10_model, evaluate=_cifar10_accuracy),
    "maskrcnn": WorkloadCode(build=_maskrcnn),
    "allreduce": WorkloadCode(run=_allreduce),
    "llama3": WorkloadCode(language_model=_llama3),
}
