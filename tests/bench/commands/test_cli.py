"""`python -m bench plan` as a user runs it: exit codes, output, and no tracebacks."""

import json
import subprocess
import sys

import pytest

from program.stack_files import ROOT, available_stacks


def bench(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_plan_dev_prints_resources_outputs_cost_and_time():
    r = bench("plan", "dev")
    assert r.returncode == 0, r.stderr
    for text in ("eks:index:Cluster", "Outputs:", "results_prefix", "Estimated cost: $49.3",
                 "Estimated provisioning:", "AWS is retiring P3"):
        assert text in r.stdout
    assert "Traceback" not in r.stderr and "Task was destroyed" not in r.stderr


# Example stacks that ship with placeholders: plan stops, exit 2, naming exactly the keys to fill in.
TO_FILL_IN = {"p5-fsx": ["cluster.public_access_cidrs[0]"]}


@pytest.mark.parametrize("stack", available_stacks())
def test_every_stack_plans_cleanly_as_json(stack):
    r = bench("plan", stack, "--json")
    if stack in TO_FILL_IN:
        assert r.returncode == 2 and r.stdout == ""
        problems = r.stderr.strip().splitlines()[1:]
        assert [p.strip().split("=")[0].split(":")[0] for p in problems] == TO_FILL_IN[stack], r.stderr
        return
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert set(doc) == {"stack", "resources", "outputs", "placeholders", "warnings", "estimate"}
    assert {"urn", "type", "name", "parent", "provider", "dependencies", "inputs"} <= set(doc["resources"][0])
    # a home stack runs no experiment, so it has no estimate of their first steps nor their learning rates
    assert set(doc["estimate"]) == {"hourly_cost_usd", "unpriced", "prices", "provision_minutes", "critical_path"} | (
        {"storage_prices"} if stack == "home" else {"first_step", "lr_schedules", "gpu_defaults", "sweep_idle",
                                                    "language_models"})
    if stack == "home":  # a bucket and a repository: minutes, no cluster, nothing billed per hour
        assert doc["estimate"]["hourly_cost_usd"] == 0 and not [r for r in doc["resources"] if r["type"].startswith("eks:")]
        return
    assert doc["estimate"]["provision_minutes"] > 15


def test_bad_config_exits_2_with_one_message_per_problem(tmp_path):
    (tmp_path / "Pulumi.bad.yaml").write_text(
        "config:\n  aws:region: us-west-2\n  eksbench:storage:\n    kind: nfs\n"
        "  eksbench:gpu_node_groups:\n    - {name: gpu, instance_type: m5.large}\n")
    target = ROOT / "Pulumi.bad-cli-test.yaml"
    target.write_text((tmp_path / "Pulumi.bad.yaml").read_text())
    try:
        r = bench("plan", "bad-cli-test")
    finally:
        target.unlink()
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert lines[0] == "error: invalid config for stack 'bad-cli-test':"
    assert 'storage.kind="nfs": must be one of efs, fsx, e.g. "efs"' in r.stderr
    assert 'gpu_node_groups[0].instance_type="m5.large": is not a GPU instance type' in r.stderr
    assert len(lines) == 3 and "Traceback" not in r.stderr


@pytest.mark.parametrize("extra, expected", [
    ("  eksbench:storage:\n    efs: {performance_mode: maxIO}\n  eksbench:results: {home_stack: organization/eksbench/home}\n",
     'storage.efs.performance_mode="maxIO"'),
    ("  eksbench:experiments:\n    - {name: c, workload: cifar10, dataset: cifar10}\n", "results.home_stack: is required"),
])
def test_new_meaning_rules_exit_2_naming_the_key(extra, expected):
    target = ROOT / "Pulumi.bad-rule-test.yaml"
    target.write_text("config:\n  aws:region: us-west-2\n  eksbench:cluster:\n    public_access_cidrs: []\n"
                      "  eksbench:gpu_node_groups:\n    - {name: gpu, instance_type: p3.16xlarge, max_size: 2}\n" + extra)
    try:
        r = bench("plan", "bad-rule-test")
    finally:
        target.unlink()
    assert r.returncode == 2 and r.stdout == "" and expected in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_unknown_stack_names_the_stacks_there():
    r = bench("plan", "nope")
    assert r.returncode == 2 and "no file Pulumi.nope.yaml; stacks here: dev" in r.stderr, r.stderr


@pytest.mark.parametrize("module,install", [("pandas", "bash .ci/setup"), ("yaml", "bash .ci/setup"),
                                            ("botocore.session", "bash .ci/setup"),
                                            ("jupyter", "pip install -e '.[notebook]'"),
                                            ("moto", "bash .ci/setup-tests")])
def test_a_missing_package_is_one_line_naming_the_install_that_brings_it(monkeypatch, capsys, module, install):
    """An environment set up by hand (a venv without the install files' packages) gets one line, no traceback."""
    from bench import cli

    def needs(args):
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)
    parser = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda: _with_func(parser(), needs))
    assert cli.main(["status", "dev"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the Python package ") and f"`{install}" in err[0], err


def _with_func(parser, func):
    """The parser, every subcommand's function replaced by ``func``."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.set_defaults(func=func)
    return parser
