"""Staging manifests (schema-valid, pointed at the right places, shipping a program that runs) and the
DatasetStaging component under the shared mock engine (tests/support/mock_engine)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import pytest

from core.config.shape import parse_stack_config
from datasets import staging_manifests as manifests
from datasets.catalog import CATALOG
from datasets.dataset_staging import (
    DatasetStaging,
    DatasetStagingArgs,
    datasets_to_stage,
    stage_program_files,
)
from infra.environment import SYSTEM_NODE_LABEL, environment_for
from tests.support.k8s_schema import assert_valid
from tests.support.mock_engine import Registration, by_name, register

GPU = [{"name": "p3", "instance_type": "p3.16xlarge", "max_size": 2}]


def stack(datasets: list[str], **storage) -> object:
    raw = {"gpu_node_groups": GPU, "storage": storage or {"kind": "efs"},
           "experiments": [{"name": f"e{i}", "dataset": d} for i, d in enumerate(datasets)]}
    return parse_stack_config(raw, project="eksbench", stack="test", region="us-west-2")


def program(env) -> dict:
    return manifests.staging_program_config_map_manifest(stage_program_files(), env=env)


def test_efs_copy_job_is_valid_and_points_at_the_shared_volume():
    env = environment_for(stack(["cifar10"]))
    cm = program(env)
    job = manifests.staging_job_manifest(CATALOG["cifar10"], env=env, program=cm,
                                         source_uri="s3://b/datasets/cifar10/", region="us-west-2")
    assert_valid(cm)
    assert_valid(job)
    pod = job["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert pod["nodeSelector"] == SYSTEM_NODE_LABEL and pod["serviceAccountName"] == env.service_account
    assert c["image"] == manifests.STAGING_IMAGE and ":" in c["image"] and not c["image"].endswith(":latest")
    assert c["args"] == ["--source", "s3://b/datasets/cifar10/", "--dest", f"{env.datasets_dir}/cifar10",
                         "--mode", "copy"]
    assert "boto3==" in c["command"][2] and not any("AWS_SECRET" in e["name"] for e in c["env"])
    assert {v["name"]: v for v in pod["volumes"]}["shared"]["persistentVolumeClaim"]["claimName"] == env.claim_name
    # only the dataset's folder of the claim is mounted, exactly where --dest points
    assert {m["name"]: m for m in c["volumeMounts"]}["shared"] == {
        "name": "shared", "mountPath": f"{env.datasets_dir}/cifar10", "subPath": "datasets/cifar10"}
    assert not any(m["mountPath"] in (env.mount_path, env.mount_path + "/") for m in c["volumeMounts"])
    assert "pulumi.com/skipAwait" not in job["metadata"].get("annotations", {})
    assert job["metadata"]["name"] == "stage-cifar10" and job["metadata"]["namespace"] == env.namespace
    assert job["spec"]["activeDeadlineSeconds"] == 60 * manifests.staging_timeout_minutes(CATALOG["cifar10"],
                                                                                          mode="copy")


def test_fsx_preload_job_and_timeouts_grow_with_the_data():
    env = environment_for(stack(["imagenet"], kind="fsx", preload=True))
    job = manifests.staging_job_manifest(CATALOG["imagenet"], env=env, program=program(env),
                                         source_uri="s3://b/datasets/imagenet/", region="us-west-2",
                                         storage_kind="fsx", preload=True)
    assert_valid(job)
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[4:6] == ["--mode", "fsx"] and args[-1] == "--preload"
    imagenet = manifests.staging_timeout_minutes(CATALOG["imagenet"], mode="copy")
    assert imagenet > 90 and manifests.staging_timeout_minutes(CATALOG["cifar10"], mode="copy") == 30
    assert manifests.staging_timeout_minutes(CATALOG["imagenet"], mode="fsx") < imagenet


@pytest.mark.parametrize("kwargs, message", [
    ({"source_uri": "s3://b/datasets/cifar10"}, "must be an S3 prefix ending in '/'"),
    ({"storage_kind": "nfs"}, "must be efs or fsx"),
    ({"preload": True}, "applies to FSx only"),
])
def test_builder_rejects_bad_arguments(kwargs, message):
    env = environment_for(stack(["cifar10"]))
    with pytest.raises(ValueError, match=message):
        manifests.staging_job_manifest(CATALOG["cifar10"], env=env, program=program(env), region="us-west-2",
                                       **({"source_uri": "s3://b/d/cifar10/"} | kwargs))
    with pytest.raises(ValueError, match="nothing to stage"):
        manifests.staging_job_manifest(CATALOG["synthetic"], env=env, program=program(env), source_uri="s3://b/d/",
                                       region="us-west-2")


REPO = Path(__file__).resolve().parents[2]


def project_imports(path: str) -> set[str]:
    """The repository files of the project modules ``path`` imports (packages' __init__.py included)."""
    found = set()
    for node in ast.walk(ast.parse((REPO / path).read_text())):
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]  # names may be submodules
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if not (REPO / parts[0] / "__init__.py").is_file():
                continue  # the standard library or a third-party package
            for i in range(1, len(parts) + 1):  # the packages on the way, then the module
                name = "/".join(parts[:i])
                found |= {c for c in (f"{name}.py", f"{name}/__init__.py") if (REPO / c).is_file()}
    return found


def test_every_project_module_the_staging_program_imports_is_shipped():
    shipped = set(manifests.STAGE_FILES)
    assert "datasets/stage.py" in shipped
    for path in sorted(shipped):
        missing = project_imports(path) - shipped
        assert not missing, f"{path} imports {sorted(missing)}, which the staging ConfigMap does not ship"


def test_the_shipped_program_runs_from_the_config_map_alone(tmp_path):
    env = environment_for(stack(["cifar10"]))
    cm = program(env)
    job = manifests.staging_job_manifest(CATALOG["cifar10"], env=env, program=cm, source_uri="s3://b/d/cifar10/",
                                         region="us-west-2")
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    volume = {v["name"]: v for v in pod["volumes"]}["code"]["configMap"]
    mount = {m["name"]: m for m in container["volumeMounts"]}["code"]["mountPath"]
    assert volume["name"] == cm["metadata"]["name"] and mount == manifests.CODE_ROOT
    assert {"name": "PYTHONPATH", "value": mount} in container["env"]
    assert container["command"][2].endswith('exec python -m datasets.stage "$@"')
    root, elsewhere = tmp_path / "opt-eksbench", tmp_path / "cwd"
    elsewhere.mkdir()
    for item in volume["items"]:  # what the kubelet writes into the volume
        (root / item["path"]).parent.mkdir(parents=True, exist_ok=True)
        (root / item["path"]).write_text(cm["data"][item["key"]])
    assert sorted(item["path"] for item in volume["items"]) == sorted(manifests.STAGE_FILES)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | {"PYTHONPATH": str(root)}
    run = subprocess.run([sys.executable, "-m", "datasets.stage", "--help"], cwd=elsewhere, env=environ,
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert "--source" in run.stdout


def test_a_change_to_any_shipped_file_changes_the_pod_template():
    env = environment_for(stack(["cifar10"]))
    files = stage_program_files()

    def annotation(files):
        job = manifests.staging_job_manifest(
            CATALOG["cifar10"], env=env, program=manifests.staging_program_config_map_manifest(files, env=env),
            source_uri="s3://b/d/cifar10/", region="us-west-2")
        return job["spec"]["template"]["metadata"]["annotations"]["eksbench.io/stage-program-sha256"]

    before = annotation(files)
    for path in manifests.STAGE_FILES:
        assert annotation(files | {path: files[path] + "\n"}) != before, path


def run_component(cfg) -> dict[str, Registration]:
    """Builds DatasetStaging under the shared mock engine; returns what it registered, by name."""
    env = environment_for(cfg)

    def build():
        provider = k8s.Provider("k8s", kubeconfig="{}")
        namespace = k8s.core.v1.Namespace("ns", metadata={"name": env.namespace},
                                          opts=pulumi.ResourceOptions(provider=provider))
        args = DatasetStagingArgs(datasets=datasets_to_stage(cfg.experiments), storage_kind=cfg.storage.kind,
                                  preload=cfg.storage.preload, region=cfg.region, env=env,
                                  source_uri=pulumi.Output.from_input("results-bucket").apply(env.datasets_uri))
        DatasetStaging("data", args, opts=pulumi.ResourceOptions(provider=provider, depends_on=[namespace]))

    return by_name(register(build))


def test_component_makes_one_awaited_job_per_dataset():
    registered = run_component(stack(["cifar10", "synthetic", "coco2017", "cifar10"]))
    jobs = [r for r in registered.values() if r.type == "kubernetes:batch/v1:Job"]
    assert sorted(r.name for r in jobs) == ["data-cifar10", "data-coco2017"]
    component = next(r for r in registered.values() if r.type == "eksbench:datasets:DatasetStaging")
    assert component.name == "data"
    for r in jobs:
        assert r.parent.endswith("eksbench:datasets:DatasetStaging::data")
        assert r.custom_timeouts["create"].endswith("m") and int(r.custom_timeouts["create"][:-1]) >= 30
        assert any("ConfigMap" in d for d in r.dependencies)
        assert any(d.endswith("kubernetes:core/v1:Namespace::ns") for d in r.dependencies)
        assert "pulumi:providers:kubernetes::k8s" in r.provider
        assert "pulumi.com/skipAwait" not in (r.inputs["metadata"].get("annotations") or {})
    args = registered["data-coco2017"].inputs["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:4] == ["--source", "s3://results-bucket/datasets/coco2017/", "--dest", "/data/datasets/coco2017"]
    mounts = registered["data-coco2017"].inputs["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "shared", "mountPath": "/data/datasets/coco2017", "subPath": "datasets/coco2017"} in mounts
    assert registered["data-coco2017"].inputs["metadata"]["name"] == "stage-coco2017"
    assert "datasets--stage.py" in registered["data-script"].inputs["data"]


def test_component_stages_nothing_for_synthetic_only_stacks():
    registered = run_component(stack(["synthetic", "synthetic"]))
    assert [r.type for r in registered.values() if r.type.startswith("kubernetes:") and r.name != "ns"] == []


def test_datasets_to_stage_keeps_first_use_order_and_skips_in_memory_data():
    cfg = stack(["coco2017", "synthetic", "cifar10", "coco2017"])
    assert datasets_to_stage(cfg.experiments) == ("coco2017", "cifar10")
    assert datasets_to_stage(stack(["synthetic"]).experiments) == ()
