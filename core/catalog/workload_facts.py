"""Each workload's plain facts, one entry per workload: its input size, the datasets its data path
reads, whether it evaluates, its learning-rate rule and the model it names in a summary.

The code that trains it (model, data source, loss) is the matching entry of
``workloads.train.pytorch.registry``; adding a workload is one entry here and one there. Everything that
branches on a workload (the shape check's choices, ``workloads.framework_support``, the trainer, its
schedule, the launcher's summary) asks these entries instead.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkloadFacts:
    image_size: int  # the cluster's input size (the local run scales it down)
    datasets: tuple[str, ...]  # what its data path reads; the first is the example an error gives
    model: str  # what the summary says was trained
    classifier: bool = True  # an image classifier: cross-entropy, a fixed input shape, FLOPs counted
    evaluates: bool = False  # test accuracy each epoch, and an evaluation Job where asked
    flops_image_size: int | None = None  # the input size its FLOPs are counted at (None: --image-size)
    # its data comes at image_size whatever --image-size says (CIFAR-10's 32 x 32 batches): every framework's
    # model is built for that size (input_size)
    own_image_size: bool = False
    # The linear scaling rule: lr = base_lr x global batch / lr_batch (unless --lr is given) ...
    base_lr: float = 0.1
    lr_batch: int = 256
    # ... with a linear warm-up from warmup_factor x lr over the first warmup_steps steps (0: none) ...
    warmup_steps: int = 0
    warmup_factor: float = 1.0
    # ... or, for a classifier without its own warm-up, the large-batch one (workloads.train.common.schedule:
    # Goyal et al. 2017), whose length is epochs of the dataset: this many samples where the data has
    # no size of its own (synthetic tensors stand in for this dataset's epoch).
    epoch_samples: int | None = None
    # Not a model at all: times a collective (workloads.train.pytorch.registry gives it its own loop). No
    # samples/s, loss or FLOPs; --steps and --warmup-steps count iterations per message size.
    collective: bool = False
    # Its data is a small in-memory tensor set (CIFAR-10's batches), cropped and flipped on the training thread.
    in_memory_data: bool = False
    # It reads ImageFolder JPEGs where its dataset is not synthetic, so input_path (Pillow, nvJPEG, DALI) applies to it.
    image_folder: bool = False
    # What one sample is, as messages and the report name it: an image, or a language model's sequence of tokens
    sample: str = "image"
    # Gradients clipped to this total norm before each step (None: not clipped)
    max_grad_norm: float | None = None
    # A language model (core.catalog.llm): its samples are sequences of --seq-len tokens, its FLOPs are counted per
    # token from its shape, and its figures are tokens/s, MFU, a validation loss and the cost of a billion tokens.
    language_model: bool = False


WORKLOADS: dict[str, WorkloadFacts] = {
    "resnet50": WorkloadFacts(
        image_size=224, datasets=("synthetic", "synthetic-imagefolder", "tiny-imagenet-200", "imagenet"),
        epoch_samples=1_281_167,  # ImageNet-1k's training set
        image_folder=True,
        model="torchvision ResNet-50 v1.5 (torchvision.models.resnet50)"),
    # cifar10 always reads the CIFAR batches, at their own 32 x 32.
    "cifar10": WorkloadFacts(
        image_size=32, datasets=("cifar10",), evaluates=True, flops_image_size=32, epoch_samples=50_000,
        own_image_size=True, in_memory_data=True,
        model="ResNet-18-style CIFAR-10 network (workloads/train/pytorch/models.py cifar_resnet)"),
    # Mask R-CNN: 0.02 per 16 images and torchvision's references/detection warm-up
    # (warmup_iters = min(1000, len(loader) - 1), warmup_factor = 1/1000).
    "maskrcnn": WorkloadFacts(
        image_size=800, datasets=("coco2017", "synthetic"), classifier=False, base_lr=0.02, lr_batch=16,
        warmup_steps=1000, warmup_factor=1.0 / 1000,
        model="torchvision Mask R-CNN (maskrcnn_resnet50_fpn, min_size 800, max_size 1333): not TensorPack's "
              "Mask R-CNN, so compare with TensorPack figures only knowing the two implementations differ"),
    # nccl-tests' all_reduce_perf in torch.distributed: sum of float32, in place, 8 B doubling up to
    # --max-bytes. It reads no data ("synthetic": buffers it fills itself) and has no images.
    "allreduce": WorkloadFacts(
        image_size=1, datasets=("synthetic",), classifier=False, collective=True,
        model="torch.distributed all_reduce (sum, float32, in place), message sizes 8 B to --max-bytes"),
    # Llama 3 pretraining (core.catalog.llm's shapes; workloads.train.pytorch.llama): synthetic tokens, the shipped
    # byte-level text, or a pre-tokenized web corpus. TorchTitan's 8B recipe (torchtitan/models/llama3/train_configs/
    # llama3_8b.toml): AdamW at 3e-4 whatever the batch (a language model's rate does not follow the linear scaling
    # rule), a linear warm-up over 200 steps from about 1/201 of it, gradients clipped to norm 1.0. No image size.
    "llama3": WorkloadFacts(
        image_size=1, datasets=("synthetic", "text-bytes", "fineweb-edu-10bt-sample"), classifier=False, base_lr=3e-4,
        lr_batch=0, warmup_steps=200, warmup_factor=0.005, max_grad_norm=1.0, sample="sequence", language_model=True,
        model="Llama 3 (core/catalog/llm.py shapes, torch-native; workloads/train/pytorch/llama.py)"),
}


def input_size(workload: str, image_size: int) -> int:
    """The side of the images ``workload``'s model is built for: its data's own (CIFAR-10: 32), else ``image_size``
    (--image-size; a stack's ``local:`` section sets one for every experiment)."""
    facts = WORKLOADS[workload]
    return facts.image_size if facts.own_image_size else image_size
