"""Rules on each experiment's image and framework against its node group's GPUs (``core/catalog/compat.py``):
problems (no kernels for the GPUs, a CUDA the driver cannot run, a framework that cannot train on GPUs) and
advisories (an image eksbench cannot check, a framework not verified on GPUs, an image past patch support).
``program.validation.meaning_problems`` runs the problems with the others; ``program.stack`` warns the advisories."""

from __future__ import annotations

from typing import Any

from core.catalog import aws as catalog
from core.catalog import compat
from core.config.fields import problem, show
from core.config.model import Experiment, GpuNodeGroup, StackConfig


def _image_pairs(cfg: StackConfig):
    """(index, experiment, its node group, the table's row for its image or None) for every experiment on a group."""
    groups = cfg.node_groups
    for i, e in enumerate(cfg.experiments):
        group = groups.get(e.node_group)
        if group is not None:
            yield i, e, group, compat.find_image(e.image)


def image_problems(cfg: StackConfig) -> list[str]:
    """Each experiment's image can train on its node group: kernels for the group's GPUs, and a CUDA the
    AMI's driver runs without the forward-compatibility package (core/catalog/compat.py, with its sources)."""
    out = []
    for i, e, group, row in _image_pairs(cfg):
        if row is None:
            continue
        reasons = compat.pair_problems(row, group.instance_type, group.ami_type)
        if reasons:
            fit = compat.default_image(group.instance_type, group.ami_type, cfg.region or catalog.DEFAULT_REGION, e.framework)
            out.append(problem(f"{cfg.experiment_key(i)}.image", e.image,
                               f"cannot train on node group {group.name!r} ({group.instance_type}, {group.ami_type}): "
                               f"{'; '.join(reasons)}; leave image unset for the group's default (core/catalog/compat.py), "
                               f"or use one built for its GPUs", show(fit)))
    return out


def gpu_training_problems(cfg: StackConfig) -> list[str]:
    """Experiments whose framework cannot train on GPUs in its pinned release (``compat.NO_GPU_TRAINING``): every
    node group is a GPU group, so the cluster cannot run them."""
    out = []
    for i, e, group, _ in _image_pairs(cfg):
        why = compat.NO_GPU_TRAINING.get(e.framework)
        if why:
            out.append(problem(f"{cfg.experiment_key(i)}.framework", e.framework,
                               f"cannot train on node group {group.name!r} ({group.instance_type}): {why}; run it on "
                               f"this machine's CPUs with `eksbench run {cfg.stack} --local`, or benchmark the GPUs "
                               "with pytorch, horovod or tensorflow", '"pytorch"'))
    return out


def image_advisories(cfg: StackConfig, today: str | None = None) -> list[str]:
    """Warnings: an image eksbench has no CUDA build for (custom images, other frameworks) is not checked; a
    framework whose GPU path has not run yet (``compat.NOT_VERIFIED_ON_GPUS``) is not verified; an image past
    AWS's patch support on ``today`` (ISO date; None: no date check) is named with what to use instead.

    Each is said once for all the experiments it concerns, and names the setting that chose what it is about: the
    experiments' own ``image``/``framework`` keys where the stack file sets them, else the node group's
    ``instance_type``, from which ``core.config.experiment_shape`` picks an experiment's default image."""
    found: dict[tuple[tuple[str, ...], str], list[tuple[int, Experiment]]] = {}
    for i, e, group, row in _image_pairs(cfg):
        for setter, body in _image_notes(cfg, e, group, row, today):
            found.setdefault((setter, body), []).append((i, e))
    return [f"{_setter_text(cfg, setter, members)}: {body}" for (setter, body), members in found.items()]


def _image_notes(cfg: StackConfig, e: Experiment, group: GpuNodeGroup, row: Any,
                 today: str | None) -> list[tuple[tuple[str, ...], str]]:
    """(what set it, the advisory) for one experiment's image and framework on its node group."""
    out = []
    cc = compat.gpu_arch(group.instance_type)
    region = cfg.region or catalog.DEFAULT_REGION
    defaulted = e.image == compat.default_image(group.instance_type, group.ami_type, region, e.framework)
    image_setter = ("default image", group.name, e.image) if defaulted else ("image", e.image)
    if row is not None and today and compat.past_patch_support(row, today):
        instead = (compat.SM70_AFTER_SUPPORT if cc == "7.0" else
                   f"set image: to a supported {row.framework} image (core/catalog/compat.py IMAGES)")
        out.append((image_setter, f"{row.name} left AWS's patch support on {row.end_of_patch} (no security fixes "
                                  f"since); {instead}"))
    if row is None and cc is not None:
        driver = compat.AMI_DRIVERS.get(group.ami_type)
        on_driver = f" and runs on its NVIDIA driver {driver.branch} without the compat package" if driver else ""
        out.append((("image", e.image), "not in core/catalog/compat.py, so eksbench cannot check that its CUDA build "
                    f"has kernels for node group {group.name!r} ({catalog.INSTANCE_TYPES[group.instance_type].gpu_model}, "
                    f"{compat.sm(cc)}){on_driver}; check it, or add its row to core/catalog/compat.py IMAGES"))
    why = compat.NOT_VERIFIED_ON_GPUS.get(e.framework)
    if why and cc is not None:
        out.append((("framework", e.framework), f"not verified on GPUs: {why}; its numbers on node group "
                    f"{group.name!r} may fail or mislead until a GPU run has checked it"))
    return out


def _setter_text(cfg: StackConfig, setter: tuple[str, ...], members: list[tuple[int, Experiment]]) -> str:
    """Whom an advisory is about: ``experiments[0].image="..."`` (every experiment that sets it, each key once), or
    for a default image the node group's instance type that chose it and the experiments that get it."""
    kind, *rest = setter
    if kind == "default image":
        group, image = rest
        index = next(k for k, g in enumerate(cfg.gpu_node_groups) if g.name == group)
        names = ", ".join(dict.fromkeys(e.name for _, e in members))
        return (f"gpu_node_groups[{index}].instance_type={show(cfg.gpu_node_groups[index].instance_type)}: the "
                f"default image it gives {names} (no image: set), {show(image)}")
    keys = ", ".join(dict.fromkeys(f"{cfg.experiment_key(i)}.{kind}" for i, _ in members))
    return f"{keys}={show(rest[0])}"
