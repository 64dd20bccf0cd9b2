"""The first validation stage, shape: a stack's raw config to a ``StackConfig``, or every shape problem.

Shape means keys, types and the ranges or choices of single values. Each problem names
the key path, quotes the value, states the rule and gives an example
(``gpu_node_groups[0].max_size="two": must be a whole number, e.g. 2``); unknown keys are
reported with the allowed ones. Rules that relate values to each other or to the world
(dataset catalog, region offerings, shipped code) are the second stage,
``program.validation``, which runs only once the shape is clean.

This module reads a stack file as a whole (either role) and its small sections (storage, results, local,
autostop); the cluster sections are ``core.config.cluster_shape``, the experiments ``core.config.experiment_shape``.
"""

from __future__ import annotations

from typing import Any, Mapping

from core.catalog import aws as catalog
from core.catalog.pins import training_image
from core.config.cluster_shape import parse_cluster, parse_gpu_groups, parse_network, parse_system_nodes
from core.config.experiment_shape import parse_experiments
from core.config.fields import ConfigError, Reader
from core.config.model import (
    DEFAULT_IMAGE,
    HOME_ROLE,
    NAME,
    ROLES,
    Autostop,
    Efs,
    Fsx,
    HomeConfig,
    LocalRun,
    Results,
    StackConfig,
    Storage,
    choices_of,
)
from core.config.pulumi_config import misspelled_key

# A home stack's StackReference name: <organization>/<project>/<stack> (Pulumi's fully qualified form;
# "organization" itself for a file or cloud-storage backend).
HOME_STACK = r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9._-]+/[A-Za-z0-9._-]{1,100}"
HOME_STACK_EXAMPLE = '"organization/eksbench/home"'
# Keys Pulumi.yaml declares with a default: the CLI hands them to every stack, the home stack too.
PROJECT_DEFAULTS = {"run_id": "run-001", "namespace": "eksbench", "execution": "parallel"}


def stack_role(raw: Mapping[str, Any]) -> str:
    """``eksbench:role``: "home" for the home stack, else "experiment" (also for a malformed value,
    which the parser then reports)."""
    return HOME_ROLE if isinstance(raw, Mapping) and raw.get("role") == HOME_ROLE else "experiment"


def parse_config(raw: Mapping[str, Any], *, project: str, stack: str,
                 region: str | None) -> StackConfig | HomeConfig:
    """Either kind of stack, by its role."""
    if stack_role(raw) == HOME_ROLE:
        return parse_home_config(raw, project=project, stack=stack, region=region)
    return parse_stack_config(raw, project=project, stack=stack, region=region)


def misspelled_namespaces(top: Reader, project: str) -> None:
    """Refuse, by name, each key whose namespace is a typo of a known one (``eksbnech:run_id``: decode_config
    keeps those whole), with the key it was probably meant to be."""
    for key in list(top.data):
        meant = misspelled_key(str(key), project) if ":" in str(key) else None
        if meant:
            top.refused.add(key)
            ns = str(key).partition(":")[0]
            top.fail(str(key), top.data[key], f"unknown namespace {ns!r} (a stack file holds {project}:, aws:, "
                     f"kubernetes:, ... keys), so the key would be ignored; did you mean {meant!r}?")


def parse_home_config(raw: Mapping[str, Any], *, project: str, stack: str, region: str | None) -> HomeConfig:
    """The home stack: role, tags and nothing an experiment stack has. Raises ConfigError (shape problems)."""
    problems: list[str] = []
    top = Reader(raw, "", problems)
    if not region:
        problems.append('aws:region: is required, e.g. "us-west-2" (pulumi config set aws:region us-west-2)')
    top.string("role", choices=ROLES)
    misspelled_namespaces(top, project)
    for key, default in PROJECT_DEFAULTS.items():
        value = top.raw(key, default)
        if value != default:
            top.fail(key, value, "is an experiment stack's key; the home stack runs nothing: remove it from "
                     f"Pulumi.{stack}.yaml")
    tags = top.string_map("tags")
    experiment_keys = sorted(set(raw) - top.used - top.refused) if isinstance(raw, Mapping) else []
    for key in experiment_keys:
        top.used.add(key)
        top.fail(top.key(str(key)), raw[key], "unknown key in a home stack (role: home), which holds only the "
                 "results/datasets bucket and the image repository; put clusters and experiments in an experiment "
                 "stack whose results.home_stack names this one; allowed keys here: role, tags")
    if problems:
        raise ConfigError(problems)
    return HomeConfig(project=project, stack=stack, region=region, tags=tags)


def parse_stack_config(raw: Mapping[str, Any], *, project: str, stack: str, region: str | None) -> StackConfig:
    """Parse the ``eksbench:*`` keys (namespace stripped) of one experiment stack. Raises ConfigError (shape problems)."""
    problems: list[str] = []
    top = Reader(raw, "", problems)
    if not region:
        problems.append('aws:region: is required, e.g. "us-west-2" (pulumi config set aws:region us-west-2)')
    if top.string("role", "experiment", choices=ROLES) == HOME_ROLE:
        raise ConfigError([f'role="home": Pulumi.{stack}.yaml is the home stack (results, datasets, image), not an '
                           f"experiment stack: create it with pulumi up -s {stack} (eksbench plan {stack} "
                           f"shows it); run experiments in a stack whose results.home_stack names it"])
    run_id = top.string("run_id", "run-001", pattern=NAME, example='"run-002"')
    namespace = top.string("namespace", "eksbench", pattern=NAME, example='"eksbench"')
    network = parse_network(Reader(top.mapping("network"), "network", problems))
    cluster = parse_cluster(Reader(top.mapping("cluster"), "cluster", problems))
    groups = parse_gpu_groups(top.raw("gpu_node_groups", None), problems)
    system = parse_system_nodes(Reader(top.mapping("system_nodes"), "system_nodes", problems))
    storage = _storage(Reader(top.mapping("storage"), "storage", problems))
    results = _results(Reader(top.mapping("results"), "results", problems))
    datasets_uri = top.s3_uri("datasets_uri", None)
    execution = top.string("execution", "parallel", choices=("parallel", "sequential"))
    local = _local(Reader(top.mapping("local"), "local", problems))
    tags = top.string_map("tags")
    autostop = _autostop(Reader(top.mapping("autostop"), "autostop", problems))
    experiments, sources = parse_experiments(top.raw("experiments", None), groups, problems,
                                             default_image=training_image(region) if region else DEFAULT_IMAGE,
                                             region=region)
    misspelled_namespaces(top, project)
    top.finish()
    if problems:  # the experiments of one sweep share their entry's problems: each is said once
        raise ConfigError(list(dict.fromkeys(problems)))
    return StackConfig(project=project, stack=stack, region=region, run_id=run_id, namespace=namespace,
                       network=network, cluster=cluster, gpu_node_groups=groups, system_nodes=system,
                       storage=storage, results=results, datasets_uri=datasets_uri, experiments=experiments,
                       execution=execution, local=local, tags=tags, autostop=autostop, experiment_sources=sources)


def _autostop(r: Reader) -> Autostop:
    """``autostop``: whether the cluster scales its GPU node groups to zero once the run is over, its deadline and
    how long it waits idle."""
    d = Autostop()
    a = Autostop(enabled=r.boolean("enabled", d.enabled),
                 deadline_minutes=r.integer("deadline_minutes", None, minimum=10, maximum=20160, example="240"),
                 idle_minutes=r.integer("idle_minutes", d.idle_minutes, minimum=1, maximum=1440, example="5"))
    r.finish()
    return a


def _storage(r: Reader) -> Storage:
    """``storage``: the shared volume (EFS or FSx for Lustre), where it is mounted, and each kind's settings."""
    d = Storage()
    kind = r.string("kind", d.kind, choices=("efs", "fsx"))
    mount = r.string("mount_path", d.mount_path, pattern=r"/[A-Za-z0-9_/.-]*", example='"/data"')
    preload = r.boolean("preload", d.preload)
    e = Reader(r.mapping("efs"), r.key("efs"), r.problems)
    efs = Efs(throughput_mode=e.string("throughput_mode", d.efs.throughput_mode, choices=("elastic", "bursting")),
              performance_mode=e.string("performance_mode", d.efs.performance_mode,
                                        choices=("generalPurpose", "maxIO")))
    e.finish()
    f = Reader(r.mapping("fsx"), r.key("fsx"), r.problems)
    deployment = f.string("deployment_type", d.fsx.deployment_type, choices=("PERSISTENT_2", "SCRATCH_2"))
    capacity = f.integer("storage_capacity_gib", d.fsx.storage_capacity_gib, minimum=1200, example="1200")
    # FSx for Lustre: SSD capacity is 1200 GiB or a multiple of 2400 GiB (PERSISTENT_2, SCRATCH_2).
    if isinstance(capacity, int) and capacity != 1200 and capacity % 2400:
        f.fail(f.key("storage_capacity_gib"), capacity, "must be 1200 or a multiple of 2400 (FSx for Lustre SSD)",
               "2400")
    throughput = f.integer("per_unit_storage_throughput", d.fsx.per_unit_storage_throughput, example="250")
    if isinstance(throughput, int) and throughput not in catalog.FSX_PERSISTENT_2_USD_PER_GIB_MONTH:
        f.fail(f.key("per_unit_storage_throughput"), throughput, "must be one of 125, 250, 500, 1000 (MB/s/TiB)",
               "250")
    f.finish()
    r.finish()
    return Storage(kind=kind, mount_path=mount, preload=preload, efs=efs,
                   fsx=Fsx(deployment_type=deployment, storage_capacity_gib=capacity,
                           per_unit_storage_throughput=throughput))


def _results(r: Reader) -> Results:
    """``results``: the home stack whose bucket holds the results, or an existing bucket."""
    home = r.string("home_stack", None, pattern=HOME_STACK, example=HOME_STACK_EXAMPLE)
    bucket = r.string("bucket", None, pattern=r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]", example='"my-results-bucket"')
    r.finish()
    return Results(home_stack=home, bucket=bucket)


def _local(r: Reader) -> LocalRun:
    """``local``: the sizes of a run on this machine (``eksbench run --local``)."""
    d = LocalRun()
    local = LocalRun(
        nodes=r.integer("nodes", d.nodes, minimum=1, maximum=8, example="2"),
        procs_per_node=r.integer("procs_per_node", d.procs_per_node, minimum=1, maximum=8, example="1"),
        steps=r.integer("steps", d.steps, minimum=1, example="30"),
        batch_size=r.integer("batch_size", d.batch_size, minimum=1, example="8"),
        image_size=r.integer("image_size", d.image_size, minimum=32, maximum=512, example="64"),
        width_per_group=r.integer("width_per_group", d.width_per_group, minimum=1, maximum=64, example="16"),
        timeout_minutes=r.integer("timeout_minutes", d.timeout_minutes, minimum=1, example="10"),
        model_size=r.string("model_size", d.model_size, choices=choices_of(LocalRun, "model_size")),
        seq_len=r.integer("seq_len", d.seq_len, minimum=0, maximum=8192, example="128"))
    r.finish()
    return local
