"""Checks the config against what the region offers, and advises on costly choices.

``offering_problems`` is the second validation stage (meaning, after schema): given the
instance-type offerings the program looked up, it names each GPU type the region does
not offer and the alternatives it does (AWS is retiring P3). ``choose_azs`` prefers
zones that offer the GPU types. ``advisories`` are warnings, not errors.
"""

from __future__ import annotations

from typing import Mapping

from spec import aws_catalog as catalog
from spec.config import StackConfig
from spec.fields import show


def offering_problems(cfg: StackConfig, offered: Mapping[str, set[str]]) -> list[str]:
    problems = []
    for i, g in enumerate(cfg.gpu_node_groups):
        if offered.get(g.instance_type):
            continue
        here = [t for t in catalog.GPU_ALTERNATIVES if offered.get(t)]
        note = " (AWS is retiring P3)" if catalog.INSTANCE_TYPES[g.instance_type].retiring else ""
        problems.append(
            f"gpu_node_groups[{i}].instance_type={show(g.instance_type)}: not offered in {cfg.region}{note}; "
            f"offered there: {', '.join(here) or 'none of ' + ', '.join(catalog.GPU_ALTERNATIVES)}"
            + (f", e.g. {show(here[0])}" if here else ""))
    return problems


def choose_azs(region_azs: list[str], offered: Mapping[str, set[str]], gpu_types: list[str], count: int) -> list[str]:
    """``count`` zones (at least two), those offering the most GPU types first, region order kept."""
    score = {az: sum(az in offered.get(t, set()) for t in gpu_types) for az in region_azs}
    ranked = sorted(region_azs, key=lambda az: -score[az])[:max(2, count)]
    return [az for az in region_azs if az in ranked]


def group_azs(instance_type: str, azs: list[str], offered: Mapping[str, set[str]]) -> list[str]:
    """The chosen zones where this type is offered (all of them when offerings are unknown)."""
    return [az for az in azs if az in offered.get(instance_type, set(azs))] or list(azs)


def advisories(cfg: StackConfig) -> list[str]:
    notes = []
    for i, g in enumerate(cfg.gpu_node_groups):
        if catalog.INSTANCE_TYPES[g.instance_type].retiring:
            notes.append(f"gpu_node_groups[{i}].instance_type={show(g.instance_type)}: AWS is retiring P3 and some "
                         f"regions no longer offer it; alternatives: {', '.join(catalog.GPU_ALTERNATIVES)}")
        if g.min_size > 0:
            notes.append(f"gpu_node_groups[{i}].min_size={g.min_size}: GPU nodes bill while idle; 0 lets them scale "
                         "to zero between runs")
    if "0.0.0.0/0" in cfg.cluster.public_access_cidrs:
        notes.append('cluster.public_access_cidrs=["0.0.0.0/0"]: the API endpoint is reachable from anywhere; '
                     'restrict it, e.g. ["203.0.113.7/32"]')
    if cfg.cluster.kubernetes_version in catalog.EKS_EXTENDED_SUPPORT:
        notes.append(f"cluster.kubernetes_version={show(cfg.cluster.kubernetes_version)}: in extended support "
                     "($0.60/h instead of $0.10/h)")
    return notes
