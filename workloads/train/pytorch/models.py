"""The three benchmark models (torch imported inside); workloads/train/pytorch/registry.py says which workload builds which.

- resnet50: torchvision's ResNet-50 v1.5 (``torchvision.models.resnet50``), written out here module for module: the
  same parameters under the same names, built and initialised in the same order, so one seed gives the same weights
  and a checkpoint of either loads into the other (tests/workloads/train/pytorch/test_resnet50.py). Importing torchvision cost
  each worker 1.3 s of its start (its ``ops`` import ``torch._dynamo``). ``width_per_group`` (64 = the real model)
  lets a CPU run shrink the bottleneck width.
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
    """torchvision.models.resnet50(weights=None, num_classes=..., width_per_group=...), without torchvision."""
    import torch
    from torch import nn

    class Bottleneck(nn.Module):  # torchvision's: the stride on the 3x3 convolution (v1.5)
        def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: Any = None):
            super().__init__()
            width = int(planes * (width_per_group / 64.0))
            self.conv1 = nn.Conv2d(inplanes, width, kernel_size=1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, kernel_size=3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, planes * 4, kernel_size=1, bias=False)
            self.bn3 = nn.BatchNorm2d(planes * 4)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = downsample

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            out += x if self.downsample is None else self.downsample(x)
            return self.relu(out)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inplanes = 64
            self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1, self.layer2 = self._layer(64, 3), self._layer(128, 4, stride=2)
            self.layer3, self.layer4 = self._layer(256, 6, stride=2), self._layer(512, 3, stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512 * 4, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)

        def _layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
            downsample = None
            if stride != 1 or self.inplanes != planes * 4:
                downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes * 4, kernel_size=1, stride=stride, bias=False),
                                           nn.BatchNorm2d(planes * 4))
            layers = [Bottleneck(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes * 4
            layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
            return nn.Sequential(*layers)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return ResNet()


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
