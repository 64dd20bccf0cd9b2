"""The three benchmark models (torch imported inside); workloads/train/pytorch/registry.py says which workload builds which.

- resnet50: torchvision's ResNet-50 v1.5; ``width_per_group`` (64 = the real model) lets a
  CPU run shrink the bottleneck width.
- cifar10: the workshop's small ResNet (ResNet-18 layout for 32x32 inputs, base width
  ``width_per_group``).
- maskrcnn: torchvision ``maskrcnn_resnet50_fpn`` with no downloaded weights; a local
  ImageNet ResNet-50 file ``<data-dir>/coco2017/weights/*.pth`` seeds the backbone if present
  (the cluster has no route to download.pytorch.org).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def resnet50(*, num_classes: int, width_per_group: int) -> Any:
    import torchvision  # only here: importing it costs about 2 s on 2 cores (it pulls in torch._dynamo)

    return torchvision.models.resnet50(weights=None, num_classes=num_classes, width_per_group=width_per_group)


def cifar_resnet(*, num_classes: int = 10, width: int = 64) -> Any:
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
            self.skip = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            return self.relu(self.body(x) + self.skip(x))

    widths = [width, width * 2, width * 4, width * 8]
    layers: list[Any] = [nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True)]
    cin = width
    for i, w in enumerate(widths):
        layers += [Block(cin, w, 1 if i == 0 else 2), Block(w, w, 1)]
        cin = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return nn.Sequential(*layers)


def backbone_weights(data_dir: str | Path) -> Path | None:
    found = sorted((Path(data_dir) / "coco2017" / "weights").glob("*.pth"))
    return found[0] if found else None


# torchvision's (and Detectron's) standard COCO resize: shorter side 800, longer side at most 1333.
MASKRCNN_MIN_SIZE = 800
MASKRCNN_MAX_SIZE = 1333


def maskrcnn_sizes(image_size: int) -> tuple[int, int]:
    """(min_size, max_size) for the model's resize: the standard 800/1333 at ``image_size`` 800, the
    same aspect bound (1333/800) at a scaled-down local size."""
    return image_size, round(image_size * MASKRCNN_MAX_SIZE / MASKRCNN_MIN_SIZE)


def build_maskrcnn(*, num_classes: int, image_size: int, data_dir: str | Path) -> tuple[Any, str | None]:
    """The model and the backbone file it was seeded from (None: random init).

    Images are resized as in torchvision's detection reference: shorter side ``image_size`` (800
    on the cluster), longer side at most 1333 (``maskrcnn_sizes``).

    With a backbone file the model is built the way torchvision builds it for pretrained
    backbone weights (frozen batch norm, the top 3 stages trainable); without one, like
    ``maskrcnn_resnet50_fpn(weights=None, weights_backbone=None)``.
    """
    import torch
    from torchvision.models import resnet50
    from torchvision.models.detection import MaskRCNN, maskrcnn_resnet50_fpn
    from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
    from torchvision.ops.misc import FrozenBatchNorm2d

    min_size, max_size = maskrcnn_sizes(image_size)
    path = backbone_weights(data_dir)
    if path is None:
        model = maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=num_classes,
                                      min_size=min_size, max_size=max_size)
        return model, None
    state = torch.load(path, map_location="cpu", weights_only=True)
    state = {k: v for k, v in state.items() if not k.endswith("num_batches_tracked")}
    body = resnet50(weights=None, norm_layer=FrozenBatchNorm2d)
    body.load_state_dict(state)
    model = MaskRCNN(_resnet_fpn_extractor(body, 3), num_classes=num_classes, min_size=min_size,
                     max_size=max_size)
    return model, str(path)
