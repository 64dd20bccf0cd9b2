"""``ExperimentSuite``: every experiment of the stack, plus the ConfigMap with their code.

One ``TrainingJob`` per experiment. With ``execution: sequential`` each experiment's Jobs
are created suspended and resumed by a gate once the previous experiment finished (its
training Job, and its evaluation unless that never started), so waiting experiments hold
no GPUs; with ``parallel`` they all start at once and the scheduler shares the nodes.
The Kubernetes provider comes in through ``opts`` and reaches every child via ``parent``
(pulumi-eks gives no usable default provider: it must be explicit).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import pulumi

from infra import k8s_objects
from infra.environment import Environment
from spec.config import StackConfig
from spec.fields import ConfigError
from workloads import contracts
from workloads import job_manifests as manifests
from workloads.training_job import TrainingJob, TrainingJobArgs

REPO_ROOT = Path(__file__).resolve().parents[1]


def read_code_files(root: Path = REPO_ROOT) -> dict[str, str]:
    """The sources the pods run, ``{path relative to the repository root: text}``.

    ``workloads/train`` (every ``*.py``, subfolders too) with the package files above it, and
    ``spec/*.py``, the dependency-free layer the training code imports (``spec.train_args``,
    ``spec.s3_uri``). They are mounted at ``contracts.CODE_ROOT`` with the same layout.
    """
    paths = [root / "workloads" / "__init__.py", *sorted((root / "spec").glob("*.py")),
             *sorted((root / "workloads" / "train").rglob("*.py"))]
    return {p.relative_to(root).as_posix(): p.read_text() for p in paths if "__pycache__" not in p.parts}


@dataclass(frozen=True)
class ExperimentSuiteArgs:
    """config: the parsed stack config. env: infra.environment.environment_for(config).
    bucket: the results bucket's name. code_files: read_code_files()."""
    config: StackConfig
    env: Environment
    bucket: pulumi.Input[str]
    code_files: Mapping[str, str]


class ExperimentSuite(pulumi.ComponentResource):
    """The code ConfigMap and one TrainingJob per experiment, in parallel or one after another."""

    results_uris: dict[str, pulumi.Output[str]]
    jobs: dict[str, TrainingJob]

    def __init__(self, name: str, args: ExperimentSuiteArgs, opts: pulumi.ResourceOptions | None = None):
        cfg, env = args.config, args.env
        problems = [f"experiments[{i}].{p}" for i, e in enumerate(cfg.experiments)
                    for p in contracts.check_experiment(e)]
        # The code ConfigMap is mounted over workloads/train, so the entry point must be shipped.
        problems += contracts.missing_entry_points(cfg.experiments, args.code_files)
        if problems:
            raise ConfigError(problems)  # before registering anything
        super().__init__("eksbench:workloads:ExperimentSuite", name, None, opts)
        # What the suite waits for (namespace, service account, claim, etcd) its children wait for:
        # depends_on is not inherited through parent.
        deps = opts.depends_on if opts else None
        inherited = [deps] if isinstance(deps, pulumi.Resource) else list(deps or [])
        code = manifests.code_config_map_manifest(args.code_files, namespace=env.namespace)
        code_map = k8s_objects.register(f"{name}-code", code, pulumi.ResourceOptions(parent=self, depends_on=inherited))
        self.jobs = {}
        previous: TrainingJob | None = None
        waited_minutes = 0
        for i, e in enumerate(cfg.experiments):
            sequential = cfg.execution == "sequential" and i > 0
            prior = cfg.experiments[i - 1] if sequential else None
            if prior is not None:
                waited_minutes += manifests.suite_budget_minutes(prior)
            job = TrainingJob(
                f"{name}-{e.name}",
                TrainingJobArgs(experiment=e, env=env, node_group=cfg.node_group_for(e), bucket=args.bucket,
                                run_id=cfg.run_id, code_config_map=code, region=cfg.region,
                                after=manifests.completion_waits(prior, run_id=cfg.run_id) if prior else (),
                                after_minutes=waited_minutes if prior else 0),
                pulumi.ResourceOptions(parent=self,
                                       depends_on=inherited + [code_map] + ([previous] if sequential else [])))
            self.jobs[e.name] = job
            previous = job
        self.results_uris = {n: j.results_uri for n, j in self.jobs.items()}
        self.register_outputs({"results_uris": self.results_uris})
