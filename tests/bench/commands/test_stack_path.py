"""A path where a stack name is expected (a stack file's, or a folder of stack files) gets one line naming the command
that works, exit 2, from every command that takes a stack name; a stack name and a run's handle pass through."""

from __future__ import annotations

import pytest

from bench.cli import main
from bench.project import stack_path_problem
from program.stack_files import ROOT, stack_file_parts

FRAMEWORKS = "tests/stacks/Pulumi.frameworks.yaml"


@pytest.mark.parametrize("argv,command", [
    (["plan", FRAMEWORKS], "eksbench plan --project-dir tests/stacks frameworks"),
    (["plan", "--json", FRAMEWORKS], "eksbench plan --project-dir tests/stacks --json frameworks"),
    (["run", FRAMEWORKS, "--local"], "eksbench run --project-dir tests/stacks frameworks --local"),
    (["status", FRAMEWORKS], "eksbench status --project-dir tests/stacks frameworks"),
    (["logs", FRAMEWORKS, "tf"], "eksbench logs --project-dir tests/stacks frameworks tf"),
    (["audit", FRAMEWORKS], "eksbench audit --project-dir tests/stacks frameworks"),
    (["destroy", FRAMEWORKS], "eksbench destroy --project-dir tests/stacks frameworks"),
    (["plan", "Pulumi.dev.yaml"], "eksbench plan dev"),  # the project's own file: no --project-dir needed
])
def test_a_stack_files_path_is_one_line_naming_the_command_that_works(monkeypatch, capsys, argv, command):
    monkeypatch.chdir(ROOT)
    assert main(argv) == 2
    err = capsys.readouterr().err
    given = next(a for a in argv if a.endswith(".yaml"))
    assert err.count("\n") == 1 and err.startswith(f'error: stack="{given}": is a stack file\'s path where a stack '
                                                   "name is expected; use: ")
    assert err.rstrip().endswith(f"use: {command}"), err


def test_the_command_it_names_plans_the_stack(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert main(["plan", "--project-dir", "tests/stacks", "frameworks"]) == 0
    assert "eksbench plan for stack 'frameworks'" in capsys.readouterr().out


def test_a_folder_of_stack_files_names_its_stacks(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert main(["plan", "tests/stacks/"]) == 2
    err = capsys.readouterr().err
    assert "is a folder of stack files" in err and "use: eksbench plan --project-dir tests/stacks STACK" in err
    assert "(STACK: cifar-frameworks, frameworks, horovod)" in err


@pytest.mark.parametrize("given", ["dev", "dev/run-001", "dev/run-001/resnet50-synthetic", "results/dev"])
def test_a_stack_name_or_a_runs_handle_is_not_a_path_here(given):
    assert stack_path_problem(given, ["status", given], ROOT) is None


def test_the_api_says_the_same_in_its_own_words():
    from core.config.fields import ConfigError
    from program.stack_files import check_stack_name

    assert stack_file_parts("a/b/Pulumi.x.yml") == ("a/b", "x") and stack_file_parts("Pulumi.yaml") is None
    with pytest.raises(ConfigError) as e:
        check_stack_name(FRAMEWORKS)
    assert e.value.problems == [f'stack="{FRAMEWORKS}": is a stack file\'s path, not a stack name; name the stack '
                                "(frameworks) and give its folder (tests/stacks) as the project folder"]
