"""Pinned versions: every image names a version, and the packages pods install match what the tests ran with."""

from __future__ import annotations

import re
from pathlib import Path

from core.catalog import compat, pins

ROOT = Path(__file__).resolve().parents[2]

IMAGES = [pins.TRAINING_IMAGE, pins.ETCD_IMAGE, pins.DEVICE_PLUGIN_IMAGE, pins.GATE_IMAGE, pins.STAGING_IMAGE,
          pins.efa_plugin_image("us-west-2")]


def requirement_pins(path) -> dict[str, str]:
    """``name: version`` of a requirements file, following its ``-r`` includes."""
    found = {}
    for line in path.read_text().splitlines():
        if line.startswith("-r "):
            found.update(requirement_pins(path.parent / line[3:].strip()))
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s#]+)\s*(#.*)?", line.strip())
        if m:
            found[m.group(1).lower()] = m.group(2)
    return found


def test_every_image_is_pinned_to_a_version():
    for image in IMAGES:
        tag = image.rsplit("/", 1)[-1]
        assert ":" in tag and not tag.endswith(":latest"), image


def test_pod_package_pins_match_the_tested_requirements():
    tested = requirement_pins(ROOT / "requirements-dev.txt")
    for spec in [*pins.PIP_PINS.values(), pins.dali_pin("13.0")]:  # DALI: the tests' wheel is the DLC's CUDA's
        name, version = spec.split("==")
        assert tested.get(name.lower()) == version, (spec, tested.get(name.lower()))
    assert pins.dali_pin("12.6") == "nvidia-dali-cuda120==2.4.0"
    assert pins.dali_pin("13.0") == "nvidia-dali-cuda130==2.4.0"


def test_the_dockerfile_builds_on_the_pinned_image_with_the_same_packages():
    dockerfile = (ROOT / "workloads" / "Dockerfile").read_text()
    assert f"FROM {pins.TRAINING_IMAGE}" in dockerfile
    cuda = compat.find_image(pins.TRAINING_IMAGE).cuda
    for spec in [*pins.PIP_PINS.values(), pins.dali_pin(cuda)]:
        assert spec in dockerfile, spec


# Cluster Autoscaler's newest patch of each minor with an image on registry.k8s.io (kubernetes/autoscaler tags
# cluster-autoscaler-1.3x.y; promoted by kubernetes/k8s.io#9116 and #9760), and the appVersion of each chart
# release pinned (the chart repository's index.yaml), as read on 2026-12-07 (core/catalog/pins.py cites them).
NEWEST_AUTOSCALER_PATCH = {"1.32": "1.32.7", "1.33": "1.33.6", "1.34": "1.34.5", "1.35": "1.35.2", "1.36": "1.36.1"}
CHART_APP_VERSION = {"9.46.6": "1.32.0", "9.51.0": "1.33.0", "9.53.0": "1.34.2", "9.59.0": "1.35.0"}


def test_each_autoscaler_image_is_the_newest_patch_of_its_minor():
    for minor, (_, app) in pins.CLUSTER_AUTOSCALER_CHARTS.items():
        assert app == NEWEST_AUTOSCALER_PATCH[minor], (minor, app)  # a .0 image where a later patch exists fails here
    assert pins.CLUSTER_AUTOSCALER_CHARTS.keys() >= {"1.32", "1.33", "1.34", "1.35"}


def test_each_autoscaler_image_runs_under_a_chart_released_for_its_minor():
    # 1.36 has images but no chart whose appVersion is 1.36: the chart of 1.35 with a 1.36 image is no pin
    for minor, (chart, app) in pins.CLUSTER_AUTOSCALER_CHARTS.items():
        assert chart in CHART_APP_VERSION, f"chart {chart}: add its appVersion from the chart repository's index.yaml"
        assert CHART_APP_VERSION[chart].startswith(minor + ".") and app.startswith(minor + "."), (minor, chart, app)
