"""A stack scaled down for the pod sandbox is still checked as the cloud's: the CPU kind the pods run on
never reaches the plan's validation (it once turned the dev stack's amp-fp16 into bf16, which the plan
rightly refuses on V100s)."""

from __future__ import annotations

import pytest
import yaml

from program.stack_files import ROOT
from tests.pods.conftest import scaled_plan
from tests.support.plan_manifests import kubernetes_objects
from workloads.train.common.cpu_choice import FORCE_BF16_ENV


@pytest.mark.parametrize("bf16", ["0", "1"], ids=["no-bf16-cpu", "bf16-cpu"])
def test_the_scaled_dev_plan_keeps_the_cloud_precision_on_either_cpu_kind(bf16, monkeypatch):
    monkeypatch.setenv(FORCE_BF16_ENV, bf16)
    plan = scaled_plan("dev", yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"])
    jobs = {name: m for name, m in kubernetes_objects(plan.resources)
            if m["kind"] == "Job" and name.endswith("-job")}
    assert sorted(jobs) == ["experiments-cifar10-elastic-job", "experiments-resnet50-synthetic-job"]
    for name, job in jobs.items():
        container = job["spec"]["template"]["spec"]["containers"][0]
        words = " ".join([*container.get("command", []), *container.get("args", [])]).split()
        assert "--precision=amp-fp16" in words, (name, [w for w in words if "precision" in w])
