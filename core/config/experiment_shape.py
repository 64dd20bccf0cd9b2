"""The shape of a stack's ``experiments``: each entry's keys, types and single values, sweeps expanded.

Part of the first validation stage (``core.config.shape``). An entry's node counts may be a range (an elastic
run), its default image follows its node group's GPUs and its framework (``core.catalog.compat``), and its
``args`` may not set what the stack file sets. Whether an experiment can run at all is the second stage,
``program.validation``.
"""

from __future__ import annotations

import re
from typing import Any

from core.catalog import aws as catalog
from core.catalog import compat
from core.catalog.pins import PADDLE_IMAGE
from core.config import sweep
from core.config.fields import Reader, read_items, show
from core.config.model import (
    BATCH_SIZE_MAX,
    DEFAULT_IMAGE,
    MAX_REPEATS,
    NAME,
    RETIRED_FRAMEWORKS,
    Experiment,
    GpuNodeGroup,
    choices_of,
    default_of,
)
from core.contract.train_args import SET_BY_RUN, flag_of, is_option, option_field


def parse_experiments(raw: Any, groups: tuple[GpuNodeGroup, ...], problems: list[str], *, default_image: str,
                      region: str | None) -> tuple[tuple[Experiment, ...], tuple[int, ...]]:
    """The experiments, sweeps expanded (``core.config.sweep``), and the stack-file index each came from."""
    if not isinstance(raw, list):
        if raw is not None:  # the same problem as any other key that must be a list
            read_items(raw, "experiments", None, problems, non_empty=False, what="experiments",
                       example='[{"name": "resnet50", "workload": "resnet50"}]')
        return (), ()
    if refused := sweep.too_many(raw, max_repeats=MAX_REPEATS):
        problems.append(refused)
        return (), ()
    out = []
    for x in sweep.expand(raw, problems, batch_max=BATCH_SIZE_MAX):
        r = Reader(x.item, f"experiments[{x.source}]", problems)
        parsed = _experiment(r, groups, default_image, region, entry=x.sweep)
        r.finish()
        out += [(parsed, x.source)] if parsed is not None else []
    return tuple(e for e, _ in out), tuple(i for _, i in out)


def _default(name: str) -> Any:
    """An experiment key's default (the dataclass holds them)."""
    return default_of(Experiment, name)


def _experiment(r: Reader, groups: tuple[GpuNodeGroup, ...], default_image: str = DEFAULT_IMAGE,
                region: str | None = None, entry: str | None = None) -> Experiment | None:
    """One experiment; ``entry``: the name of the sweep it was expanded from (its problems name that)."""
    n0 = len(r.problems)
    name = r.string("name", pattern=NAME, example='"resnet50-8gpu"')
    framework = _framework(r)
    min_nodes, max_nodes = _node_counts(r)
    group_name = r.string("node_group", groups[0].name if groups else "", example='"gpu"')
    group = next((g for g in groups if g.name == group_name), None)
    default_image = _default_image(group, framework, region, default_image)
    # Every GPU of the node unless asked otherwise (program.validation checks it against the group).
    per_node = max(group.gpus_per_node, 1) if group else 1
    gpus = r.integer("gpus_per_node", per_node, minimum=1, example=str(per_node))
    dataset = r.string("dataset", _default("dataset"), example='"synthetic"')
    e = dict(name=name, framework=framework, min_nodes=min_nodes, max_nodes=max_nodes, gpus_per_node=gpus,
             dataset=dataset, node_group=group_name, **_run_keys(r, default_image, experiment=entry or name))
    _refuse_unpinned_image(r, e["image"], default_image)
    return None if len(r.problems) > n0 else Experiment(**e)


def _framework(r: Reader) -> Any:
    """``framework``: one the trainers run; a retired one is refused with what replaced it."""
    framework = r.raw("framework", _default("framework"))
    if framework in RETIRED_FRAMEWORKS:
        r.fail(r.key("framework"), framework, RETIRED_FRAMEWORKS[framework], '"pytorch"')
    elif framework not in choices_of(Experiment, "framework"):
        r.fail(r.key("framework"), framework, f"must be one of {', '.join(choices_of(Experiment, 'framework'))}",
               '"pytorch"')
    return framework


def _node_counts(r: Reader) -> tuple[int | None, int | None]:
    """``nodes`` as (min, max): a count (``2`` or ``"2"``) or an elastic range ``"min:max"``; (None, None) when
    it is neither."""
    nodes_raw = r.raw("nodes", _default("max_nodes"))
    min_nodes = max_nodes = None
    if isinstance(nodes_raw, int) and not isinstance(nodes_raw, bool) and nodes_raw >= 1:
        min_nodes = max_nodes = nodes_raw
    elif isinstance(nodes_raw, str) and re.fullmatch(r"\d+:\d+", nodes_raw):
        min_nodes, max_nodes = (int(x) for x in nodes_raw.split(":"))
        if not 1 <= min_nodes <= max_nodes:
            r.fail(r.key("nodes"), nodes_raw, "min:max needs 1 <= min <= max", '"2:4"')
    elif isinstance(nodes_raw, str) and re.fullmatch(r"\d+", nodes_raw) and int(nodes_raw) >= 1:
        min_nodes = max_nodes = int(nodes_raw)
    else:
        r.fail(r.key("nodes"), nodes_raw, 'must be a node count >= 1, "min:max" for an elastic run, or a list of '
               "counts for a sweep", '"2:4"')
    return min_nodes, max_nodes


def _default_image(group: GpuNodeGroup | None, framework: Any, region: str | None, stack_default: str) -> str:
    """The image an experiment runs unless its ``image`` says otherwise: the framework's image with kernels for
    the group's GPUs that fits its driver (``core.catalog.compat``); paddle's one image without a group; else the
    stack's default."""
    if group is not None:
        return compat.default_image(group.instance_type, group.ami_type, region or catalog.DEFAULT_REGION, framework)
    if framework == "paddle":  # no group to fit: paddle's one image, from Docker Hub (no region to follow)
        return PADDLE_IMAGE
    return stack_default


def _run_keys(r: Reader, default_image: str, *, experiment: str) -> dict[str, Any]:
    """The keys read as they are, each with its type and range: what the experiment trains, the image and
    arguments it runs, checkpoints, options and repeats. ``experiment`` names it in its args' problems."""
    d = _default
    return dict(
        workload=r.string("workload", d("workload"), choices=choices_of(Experiment, "workload")),
        batch_size=r.integer("batch_size", d("batch_size"), minimum=1, maximum=BATCH_SIZE_MAX, example="256"),
        precision=r.string("precision", d("precision"), choices=choices_of(Experiment, "precision")),
        steps=r.integer("steps", d("steps"), minimum=1, example="500"),
        epochs=r.integer("epochs", d("epochs"), minimum=0, example="10"),
        image=r.string("image", default_image, pattern=r"[\w.\-/:]+(:[\w.\-]+|@sha256:[0-9a-f]{64})",
                       example=f'"{default_image}"'),
        args=_trainer_args(r, experiment),
        timeout_minutes=r.integer("timeout_minutes", d("timeout_minutes"), minimum=1, maximum=10080, example="120"),
        rdzv_backend=r.string("rdzv_backend", d("rdzv_backend"), choices=choices_of(Experiment, "rdzv_backend")),
        max_restarts=r.integer("max_restarts", d("max_restarts"), minimum=0, maximum=100, example="3"),
        checkpoint_every=r.integer("checkpoint_every", d("checkpoint_every"), minimum=0, example="500"),
        checkpoint_minutes=_number(r, "checkpoint_minutes", d("checkpoint_minutes"), minimum=0, maximum=1440,
                                   example="10"),
        evaluate=r.boolean("evaluate", d("evaluate")),
        channels_last=r.boolean("channels_last", d("channels_last")),
        compile=r.boolean("compile", d("compile")),
        compile_mode=r.string("compile_mode", d("compile_mode"), choices=choices_of(Experiment, "compile_mode")),
        target_accuracy=_number(r, "target_accuracy", d("target_accuracy"), minimum=0, maximum=1, example="0.9"),
        input_path=r.string("input_path", d("input_path"), choices=choices_of(Experiment, "input_path")),
        pservers=r.integer("pservers", d("pservers"), minimum=1, maximum=64, example="2"),
        fabric=r.string("fabric", d("fabric"), choices=choices_of(Experiment, "fabric")),
        **_language_model_keys(r),
        repeats=r.integer("repeats", d("repeats"), minimum=1, maximum=MAX_REPEATS, example="3"))


def _language_model_keys(r: Reader) -> dict[str, Any]:
    """A language model's keys (llama3), each with its type and range; whether they fit the workload, the GPU and
    its memory is program.validation's (experiment_checks)."""
    d = _default
    return dict(
        model_size=r.string("model_size", d("model_size"), choices=choices_of(Experiment, "model_size")),
        seq_len=r.integer("seq_len", d("seq_len"), minimum=8, maximum=131072, example="8192"),
        tensor_parallel=r.integer("tensor_parallel", d("tensor_parallel"), minimum=1, maximum=8, example="8"),
        sharding=r.string("sharding", d("sharding"), choices=choices_of(Experiment, "sharding")),
        activation_checkpoint=r.string("activation_checkpoint", d("activation_checkpoint"),
                                       choices=choices_of(Experiment, "activation_checkpoint")),
        fp8_recipe=r.string("fp8_recipe", d("fp8_recipe"), choices=choices_of(Experiment, "fp8_recipe")),
        val_every=r.integer("val_every", d("val_every"), minimum=0, example="500"),
        target_loss=_number(r, "target_loss", d("target_loss"), minimum=0, maximum=100, example="3.3"))


def _refuse_unpinned_image(r: Reader, image: Any, default_image: str) -> None:
    """An ``image`` must pin a version tag or a digest: ``latest`` or no tag would run whatever is newest."""
    if isinstance(image, str) and (image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1]):
        r.fail(r.key("image"), image, "must pin a version tag or digest (not latest)", f'"{default_image}"')


def _number(r: Reader, name: str, default: float | None, *, minimum: float, maximum: float,
            example: str) -> float | None:
    """A number (integer or decimal) between ``minimum`` and ``maximum``; ``default`` when absent."""
    value = r.raw(name, default)
    if value is None or value is default:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        r.fail(r.key(name), value, "must be a number", example)
        return default
    if not minimum <= value <= maximum:
        r.fail(r.key(name), value, f"must be between {minimum:g} and {maximum:g}", example)
        return default
    return float(value)


def _trainer_args(r: Reader, experiment: Any) -> tuple[str, ...]:
    """An experiment's ``args``: options the trainers take, none of them one the stack sets (TrainArgs' ``stack_key``:
    given after the contract's arguments, it would win, and the plan, the summary and the report would show what
    did not run). Prefixes count as argparse reads them (core.contract.train_args.option_field)."""
    args = r.strings("args", default_of(Experiment, "args"), example='["--lr", "0.1"]')
    who = f"experiment {show(experiment)}"
    for i, token in enumerate(args):
        f = option_field(token) if is_option(token) else None
        key, owner = f"{r.key('args')}[{i}]", f.metadata["stack_key"] if f else None
        if is_option(token) and f is None:
            r.fail(key, token, f"{who}: the trainers take no such option (python -m workloads.train.pytorch --help "
                   "lists theirs)", '"--lr=0.1"')
        elif owner == SET_BY_RUN:
            r.fail(key, token, f"{who} would set the trainers' {flag_of(f)}, which eksbench sets for every run (the "
                   "launcher reads the run's metrics, checkpoints and logs there and uploads them): remove it")
        elif owner is not None:
            whose = "the stack file's key" if "." in owner else "the experiment's own key"
            value = token.partition("=")[2] or next(iter(args[i + 1:i + 2]), "")
            value = ("false" if token.startswith("--no-") else "true") if isinstance(f.default, bool) else value
            r.fail(key, token, f"{who} would set the trainers' {flag_of(f)}, which {whose} {owner} sets (the plan, "
                   "the summary and the report read it there): use that key instead", f"{owner}: {value}" if value
                   else owner)
    return args
