"""TrainingJob and ExperimentSuite under Pulumi's mock engine (no CLI, no cluster).

A small recording monitor (self-contained, not bench/mocks.py) keeps every RegisterResource
request: type, name, parent, provider, dependencies and inputs. Components are built
inside each test body, after ``set_mocks``.
"""

from __future__ import annotations

import ast
from dataclasses import replace

import pulumi
import pytest
from pulumi.runtime import mocks as pmocks
from pulumi.runtime import rpc

from infra.environment import GPU_TAINT, environment_for
from spec.config import parse_stack_config
from tests.support.k8s_schema import assert_valid
from workloads import job_manifests as manifests
from workloads.experiment_suite import (
    ExperimentSuite,
    ExperimentSuiteArgs,
    read_code_files,
)
from workloads.training_job import TrainingJob, TrainingJobArgs

RAW = {
    "run_id": "run-001",
    "gpu_node_groups": [{"name": "p3", "instance_type": "p3.16xlarge", "min_size": 0, "desired_size": 2,
                         "max_size": 2}],
    "experiments": [
        {"name": "resnet50-synthetic", "workload": "resnet50", "nodes": 2, "batch_size": 256, "steps": 500,
         "timeout_minutes": 60},
        {"name": "cifar10-elastic", "workload": "cifar10", "nodes": "1:2", "gpus_per_node": 1, "batch_size": 128,
         "epochs": 20, "dataset": "cifar10", "evaluate": True, "checkpoint_every": 100, "timeout_minutes": 90},
    ],
}
K8S_KINDS = {"kubernetes:batch/v1:Job": "Job", "kubernetes:core/v1:Service": "Service",
             "kubernetes:core/v1:ConfigMap": "ConfigMap", "kubernetes:core/v1:ServiceAccount": "ServiceAccount",
             "kubernetes:rbac.authorization.k8s.io/v1:Role": "Role",
             "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": "RoleBinding"}
CODE_FILES = {"spec/__init__.py": "", "spec/train_args.py": "pass\n", "workloads/__init__.py": "",
              "workloads/train/__init__.py": "", "workloads/train/__main__.py": "pass\n",
              "workloads/train/launch.py": "pass\n"}
RBAC = "rbac.authorization.k8s.io/v1"
API_VERSIONS = {"Job": "batch/v1", "Role": RBAC, "RoleBinding": RBAC}


class Mocks(pmocks.Mocks):
    def new_resource(self, args):
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args):
        return {}


class Recorder(pmocks.MockMonitor):
    def __init__(self, mocks):
        super().__init__(mocks)
        self.regs: list[dict] = []

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.regs.append({"urn": response.urn, "type": request.type, "name": request.name,
                              "parent": request.parent, "provider": request.provider,
                              "deps": set(request.dependencies), "inputs": rpc.deserialize_properties(request.object),
                              "ignore": list(request.ignoreChanges), "replace_on": list(request.replaceOnChanges),
                              "delete_first": request.deleteBeforeReplace})
        return response


@pytest.fixture
def monitor():
    rec = Recorder(Mocks())
    pulumi.runtime.set_mocks(Mocks(), monitor=rec, preview=False, project="eksbench", stack="dev")
    return rec


def config(**changes):
    return parse_stack_config({**RAW, **changes}, project="eksbench", stack="dev", region="us-west-2")


def as_manifest(reg):
    kind = K8S_KINDS[reg["type"]]
    obj = {"apiVersion": API_VERSIONS.get(kind, "v1"), "kind": kind}
    for key, value in reg["inputs"].items():
        if key not in ("apiVersion", "kind") and value is not None:
            obj[key] = value
    return obj


def k8s_regs(monitor):
    return [r for r in monitor.regs if r["type"] in K8S_KINDS]


def settled(*components):
    """An Output that resolves once every child resource is registered (the checks run then)."""
    jobs = [j for c in components for j in (c.jobs.values() if isinstance(c, ExperimentSuite) else [c])]
    ids = [res.id for j in jobs for res in j.resources.values()]
    uris = [j.results_uri for j in jobs]
    return pulumi.Output.all(pulumi.Output.all(*uris), *ids).apply(lambda xs: xs[0])


def suite(cfg, provider=None, depends_on=None):
    opts = pulumi.ResourceOptions(provider=provider, depends_on=depends_on) if provider or depends_on else None
    return ExperimentSuite("bench", ExperimentSuiteArgs(config=cfg, env=environment_for(cfg),
                                                        bucket=pulumi.Output.from_input("results-bkt"),
                                                        code_files=CODE_FILES), opts)


@pulumi.runtime.test
def test_suite_registers_valid_objects_with_gpus_tolerations_and_skip_await(monitor):
    provider = pulumi.ProviderResource("kubernetes", "k8s", {})
    namespace = pulumi.CustomResource("kubernetes:core/v1:Namespace", "ns", {},
                                      pulumi.ResourceOptions(provider=provider))
    s = suite(config(), provider, depends_on=[namespace])

    def check(uris):
        assert uris == ["s3://results-bkt/eksbench/dev/run-001/resnet50-synthetic/",
                        "s3://results-bkt/eksbench/dev/run-001/cifar10-elastic/"]
        regs = k8s_regs(monitor)
        jobs = [r for r in regs if r["type"] == "kubernetes:batch/v1:Job"]
        names = sorted(r["name"] for r in jobs)
        assert names == ["bench-cifar10-elastic-eval", "bench-cifar10-elastic-eval-gate",
                         "bench-cifar10-elastic-job", "bench-resnet50-synthetic-job"]
        ns_urn = next(r["urn"] for r in monitor.regs if r["type"] == "kubernetes:core/v1:Namespace")
        for r in regs:
            assert ns_urn in r["deps"], r["name"]  # the suite's depends_on reaches every object
            assert_valid(as_manifest(r))
            assert "pulumi:providers:kubernetes::k8s::" in r["provider"], (r["name"], r["provider"])  # via parent
        for r in jobs:
            assert r["inputs"]["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
        by_name = {r["name"]: r for r in jobs}
        train = by_name["bench-resnet50-synthetic-job"]["inputs"]["spec"]["template"]["spec"]
        assert train["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
        tol = train["tolerations"][0]
        assert (tol["key"], tol["value"], tol["effect"]) == (GPU_TAINT["key"], GPU_TAINT["value"], GPU_TAINT["effect"])
        ev = by_name["bench-cifar10-elastic-eval"]
        assert ev["inputs"]["spec"]["suspend"] is True and ev["ignore"] == ["spec.suspend"]
        assert all(r["replace_on"] == ["spec"] and r["delete_first"] for r in jobs)  # fixed names: rerun = replace
        assert by_name["bench-resnet50-synthetic-job"]["ignore"] == []
        svc = [r for r in regs if r["type"] == "kubernetes:core/v1:Service"]
        assert len(svc) == 2 and all(r["inputs"]["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
                                     for r in svc)
        assert len([r for r in regs if r["type"] == "kubernetes:core/v1:ConfigMap"]) == 1

    return settled(s).apply(check)


@pulumi.runtime.test
def test_parallel_suite_starts_everything_at_once(monitor):
    s = suite(config())

    def check(_):
        jobs = {r["name"]: r for r in k8s_regs(monitor) if r["type"] == "kubernetes:batch/v1:Job"}
        assert jobs["bench-resnet50-synthetic-job"]["inputs"]["spec"]["suspend"] is False
        assert jobs["bench-cifar10-elastic-job"]["inputs"]["spec"]["suspend"] is False
        assert "bench-cifar10-elastic-gate" not in jobs

    return settled(s).apply(check)


@pulumi.runtime.test
def test_sequential_suite_chains_experiments_through_suspended_jobs_and_gates(monitor):
    raw = dict(RAW, experiments=list(reversed(RAW["experiments"])))  # cifar first, so its eval is waited for
    s = suite(config(execution="sequential", experiments=raw["experiments"]))

    def check(_):
        regs = k8s_regs(monitor)
        jobs = {r["name"]: r for r in regs if r["type"] == "kubernetes:batch/v1:Job"}
        assert jobs["bench-cifar10-elastic-job"]["inputs"]["spec"]["suspend"] is False
        second = jobs["bench-resnet50-synthetic-job"]
        assert second["inputs"]["spec"]["suspend"] is True
        gate = jobs["bench-resnet50-synthetic-gate"]
        spec = gate["inputs"]["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"]
        assert '"resume": ["resnet50-synthetic-run-001"]' in spec
        assert '["cifar10-elastic-run-001", null]' in spec
        assert '["cifar10-elastic-run-001-eval", "cifar10-elastic-run-001"]' in spec
        # The gate is created only after the previous experiment's Jobs exist (a missing Job counts as done).
        first_jobs = {jobs[n]["urn"] for n in ("bench-cifar10-elastic-job", "bench-cifar10-elastic-eval")}
        assert first_jobs <= gate["deps"]
        assert jobs["bench-resnet50-synthetic-job"]["urn"] in gate["deps"]

    return settled(s).apply(check)


@pulumi.runtime.test
def test_training_job_component_outputs_and_child_names(monitor):
    cfg = config()
    e = cfg.experiments[1]
    code = manifests.code_config_map_manifest({"launch.py": "pass\n"}, namespace=cfg.namespace)
    job = TrainingJob("cifar", TrainingJobArgs(experiment=e, env=environment_for(cfg), node_group=cfg.node_group_for(e),
                                               bucket=pulumi.Output.from_input("b"), run_id=cfg.run_id,
                                               code_config_map=code))
    assert job.job_name == "cifar10-elastic-run-001"

    def check(uri):
        assert uri == "s3://b/eksbench/dev/run-001/cifar10-elastic/"
        comp = next(r for r in monitor.regs if r["type"] == "eksbench:workloads:TrainingJob")
        children = {r["name"] for r in monitor.regs if r["parent"] == comp["urn"]}
        assert {"cifar-job", "cifar-svc", "cifar-eval", "cifar-eval-gate"} <= children

    return settled(job).apply(lambda uris: check(uris[0]))


def test_suite_rejects_unsupported_pairs_before_registering(monitor):
    cfg = config()
    bad = replace(cfg, experiments=(replace(cfg.experiments[0], framework="tensorflow"),))
    with pytest.raises(ValueError, match=r"experiments\[0\]\.image="):
        suite(bad)


def test_suite_rejects_frameworks_without_a_shipped_entry_point(monitor):
    cfg = config()
    tf = replace(cfg.experiments[0], framework="tensorflow", image="tensorflow/tensorflow:2.17.0-gpu")
    with pytest.raises(ValueError, match=r"experiments\[0\]\.framework=\"tensorflow\": .*tf_keras.py"):
        suite(replace(cfg, experiments=(tf,)))


def project_imports(path: str, text: str) -> set[str]:
    """The eksbench modules (``spec.*``, ``workloads.*``) a shipped file imports, absolute names."""
    out = set()
    for node in ast.walk(ast.parse(text, path)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # "from workloads.train import summary" may name a module of the package.
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in out if m.split(".")[0] in ("spec", "workloads")}


def test_read_code_files_ships_the_training_package():
    files = read_code_files()
    assert {"workloads/__init__.py", "workloads/train/__init__.py", "workloads/train/__main__.py",
            "workloads/train/launch.py", "spec/train_args.py", "spec/s3_uri.py"} <= set(files)
    assert all(not k.startswith("/") and k.endswith(".py") and "__pycache__" not in k for k in files)
    assert {k.split("/")[0] for k in files} == {"spec", "workloads"}
    manifests.code_config_map_manifest(files, namespace="eksbench")  # fits a ConfigMap
    # Everything the pods import from the project is shipped: follow the imports from workloads/train.
    shipped = {k[:-len("/__init__.py")].replace("/", ".") if k.endswith("/__init__.py")
               else k[:-len(".py")].replace("/", "."): k for k in files}
    todo = [m for m, k in shipped.items() if k.startswith("workloads/train/")]
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        for name in project_imports(shipped[module], files[shipped[module]]):
            if name in shipped:
                todo.append(name)
            else:  # "from X import f": f is a function of the shipped module X
                assert name.rsplit(".", 1)[0] in shipped, f"{shipped[module]} imports {name}, which is not shipped"
    assert {"spec.train_args", "spec.s3_uri"} <= seen
