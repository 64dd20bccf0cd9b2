"""Published strong-scaling figures a measured scaling sweep is read against (the report's scaling section).

Each anchor is one row of a vendor's published table, copied with its source: the throughput at one
GPU and at ``gpus`` GPUs, and the speedup the table prints. Efficiency = speedup / gpus (the
speedup of perfect scaling is the GPU count). These are 1 -> 8 GPU figures inside one machine
(NVLink), so they are what scaling looks like at its best; a sweep across nodes that reaches them
scales across the network as well as NVIDIA's did inside one box.

Source of every row: NVIDIA DeepLearningExamples, ``PyTorch/Classification/ConvNets/resnet50v1.5/
README.md``, "Training performance results" (the tables last changed in commit 5843f4e5, 2022-10-03;
read at 729963dd, 2024-04-04): "Our results were obtained by running the applicable training script
in the pytorch-21.03 NGC container", real ImageNet with DALI. Their FP32 on A100 is TF32 (Tensor
Cores), as PyTorch's fp32 convolutions are on Ampere and later (torch.backends.cudnn.allow_tf32 is
True by default: checked on torch 2.14.1), so our ``fp32`` reads against their TF32 there. No row
for bf16: the table has none. Pure data; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE = ("NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md, "
          "Training performance results (pytorch-21.03 NGC container), "
          "https://github.com/NVIDIA/DeepLearningExamples/tree/master/PyTorch/Classification/ConvNets/resnet50v1.5")


@dataclass(frozen=True)
class ScalingAnchor:
    workload: str  # core.contract.train_args.WORKLOADS
    precision: str  # our precision (core.contract.train_args.PRECISIONS) this row is read against
    gpu_model: str  # core.catalog.aws InstanceType.gpu_model
    system: str  # the machine of the table
    published_precision: str  # the table's column: TF32, FP32, mixed precision
    gpus: int  # the larger size of the table (the smaller is 1 GPU)
    images_per_s_1: float  # throughput at 1 GPU
    images_per_s: float  # throughput at ``gpus`` GPUs
    speedup: float  # "Strong Scaling" as printed
    source: str = SOURCE

    @property
    def efficiency(self) -> float:
        return self.speedup / self.gpus

    @property
    def label(self) -> str:
        return (f"NVIDIA {self.system}, {self.published_precision}: 1 -> {self.gpus} GPUs {self.speedup:g}x "
                f"({self.efficiency:.1%})")


def _rn50(precision: str, gpu_model: str, system: str, published: str, one: float, eight: float,
          speedup: float) -> ScalingAnchor:
    return ScalingAnchor("resnet50", precision, gpu_model, system, published, 8, one, eight, speedup)


ANCHORS: tuple[ScalingAnchor, ...] = (
    _rn50("fp32", "A100", "DGX A100 (8x A100 80GB)", "TF32", 938, 7248, 7.72),
    _rn50("amp-fp16", "A100", "DGX A100 (8x A100 80GB)", "mixed precision", 2470, 16621, 6.72),
    _rn50("fp32", "V100", "DGX-1 16GB (8x V100 16GB)", "FP32", 367, 2855, 7.76),
    _rn50("amp-fp16", "V100", "DGX-1 16GB (8x V100 16GB)", "mixed precision", 1200, 8322, 6.93),
)
NEWEST_FIRST = ("A100", "V100")  # the fallback order for a GPU the table does not have


def anchor_for(workload: str | None, precision: str | None, gpu_model: str | None) -> tuple[ScalingAnchor, bool] | None:
    """(the anchor, whether it is for this very GPU) for a workload and precision: the row of the GPU
    when the table has one, else the newest GPU's row (the caller says so); None without a row."""
    rows = [a for a in ANCHORS if a.workload == workload and a.precision == precision]
    exact = next((a for a in rows if a.gpu_model == gpu_model), None)
    if exact:
        return exact, True
    for model in NEWEST_FIRST:
        near = next((a for a in rows if a.gpu_model == model), None)
        if near:
            return near, False
    return None
