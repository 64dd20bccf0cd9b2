"""The startup event: where an attempt's time before its first step went."""

from __future__ import annotations

from workloads.train.common.startup import startup_event


def test_phases_add_up_from_the_launcher_to_the_first_step():
    marks = {"launched": 100.0, "process": 102.5, "imported": 104.0, "process_group": 104.25, "built": 105.0,
             "resumed": 105.5}
    e = startup_event(marks, 106.0, step=1, restart=0)
    assert e["phases_s"] == {"launch": 2.5, "imports": 1.5, "process_group": 0.25, "build": 0.75, "resume": 0.5,
                             "first_step": 0.5}
    assert e["time_to_first_step_s"] == 6.0 == sum(e["phases_s"].values())


def test_without_the_launchers_mark_it_counts_from_the_process():
    e = startup_event({"process": 10.0, "imported": 11.0}, 13.0, step=1, restart=2)
    assert "launch" not in e["phases_s"] and e["time_to_first_step_s"] == 3.0 and e["restart"] == 2
