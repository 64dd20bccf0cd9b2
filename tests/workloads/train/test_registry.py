"""A workload is one entry in core/catalog/workload_facts.py and one in workloads/train/pytorch/registry.py: the trainer and
the evaluation ask the entries, and no code branches on a workload's name."""

from __future__ import annotations

import re
from pathlib import Path

from core.catalog.workload_facts import WORKLOADS as FACTS
from workloads.train.pytorch.registry import WORKLOADS as CODE

ROOT = Path(__file__).resolve().parents[3]
BRANCH = re.compile(r"""workload\s*(==|!=|in\s*[(\[{])\s*["'(\[{]""")


def test_every_workload_has_its_facts_and_its_code():
    assert set(FACTS) == set(CODE)
    for name, facts in FACTS.items():
        code = CODE[name]
        # a classifier's data, model and loss (build), a loop of its own (run: the allreduce workload), or a
        # language model's parts (language_model: llama3), exactly one of them
        assert [callable(code.build), callable(code.run), callable(code.language_model)].count(True) == 1, name
        assert callable(code.language_model) == facts.language_model, name
        if facts.evaluates:  # the evaluation Job rebuilds the model and measures it
            assert code.evaluate is not None and code.model is not None, name


def test_an_evaluated_classifier_is_rebuilt_from_its_entry():
    import torch

    model = CODE["cifar10"].model(10, 4)
    assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


def test_no_code_branches_on_a_workloads_name():
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for top in ("core", "infra", "workloads", "datasets", "program", "bench")
             for path in sorted((ROOT / top).rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if BRANCH.search(line)]
    assert not found, "branches on a workload's name (add to the registries instead):\n" + "\n".join(found)
