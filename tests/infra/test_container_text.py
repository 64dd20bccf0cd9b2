"""infra.container_text: every ``$`` of a container's command, args, env values and exec probes is doubled, and
Kubernetes' own expansion (tests/support/kubelet_expansion.py, checked here against upstream's cases) gives
back exactly what the builder wrote."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.container_text import escape_dollars, kubelet_literal
from tests.support.kubelet_expansion import command_and_args, container_env, expand, mapping_for

# kubernetes/kubernetes third_party/forked/golang/expansion/expand_test.go ``doExpansionTest``, every case,
# under the mapping of ``TestMapping``.
UPSTREAM_CONTEXT = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}
UPSTREAM_CASES = [
    ("$(VAR_A)", "A"), ("$(VAR_A)-$(VAR_A)", "A-A"), ("$(VAR_A)-1", "A-1"), ("___$(VAR_B)___", "___B___"),
    ("___$(VAR_C)", "___C"), ("$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"), ("$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"),
    ("$$(VAR_A)_$$(VAR_B)", "$(VAR_A)_$(VAR_B)"), ("f000-$$VAR_A", "f000-$VAR_A"),
    ("foo\\$(VAR_C)bar", "foo\\Cbar"), ("foo\\\\$(VAR_C)bar", "foo\\\\Cbar"),
    ("foo\\\\\\\\$(VAR_A)bar", "foo\\\\\\\\Abar"), ("$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"),
    ("$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"), ("$(VAR_REF)", "$(VAR_A)"),
    ("%%$(VAR_REF)--$(VAR_REF)%%", "%%$(VAR_A)--$(VAR_A)%%"), ("foo$(VAR_EMPTY)bar", "foobar"),
    ("foo$(VAR_Awhoops!", "foo$(VAR_Awhoops!"), ("f00__(VAR_A)__", "f00__(VAR_A)__"),
    ("$?_boo_$!", "$?_boo_$!"), ("$VAR_A", "$VAR_A"), ("$(VAR_DNE)", "$(VAR_DNE)"),
    ("$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"), ("$$$$$$(VAR_A)", "$$$(VAR_A)"),
    ("$$$$$$$(GOOD_ODDS)", "$$$$(GOOD_ODDS)"), ("$$$$$$$(VAR_A)", "$$$A"), ("$VAR_A)", "$VAR_A)"),
    ("${VAR_A}", "${VAR_A}"), ("$(VAR_B)_______$(A", "B_______$(A"), ("$(VAR_C)_______$(", "C_______$("),
    ("$(VAR_A)foobarzab$", "Afoobarzab$"), ("foo-\\$(VAR_A", "foo-\\$(VAR_A"), ("--$($($($($--", "--$($($($($--"),
    ("$($($($($--foo$(", "$($($($($--foo$("), ("foo0--$($($($(", "foo0--$($($($("),
    ("$(foo$$var)", "$(foo$$var)"), ("\n", "\n"),
]
HOSTILE = ["--tag=$(EKSBENCH_EXPERIMENT)", "--cost=$$5", "$", "$(", "'; rm -rf /", "`id`", "a\nb", "$é", "$()"]


@pytest.mark.parametrize("text, expected", UPSTREAM_CASES)
def test_the_expansion_is_kubernetes_own(text, expected):
    assert expand(text, mapping_for(UPSTREAM_CONTEXT)) == expected


def test_the_kubelet_rewrites_what_is_not_escaped():
    """What the escape is for: unescaped, a stack file's argument reaches the process changed."""
    env = mapping_for({"EKSBENCH_EXPERIMENT": "x-pytorch"})
    assert [expand(a, env) for a in HOSTILE[:2]] == ["--tag=x-pytorch", "--cost=$5"]


@given(text=st.text(alphabet=st.sampled_from("$()ab \n\\`'é{}") | st.characters(), max_size=40),
       context=st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=4))
def test_a_doubled_text_expands_back_to_itself_under_any_env(text, context):
    assert expand(escape_dollars(text), mapping_for(context)) == text


def pod(container: dict, init: dict | None = None) -> dict:
    spec = {"containers": [container], **({"initContainers": [init]} if init else {})}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"template": {"spec": spec}}}


def test_command_args_env_values_and_exec_probes_are_escaped_and_the_input_kept():
    c = {"name": "main", "command": ["/bin/sh", "-c", 'echo "$HOME" $(date)'], "args": HOSTILE,
         "env": [{"name": "A", "value": "$(B)$$"}, {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}],
         "livenessProbe": {"exec": {"command": ["test", "$(A)"]}},
         "lifecycle": {"preStop": {"exec": {"command": ["echo", "$(A)"]}}}}
    job = pod(c, init={"name": "init", "command": ["sh", "-c", "chown $(id -u) /x"]})
    before = copy.deepcopy(job)
    out = kubelet_literal(job)
    assert job == before  # the builder's dict is not changed
    spec = out["spec"]["template"]["spec"]
    main, init = spec["containers"][0], spec["initContainers"][0]
    assert main["command"][2] == 'echo "$$HOME" $$(date)' and main["args"] == [escape_dollars(a) for a in HOSTILE]
    assert main["env"][0]["value"] == "$$(B)$$$$" and main["env"][1] == c["env"][1]
    assert main["livenessProbe"]["exec"]["command"] == ["test", "$$(A)"]
    # the kubelet runs a lifecycle hook's command as it is (pkg/kubelet/lifecycle/handlers.go)
    assert main["lifecycle"] == c["lifecycle"]
    assert init["command"][2] == "chown $$(id -u) /x"


def test_what_the_kubelet_hands_the_process_is_what_the_builder_wrote():
    c = {"name": "main", "command": ["/bin/sh", "-c", "exec x"], "args": HOSTILE,
         "env": [{"name": "EKSBENCH_EXPERIMENT", "value": "x-pytorch"},
                 {"name": "A", "value": "$(EKSBENCH_EXPERIMENT)"}, {"name": "B", "value": "$$5 $"}]}
    escaped = kubelet_literal(pod(c))["spec"]["template"]["spec"]["containers"][0]
    env = container_env(escaped, value_from=lambda e: "", completion_index=0)
    assert env == {"EKSBENCH_EXPERIMENT": "x-pytorch", "A": "$(EKSBENCH_EXPERIMENT)", "B": "$$5 $",
                   "JOB_COMPLETION_INDEX": ""}
    assert command_and_args(escaped, env) == [*c["command"], *HOSTILE]


@pytest.mark.parametrize("kind, path", [
    ("Deployment", ("spec", "template", "spec")), ("DaemonSet", ("spec", "template", "spec")),
    ("Pod", ("spec",)), ("CronJob", ("spec", "jobTemplate", "spec", "template", "spec"))])
def test_every_kind_with_a_pod_spec_is_escaped(kind, path):
    manifest = {"kind": kind}
    node = manifest
    for key in path:
        node = node.setdefault(key, {})
    node["containers"] = [{"name": "c", "command": ["$x"]}]
    node = kubelet_literal(manifest)
    for key in path:
        node = node[key]
    assert node["containers"][0]["command"] == ["$$x"]


def test_objects_without_a_pod_are_passed_as_they_are():
    cm = {"kind": "ConfigMap", "data": {"script": "echo $(HOME) $$"}}
    assert kubelet_literal(cm) is cm
