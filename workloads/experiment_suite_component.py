"""``ExperimentSuite``: every experiment of the stack, plus the ConfigMap with their code.

One ``TrainingJob`` per experiment, or per repeat of one (``repeats: N``: N Jobs, one after
another; a Job cannot run its pods again, and an Indexed Job's completions and successPolicy
count pods of one run, so each repeat is a Job of its own, ``<job>-r<k>``). With ``execution:
sequential`` each run's Jobs are created suspended and resumed by a gate once the previous run
finished (its training Job, and its evaluation unless that never started), so waiting runs hold
no GPUs; with ``parallel`` the experiments start at once and the scheduler shares the nodes, each
experiment's repeats still chained (``run_order``).
The Kubernetes provider comes in through ``opts`` and reaches every child via ``parent``
(pulumi-eks gives no usable default provider: it must be explicit); the suite's
``depends_on`` reaches the code ConfigMap through ``infra.component_options.child_options``, and every
run's objects through that one ConfigMap.

Registration stays linear in the runs: no run's objects depend on another run's component, which Pulumi would
expand into its children, nor on a chain through every run before it. Pulumi's SDK walks all that a resource
depends on, transitively, each time a dependency is declared (``pulumi/runtime/resource_cycle_breaker.py``),
so a chain of n runs cost n walks of the whole chain. A run's gate alone waits for the run before it, for
that run's Jobs (``TrainingJob.completion``), which depend on nothing of the runs before theirs: the gate
must not be created before the Jobs it waits for exist (it would take a missing Job as finished), and the
waiting runs' Jobs are created suspended.
The experiments arrive validated: the program checks them before registering anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import pulumi

from core.config.model import Experiment, GpuNodeGroup
from core.contract.names import repeat_suffix
from infra import k8s_objects
from infra.component_options import child_options
from infra.environment import Environment
from workloads.code_files import read_git_commit
from workloads.code_manifests import code_config_map_manifest
from workloads.gate_manifests import completion_waits
from workloads.job_manifests import suite_budget_minutes
from workloads.training_job_component import TrainingJob, TrainingJobArgs


@dataclass(frozen=True)
class ExperimentSuiteArgs:
    """Inputs of the suite: the experiments and just what running them needs from the stack.

    experiments: the parsed experiments, in config order (the order ``sequential`` runs them in).
    node_groups: the GPU node groups by name; ``Experiment.node_group`` names each experiment's.
    execution: "parallel" (all at once) or "sequential" (one after another, through gates).
    run_id: part of every Job name and results path.
    region: exported to the pods as AWS_REGION for boto3; None leaves it to the pod.
    env: infra.environment.environment_for(config): namespace, shared storage, results paths.
    bucket: the results bucket's name.
    code_files: read_code_files(), shipped in the code ConfigMap.
    git_commit: read_git_commit() of the shipped code; None: the suite reads it itself.

    Checked before the suite is built (the program calls framework_support.check_experiment and
    framework_support.missing_entry_points once, before registering anything). The Kubernetes provider
    and what the suite waits for come through ``opts``.
    """
    experiments: tuple[Experiment, ...]
    node_groups: Mapping[str, GpuNodeGroup]
    execution: str
    run_id: str
    region: str | None
    env: Environment
    bucket: pulumi.Input[str]
    code_files: Mapping[str, str]
    git_commit: str | None = None


def run_order(experiments: tuple[Experiment, ...], execution: str
              ) -> list[tuple[Experiment | None, Experiment, int]]:
    """(the run it waits for or None, the run, the longest that wait can take in minutes) for each run of
    each experiment (``Experiment.runs``: itself, or its repeats). ``sequential``: every run after the one
    before it. ``parallel``: experiments start together, and an experiment's repeats still run one after
    another (side by side they would share the nodes and slow each other down)."""
    out, last, waited = [], None, 0
    for e in experiments:
        runs = e.runs()
        for k, run in enumerate(runs):
            prior = runs[k - 1] if k else (last if execution == "sequential" else None)
            if prior is None:
                waited = 0
            else:
                waited += suite_budget_minutes(prior)
            out.append((prior, run, waited))
            last = run
    return out


class ExperimentSuite(pulumi.ComponentResource):
    """The code ConfigMap and one TrainingJob per experiment, in parallel or one after another."""

    results_uris: dict[str, pulumi.Output[str]]
    jobs: dict[str, TrainingJob]

    def __init__(self, name: str, args: ExperimentSuiteArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:workloads:ExperimentSuite", name, None, opts)
        env, experiments = args.env, args.experiments
        code = code_config_map_manifest(args.code_files, namespace=env.namespace)
        # What the suite waits for (namespace, service account, claim, etcd), the code ConfigMap waits for, and every
        # run waits for the ConfigMap alone: one resource, where the suite's own dependencies are components that
        # Pulumi would expand into all their children for each of the runs' objects.
        code_map = k8s_objects.register(f"{name}-code", code, child_options(self, opts))
        self.jobs = {}
        self.results_uris = {}
        git_commit = args.git_commit if args.git_commit is not None else read_git_commit()
        bucket = pulumi.Output.from_input(args.bucket)
        for prior, run, waited_minutes in run_order(experiments, args.execution):
            job = TrainingJob(
                f"{name}-{run.name}" + (repeat_suffix(run.repeat) if run.repeat else ""),
                TrainingJobArgs(experiment=run, env=env, node_group=args.node_groups[run.node_group],
                                bucket=args.bucket, run_id=args.run_id, code_config_map=code, region=args.region,
                                after=completion_waits(prior, run_id=args.run_id) if prior else (),
                                after_minutes=waited_minutes, git_commit=git_commit,
                                after_jobs=tuple(self.jobs[prior.label].completion) if prior else ()),
                pulumi.ResourceOptions(parent=self, depends_on=[code_map]))
            self.jobs[run.label] = job
            # The experiment's own prefix: its repeats' folders sit below it.
            self.results_uris.setdefault(run.name, bucket.apply(
                lambda b, n=run.name: env.results.child(n).in_bucket(b).uri))
        self.register_outputs({"results_uris": self.results_uris})
