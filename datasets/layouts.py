"""Turns source archives into the layout the workloads read, as a plan of files.

A plan maps each relative path of the prepared dataset to the local file holding its
bytes. Converters extract archives into the work directory, but re-arranging (such as
Tiny ImageNet's val images into class folders) is only a different relative path for
the same file: nothing is copied twice. The layouts match what ``workloads/`` reads:

  imagefolder    train/<class>/*.JPEG, val/<class>/*.JPEG (torchvision ImageFolder)
  cifar-batches  cifar-10-batches-py/data_batch_1..5, test_batch, batches.meta
  coco           annotations/instances_{train,val}2017.json, train2017/, val2017/,
                 weights/resnet50-0676ba61.pth
"""

from __future__ import annotations

import shutil
import tarfile
import zipfile
from pathlib import Path

from datasets.catalog import RESNET50_WEIGHTS, Dataset
from datasets.errors import DataError

Plan = dict[str, Path]  # relative path in the prepared dataset -> local file
CIFAR_FILES = ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch",
               "batches.meta")
IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")


def extract(archive: Path, into: Path) -> Path:
    """Unpacks a .tar.gz or .zip into a fresh ``into`` (refusing paths that escape it)."""
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                for name in z.namelist():
                    if name.startswith("/") or ".." in Path(name).parts:
                        raise DataError(f"{archive}: member {name!r} escapes the archive; refusing to extract")
                z.extractall(into)
        elif tarfile.is_tarfile(archive):
            with tarfile.open(archive) as t:
                t.extractall(into, filter="data")  # rejects absolute paths, '..' and device files
        else:
            raise DataError(f"{archive}: neither a .zip nor a tar archive")
    except (tarfile.TarError, zipfile.BadZipFile, OSError) as e:
        raise DataError(f"{archive}: cannot extract ({e}); re-download it") from None
    return into


def unpacked(path: Path, folder: str, work: Path) -> Path:
    """The ``folder`` an archive unpacks to: extracted into ``work`` unless ``path`` already is it."""
    if path.is_dir():
        return path
    root = extract(path, work / "extracted" / path.name)
    if (root / folder).is_dir():
        return root / folder
    inner = [p for p in root.iterdir() if p.is_dir()]
    if len(inner) == 1 and (inner[0] / folder).is_dir():
        return inner[0] / folder
    raise DataError(f"{path}: holds no {folder}/ folder; is it the right archive?")


def files_under(root: Path, rel: str = "") -> Plan:
    base = root / rel if rel else root
    return {f"{rel}/{p.relative_to(base).as_posix()}" if rel else p.relative_to(base).as_posix(): p
            for p in sorted(base.rglob("*")) if p.is_file()}


def plan_cifar10(sources: dict[str, Path], work: Path) -> Plan:
    batches = unpacked(sources["cifar-10-python.tar.gz"], "cifar-10-batches-py", work)
    missing = [f for f in CIFAR_FILES if not (batches / f).is_file()]
    if missing:
        raise DataError(f"{batches}: not CIFAR-10 python batches, missing {', '.join(missing)}")
    return {f"cifar-10-batches-py/{p.name}": p for p in sorted(batches.iterdir()) if p.is_file()}


def tiny_imagenet_val_classes(annotations: str) -> dict[str, str]:
    """val_annotations.txt ("val_0.JPEG<TAB>n03444034<TAB>x<TAB>y<TAB>w<TAB>h") -> {file: wnid}."""
    out = {}
    for n, line in enumerate(annotations.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < 2:
            raise DataError(f"val_annotations.txt line {n}: {line!r} is not 'FILE<TAB>WNID<TAB>...'")
        out[parts[0]] = parts[1]
    return out


def plan_tiny_imagenet(sources: dict[str, Path], work: Path) -> Plan:
    root = unpacked(sources["tiny-imagenet-200.zip"], "tiny-imagenet-200", work)
    train, val = root / "train", root / "val"
    if not train.is_dir() or not (val / "val_annotations.txt").is_file():
        raise DataError(f"{root}: not Tiny ImageNet (needs train/ and val/val_annotations.txt)")
    plan: Plan = {}
    for name in ("wnids.txt", "words.txt"):
        if (root / name).is_file():
            plan[name] = root / name
    for cls in sorted(p for p in train.iterdir() if p.is_dir()):
        images = cls / "images" if (cls / "images").is_dir() else cls
        for img in sorted(images.iterdir()):
            if img.suffix.lower() in IMAGE_SUFFIXES:
                plan[f"train/{cls.name}/{img.name}"] = img
    for filename, wnid in sorted(tiny_imagenet_val_classes((val / "val_annotations.txt").read_text()).items()):
        img = val / "images" / filename
        if not img.is_file():
            raise DataError(f"{val / 'val_annotations.txt'} names {filename}, which is not in {val / 'images'}")
        plan[f"val/{wnid}/{filename}"] = img
    return plan


def plan_imagefolder_dir(root: Path) -> Plan:
    """A user's ImageNet copy, already arranged as train/<wnid>/*.JPEG and val/<wnid>/*.JPEG."""
    plan: Plan = {}
    for split in ("train", "val"):
        classes = sorted(p for p in (root / split).iterdir() if p.is_dir()) if (root / split).is_dir() else []
        if not classes:
            raise DataError(f"{root / split}: no class folders; arrange ImageNet as {split}/<wnid>/*.JPEG "
                            f"(e.g. {split}/n01440764/n01440764_10026.JPEG)")
        for cls in classes:
            for img in sorted(cls.iterdir()):
                if img.is_file() and img.suffix.lower() in IMAGE_SUFFIXES:
                    plan[f"{split}/{cls.name}/{img.name}"] = img
    return plan


def plan_coco(sources: dict[str, Path], work: Path) -> Plan:
    plan: Plan = {}
    annotations = unpacked(sources["annotations_trainval2017.zip"], "annotations", work)
    for needed in ("instances_train2017.json", "instances_val2017.json"):
        if not (annotations / needed).is_file():
            raise DataError(f"{annotations}: missing {needed}; is it annotations_trainval2017.zip?")
    plan.update({f"annotations/{p.name}": p for p in sorted(annotations.glob("instances_*2017.json"))})
    for split in ("train2017", "val2017"):
        images = unpacked(sources[f"{split}.zip"], split, work)
        plan.update({f"{split}/{p.name}": p for p in sorted(images.iterdir()) if p.suffix.lower() == ".jpg"})
    plan[f"weights/{RESNET50_WEIGHTS.filename}"] = sources[RESNET50_WEIGHTS.filename]
    return plan


def plan_for(ds: Dataset, sources: dict[str, Path], work: Path) -> Plan:
    """The plan of the prepared ``ds`` from its resolved sources (not for generated datasets)."""
    if ds.name == "cifar10":
        return plan_cifar10(sources, work)
    if ds.name == "tiny-imagenet-200":
        return plan_tiny_imagenet(sources, work)
    if ds.name == "imagenet":
        return plan_imagefolder_dir(sources[""])
    if ds.name == "coco2017":
        return plan_coco(sources, work)
    raise DataError(f"{ds.name}: no converter; it is generated, not prepared from sources")
