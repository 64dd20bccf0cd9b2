"""Hostile stack files and stack documents: one line naming the key or the file, exit 2, never a traceback.

Each case below broke the CLI before (a traceback, a hang or gigabytes of memory); the
property-based tests throw generated documents at the same path ``pulumi up`` and
``bench plan`` take (CLI serialisation, shape, meaning) and accept only two outcomes:
a StackConfig, or a ConfigError whose every line names a key or the file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.config.fields import ConfigError, show
from core.config.pulumi_config import decode_config, to_pulumi_config
from program.stack_files import ROOT, available_stacks, read_stack_yaml
from program.validation import validated_config

pytestmark = pytest.mark.hostile  # the hostile-input group: pytest -m hostile

GOOD_GROUP = {"name": "gpu", "instance_type": "p3.16xlarge", "max_size": 2}
GOOD_EXPERIMENT = {"name": "r50", "workload": "resnet50", "nodes": 2}
# A problem line starts with a key path (``a.b[0].c=`` or ``a.b: is required``) or a file name.
PROBLEM = re.compile(r'^(aws:region|stack|Pulumi\.[^:]+\.yaml|(?:[A-Za-z_][\w-]*|\[".*?"\])'
                     r'(?:\.[A-Za-z_][\w-]*|\[\d+\]|\[".*?"\])*)(=|: )')


def bench(*args):
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


@pytest.fixture
def stack_text(request):
    """Writes Pulumi.<name>.yaml into the project for one test, removed after."""
    written = []

    def write(name: str, data: bytes) -> str:
        path = ROOT / f"Pulumi.{name}.yaml"
        path.write_bytes(data)
        written.append(path)
        return name

    yield write
    for path in written:
        path.unlink(missing_ok=True)


ALIAS_BOMB = b"""config:
  a: &a ["x","x","x","x","x","x","x","x","x"]
  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
  eksbench:tags: [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


@pytest.mark.parametrize("name, data, expected", [
    ("hostile-binary", bytes(range(256)) * 4, "is not UTF-8 text"),
    ("hostile-list", b"- config\n- 1\n", "must be a mapping with a config: key, not a list"),
    ("hostile-aliases", ALIAS_BOMB, "YAML aliases (*a) are not allowed"),
    ("hostile-huge", b"config:\n  eksbench:run_id: " + b"x" * 2_000_000 + b"\n", "a stack file is at most"),
    ("hostile-twice", b"config:\n  eksbench:run_id: a\n  eksbench:run_id: b\n",
     "line 3: config.eksbench:run_id is given twice (lines 2 and 3)"),
], ids=["binary", "top-level-list", "alias-bomb", "two-megabytes", "key-twice"])
def test_unreadable_stack_files_are_one_line_and_exit_2(stack_text, name, data, expected):
    r = bench("plan", stack_text(name, data))
    assert r.returncode == 2, r.stderr
    assert expected in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 2  # "invalid config for stack ...:" and the problem


def test_alias_bomb_is_refused_before_it_expands(stack_text):
    with pytest.raises(ConfigError, match="aliases"):
        read_stack_yaml(stack_text("hostile-bomb", ALIAS_BOMB))


def test_stack_names_are_checked_before_any_file_is_opened():
    r = bench("plan", "x" * 300)
    assert r.returncode == 2 and 'must be 1-100 letters, digits, ".", "_" or "-"' in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr) < 600
    r = bench("plan", "../dev")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_a_huge_value_is_not_echoed_whole():
    raw = {"gpu_node_groups": [GOOD_GROUP], "experiments": [GOOD_EXPERIMENT], "run_id": "r" * 5_000_000}
    with pytest.raises(ConfigError) as e:
        validated_config(raw, project="eksbench", stack="t", region="us-west-2")
    assert len(str(e.value)) < 1000 and "more characters" in str(e.value)
    assert show("y" * 10_000).endswith("(9802 more characters)")


# Generated documents: every JSON-ish value at every key, including unknown keys and odd key types.
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                    st.text(max_size=30), st.sampled_from(["p3.16xlarge", "1:2", "efs", "fsx", "auto", "-1", ""]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=12), st.integers()), inner, max_size=4)),
    max_leaves=12)
KEYS = ["run_id", "namespace", "execution", "datasets_uri", "network", "cluster", "gpu_node_groups", "system_nodes",
        "storage", "results", "experiments", "local", "tags", "role"]
documents = st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=10)), values, max_size=6)


def near_good(doc: dict) -> dict:
    """Start from a valid stack and overwrite keys (so meaning rules get reached too)."""
    return {"gpu_node_groups": [dict(GOOD_GROUP)], "experiments": [dict(GOOD_EXPERIMENT)], **doc}


def outcome(stack_doc: dict) -> None:
    raw, region = decode_config(to_pulumi_config(stack_doc))
    try:
        validated_config(raw, project="eksbench", stack="t", region=region)
    except ConfigError as e:
        assert e.problems
        for line in e.problems:
            assert "\n" not in line and PROBLEM.match(line), line
            assert len(line) < 2000, line[:300]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_generated_stack_documents_give_a_config_or_named_problems(doc):
    outcome({"aws:region": "us-west-2", **{f"eksbench:{k}": v for k, v in near_good(doc).items()}})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["gpu_node_groups", "experiments", "storage", "network", "cluster", "local"]),
       st.sampled_from(["name", "instance_type", "nodes", "max_size", "min_size", "desired_size", "efa",
                        "placement_group", "kind", "efs", "fsx", "gpus_per_node", "node_group", "vpc_cidr",
                        "existing", "kubernetes_version", "public_access_cidrs", "precision", "image"]),
       values)
def test_generated_values_inside_sections(section, key, value):
    doc = near_good({})
    if section in ("gpu_node_groups", "experiments"):
        doc[section] = [{**doc[section][0], key: value}]
    else:
        doc[section] = {key: value}
    outcome({"aws:region": "us-west-2", **{f"eksbench:{k}": v for k, v in doc.items()}})


def test_a_stack_without_experiments_plans_with_a_warning_showing_the_cost(stack_text):
    text = (ROOT / "Pulumi.dev.yaml").read_text().split("  eksbench:experiments:")[0]
    r = bench("plan", stack_text("hostile-idle", (text + "  eksbench:experiments: []\n").encode()))
    assert r.returncode == 0, r.stderr
    assert "experiments=[]: the stack runs no experiment, yet its nodes and control plane bill about $49.30/h" \
        in r.stdout, r.stdout[-2000:]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_generated_home_stack_documents_give_a_home_or_named_problems(doc):
    """The home stack (role: home) through the same reader: a HomeConfig, or one-line named problems."""
    from core.config.model import HomeConfig
    from core.config.shape import parse_config

    raw, region = decode_config(to_pulumi_config({"aws:region": "us-west-2",
                                                  **{f"eksbench:{k}": v for k, v in doc.items()},
                                                  "eksbench:role": "home"}))
    try:
        assert isinstance(parse_config(raw, project="eksbench", stack="home", region=region), HomeConfig)
    except ConfigError as e:
        assert e.problems
        for line in e.problems:
            assert "\n" not in line and PROBLEM.match(line), line
            assert len(line) < 2000, line[:300]


# A key given twice is refused by name and line; only a regular file is a stack file (a named pipe is never
# opened to wait on, nor listed among the stacks).

GROUP_TWICE = """config:
  aws:region: us-west-2
  eksbench:gpu_node_groups:
    - name: p3
      instance_type: p3.16xlarge
      max_size: 2
      desired_size: 2
      max_size: 64
"""

EXPERIMENTS_TWICE = """config:
  eksbench:experiments:
    - name: first
  eksbench:run_id: r
  eksbench:experiments:
    - name: second
"""


def problems(tmp_path, text: str, stack: str = "t") -> list[str]:
    (tmp_path / f"Pulumi.{stack}.yaml").write_text(text)
    with pytest.raises(ConfigError) as e:
        read_stack_yaml(stack, tmp_path)
    return e.value.problems


def test_a_node_groups_key_given_twice_is_refused_naming_file_line_and_key_path(tmp_path):
    assert problems(tmp_path, GROUP_TWICE) == [
        "Pulumi.t.yaml: line 8: config.eksbench:gpu_node_groups[0].max_size is given twice (lines 6 and 8); give "
        "each key once, with the value you mean"]


def test_a_top_level_section_given_twice_is_refused_instead_of_dropping_the_first(tmp_path):
    (line,) = problems(tmp_path, EXPERIMENTS_TWICE)
    assert line.startswith("Pulumi.t.yaml: line 5: config.eksbench:experiments is given twice (lines 2 and 5)")


def test_every_repeated_key_is_named_and_keys_that_compare_equal_count_as_one(tmp_path):
    text = "config:\n  a: 1\n  a: 2\n  b: {0x1: x, 1: y}\n  a: 3\n"
    assert [p.split(";")[0] for p in problems(tmp_path, text)] == [
        "Pulumi.t.yaml: line 3: config.a is given twice (lines 2 and 3)",
        "Pulumi.t.yaml: line 4: config.b.1 is given twice (lines 4 and 4)",
        "Pulumi.t.yaml: line 5: config.a is given twice (lines 2 and 5)"]


def test_the_same_key_in_different_mappings_is_no_repeat(tmp_path):
    (tmp_path / "Pulumi.t.yaml").write_text(
        "config:\n  eksbench:gpu_node_groups:\n    - {name: a, max_size: 1}\n    - {name: b, max_size: 2}\n"
        "  eksbench:local: {steps: 3, nodes: 1}\n  eksbench:experiments: [{name: x, nodes: 1}]\n")
    assert read_stack_yaml("t", tmp_path)["eksbench:gpu_node_groups"][1] == {"name": "b", "max_size": 2}


def test_a_named_pipe_is_refused_at_once_and_is_not_listed_among_the_stacks(tmp_path):
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\n")
    os.mkfifo(tmp_path / "Pulumi.fifo.yaml")
    (tmp_path / "Pulumi.dir.yaml").mkdir()
    got: list = []
    reader = threading.Thread(target=lambda: got.append(_problems_of(tmp_path, "fifo")), daemon=True)
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # blocked in open(): release it with a writer, then fail
        with open(tmp_path / "Pulumi.fifo.yaml", "w"):
            pass
        pytest.fail("reading a named pipe as a stack file blocked")
    assert got == [["Pulumi.fifo.yaml: is a named pipe (FIFO), not a regular file; a stack file is a YAML file "
                    "(Pulumi.<stack>.yaml)"]]
    assert _problems_of(tmp_path, "dir") == [
        "Pulumi.dir.yaml: is a folder, not a regular file; a stack file is a YAML file (Pulumi.<stack>.yaml)"]
    assert available_stacks(tmp_path) == ["dev"]
    assert _problems_of(tmp_path, "nope") == ['stack="nope": no file Pulumi.nope.yaml; stacks here: dev']


def test_a_link_to_a_regular_file_is_still_a_stack_file(tmp_path):
    (tmp_path / "real.yaml").write_text("config:\n  eksbench:run_id: r\n")
    (tmp_path / "Pulumi.linked.yaml").symlink_to(tmp_path / "real.yaml")
    assert read_stack_yaml("linked", tmp_path) == {"eksbench:run_id": "r"}
    assert available_stacks(tmp_path) == ["linked"]


def _problems_of(root, stack: str) -> list[str]:
    try:
        read_stack_yaml(stack, root)
    except ConfigError as e:
        return e.problems
    return []


@pytest.mark.parametrize("value, message", [
    ("[" * 3000 + "]" * 3000, "lists and maps nested more than 16 deep"),
    ("!!binary aGVsbG8=", "eksbench:local: !!binary, which JSON cannot carry"),
    ("!!int abc", "a value cannot be read (invalid literal for int()"),
], ids=["3000-lists", "binary", "int-abc"])
def test_a_value_json_cannot_carry_is_one_line_naming_the_file(tmp_path, value, message):
    """A stack file nesting 3,000 lists ended in RecursionError; a --set value is held to the same rule."""
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.deep.yaml").write_text(f"config:\n  eksbench:local: {value}\n")
    r = subprocess.run([sys.executable, "-m", "bench", "plan", "deep", "--project-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and message in r.stderr, r.stderr
    assert "Pulumi.deep.yaml" in r.stderr and len(r.stderr.splitlines()) == 2


def test_a_plain_date_in_a_stack_file_stays_text_as_the_pulumi_cli_reads_it(tmp_path):
    """YAML 1.1 (PyYAML) reads 2026-12-07 as a date, which JSON cannot carry; go-yaml v3 reads it as text."""
    (tmp_path / "Pulumi.dated.yaml").write_text("config:\n  eksbench:run_id: 2026-12-07\n"
                                                "  eksbench:x: !!timestamp 2026-12-07\n")
    with pytest.raises(ConfigError, match=r"eksbench:x: !!timestamp, which JSON cannot carry"):
        read_stack_yaml("dated", tmp_path)
    (tmp_path / "Pulumi.dated.yaml").write_text("config:\n  eksbench:run_id: 2026-12-07\n")
    assert read_stack_yaml("dated", tmp_path) == {"eksbench:run_id": "2026-12-07"}
