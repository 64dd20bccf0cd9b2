"""``--set`` paths and values as `pulumi config set --path` reads them, applied to the config the Pulumi CLI hands the
program, and ``--experiment``'s selection (core/config/overrides.py): pure, no stack file."""

from __future__ import annotations

import json

import pytest

from core.config.overrides import Overrides, SetError, Setting, parse_path, split_setting

CONFIG = {"aws:region": "us-west-2", "eksbench:run_id": "run-001",
          "eksbench:experiments": json.dumps([{"name": "a", "nodes": 1}, {"name": "b", "nodes": "1:2"}])}


def setting(text: str, value) -> Setting:
    key, path = parse_path(split_setting(text)[0])
    return Setting(text, key, path, value)


@pytest.mark.parametrize("text, key, path", [
    ("experiments[0].nodes", "eksbench:experiments", (0, "nodes")),
    ("local.steps", "eksbench:local", ("steps",)),
    ("eksbench:local.steps", "eksbench:local", ("steps",)),
    ("aws:region", "aws:region", ()),
    ('experiments[1]["batch_size"]', "eksbench:experiments", (1, "batch_size")),
    ('tags["team.name"]', "eksbench:tags", ("team.name",)),
    ("experiments[1].args[0]", "eksbench:experiments", (1, "args", 0)),
])
def test_a_path_reads_as_pulumi_config_set_path_reads_it(text, key, path):
    assert parse_path(text) == (key, path)


@pytest.mark.parametrize("text", ["a..b", "[0]", "a.", "x[a]", ".a", "a[0", 'a["b]'])
def test_a_path_that_is_not_one_is_one_line_saying_where(text):
    with pytest.raises(SetError) as e:
        parse_path(text)
    assert "\n" not in str(e.value) and "not a config path at character" in str(e.value)


def test_a_setting_without_an_equals_sign_says_how_to_give_one():
    with pytest.raises(SetError, match=r"^--set nodes: give KEY=VALUE, e\.g\. --set experiments\[0\]\.nodes=2$"):
        split_setting("nodes")


def test_settings_change_the_config_the_program_gets_and_nothing_else():
    got = Overrides((setting("experiments[0].nodes=2", 2), setting("local.steps=5", 5),
                     setting("experiments[1].batch_size=64", 64))).apply(CONFIG)
    assert json.loads(got["eksbench:experiments"]) == [{"name": "a", "nodes": 2},
                                                        {"name": "b", "nodes": "1:2", "batch_size": 64}]
    assert json.loads(got["eksbench:local"]) == {"steps": 5}  # made where the file has none
    assert {k: v for k, v in got.items() if k not in ("eksbench:experiments", "eksbench:local")} == {
        "aws:region": "us-west-2", "eksbench:run_id": "run-001"}


def test_a_later_setting_wins_and_the_next_index_appends():
    got = Overrides((setting("run_id=r1", "r1"), setting("run_id=r2", "r2"),
                     setting("experiments[2].name=c", "c"))).apply(CONFIG)
    assert got["eksbench:run_id"] == "r2"
    assert json.loads(got["eksbench:experiments"])[2] == {"name": "c"}


@pytest.mark.parametrize("text, message", [
    ("experiments[5].nodes=2", "--set experiments[5].nodes=2: experiments has 2 item(s): [5] is past its end "
                               "([2] adds one)"),
    ("run_id.x=2", '--set run_id.x=2: run_id is the value "run-001", not a mapping: .x cannot be set in it'),
    ("experiments.x=2", "--set experiments.x=2: experiments is a list, not a mapping: .x cannot be set in it"),
    ("experiments[0].nodes[1]=2", "--set experiments[0].nodes[1]=2: experiments[0].nodes is the value 1, not a "
                                  "list: [1] cannot index it"),
])
def test_a_path_the_config_cannot_take_is_one_line_naming_it(text, message):
    with pytest.raises(SetError) as e:
        Overrides((setting(text, 2),)).apply(CONFIG)
    assert str(e.value) == message


def test_the_overrides_reach_the_program_whole_through_its_environment():
    o = Overrides((setting("experiments[0].nodes=2", 2), setting("local.fast=true", True)), experiment="a")
    assert Overrides.from_env(o.to_env()) == o
    assert Overrides.from_env(None) == Overrides() and not Overrides()


def test_a_problem_of_a_set_value_says_which_set_gave_it():
    o = Overrides((setting("experiments[0].nodes=0", 0),))
    assert o.annotate(["experiments[0].nodes=0: must be >= 1", "experiments[0].name=1: must be text",
                       "experiments[0].nodes_x=1: unknown key"]) == [
        "experiments[0].nodes=0: must be >= 1 (set by --set experiments[0].nodes=0)",
        "experiments[0].name=1: must be text", "experiments[0].nodes_x=1: unknown key"]


def test_a_set_inside_a_secret_value_names_the_key_and_the_command_that_sets_it():
    from core.config.overrides import apply_setting
    from core.config.pulumi_config import SECRET

    with pytest.raises(SetError) as refused:
        apply_setting({"eksbench:results": SECRET}, setting("results.bucket=b", "b"))
    assert str(refused.value) == ("--set results.bucket=b: results is a secret; set it with "
                                  "pulumi config set --secret")
