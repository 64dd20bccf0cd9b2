"""Kubernetes object names from experiment names, run ids and repeats: always a DNS-1035 label within its
limit, the same as before for ordinary names, and different for different runs (core.contract.k8s_names)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from core.config.model import Experiment
from core.contract.k8s_names import MAX_LABEL, dns1035_label
from tests.support.k8s_schema import assert_valid
from tests.workloads.test_manifests import CIFAR, CODE, ENV, P3, RESNET
from workloads.job_manifests import experiment_manifests
from workloads.object_names import MAX_BASE_NAME, base_name, object_names, paddle_job_names, service_name

# Written out here, not imported: what Kubernetes checks (apimachinery validation.IsDNS1035Label).
DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def label(name: str, limit: int = MAX_LABEL) -> bool:
    return len(name) <= limit and DNS1035.fullmatch(name) is not None


# --- the two stacks of the issue ---------------------------------------------------------------------

def test_a_digit_led_name_that_fills_the_limit_gives_a_valid_service_name():
    e = Experiment(name="1" + "a" * 28)
    svc, job = service_name(e, "abcdefgh-1"), base_name(e, "abcdefgh-1")
    assert label(svc, MAX_BASE_NAME) and label(job, MAX_BASE_NAME), (svc, job)  # was "x1aaa...a-abcdefgh-"
    assert all(label(f"{job}-{i}") for i in range(64))  # the pods' hostnames


def test_the_repeats_of_a_digit_led_name_get_different_names():
    e = Experiment(name="1" + "b" * 25, repeats=2)
    runs = e.runs()
    services = [service_name(r, "abcdefgh-1") for r in runs]
    jobs = [base_name(r, "abcdefgh-1") for r in runs]
    assert len(set(services)) == 2 and len(set(jobs)) == 2, services  # both were "x1bbb...b-abcdefgh-1-r"
    assert all(label(n, MAX_BASE_NAME) for n in services + jobs)


# --- names that were fine stay as they were ------------------------------------------------------------

def test_valid_short_names_are_unchanged():
    assert base_name(RESNET, "run-001") == service_name(RESNET, "run-001") == "resnet50-synthetic-run-001"
    assert base_name(replace(CIFAR, repeats=3, repeat=2), "run-001") == "cifar10-elastic-run-001-r2"
    assert paddle_job_names("resnet50-run-001") == ("resnet50-run-001", "resnet50-run-001-ps")
    assert dns1035_label("a", "b-c") == "a-b-c"


def test_a_name_that_must_change_keeps_its_readable_start_and_ends_with_a_hash():
    long = base_name(Experiment(name="a" * 32), "r" * 20)
    assert long.startswith("a" * 31 + "-") and re.fullmatch(r"[0-9a-f]{8}", long[-8:]) and len(long) == 40
    assert re.fullmatch(r"x3d-unet-run-1-[0-9a-f]{8}", service_name(Experiment(name="3d-unet"), "run-1"))
    assert re.fullmatch(r"resnet-run-x-[0-9a-f]{8}", dns1035_label("ResNet", "run_X"))
    assert re.fullmatch(r"x-[0-9a-f]{8}", dns1035_label("")) and re.fullmatch(r"x-[0-9a-f]{8}", dns1035_label("--"))


@pytest.mark.parametrize("limit", [0, 9, 64])
def test_a_limit_outside_what_a_label_and_its_hash_allow_is_refused(limit):
    with pytest.raises(ValueError, match=f"limit={limit}"):
        dns1035_label("a", limit=limit)


# --- what the manifests name is what object_names says (the plan checks those) ------------------------

GATE_RBAC = {"gate-sa": "gate", "gate-role": "gate", "gate-binding": "gate"}  # one name, three kinds


@pytest.mark.parametrize("e", [RESNET, CIFAR, replace(RESNET, framework="paddle", pservers=2, name="3d-paddle")],
                         ids=lambda e: e.name)
def test_object_names_are_the_names_the_manifests_give(e):
    objs = experiment_manifests(e, env=ENV, node_group=P3, bucket="b", run_id="run-001", code_config_map=CODE,
                                  region="us-west-2", after=[("prev-run-001", None)], after_minutes=60)
    names = object_names(e, "run-001")
    for role, obj in objs.items():
        assert obj["metadata"]["name"] == names[GATE_RBAC.get(role, role)], role
        assert_valid(obj)
    assert set(names) == {r for r in objs if not r.startswith("gate-")}


# --- any input --------------------------------------------------------------------------------------

# Few characters, so that hypothesis meets the near misses: digits first, hyphens at the edges, upper case,
# names one apart, joins that read the same.
text = st.text(alphabet="ab1-A_.é", max_size=70)
repeat = st.integers(min_value=0, max_value=20)


def parts(name: str, run_id: str, k: int) -> tuple[str, ...]:
    return (name, run_id) + ((f"r{k}",) if k else ())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text, text, repeat)
def test_any_name_run_id_and_repeat_give_valid_labels_within_their_limits(name, run_id, k):
    e = Experiment(name=name, repeat=k, framework="paddle", evaluate=True)
    job = base_name(e, run_id)
    assert label(job, MAX_BASE_NAME) and label(service_name(e, run_id), MAX_BASE_NAME), job
    assert job == base_name(e, run_id)  # stable
    names = object_names(e, run_id)
    assert all(label(n) for n in names.values()) and label(f"{job}-999")  # a pod's hostname, names
    assert len(set(names.values())) == len(names) - 1  # only the Service shares the Job's name


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text, text, repeat, text, text, repeat)
@example("1" + "b" * 25, "abcdefgh-1", 1, "1" + "b" * 25, "abcdefgh-1", 2)  # the two repeats
@example("a" * 20 + "-b", "c" * 20, 0, "a" * 20, "b-" + "c" * 20, 0)  # too long, and joined alike
@example("3d", "run-1", 0, "x3d", "run-1", 0)  # the prefix "x" does not make it another experiment's name
def test_different_inputs_give_different_names(name1, run1, k1, name2, run2, k2):
    """Different names, unless both are the readable join unchanged and the joins are the same text: that
    case the plan refuses (tests/program/test_k8s_name_collisions.py)."""
    a, b = parts(name1, run1, k1), parts(name2, run2, k2)
    assume(a != b)
    e1, e2 = Experiment(name=name1, repeat=k1), Experiment(name=name2, repeat=k2)
    for build in (base_name, service_name):
        n1, n2 = build(e1, run1), build(e2, run2)
        if n1 == n2:
            assert n1 == "-".join(a) == "-".join(b), (build.__name__, a, b, n1)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(text, min_size=1, max_size=4), st.lists(text, min_size=1, max_size=4),
       st.integers(min_value=10, max_value=63))
def test_the_function_itself_on_any_parts_and_limit(p1, p2, limit):
    n1, n2 = dns1035_label(*p1, limit=limit), dns1035_label(*p2, limit=limit)
    assert label(n1, limit) and label(n2, limit)
    if p1 != p2 and n1 == n2:
        assert n1 == "-".join(p1) == "-".join(p2)
