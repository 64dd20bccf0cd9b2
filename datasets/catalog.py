"""The datasets the product knows how to prepare and stage (names only, for now)."""

DATASET_NAMES = ("synthetic", "synthetic-imagefolder", "cifar10", "tiny-imagenet-200", "imagenet", "coco2017")
