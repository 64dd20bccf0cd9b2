"""A tiny ImageFolder of random JPEGs (``<data>/<dataset>/train/<class>/<i>.JPEG``) for the trainers' data tests."""

from __future__ import annotations

from pathlib import Path


def write_image_folder(data_dir: Path, dataset: str = "tiny", classes: tuple[str, ...] = ("n01", "n02"),
                       per_class: int = 4) -> Path:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for cls in classes:
        folder = data_dir / dataset / "train" / cls
        folder.mkdir(parents=True)
        for i in range(per_class):
            Image.fromarray(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)).save(folder / f"{i}.JPEG")
    return data_dir
