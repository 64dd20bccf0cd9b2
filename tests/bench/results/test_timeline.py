"""bench/results/timeline.py: the run's timeline document and the figures derived from it, on fixture timelines."""

from __future__ import annotations

import pytest

from bench.results import timeline as T


def fixture(experiments, *, nodes=2, hourly=48.96, teardown=(900.0, 1000.0)):
    phases = [{"name": T.PREFLIGHT, "start_s": 0.0, "end_s": 20.0, "source": "x"},
              {"name": T.UP, "start_s": 20.0, "end_s": 300.0, "source": "x"},
              {"name": T.UP_NODE_GROUPS, "start_s": 100.0, "end_s": 340.0, "source": "x"}]
    if teardown:
        phases.append({"name": T.TEARDOWN, "start_s": teardown[0], "end_s": teardown[1], "source": "x"})
        phases.append({"name": T.AUDIT, "start_s": teardown[1], "end_s": teardown[1] + 30, "source": "x"})
    return {"gpu_nodes": nodes, "gpu_hourly_usd": hourly, "phases": phases,
            "experiments": [{"name": f"e{i}", "first_step_s": a, "last_step_s": b} for i, (a, b) in enumerate(experiments)]}


def test_idle_node_minutes_count_the_window_no_experiment_steps_in():
    doc = fixture([(400.0, 600.0), (500.0, 800.0)])
    # window 100..1000 (node groups' creation to teardown's end) = 900 s; stepping covers 400..800 = 400 s
    assert T.billing_window(doc) == (100.0, 1000.0)
    assert T.idle_gpu_node_minutes(doc) == round(2 * 500 / 60, 2)
    assert T.minutes_to_first_step(doc) == round(400 / 60, 2)
    figs = T.figures(doc)
    assert figs["idle_gpu_usd"] == round(2 * 500 / 3600 * 48.96 / 2, 2)
    assert figs["gpu_billed_minutes"] == 15.0


def test_disjoint_and_nested_spans_are_counted_once():
    assert T.union_length([(0, 10), (2, 5), (20, 30), (25, 40)], 0, 35) == 10 + 15
    assert T.union_length([(-5, 3)], 0, 10) == 3
    assert T.union_length([], 0, 10) == 0


def test_no_step_at_all_means_the_whole_window_idled():
    doc = fixture([])
    assert T.minutes_to_first_step(doc) is None
    assert T.idle_gpu_node_minutes(doc) == 2 * 900 / 60


def test_without_a_teardown_the_window_ends_at_the_last_mark():
    doc = fixture([(400.0, 600.0)], teardown=None)
    assert T.billing_window(doc) == (100.0, 340.0)


def test_no_up_no_window():
    assert T.idle_gpu_node_minutes({"gpu_nodes": 2, "phases": [], "experiments": []}) is None


def test_steps_from_summary_read_the_launcher_and_startup_fields():
    got = T.steps_from_summary({"started_at": "2026-11-24T00:00:00Z", "ended_at": "2026-11-24T00:10:00Z",
                                "startup": {"time_to_first_step_s": 42.5}})
    base = T.parse_iso("2026-11-24T00:00:00Z")
    assert (got["pods_started"], got["first_step"], got["last_step"]) == (base, base + 42.5, base + 600)
    assert T.steps_from_summary({"started_at": "not a time"}) is None
    assert T.steps_from_summary({"started_at": "2026-11-24T00:00:00Z"})["first_step"] is None


def test_the_recorder_orders_phases_and_derives_the_run_level_ones():
    now = [1000.0]
    rec = T.Recorder(stack="s", run_id="r", gpu_nodes=2, gpu_hourly_usd=10.0, clock=lambda: now[0])

    def at(t):
        now[0] = 1000.0 + t

    rec.begin(T.PREFLIGHT)
    at(5)
    rec.end(T.PREFLIGHT)
    rec.begin(T.UP)
    rec.span(T.UP_CLUSTER, 1010.0, 1100.0, "events")
    rec.span(T.UP_NODE_GROUPS, 1100.0, 1160.0, "events")
    at(170)
    rec.end(T.UP)
    rec.experiment("a", pods_started=1200.0, first_step=1230.0, last_step=1400.0, source="summary")
    rec.experiment("b", pods_started=1210.0, first_step=1250.0, last_step=1500.0, source="summary")
    rec.experiment("a", first_step=1.0)  # a later, other source does not overwrite what is known
    at(510)
    rec.begin(T.TEARDOWN)
    at(600)
    rec.end(T.TEARDOWN)
    rec.begin(T.AUDIT)
    doc = rec.document()  # the audit left open ends where the record does
    names = [p["name"] for p in doc["phases"]]
    assert names == [T.PREFLIGHT, T.UP, T.UP_CLUSTER, T.UP_NODE_GROUPS, T.PODS_STARTED, T.FIRST_STEP,
                     T.TRAINING, T.TEARDOWN, T.AUDIT]
    starts = [p["start_s"] for p in doc["phases"]]
    assert starts == sorted(starts)
    pods = next(p for p in doc["phases"] if p["name"] == T.PODS_STARTED)
    assert (pods["start_s"], pods["end_s"]) == (160.0, 200.0)  # node groups done -> first container
    training = next(p for p in doc["phases"] if p["name"] == T.TRAINING)
    assert (training["start_s"], training["end_s"]) == (230.0, 500.0)
    assert doc["figures"]["minutes_to_first_step"] == round(230 / 60, 2)
    # window 100..600 = 500 s; stepping 230..500 = 270 s; 2 nodes
    assert doc["figures"]["idle_gpu_node_minutes"] == round(2 * 230 / 60, 2)
    assert doc["started_at"] == T.iso(1000.0)


@pytest.mark.parametrize("text,expected", [("2026-11-24T00:00:01.500000Z", 1795478401.5),
                                           ("2026-11-24T00:00:01+00:00", 1795478401.0), (None, None), ("", None)])
def test_parse_iso(text, expected):
    assert T.parse_iso(text) == expected


def recorded_run(skew: float):
    """One run recorded by a client whose clock is ``skew`` seconds ahead of the cluster's; the cluster's
    marks (a container start, the launcher's steps) are on the cluster's clock, its offset read from the
    API server's Date header (bench.cloud.kube.clock_offset)."""
    from email.utils import formatdate

    from bench.cloud.kube import clock_offset

    t0 = 1795825400.0  # 2026-11-28 00:23:20 UTC on the cluster's clock
    true = iter([t0, t0, t0 + 20, t0 + 20, t0 + 300])  # started, preflight begin/end, up begin/end
    rec = T.Recorder(stack="s", run_id="r", gpu_nodes=2, gpu_hourly_usd=48.96, clock=lambda: next(true) + skew)
    rec.begin(T.PREFLIGHT)
    rec.end(T.PREFLIGHT)
    rec.begin(T.UP)
    rec.end(T.UP)
    # the API server answers at t0 + 400 on its clock: its Date header, sent and received on ours
    rec.cluster_offset = clock_offset(formatdate(t0 + 400, usegmt=True), t0 + 400 + skew, t0 + 400.2 + skew)
    rec.experiment("e", pods_started=t0 + 350, first_step=t0 + 420, last_step=t0 + 800)
    return rec.document()


def test_a_client_clock_skewed_by_two_minutes_gives_the_same_figures():
    plain, skewed = recorded_run(0.0), recorded_run(120.0)
    assert skewed["figures"] == plain["figures"]
    assert [(p["name"], p["start_s"], p["end_s"]) for p in skewed["phases"]] == \
        [(p["name"], p["start_s"], p["end_s"]) for p in plain["phases"]]
    assert skewed["experiments"] == plain["experiments"]
    assert plain["experiments"][0]["first_step_s"] == pytest.approx(420.0, abs=1.0)
    assert "Date header" in skewed["clock"] and "-119.6 s" in skewed["clock"]
