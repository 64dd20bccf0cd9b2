"""workloads/results_folders: on FSx every results folder belongs to the UID that writes it, for
every framework (paddle's pservers included), with and without EFA and evaluation; checked by
running each generated experiment's pods, in every order, against the storage model."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from infra.access.pod_security import RUN_AS_USER
from tests.support.pod_writes import Storage, check_pod
from tests.workloads.test_manifests import CODE, ENV, FRAMEWORKS, P3, P4D
from workloads.job_manifests import experiment_manifests
from workloads.results_folders import results_folder_owners

FSX = replace(ENV, storage_kind="fsx")


def fsx_pods(e, group):
    objs = experiment_manifests(e, env=FSX, node_group=group, bucket="results-bkt", run_id="run-001",
                                  code_config_map=CODE, region="us-west-2")
    return [(role, o["spec"]["template"]["spec"]) for role, o in objs.items()
            if role in ("job", "pserver", "eval")]


@pytest.mark.parametrize("evaluate", [False, True], ids=["train", "train+eval"])
@pytest.mark.parametrize("group", [P3, P4D], ids=["p3", "p4d-efa"])
@pytest.mark.parametrize("e", FRAMEWORKS, ids=lambda e: f"{e.framework}-{e.name}")
def test_every_pod_may_write_its_results_in_any_order(e, group, evaluate):
    e = replace(e, evaluate=evaluate)
    pods = fsx_pods(e, group)
    assert len(pods) == 1 + (e.framework == "paddle") + evaluate
    for order in itertools.permutations(pods):
        storage = Storage.fsx(mount_path=FSX.mount_path)
        problems = [p for role, pod in order for p in check_pod(storage, role, pod)]
        assert not problems, problems
    for role, pod in pods:
        assert "fsGroup" not in pod["securityContext"], role  # FSx: never re-own the file system
        for c in pod.get("initContainers", []) + pod["containers"]:
            env = {v["name"]: v.get("value") for v in c.get("env", [])}
            gpus = "nvidia.com/gpu" in c.get("resources", {}).get("limits", {})
            assert gpus or env.get("NVIDIA_VISIBLE_DEVICES") == "void", (role, c["name"])


def test_owners_follow_the_writers():
    base = FSX.experiment_results_dir(FRAMEWORKS[-1])
    paddle = replace(FRAMEWORKS[-1], evaluate=True)
    assert results_folder_owners(paddle, env=FSX, group=P4D) == {
        base: 0, f"{base}/pserver": RUN_AS_USER, f"{base}/eval": RUN_AS_USER}
    assert results_folder_owners(FRAMEWORKS[0], env=FSX, group=P3) == {
        FSX.experiment_results_dir(FRAMEWORKS[0]): RUN_AS_USER}
