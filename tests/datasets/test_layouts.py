"""Pure pieces and converters: catalog, synthetic plan and determinism, Tiny ImageNet and COCO layouts."""

from __future__ import annotations

import dataclasses
import hashlib
import zipfile
from pathlib import Path

import pytest

from datasets import layouts, sources, synthetic
from datasets.catalog import CATALOG, DATASET_NAMES, dataset
from datasets.errors import DataError


def test_catalog_entries():
    assert DATASET_NAMES == ("synthetic", "synthetic-imagefolder", "cifar10", "tiny-imagenet-200", "imagenet",
                             "coco2017", "text-bytes", "fineweb-edu-10bt-sample")
    cifar = dataset("cifar10").sources[0]
    assert (cifar.size, cifar.md5) == (170_498_071, "c58f30108f718f92721af3b95e74349a")
    weights = {s.filename: s for s in dataset("coco2017").sources}["resnet50-0676ba61.pth"]
    assert weights.url == "https://download.pytorch.org/models/resnet50-0676ba61.pth"
    assert weights.sha256_prefix == "0676ba61" and weights.checksum_text() == "sha256 0676ba61..."
    assert dataset("imagenet").user_supplied and not dataset("imagenet").sources
    assert not dataset("synthetic").needs_staging
    assert all(s.checksum_text() == "unknown" or s.md5 or s.sha256_prefix for d in CATALOG.values() for s in d.sources)
    with pytest.raises(ValueError, match="'mnist' is not in the catalog; choose one of synthetic, "):
        dataset("mnist")


def test_synthetic_plan_is_balanced_imagefolder():
    spec = synthetic.SyntheticSpec(images=10, classes=3, resolution=16, seed=1)
    plan = synthetic.synthetic_plan(spec)
    assert len(plan) == 10 + 3 and plan[0].path == "train/class_0/img_00000000.JPEG"
    assert plan[-1].path.startswith("val/") and len({p.index for p in plan}) == 13
    assert [p.label for p in plan[:10]].count(0) == 4


def test_synthetic_images_are_deterministic_per_seed(tmp_path):
    from PIL import Image

    spec = synthetic.SyntheticSpec(images=6, classes=2, resolution=48, seed=3)
    a = synthetic.generate(spec, tmp_path / "a", workers=1)
    b = synthetic.generate(spec, tmp_path / "b", workers=2)
    c = synthetic.generate(synthetic.SyntheticSpec(images=6, classes=2, resolution=48, seed=4), tmp_path / "c")
    digest = lambda plan: {k: hashlib.sha256(p.read_bytes()).hexdigest() for k, p in plan.items()}  # noqa: E731
    assert digest(a) == digest(b) and set(digest(a).values()).isdisjoint(digest(c).values())
    with Image.open(next(iter(a.values()))) as img:
        assert img.format == "JPEG" and img.size == (48, 48) and img.mode == "RGB"


def test_unreachable_url_message(tmp_path):
    with pytest.raises(DataError, match=r"^cannot reach URL http://127.0.0.1:9/x.zip: .*; download it yourself "
                                        r"and pass --from PATH$"):
        sources.fetch_url("http://127.0.0.1:9/x.zip", tmp_path / "x.zip", timeout=5)
    assert not (tmp_path / "x.zip").exists() and not (tmp_path / "x.zip.part").exists()


def tiny_imagenet_zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("tiny-imagenet-200/wnids.txt", "n01\nn02\n")
        for wnid in ("n01", "n02"):
            z.writestr(f"tiny-imagenet-200/train/{wnid}/{wnid}_boxes.txt", "")
            for i in range(2):
                z.writestr(f"tiny-imagenet-200/train/{wnid}/images/{wnid}_{i}.JPEG", f"{wnid}{i}")
        z.writestr("tiny-imagenet-200/val/val_annotations.txt", "val_0.JPEG\tn02\t0\t0\t9\t9\nval_1.JPEG\tn01\t1\t1\t8\t8\n")
        z.writestr("tiny-imagenet-200/val/images/val_0.JPEG", "v0")
        z.writestr("tiny-imagenet-200/val/images/val_1.JPEG", "v1")
        z.writestr("tiny-imagenet-200/test/images/test_0.JPEG", "t0")


def test_tiny_imagenet_val_becomes_imagefolder(tmp_path):
    tiny_imagenet_zip(tmp_path / "tiny-imagenet-200.zip")
    plan = layouts.plan_tiny_imagenet({"tiny-imagenet-200.zip": tmp_path / "tiny-imagenet-200.zip"}, tmp_path / "w")
    assert set(plan) == {"wnids.txt", "train/n01/n01_0.JPEG", "train/n01/n01_1.JPEG", "train/n02/n02_0.JPEG",
                         "train/n02/n02_1.JPEG", "val/n02/val_0.JPEG", "val/n01/val_1.JPEG"}
    assert plan["val/n02/val_0.JPEG"].read_text() == "v0"


def test_coco_layout_from_archives_or_folders(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    with zipfile.ZipFile(src / "annotations_trainval2017.zip", "w") as z:
        z.writestr("annotations/instances_train2017.json", "{}")
        z.writestr("annotations/instances_val2017.json", "{}")
        z.writestr("annotations/captions_train2017.json", "{}")
    with zipfile.ZipFile(src / "val2017.zip", "w") as z:
        z.writestr("val2017/000000000139.jpg", "img")
    (src / "train2017").mkdir()  # already unpacked
    (src / "train2017" / "000000000009.jpg").write_text("img")
    weights = src / "resnet50-0676ba61.pth"
    weights.write_bytes(b"not the weights")
    coco = CATALOG["coco2017"]
    with pytest.raises(DataError, match="checksum mismatch for .*annotations_trainval2017.zip: md5 .*expected f4bb"):
        sources.resolve_sources(coco, str(src), tmp_path / "w")
    unzipped = tuple(dataclasses.replace(s, md5=None) for s in coco.sources)  # test archives, published weights
    with pytest.raises(DataError, match="checksum mismatch for .*resnet50-0676ba61.pth: sha256 .*expected 0676ba61"):
        sources.resolve_sources(dataclasses.replace(coco, sources=unzipped), str(src), tmp_path / "w")
    specs = tuple(dataclasses.replace(s, sha256_prefix=hashlib.sha256(b"not the weights").hexdigest()[:8])
                  if s.filename.endswith(".pth") else s for s in unzipped)
    found = sources.resolve_sources(dataclasses.replace(coco, sources=specs), str(src), tmp_path / "w")
    plan = layouts.plan_coco(found, tmp_path / "w")
    assert set(plan) == {"annotations/instances_train2017.json", "annotations/instances_val2017.json",
                         "val2017/000000000139.jpg", "train2017/000000000009.jpg", "weights/resnet50-0676ba61.pth"}
