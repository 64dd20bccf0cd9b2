"""TrainingJob and ExperimentSuite under the shared mock engine (tests/support/mock_engine: no CLI, no cluster).

``register(build)`` runs ``build`` with the mocks set and returns the recording monitor once every
RPC is done; its ``registrations`` hold every RegisterResource request (type, name, parent,
provider, dependencies, inputs and resource options). Outputs are read back as stack exports.
"""

from __future__ import annotations

import ast
from dataclasses import replace

import pulumi

from core.config.shape import parse_stack_config
from infra.environment import GPU_TAINT, environment_for
from tests.support.k8s_schema import assert_valid
from tests.support.mock_engine import K8S_API, k8s_manifest, of_type, register
from workloads.code_files import read_code_files
from workloads.code_manifests import code_config_map_manifest
from workloads.experiment_suite_component import ExperimentSuite, ExperimentSuiteArgs
from workloads.framework_support import check_experiment, missing_entry_points
from workloads.training_job_component import TrainingJob, TrainingJobArgs

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
CODE_FILES = {"core/__init__.py": "", "core/contract/train_args.py": "pass\n", "workloads/__init__.py": "",
              "workloads/train/__init__.py": "", "workloads/train/pytorch/__main__.py": "pass\n",
              "workloads/train/harness/launch.py": "pass\n"}
JOB = "kubernetes:batch/v1:Job"


def config(**changes):
    return parse_stack_config({**RAW, **changes}, project="eksbench", stack="dev", region="us-west-2")


def suite_args(cfg, code_files=CODE_FILES) -> ExperimentSuiteArgs:
    return ExperimentSuiteArgs(experiments=cfg.experiments, node_groups={g.name: g for g in cfg.gpu_node_groups},
                               execution=cfg.execution, run_id=cfg.run_id, region=cfg.region, env=environment_for(cfg),
                               bucket=pulumi.Output.from_input("results-bkt"), code_files=code_files)


def suite(cfg, provider=None, depends_on=None):
    opts = pulumi.ResourceOptions(provider=provider, depends_on=depends_on) if provider or depends_on else None
    s = ExperimentSuite("bench", suite_args(cfg), opts)
    pulumi.export("uris", pulumi.Output.all(*s.results_uris.values()))
    return s


def k8s_regs(monitor):
    return [r for r in monitor.registrations if r.type in K8S_API and r.type != "kubernetes:core/v1:Namespace"]


def test_suite_registers_valid_objects_with_gpus_tolerations_and_skip_await():
    def build():
        provider = pulumi.ProviderResource("kubernetes", "k8s", {})
        namespace = pulumi.CustomResource("kubernetes:core/v1:Namespace", "ns", {},
                                          pulumi.ResourceOptions(provider=provider))
        suite(config(), provider, depends_on=[namespace])

    monitor = register(build)
    assert monitor.stack_outputs["uris"] == ["s3://results-bkt/eksbench/dev/run-001/resnet50-synthetic/",
                                             "s3://results-bkt/eksbench/dev/run-001/cifar10-elastic/"]
    regs = k8s_regs(monitor)
    jobs = of_type(monitor, JOB)
    names = sorted(r.name for r in jobs)
    assert names == ["bench-cifar10-elastic-eval", "bench-cifar10-elastic-eval-gate",
                     "bench-cifar10-elastic-job", "bench-resnet50-synthetic-job"]
    ns_urn = of_type(monitor, "kubernetes:core/v1:Namespace")[0].urn
    code = next(r for r in regs if r.name == "bench-code")
    assert ns_urn in code.dependencies  # the suite's depends_on reaches the code ConfigMap ...
    for r in regs:
        assert r is code or code.urn in r.dependencies, r.name  # ... and every object waits for that ConfigMap
        assert_valid(k8s_manifest(r))
        assert "pulumi:providers:kubernetes::k8s::" in r.provider, (r.name, r.provider)  # via parent
    for r in jobs:
        assert r.inputs["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    named = {r.name: r for r in jobs}
    train = named["bench-resnet50-synthetic-job"].inputs["spec"]["template"]["spec"]
    assert train["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    tol = train["tolerations"][0]
    assert (tol["key"], tol["value"], tol["effect"]) == (GPU_TAINT["key"], GPU_TAINT["value"], GPU_TAINT["effect"])
    ev = named["bench-cifar10-elastic-eval"]
    assert ev.inputs["spec"]["suspend"] is True and ev.ignore_changes == ["spec.suspend"]
    # Fixed names: a rerun is a replacement, deleted first.
    assert all(r.replace_on_changes == ["spec"] and r.delete_before_replace for r in jobs)
    assert named["bench-resnet50-synthetic-job"].ignore_changes == []
    svc = of_type(monitor, "kubernetes:core/v1:Service")
    assert len(svc) == 2 and all(r.inputs["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true" for r in svc)
    assert len(of_type(monitor, "kubernetes:core/v1:ConfigMap")) == 1


def test_parallel_suite_starts_everything_at_once():
    jobs = {r.name: r for r in of_type(register(lambda: suite(config())), JOB)}
    assert jobs["bench-resnet50-synthetic-job"].inputs["spec"]["suspend"] is False
    assert jobs["bench-cifar10-elastic-job"].inputs["spec"]["suspend"] is False
    assert "bench-cifar10-elastic-gate" not in jobs


def test_sequential_suite_chains_experiments_through_suspended_jobs_and_gates():
    raw = dict(RAW, experiments=list(reversed(RAW["experiments"])))  # cifar first, so its eval is waited for
    monitor = register(lambda: suite(config(execution="sequential", experiments=raw["experiments"])))
    jobs = {r.name: r for r in of_type(monitor, JOB)}
    assert jobs["bench-cifar10-elastic-job"].inputs["spec"]["suspend"] is False
    second = jobs["bench-resnet50-synthetic-job"]
    assert second.inputs["spec"]["suspend"] is True
    gate = jobs["bench-resnet50-synthetic-gate"]
    spec = gate.inputs["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"]
    assert '"resume": ["resnet50-synthetic-run-001"]' in spec
    assert '["cifar10-elastic-run-001", null]' in spec
    assert '["cifar10-elastic-run-001-eval", "cifar10-elastic-run-001"]' in spec
    # The gate is created only after the previous experiment's Jobs exist (a missing Job counts as done).
    first_jobs = {jobs[n].urn for n in ("bench-cifar10-elastic-job", "bench-cifar10-elastic-eval")}
    assert first_jobs <= set(gate.dependencies)
    assert jobs["bench-resnet50-synthetic-job"].urn in gate.dependencies


def test_training_job_component_outputs_and_child_names():
    cfg = config()
    e = cfg.experiments[1]
    code = code_config_map_manifest({"workloads/train/harness/launch.py": "pass\n"}, namespace=cfg.namespace)
    made = []

    def build():
        job = TrainingJob("cifar", TrainingJobArgs(experiment=e, env=environment_for(cfg),
                                                   node_group=cfg.node_group_for(e),
                                                   bucket=pulumi.Output.from_input("b"), run_id=cfg.run_id,
                                                   code_config_map=code))
        made.append(job)
        pulumi.export("uri", job.results_uri)

    monitor = register(build)
    assert made[0].job_name == "cifar10-elastic-run-001"
    assert monitor.stack_outputs["uri"] == "s3://b/eksbench/dev/run-001/cifar10-elastic/"
    comp = of_type(monitor, "eksbench:workloads:TrainingJob")[0]
    children = {r.name for r in monitor.registrations if r.parent == comp.urn}
    assert {"cifar-job", "cifar-svc", "cifar-eval", "cifar-eval-gate"} <= children


def test_unsupported_pairs_are_found_by_the_checks_the_program_runs_first():
    # The program (program/stack.validate) runs these before registering anything; the suite trusts them.
    cfg = config()
    problems = check_experiment(replace(cfg.experiments[0], framework="tensorflow"))
    assert any(p.startswith("image=") for p in problems), problems


def test_frameworks_without_a_shipped_entry_point_are_found_by_the_program_checks():
    cfg = config()
    tf = replace(cfg.experiments[0], framework="tensorflow", image="tensorflow/tensorflow:2.17.0-gpu")
    problems = missing_entry_points((tf,), CODE_FILES)
    assert len(problems) == 1
    assert problems[0].startswith('experiments[0].framework="tensorflow": ')
    assert "workloads/train/tensorflow/__main__.py" in problems[0]
    assert missing_entry_points(cfg.experiments, CODE_FILES) == []


def project_imports(path: str, text: str) -> set[str]:
    """The eksbench modules (``core.*``, ``workloads.*``) a shipped file imports, absolute names."""
    out = set()
    for node in ast.walk(ast.parse(text, path)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # "from workloads.train import summary" may name a module of the package.
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in out if m.split(".")[0] in ("core", "workloads")}


def test_read_code_files_ships_the_training_package():
    files = read_code_files()
    assert {"workloads/__init__.py", "workloads/train/__init__.py", "workloads/train/pytorch/__main__.py",
            "workloads/train/harness/launch.py", "core/contract/train_args.py", "core/contract/s3_uri.py"} <= set(files)
    assert all(not k.startswith("/") and k.endswith(".py") and "__pycache__" not in k for k in files)
    assert {k.split("/")[0] for k in files} == {"core", "workloads"}
    code_config_map_manifest(files, namespace="eksbench")  # fits a ConfigMap
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
    assert {"core.contract.train_args", "core.contract.s3_uri"} <= seen
