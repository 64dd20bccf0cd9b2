"""Mask R-CNN on COCO-format data (a tiny generated set) and the local backbone weights file."""

from __future__ import annotations

import json
import sys

import pytest

from tests.workloads.conftest import child_env, run_training
from workloads.train.common.metrics import read_rank_metrics
from workloads.train.pytorch.detection import coco_index, polygon_mask


def write_coco(root, images: int = 4, size: int = 96) -> None:
    """``<root>/coco2017/{annotations/instances_train2017.json,train2017/*.jpg}`` with one square per image."""
    import numpy as np
    from PIL import Image

    base = root / "coco2017"
    (base / "train2017").mkdir(parents=True)
    (base / "annotations").mkdir()
    doc = {"images": [], "annotations": [], "categories": [{"id": 3, "name": "car"}, {"id": 18, "name": "dog"}]}
    rng = np.random.default_rng(0)
    for i in range(images):
        name = f"{i:012d}.jpg"
        Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(base / "train2017" / name)
        doc["images"].append({"id": i + 1, "file_name": name, "height": size, "width": size})
        x, y, w = 10 + i * 5, 20, 40
        doc["annotations"].append({"id": 10 + i, "image_id": i + 1, "category_id": (3, 18)[i % 2], "iscrowd": 0,
                                   "bbox": [x, y, w, w], "area": w * w,
                                   "segmentation": [[x, y, x + w, y, x + w, y + w, x, y + w]]})
    # a crowd (RLE) annotation and an image with no usable annotation: both skipped
    doc["annotations"].append({"id": 99, "image_id": 1, "category_id": 3, "iscrowd": 1, "bbox": [0, 0, 5, 5],
                               "area": 25, "segmentation": {"counts": [0, 25], "size": [size, size]}})
    doc["images"].append({"id": 50, "file_name": "missing.jpg", "height": size, "width": size})
    (base / "annotations" / "instances_train2017.json").write_text(json.dumps(doc))


def test_coco_index_skips_crowds_and_unannotated_images(tmp_path):
    write_coco(tmp_path)
    images, by_image, labels = coco_index(tmp_path / "coco2017" / "annotations" / "instances_train2017.json")
    assert [im["id"] for im in images] == [1, 2, 3, 4]
    assert labels == {3: 1, 18: 2}
    assert all(len(v) == 1 for v in by_image.values())


def test_coco_batches_cross_the_loader_as_uint8_and_reach_the_device_as_the_same_floats(tmp_path):
    """uint8 through the worker pipe and the copy (a quarter of float32's bytes), [0, 1] floats on the device,
    the same bits as scaling on the host."""
    import numpy as np
    import torch
    from PIL import Image

    from workloads.train.common.data import Position, epoch_order, rank_indices
    from workloads.train.pytorch.detection import CocoImages

    write_coco(tmp_path)
    src = CocoImages(tmp_path / "coco2017", device=torch.device("cpu"), workers=0)
    image, _ = src.dataset[0]
    assert image.dtype == torch.uint8 and tuple(image.shape) == (3, 96, 96)
    src.start(Position(), global_batch=2, rank=0, batch=2, seed=0)
    images, targets = src.batch(Position())
    for im, t in zip(images, targets):
        assert im.dtype == torch.float32 and 0 <= float(im.min()) and float(im.max()) <= 1
        assert set(t) == {"boxes", "labels", "masks"}
    for im, i in zip(images, rank_indices(epoch_order(src.size, 0, 0), Position(), 0, 2)):
        with Image.open(src.dataset.root / "train2017" / src.dataset.images[i]["file_name"]) as f:
            pixels = torch.from_numpy(np.asarray(f.convert("RGB"), dtype=np.uint8).copy()).permute(2, 0, 1)
        assert torch.equal(im, pixels.float() / 255.0)


def test_polygon_mask_fills_the_polygon():
    m = polygon_mask([[2, 2, 6, 2, 6, 6, 2, 6]], 10, 10)
    assert m.shape == (10, 10) and m[4, 4] == 1 and m[0, 0] == 0 and m.sum() == 25


def test_local_backbone_file_seeds_the_backbone(tmp_path):
    import torch
    import torchvision

    from workloads.train.pytorch.models import build_maskrcnn

    weights = tmp_path / "coco2017" / "weights"
    weights.mkdir(parents=True)
    resnet = torchvision.models.resnet50(weights=None)
    torch.nn.init.constant_(resnet.conv1.weight, 0.125)
    torch.save(resnet.state_dict(), weights / "resnet50-imagenet.pth")
    model, path = build_maskrcnn(num_classes=3, image_size=64, data_dir=tmp_path)
    assert path.endswith("resnet50-imagenet.pth")
    assert torch.all(model.backbone.body.conv1.weight == 0.125)
    _, none = build_maskrcnn(num_classes=3, image_size=64, data_dir=tmp_path / "elsewhere")
    assert none is None


@pytest.mark.local_run
def test_maskrcnn_trains_on_coco_format_with_two_processes(tmp_path):
    write_coco(tmp_path / "data")
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
           "-m", "workloads.train.pytorch", "--workload=maskrcnn", "--dataset=coco2017", f"--data-dir={tmp_path / 'data'}",
           f"--results-dir={results}", "--batch-size=1", "--steps=3", "--image-size=96", "--precision=fp32",
           "--checkpoint-every=2", "--warmup-steps=1", "--workers=0"]
    done = run_training(cmd, env=child_env(1))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    by_rank = read_rank_metrics(results)
    assert sorted(by_rank) == [0, 1]
    for lines in by_rank.values():
        assert [r["step"] for r in lines] == [1, 2, 3]
        assert all(r["world_size"] == 2 and r["loss"] > 0 for r in lines)
    # 4 images, global batch 2: steps 1-2 are epoch 0, step 3 starts epoch 1
    assert [r["epoch"] for r in by_rank[0]] == [0, 0, 1]


def test_maskrcnn_resizes_like_torchvisions_reference_and_warms_up_its_lr(tmp_path):
    from core.contract.train_args import TrainArgs
    from workloads.train.common.schedule import MASKRCNN_WARMUP_STEPS, default_lr, lr_at
    from workloads.train.harness.outcome import provenance
    from workloads.train.pytorch.models import build_maskrcnn

    model, _ = build_maskrcnn(num_classes=3, image_size=800, data_dir=tmp_path)
    assert (model.transform.min_size, model.transform.max_size) == ((800,), 1333)  # was max_size 800
    args = TrainArgs(workload="maskrcnn", batch_size=2)
    base = default_lr(args, 8)
    assert lr_at(args, 8, 0) == pytest.approx(base / 1000)
    assert base / 1000 < lr_at(args, 8, MASKRCNN_WARMUP_STEPS // 2) < base
    assert lr_at(args, 8, MASKRCNN_WARMUP_STEPS) == base
    assert lr_at(TrainArgs(workload="resnet50"), 8, 0) == default_lr(TrainArgs(), 8)  # classifiers: no warm-up
    assert "torchvision Mask R-CNN" in provenance({}, [], {"workload": "maskrcnn"})["model"]
