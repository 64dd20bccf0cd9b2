"""An experiment's ``args`` cannot set what the stack sets (core.contract.train_args: each TrainArgs field's
``stack_key``): refused by the shape check, matched as the trainers' parser matches them (``--flag``,
``--flag=value``, ``--flag value`` and every prefix argparse takes), one line naming the experiment, the argument
and the key to use instead."""

from __future__ import annotations

import argparse
import copy
import subprocess
import sys
from dataclasses import asdict, fields
from pathlib import Path

import pytest
import yaml

from core.config.fields import ConfigError
from core.config.model import Experiment, Storage
from core.config.shape import parse_stack_config
from core.contract.train_args import SET_BY_RUN, TrainArgs, build_parser, is_option, option_field, option_strings
from tests.core.examples import GOOD

ROOT = Path(__file__).resolve().parents[2]
SENTINEL = object()


def parsed_by_argparse(token: str) -> str | None:
    """The field the real parser sets from ``token`` (followed by a value where its option takes one), None where it
    refuses the token or takes none of its fields."""
    parser = build_parser()
    parser.exit_on_error = False
    namespace = argparse.Namespace(**{f.name: SENTINEL for f in fields(TrainArgs)})
    field = option_field(token)
    takes_value = field is not None and not isinstance(field.default, bool) and "=" not in token
    value = [(field.metadata["choices"] or ("1",))[0]] if takes_value else []
    if "=" in token and field is not None and isinstance(field.default, bool):
        token = token.split("=")[0]  # a switch refuses any value: which option it is is what is compared
    elif "=" in token and field is not None and field.metadata["choices"]:
        token = token.split("=")[0] + "=" + field.metadata["choices"][0]
    try:
        ns, unknown = parser.parse_known_args([token, *value], namespace=namespace)
    except (argparse.ArgumentError, SystemExit):
        return None
    changed = [name for name, v in vars(ns).items() if v is not SENTINEL]
    return None if unknown or len(changed) != 1 else changed[0]


def tokens() -> list[str]:
    """Every prefix of every option string, bare and with "=1", and a few that are no option of theirs."""
    out = {"--", "--nnodes=4", "--local-rank", "--rdzv-endpoint=x:1", "--results-dir x", "-h", "--help"}
    for option in option_strings():
        for end in range(3, len(option) + 1):
            out |= {option[:end], option[:end] + "=1"}
    return sorted(out)


@pytest.mark.parametrize("token", tokens())
def test_each_option_resolves_to_the_field_the_trainers_parser_sets(token, capsys):
    field = option_field(token)
    assert (field.name if field else None) == parsed_by_argparse(token)


def test_the_contract_names_a_key_for_what_the_stack_sets_and_each_key_exists():
    experiment_keys = set(asdict(Experiment(name="x"))) | {"max_nodes"}
    owned = {f.name: f.metadata["stack_key"] for f in fields(TrainArgs) if f.metadata["stack_key"] is not None}
    assert {"results_dir", "data_dir", "steps", "epochs", "batch_size", "precision", "workload", "dataset",
            "harness"} <= set(owned)
    for name, key in owned.items():
        if key == SET_BY_RUN:
            continue
        if key == "storage.mount_path":
            assert hasattr(Storage(), "mount_path")
        else:
            assert key in experiment_keys, (name, key)
    assert {f.name for f in fields(TrainArgs) if f.metadata["stack_key"] is None} >= {"lr", "seed", "max_bytes"}


def problems(*experiments: dict) -> list[str]:
    raw = copy.deepcopy(GOOD)
    raw["experiments"] = list(experiments)
    with pytest.raises(ConfigError) as e:
        parse_stack_config(raw, project="eksbench", stack="t", region="us-west-2")
    return e.value.problems


def test_args_that_would_move_the_results_are_refused_naming_experiment_arg_and_what_to_do():
    assert problems({"name": "r50", "args": ["--results-dir=/some/where"]}) == [
        'experiments[0].args[0]="--results-dir=/some/where": experiment "r50" would set the trainers\' --results-dir, '
        "which eksbench sets for every run (the launcher reads the run's metrics, checkpoints and logs there and "
        "uploads them): remove it"]


@pytest.mark.parametrize("args, index, flag, use", [
    (["--res", "/x"], 0, "--results-dir", "remove it"),
    (["--lr", "0.1", "--batch=512"], 2, "--batch-size", "use that key instead, e.g. batch_size: 512"),
    (["--steps", "5"], 0, "--steps", "own key steps sets (the plan, the summary and the report read it there): use "
                                     "that key instead, e.g. steps: 5"),
    (["--prec=bf16"], 0, "--precision", "e.g. precision: bf16"),
    (["--no-channels-last"], 0, "--channels-last", "e.g. channels_last: false"),
    (["--data-d=/x"], 0, "--data-dir", "the stack file's key storage.mount_path"),
    (["--no-h"], 0, "--no-harness", "remove it"),
    (["--compile"], 0, "--compile", "e.g. compile: true"),
])
def test_each_spelling_of_a_contract_flag_is_refused(args, index, flag, use):
    (line,) = problems({"name": "r50", "args": args})
    assert line.startswith(f"experiments[0].args[{index}]=") and f"would set the trainers' {flag}," in line
    assert use in line and 'experiment "r50"' in line


def test_options_the_trainers_do_not_take_are_refused_before_anything_runs():
    (line,) = problems({"name": "r50", "args": ["--nnodes=4"]})
    assert line.startswith('experiments[0].args[0]="--nnodes=4": experiment "r50": the trainers take no such option')


def test_a_sweeps_refused_arg_is_said_once_naming_its_entry():
    (line,) = problems({"name": "sw", "nodes": [1, 2], "args": ["--steps=5"]})
    assert 'experiment "sw"' in line and line.endswith("e.g. steps: 5")


def test_args_of_the_trainers_own_that_no_key_sets_are_taken():
    raw = copy.deepcopy(GOOD)
    args = ("--lr", "0.1", "--seed=3", "--max-bytes", "64", "--image-size=64", "--warmup-steps", "-1", "--workers=0")
    raw["experiments"] = [{"name": "r50", "args": list(args)}]
    cfg = parse_stack_config(raw, project="eksbench", stack="t", region="us-west-2")
    assert cfg.experiments[0].args == args
    assert not is_option("-1") and not is_option("-.5") and is_option("-x")


def test_plan_and_the_local_run_refuse_it_before_anything_is_created(tmp_path):
    config = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    config["eksbench:experiments"][0]["args"] = ["--results-dir=/some/where"]
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.hostile.yaml").write_text(yaml.safe_dump({"config": config}))
    for command in (["plan", "hostile"], ["run", "hostile", "--local", "--results-root", str(tmp_path / "results")]):
        done = subprocess.run([sys.executable, "-m", "bench", *command, "--project-dir", str(tmp_path)], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert ('experiments[0].args[0]="--results-dir=/some/where": experiment "resnet50-synthetic" would set the '
                "trainers' --results-dir, which eksbench sets for every run (the launcher reads the run's metrics, "
                "checkpoints and logs there and uploads them): remove it") in done.stderr.splitlines()[-1]
    assert not (tmp_path / "results").exists() and not (tmp_path / ".eksbench").exists()
