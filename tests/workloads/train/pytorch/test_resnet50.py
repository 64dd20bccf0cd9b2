"""The resnet50 workload's model is torchvision's ResNet-50 v1.5, written out in workloads/train/pytorch/models.py so a
worker need not import torchvision (1.3 s of its start): the same parameters and buffers under the same names, the
same weights from the same seed, the same outputs and gradients, and checkpoints that load both ways."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import torchvision

from workloads.train.pytorch.models import resnet50


@pytest.mark.parametrize("width, classes", [(64, 1000), (16, 10)])
def test_one_seed_gives_torchvisions_model_weight_for_weight(width, classes):
    torch.manual_seed(7)
    theirs = torchvision.models.resnet50(weights=None, num_classes=classes, width_per_group=width)
    torch.manual_seed(7)
    ours = resnet50(num_classes=classes, width_per_group=width)
    a, b = theirs.state_dict(), ours.state_dict()
    assert list(a) == list(b)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [type(m).__name__ for m in theirs.modules()][1:] == [type(m).__name__ for m in ours.modules()][1:]


def test_it_computes_what_torchvisions_computes_forward_and_backward():
    torch.manual_seed(0)
    theirs = torchvision.models.resnet50(weights=None, num_classes=10, width_per_group=16).train()
    ours = resnet50(num_classes=10, width_per_group=16).train()
    ours.load_state_dict(theirs.state_dict())  # a checkpoint of one loads into the other
    x = torch.randn(2, 3, 64, 64)
    for model in (theirs, ours):
        torch.nn.functional.cross_entropy(model(x), torch.tensor([1, 2])).backward()
    assert torch.equal(theirs(x), ours(x))
    for (name, p), (_, q) in zip(theirs.named_parameters(), ours.named_parameters()):
        assert torch.equal(p.grad, q.grad), name


def test_building_it_does_not_import_torchvision():
    probe = ("import sys; from workloads.train.pytorch.models import resnet50; "
             "resnet50(num_classes=10, width_per_group=8); print('torchvision' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
