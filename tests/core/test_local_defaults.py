"""A stack file without GPU node groups gets, for a local run, one stand-in group that fits its experiments at once
(core/config/local_defaults.py); a file that names groups keeps its own."""

from __future__ import annotations

from core.config.local_defaults import LOCAL_GROUP, for_local_run, nodes_at_once


def test_the_stand_in_group_holds_every_experiment_at_its_largest_at_once():
    experiments = [{"name": "a", "nodes": [1, 2, 4]}, {"name": "b", "nodes": "1:3"}, {"name": "c"},
                   {"name": "d", "nodes": "2"}, {"name": "e", "nodes": -1}]
    assert nodes_at_once(experiments) == 7 + 3 + 1 + 2 + 1  # a value the shape check refuses counts as 1
    assert nodes_at_once(None) == 1
    (group,) = for_local_run({"experiments": experiments})["gpu_node_groups"]
    assert group == {**LOCAL_GROUP, "max_size": 14, "desired_size": 14}


def test_a_file_with_node_groups_keeps_them():
    raw = {"gpu_node_groups": [{"name": "p3", "instance_type": "p3.16xlarge"}], "experiments": []}
    assert for_local_run(raw) == raw
