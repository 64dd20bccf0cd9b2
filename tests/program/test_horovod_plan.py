"""The plan of the Horovod stack (tests/stacks/Pulumi.horovod.yaml): accepted with the image
workloads/Dockerfile.horovod builds, refused on the DLC default with what to build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

STACKS = Path(__file__).resolve().parents[2] / "tests" / "stacks"


def test_the_plan_accepts_the_horovod_stack_and_refuses_it_on_the_dlc_default():
    """The program ships hvd_torch.py (framework_support.missing_entry_points passes), runs the pods' bootstrap, and
    with ``image`` left at the DLC default refuses the experiment, naming what to build."""
    from core.config.fields import ConfigError
    from program.offline import evaluate, evaluate_config
    from program.stack_files import read_stack_yaml

    plan = evaluate("horovod", root=STACKS)
    # Its base, the PyTorch 2.6.0 cu126 DLC, is past AWS's patch support: the one warning an experiment gets.
    assert [w for w in plan.warnings if "experiments[" in w and "left AWS's patch support" not in w] == []
    jobs = [r for r in plan.resources if r["type"] == "kubernetes:batch/v1:Job"]
    text = json.dumps([j["inputs"] for j in jobs])
    assert "workloads.train.horovod.bootstrap" in text and "workloads.train.horovod" in text
    config = read_stack_yaml("horovod", STACKS)
    del config["eksbench:experiments"][0]["image"]
    with pytest.raises(ConfigError) as refused:
        evaluate_config("horovod", config)
    [problem] = [p for p in refused.value.problems if "experiments[0]" in p]
    assert 'framework "horovod" needs an image that has it installed' in problem
    assert "workloads/Dockerfile.horovod" in problem
