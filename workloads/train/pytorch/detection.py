"""Mask R-CNN inputs: synthetic images with boxes and masks, or COCO-format data read without pycocotools.

COCO layout: ``<data-dir>/<dataset>/annotations/instances_train2017.json`` and
``<data-dir>/<dataset>/train2017/<file_name>``. Polygon segmentations are rasterised with
Pillow; crowd (RLE) annotations are skipped, and images left with no annotation are dropped,
as torchvision's detection reference does. Category ids map to contiguous labels 1..K
(0 is background). Batches are (list of image tensors, list of target dicts), the shape
``maskrcnn_resnet50_fpn`` takes in training mode.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workloads.train.common.data import Position, _RankBatches

COCO_ANNOTATIONS = "annotations/instances_train2017.json"
COCO_IMAGES = "train2017"
SYNTHETIC_CLASSES = 91  # COCO's label space, background included


def polygon_mask(polygons: list[list[float]], height: int, width: int) -> Any:
    """A uint8 (height, width) mask with the polygons filled."""
    import numpy as np
    from PIL import Image, ImageDraw

    img = Image.new("L", (width, height), 0)
    draw = ImageDraw.Draw(img)
    for poly in polygons:
        if len(poly) >= 6:
            draw.polygon([(poly[i], poly[i + 1]) for i in range(0, len(poly) - 1, 2)], outline=1, fill=1)
    return np.asarray(img, dtype=np.uint8)


def coco_index(annotation_file: Path) -> tuple[list[dict], dict[int, list[dict]], dict[int, int]]:
    """(images with at least one usable annotation, annotations by image id, category id -> label)."""
    doc = json.loads(annotation_file.read_text())
    labels = {c["id"]: i + 1 for i, c in enumerate(sorted(doc.get("categories", []), key=lambda c: c["id"]))}
    by_image: dict[int, list[dict]] = {}
    for a in doc.get("annotations", []):
        seg = a.get("segmentation")
        w, h = a["bbox"][2], a["bbox"][3]
        if a.get("iscrowd") or not isinstance(seg, list) or w < 1 or h < 1 or a["category_id"] not in labels:
            continue
        by_image.setdefault(a["image_id"], []).append(a)
    images = [im for im in sorted(doc.get("images", []), key=lambda im: im["id"]) if im["id"] in by_image]
    return images, by_image, labels


class CocoDetection:
    """Map-style dataset: index -> (uint8 C x H x W image, target dict). uint8: a quarter of float32's bytes through
    the worker pipe and the host-to-device copy; ``CocoImages`` makes it float on the device."""

    def __init__(self, root: Path):
        self.root = root
        self.images, self.by_image, self.labels = coco_index(root / COCO_ANNOTATIONS)
        self.num_classes = len(self.labels) + 1

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[Any, dict[str, Any]]:
        import numpy as np
        import torch
        from PIL import Image

        info = self.images[i]
        with Image.open(self.root / COCO_IMAGES / info["file_name"]) as im:
            image = torch.from_numpy(np.asarray(im.convert("RGB"), dtype=np.uint8).copy()).permute(2, 0, 1)
        h, w = image.shape[1:]
        anns = self.by_image[info["id"]]
        boxes = torch.tensor([[a["bbox"][0], a["bbox"][1], a["bbox"][0] + a["bbox"][2], a["bbox"][1] + a["bbox"][3]]
                              for a in anns], dtype=torch.float32)
        boxes[:, 0::2] = boxes[:, 0::2].clamp(0, w)
        boxes[:, 1::2] = boxes[:, 1::2].clamp(0, h)
        masks = torch.from_numpy(np.stack([polygon_mask(a["segmentation"], h, w) for a in anns]))
        target = {"boxes": boxes, "labels": torch.tensor([self.labels[a["category_id"]] for a in anns]),
                  "masks": masks}
        return image, target


def _collate(batch: list[tuple[Any, dict]]) -> tuple[list[Any], list[dict]]:
    return [b[0] for b in batch], [b[1] for b in batch]


class CocoImages:
    """COCO batches for Mask R-CNN: decoded in the loader's workers, page-locked on a GPU run so the copies are
    truly asynchronous (a ``non_blocking`` copy from pageable memory waits for the GPU), scaled to [0, 1] there."""

    def __init__(self, root: Path, *, device: Any, workers: int):
        self.dataset = CocoDetection(root)
        self.size = len(self.dataset)
        if self.size == 0:
            raise FileNotFoundError(f"{root / COCO_ANNOTATIONS}: no image with a polygon annotation")
        self.num_classes = self.dataset.num_classes
        self.device, self.workers = device, workers
        self._it = None

    def start(self, pos: Position, *, global_batch: int, rank: int, batch: int, seed: int) -> None:
        from torch.utils.data import DataLoader

        loader = DataLoader(self.dataset, batch_sampler=_RankBatches(self.size, pos, global_batch, rank, batch, seed),
                            num_workers=self.workers, collate_fn=_collate, persistent_workers=self.workers > 0,
                            pin_memory=self.device.type == "cuda")
        self._it = iter(loader)

    def batch(self, start: Position) -> tuple[list[Any], list[dict]]:
        images, targets = next(self._it)
        return ([im.to(self.device, non_blocking=True).float() / 255.0 for im in images],
                [{k: v.to(self.device, non_blocking=True) for k, v in t.items()} for t in targets])


class SyntheticDetection:
    """A fixed batch of noise images, each with 1-3 random boxes whose masks fill the box."""
    size = None

    def __init__(self, *, batch: int, image_size: int, device: Any, seed: int):
        import torch

        g = torch.Generator().manual_seed(seed)
        self.num_classes = SYNTHETIC_CLASSES
        self.images, self.targets = [], []
        s = image_size
        for _ in range(batch):
            n = int(torch.randint(1, 4, (1,), generator=g))
            xy = torch.rand(n, 2, generator=g) * (s * 0.6)
            wh = torch.rand(n, 2, generator=g) * (s * 0.3) + s * 0.1
            boxes = torch.cat([xy, (xy + wh).clamp(max=s - 1)], dim=1)
            masks = torch.zeros(n, s, s, dtype=torch.uint8)
            for k, (x0, y0, x1, y1) in enumerate(boxes.round().int().tolist()):
                masks[k, y0:y1, x0:x1] = 1
            labels = torch.randint(1, SYNTHETIC_CLASSES, (n,), generator=g)
            self.images.append(torch.rand(3, s, s, generator=g).to(device))
            self.targets.append({"boxes": boxes.to(device), "labels": labels.to(device), "masks": masks.to(device)})

    def batch(self, start: Position) -> tuple[list[Any], list[dict]]:
        return self.images, self.targets


def detection_source(args: Any, *, device: Any, rank: int) -> Any:
    if args.dataset == "synthetic":
        return SyntheticDetection(batch=args.batch_size, image_size=args.image_size, device=device,
                                  seed=args.seed + rank)
    return CocoImages(Path(args.data_dir) / args.dataset, device=device, workers=args.workers)
