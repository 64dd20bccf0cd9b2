"""Generates ``synthetic-imagefolder``: ImageNet-shaped JPEGs in ImageFolder layout.

It exists to measure the input pipeline (storage, JPEG decode, augmentation) without
ImageNet's licence. Images are square ``resolution`` pixels, a smooth random colour
field tinted per class plus pixel noise, saved at JPEG quality 90: about 0.64 bytes
per pixel (42 kB at 256 px), in the range of ImageNet's ~0.8 bytes per pixel, so
decode costs are comparable per pixel. Note ImageNet's average image is larger
(~400x350); pick ``resolution`` accordingly when decode cost matters.

Every image depends only on (seed, index): the same spec gives the same bytes with
the same Pillow/libjpeg, whatever the worker count or order.
"""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from datasets.errors import DataError

NOISE = 48  # +- per channel; sets the JPEG size per pixel
GRID = 16  # the colour field is a GRID x GRID image scaled up


@dataclass(frozen=True)
class SyntheticSpec:
    images: int = 10_000  # train images
    classes: int = 100
    resolution: int = 256
    seed: int = 0
    val_images: int | None = None  # None: images // 10, at least one per class

    @property
    def val_count(self) -> int:
        return self.val_images if self.val_images is not None else max(self.classes, self.images // 10)

    def params(self) -> dict:
        return {"images": self.images, "classes": self.classes, "resolution": self.resolution,
                "seed": self.seed, "val_images": self.val_count}


def check_spec(spec: SyntheticSpec) -> SyntheticSpec:
    """The spec, or DataError listing every bad value."""
    problems = []
    if spec.classes < 1 or spec.classes > 100_000:
        problems.append(f"--classes {spec.classes}: must be between 1 and 100000, e.g. 100")
    if spec.images < spec.classes:
        problems.append(f"--images {spec.images}: must be at least --classes ({spec.classes}), e.g. 10000")
    if not 8 <= spec.resolution <= 4096:
        problems.append(f"--resolution {spec.resolution}: must be between 8 and 4096 pixels, e.g. 256")
    if spec.seed < 0:
        problems.append(f"--seed {spec.seed}: must be >= 0, e.g. 0")
    if problems:
        raise DataError("; ".join(problems))
    return spec


@dataclass(frozen=True)
class Item:
    path: str  # relative: "train/class_0003/img_00000042.JPEG"
    index: int  # global, the image's random stream
    label: int


def synthetic_plan(spec: SyntheticSpec) -> list[Item]:
    """Every image to generate: train then val, labels round-robin so classes are balanced."""
    width = len(str(spec.classes - 1))
    items, index = [], 0
    for split, count in (("train", spec.images), ("val", spec.val_count)):
        for i in range(count):
            label = i % spec.classes
            items.append(Item(f"{split}/class_{label:0{width}d}/img_{index:08d}.JPEG", index, label))
            index += 1
    return items


def render_jpeg(spec: SyntheticSpec, item: Item) -> bytes:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng([spec.seed, item.index])
    field = Image.fromarray(rng.integers(0, 256, size=(GRID, GRID, 3), dtype=np.uint8))
    pixels = np.asarray(field.resize((spec.resolution, spec.resolution), Image.BILINEAR), dtype=np.int16)
    tint = np.array([(item.label * 53) % 256, (item.label * 97) % 256, (item.label * 151) % 256], dtype=np.int16)
    pixels = (pixels * 3 + tint) // 4 + rng.integers(-NOISE, NOISE + 1, size=pixels.shape, dtype=np.int16)
    out = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(out, "JPEG", quality=90)
    return out.getvalue()


def generate(spec: SyntheticSpec, dest: Path, *, workers: int = 2, on_file=lambda path, size: None) -> dict[str, Path]:
    """Writes every image under ``dest``; returns the plan (relative path -> file)."""
    check_spec(spec)
    items = synthetic_plan(spec)
    for folder in {str(Path(i.path).parent) for i in items}:
        (dest / folder).mkdir(parents=True, exist_ok=True)

    def write(item: Item) -> Path:
        data = render_jpeg(spec, item)
        path = dest / item.path
        path.write_bytes(data)
        on_file(item.path, len(data))
        return path

    with ThreadPoolExecutor(max(1, workers)) as pool:  # numpy and libjpeg release the GIL
        return {item.path: path for item, path in zip(items, pool.map(write, items))}
