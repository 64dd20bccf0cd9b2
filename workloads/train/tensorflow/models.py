"""The TensorFlow trainer's models, in Keras, with the same layers as the PyTorch ones (``models.py``).

- resnet50: torchvision's ResNet-50 v1.5 (the stride on the bottleneck's 3x3 convolution, no
  biases before batch norm, zero padding as torchvision pads), with ``width_per_group`` narrowing
  the bottleneck as torchvision's argument does (64 = the real model). ``keras.applications``'
  ResNet50 is v1 (stride on the 1x1) with conv biases, so it is not used: the FLOPs per sample
  and the throughput compare with PyTorch's model only when the layers are the same.
- cifar10: the ResNet-18-style CIFAR network of ``models.cifar_resnet``, base width ``width``.

Batch norm as torch's defaults: momentum 0.1 (Keras spells it 0.9) and epsilon 1e-5. Images are
NHWC (TensorFlow's layout; the torch models are NCHW or channels_last). The logits layer computes
in float32 under a mixed-precision policy (Keras' mixed-precision guide: the softmax and loss in float32).
"""

from __future__ import annotations

from typing import Any, Callable

BN = {"momentum": 0.9, "epsilon": 1e-5}
RESNET50_BLOCKS = (3, 4, 6, 3)  # torchvision resnet50: Bottleneck, [3, 4, 6, 3]


def _conv_bn(keras: Any, x: Any, filters: int, kernel: int, stride: int = 1, relu: bool = True) -> Any:
    """Conv (torch-style symmetric zero padding kernel // 2, no bias) + batch norm (+ ReLU)."""
    L = keras.layers
    if kernel > 1:
        x = L.ZeroPadding2D(kernel // 2)(x)
    x = L.Conv2D(filters, kernel, strides=stride, use_bias=False)(x)
    x = L.BatchNormalization(**BN)(x)
    return L.ReLU()(x) if relu else x


def _bottleneck(keras: Any, x: Any, planes: int, stride: int, width_per_group: int) -> Any:
    width = planes * width_per_group // 64
    out = _conv_bn(keras, x, width, 1)
    out = _conv_bn(keras, out, width, 3, stride)
    out = _conv_bn(keras, out, planes * 4, 1, relu=False)
    skip = x
    if stride != 1 or x.shape[-1] != planes * 4:
        skip = _conv_bn(keras, x, planes * 4, 1, stride, relu=False)
    return keras.layers.ReLU()(keras.layers.Add()([out, skip]))


def _head(keras: Any, x: Any, num_classes: int) -> Any:
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.layers.Dense(num_classes, dtype="float32")(x)


def resnet50(keras: Any, *, image_size: int, num_classes: int, width_per_group: int) -> Any:
    inputs = keras.Input((image_size, image_size, 3))
    x = _conv_bn(keras, inputs, 64, 7, 2)
    x = keras.layers.MaxPooling2D(3, 2)(keras.layers.ZeroPadding2D(1)(x))  # after a ReLU: zero padding = -inf
    for i, (blocks, planes) in enumerate(zip(RESNET50_BLOCKS, (64, 128, 256, 512))):
        for b in range(blocks):
            x = _bottleneck(keras, x, planes, 2 if b == 0 and i > 0 else 1, width_per_group)
    return keras.Model(inputs, _head(keras, x, num_classes), name="resnet50")


def _basic(keras: Any, x: Any, cout: int, stride: int) -> Any:
    out = _conv_bn(keras, x, cout, 3, stride)
    out = _conv_bn(keras, out, cout, 3, relu=False)
    skip = x if stride == 1 and x.shape[-1] == cout else _conv_bn(keras, x, cout, 1, stride, relu=False)
    return keras.layers.ReLU()(keras.layers.Add()([out, skip]))


def cifar_resnet(keras: Any, *, image_size: int, num_classes: int, width_per_group: int) -> Any:
    inputs = keras.Input((image_size, image_size, 3))
    x = _conv_bn(keras, inputs, width_per_group, 3)
    for i, w in enumerate(width_per_group * m for m in (1, 2, 4, 8)):
        x = _basic(keras, _basic(keras, x, w, 1 if i == 0 else 2), w, 1)
    return keras.Model(inputs, _head(keras, x, num_classes), name="cifar_resnet")


# The workloads this trainer runs (workloads.framework_support.SUPPORTED["tensorflow"]) -> model builder.
MODELS: dict[str, Callable[..., Any]] = {"resnet50": resnet50, "cifar10": cifar_resnet}
