"""`--set KEY=VALUE` on `run` and `plan`, and `--experiment` on AWS: each set value is checked as one in the stack
file would be, reaches the offline plan and the program that `pulumi up` runs (through its environment), and a
mistake is one line, exit 2; one experiment's run builds that experiment's Jobs alone."""

from __future__ import annotations

import json
import re
import runpy
import shutil

import pytest

from bench.cli import main
from core.config.overrides import Overrides
from core.config.pulumi_config import PROJECT, to_pulumi_config
from core.contract.names import ENV_OVERRIDES
from program.stack_files import ROOT, parse_setting, read_stack_yaml


def run_cli(capsys, *argv: str) -> tuple[int, list[str], list[str]]:
    """The exit code and the non-empty stdout and stderr lines of ``eksbench <argv>``, in this process."""
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's own refusals
        code = e.code
    out = capsys.readouterr()
    return code, [x for x in out.out.splitlines() if x.strip()], [x for x in out.err.splitlines() if x.strip()]


def jobs(plan_json: dict) -> dict[str, dict]:
    """The plan's training Jobs by resource name, as `eksbench plan --json` prints them."""
    return {r["urn"].rsplit("::", 1)[-1]: r["inputs"] for r in plan_json["resources"]
            if r["type"] == "kubernetes:batch/v1:Job" and r["urn"].endswith("-job")}


# --- --set on a local run: nodes, batch size, steps, precision and local: keys, checked as the file's ---

def test_set_values_reach_a_local_runs_plan(capsys):
    code, out, err = run_cli(capsys, "run", "dev", "--local", "--dry-run", "--experiment", "resnet50-synthetic",
                             "--set", "experiments[0].nodes=1", "--set", "experiments[0].precision=fp32",
                             "--set", "experiments[0].steps=7", "--set", "local.batch_size=4",
                             "--set", "local.steps=5")
    assert (code, err) == (0, [])
    (line,) = [x for x in out if x.strip().startswith("resnet50-synthetic:")]
    assert "nodes 1 x 1 proc, 5 steps, batch 4, fp32" in line


@pytest.mark.parametrize("setting, line", [
    ("experiments[0].nodes=0", 'error: experiments[0].nodes=0: must be a node count >= 1, "min:max" for an '
                               'elastic run, or a list of counts for a sweep, e.g. "2:4" (set by --set '
                               'experiments[0].nodes=0)'),
    ("experiments[1].batch_size=big", 'error: experiments[1].batch_size="big": must be a whole number, e.g. 256 '
                                      "(set by --set experiments[1].batch_size=big)"),
    ("experiments[0].precision=fp8", "(set by --set experiments[0].precision=fp8)"),
    ("local.steps=0", "error: local.steps=0: must be >= 1, e.g. 30 (set by --set local.steps=0)"),
    ("nodes", "error: --set nodes: give KEY=VALUE, e.g. --set experiments[0].nodes=2"),
    ("experiments..nodes=2", "error: --set experiments..nodes=...: not a config path at character 12"),
    ("experiments[7].nodes=2", "error: --set experiments[7].nodes=2: experiments has 2 item(s): [7] is past its end "
                               "([2] adds one)"),
    ("local.steps=[1", "error: --set local.steps=[1: the value is not YAML"),
])
def test_a_bad_set_is_one_line_naming_it_exit_2(capsys, setting, line):
    code, _, err = run_cli(capsys, "run", "dev", "--local", "--dry-run", "--set", setting)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(line) or err[0].endswith(line), err


def test_values_read_as_yaml_scalars_as_the_pulumi_cli_reads_them():
    assert parse_setting("experiments[0].nodes=2").value == 2
    assert parse_setting("experiments[0].evaluate=true").value is True
    assert parse_setting("experiments[0].nodes=1:4").value == "1:4"  # PyYAML's YAML 1.1 reads 64 (base 60)
    assert parse_setting("experiments[0].nodes=[1, 2]").value == [1, 2]
    assert parse_setting("run_id=007").value == "007"  # a key with no path keeps its text, as `pulumi config set`


# --- --set and --experiment on the plan, and on the program `pulumi up` runs ---

def test_the_plan_builds_what_set_and_experiment_say(capsys):
    code, out, err = run_cli(capsys, "plan", "dev", "--json", "--experiment", "resnet50-synthetic",
                             "--set", "experiments[0].nodes=1", "--set", "experiments[0].steps=42")
    assert (code, err) == (0, [])
    found = jobs(json.loads("\n".join(out)))
    assert list(found) == ["experiments-resnet50-synthetic-job"]  # no Job of cifar10-elastic
    spec = found["experiments-resnet50-synthetic-job"]["spec"]
    assert spec["parallelism"] == 1
    assert "--steps=42" in json.dumps(spec) or '"--steps", "42"' in json.dumps(spec)


def test_a_set_value_the_cluster_cannot_run_is_refused_by_the_plan_naming_the_set(capsys):
    code, _, err = run_cli(capsys, "plan", "dev", "--set", "experiments[0].nodes=9")
    assert code == 2
    assert err[-1].strip() == ("experiments[0].nodes=9: needs 9 nodes but node group 'p3' has max_size 2, e.g. 2 "
                               "(set by --set experiments[0].nodes=9)")


def test_the_program_pulumi_up_runs_reads_the_overrides_from_its_environment(monkeypatch):
    """__main__.py under the mock engine, with the variable bench/cloud/pulumi_cli.open_stack gives the CLI."""
    from program.mock_run import run_program

    overrides = Overrides((parse_setting("experiments[1].nodes=2"),), experiment="cifar10-elastic")
    monkeypatch.setenv(ENV_OVERRIDES, overrides.to_env())
    monitor = run_program(lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__"), project=PROJECT,
                          stack="dev", config=to_pulumi_config(read_stack_yaml("dev")))
    found = {r.urn.rsplit("::", 1)[-1]: r.inputs for r in monitor.registrations
             if r.type == "kubernetes:batch/v1:Job" and r.urn.endswith("-job")}
    assert list(found) == ["experiments-cifar10-elastic-job"]
    assert found["experiments-cifar10-elastic-job"]["spec"]["parallelism"] == 2  # the file says "1:2"


def test_an_aws_run_of_one_experiment_plans_only_it(capsys, monkeypatch):
    """`eksbench run dev --experiment X` goes through preflight with one experiment, up to the Pulumi CLI."""
    from bench.cloud import preflight

    def no_cli(*_a, **_k):
        raise preflight.Refusal("the Pulumi CLI is not on PATH")

    monkeypatch.setattr(preflight, "check_pulumi", no_cli)
    code, out, err = run_cli(capsys, "run", "dev", "--yes", "--experiment", "resnet50-synthetic")
    assert (code, err) == (2, ["error: the Pulumi CLI is not on PATH"])
    (ok,) = [x for x in out if x.startswith("preflight: config ok")]
    assert ok.endswith(", 1 experiment(s))")
    assert "60 min of experiments" in "\n".join(out)  # resnet50-synthetic's timeout alone


def test_an_aws_run_of_one_experiment_judges_only_it_as_its_plan_and_program_do(capsys, monkeypatch):
    """Another experiment's problem does not refuse `run --experiment X`: pulumi up builds and checks X alone."""
    from bench.cloud import preflight

    def no_cli(*_a, **_k):
        raise preflight.Refusal("the Pulumi CLI is not on PATH")

    monkeypatch.setattr(preflight, "check_pulumi", no_cli)
    other = ("--set", "experiments[1].nodes=9", "--experiment", "resnet50-synthetic")  # cifar10-elastic past max_size
    assert run_cli(capsys, "plan", "dev", *other)[0] == 0
    code, out, err = run_cli(capsys, "run", "dev", "--yes", *other)
    assert (code, err) == (2, ["error: the Pulumi CLI is not on PATH"])
    assert [x for x in out if x.startswith("preflight: config ok")][0].endswith(", 1 experiment(s))")


def test_a_local_run_of_one_experiment_judges_only_it(capsys):
    """As on AWS: cifar10-elastic as Paddle (elastic, evaluated: neither exists for Paddle) does not refuse a local
    run of resnet50-synthetic; a run of cifar10-elastic itself is refused, naming the experiment as the file does."""
    other = ("--set", "experiments[1].framework=paddle")
    code, out, err = run_cli(capsys, "run", "dev", "--local", "--dry-run", "--experiment", "resnet50-synthetic", *other)
    assert (code, err) == (0, []) and "1 experiment(s)" in out[0]
    code, _, err = run_cli(capsys, "run", "dev", "--local", "--dry-run", "--experiment", "cifar10-elastic", *other)
    assert code == 2 and err[0].startswith('error: experiments[1].nodes="1:2": elastic runs need framework "pytorch"')


def test_open_stack_hands_the_overrides_to_the_pulumi_cli(monkeypatch, tmp_path):
    from pulumi import automation as auto

    from bench.cloud import pulumi_cli

    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    shutil.copy(ROOT / "Pulumi.dev.yaml", tmp_path / "Pulumi.dev.yaml")
    seen = {}
    monkeypatch.setattr(pulumi_cli.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(pulumi_cli, "isolate_cli", lambda: None)
    monkeypatch.setattr(auto, "create_or_select_stack", lambda **kw: seen.update(kw))
    overrides = Overrides((parse_setting("local.steps=5"),), experiment="cifar10-elastic")
    pulumi_cli.open_stack("dev", tmp_path, overrides=overrides)
    assert Overrides.from_env(seen["opts"].env_vars[ENV_OVERRIDES]) == overrides
    pulumi_cli.open_stack("dev", tmp_path, check_config=False)
    assert not seen["opts"].env_vars


# --- --set values YAML can build but a stack file cannot hold: one line each, from the CLI and the API ---

HOSTILE_SETS = [
    ("local.steps=!!binary aGVsbG8=", "!!binary, which JSON cannot carry"),
    ("local.steps=!!set {a, b}", "!!set, which JSON cannot carry"),
    ("local.steps=!!timestamp 2001-12-14", "!!timestamp, which JSON cannot carry"),
    ("local.steps=!!int abc", "the value cannot be read (invalid literal for int()"),
    ("experiments[0].batch_size=" + "9" * 5000, "the value cannot be read (Exceeds the limit (4300 digits)"),
    ("experiments[0].batch_size=" + "9" * 30, "a whole number beyond +-9223372036854775807 (30 digits)"),
    ("local.steps=.inf", "a number too large or not a number (inf), which JSON cannot carry"),
    ("local.steps=" + "[" * 5000 + "]" * 5000, "lists and maps nested more than 16 deep"),
    ("local.steps=" + "{a: " * 3000 + "1" + "}" * 3000, "lists and maps nested more than 16 deep"),
    ("local.steps=" + "[" * 17 + "]" * 17, "lists and maps nested more than 16 deep"),
    ("local" + ".a" * 3000 + "=1", "a key path of more than 16 steps below its key"),
    ("experiments" + "[0]" * 3000 + "=1", "a key path of more than 16 steps below its key"),
]


@pytest.mark.parametrize("setting, message", HOSTILE_SETS, ids=[
    "binary", "set", "timestamp", "int-abc", "5000-digits", "30-digits", "inf", "5000-lists", "3000-maps", "17-lists",
    "3000-names", "3000-indexes"])
def test_a_set_value_a_stack_file_cannot_hold_is_one_line_from_the_cli_and_the_api(capsys, setting, message):
    """Each gave a traceback (TypeError: bytes is not JSON serializable, the 4300-digit limit, RecursionError)."""
    from bench import automation

    for argv in (["plan", "dev"], ["run", "dev", "--local", "--dry-run"]):
        code, _, err = run_cli(capsys, *argv, "--set", setting)
        assert code == 2 and len(err) == 1 and message in err[0] and "Traceback" not in err[0], err
        assert len(err[0]) < 600
    with pytest.raises(ValueError, match=re.escape(message)):
        automation.plan("dev", settings=[setting])


def test_a_map_key_yaml_reads_as_no_text_is_named_with_the_fix_and_long_settings_are_cut(capsys):
    assert parse_setting("tags={on: call}").value == {"on": "call"}  # YAML 1.2, as the Pulumi CLI reads it
    with pytest.raises(ValueError, match=r"a map key read as int 1 \(YAML 1.1 reads on, yes, off, no and numbers "
                                         r"so\), not text: quote it"):
        parse_setting("tags={1: call}")
    from bench import automation

    for bad in ([123], [None], [b"local.steps=2"]):  # an AttributeError or a bare TypeError from the API before
        with pytest.raises(TypeError, match=r"^settings: a list of KEY=VALUE texts"):
            automation.overrides(bad)
    code, _, err = run_cli(capsys, "plan", "dev", "--set", "local.steps=" + "x" * 100_000)
    assert code == 2 and err[0] == "error: invalid config for stack 'dev':" and all(len(x) < 1000 for x in err), err


def test_a_value_at_the_stated_depth_still_reads():
    assert parse_setting("local.x=" + "[" * 16 + "]" * 16).value is not None
    assert parse_setting("local" + ".a" * 16 + "=1").path == ("a",) * 16
    assert parse_setting(f"experiments[0].batch_size={2**63 - 1}").value == 2**63 - 1
