"""The plan refuses a stack whose runs (experiments and their repeats) would give two Kubernetes objects one
name, in one line naming both; the names of the issue's stacks are valid and distinct, so those plan."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.config.fields import ConfigError
from core.config.model import Experiment
from program.experiment_checks import name_collisions
from program.stack_files import ROOT, load_stack_config
from tests.program.test_config import parse, problems
from tests.program.test_sweep import stack
from workloads.object_names import object_names, service_name


def with_run_id(raw, run_id):
    return {**raw, "run_id": run_id}


def test_a_repeat_and_an_experiment_whose_names_join_alike_are_refused_in_one_line():
    raw = with_run_id(stack({"name": "a", "repeats": 2}, {"name": "a-r1"}), "r1")
    assert problems(raw) == [
        'experiments[1].name="a-r1": the Service and training Job of "a-r1" would be named "a-r1-r1" (run id "r1"), '
        'and so would the Service and training Job of experiments[0] "a repeat 1/2": Kubernetes names in one '
        'namespace must be unique; rename one, e.g. "a-r1-2"']


def test_a_training_job_named_like_another_experiments_evaluation_is_refused():
    raw = with_run_id(stack({"name": "a", "workload": "cifar10", "dataset": "cifar10", "evaluate": True},
                            {"name": "a-eval"}), "eval")
    (line,) = problems(raw)
    assert line.startswith('experiments[1].name="a-eval": the Service and training Job of "a-eval" would be named '
                           '"a-eval-eval" (run id "eval"), and so would the evaluation Job of experiments[0] "a"')


def test_the_issues_stacks_plan_with_valid_distinct_names():
    cfg = parse(with_run_id(stack({"name": "1" + "a" * 28}, {"name": "1" + "b" * 25, "repeats": 2}), "abcdefgh-1"))
    runs = [r for e in cfg.experiments for r in e.runs()]
    services = [service_name(r, cfg.run_id) for r in runs]
    assert len(set(services)) == 3 and all(s[0].isalpha() and s[-1].isalnum() for s in services), services


def test_a_stack_file_that_collides_is_refused_where_the_plan_reads_it(tmp_path):
    raw = with_run_id(stack({"name": "a", "repeats": 2}, {"name": "a-r1"}), "r1")
    doc = {"config": {"aws:region": "us-west-2", **{f"eksbench:{k}": v for k, v in raw.items()}}}
    (tmp_path / "Pulumi.clash.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=r'^experiments\[1\]\.name="a-r1": .* "a-r1-r1"'):
        load_stack_config("clash", tmp_path)


@pytest.fixture
def stack_in_project():
    """Pulumi.<name>.yaml in the project (where ``bench plan`` reads stacks) for one test, removed after."""
    written = []

    def write(name: str, raw: dict) -> str:
        path = ROOT / f"Pulumi.{name}.yaml"
        doc = {"config": {"aws:region": "us-west-2", **{f"eksbench:{k}": v for k, v in raw.items()}}}
        path.write_text(yaml.safe_dump(doc))
        written.append(path)
        return name

    yield write
    for path in written:
        path.unlink(missing_ok=True)


def test_bench_plan_refuses_it_before_anything_is_created(stack_in_project):
    name = stack_in_project("test-k8s-name-clash", with_run_id(stack({"name": "a", "repeats": 2}, {"name": "a-r1"}),
                                                               "r1"))
    r = subprocess.run([sys.executable, "-m", "bench", "plan", name], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert 'experiments[1].name="a-r1": the Service and training Job of "a-r1" would be named "a-r1-r1"' in r.stderr


# --- any stack: either every run's objects have their own names, or the plan says which do not -----------

# Names made of a stem and the words the builders add (a run id, "r<k>", "eval", "ps", "gate"), so that joins
# that read alike are common; stems that must change (a leading digit, too long) too.
STEMS = ["a", "1a", "b" * 30]
WORDS = ["r1", "r2", "eval", "ps", "gate"]
names = st.builds(lambda stem, words: "-".join([stem, *words]), st.sampled_from(STEMS),
                  st.lists(st.sampled_from(WORDS), max_size=2))
run_ids = st.sampled_from(WORDS + ["r1-r1", "run-001"])
experiment = st.builds(lambda n, k, ev, fw: Experiment(name=n, repeats=k, evaluate=ev, framework=fw), names,
                       st.integers(min_value=1, max_value=3), st.booleans(), st.sampled_from(["pytorch", "paddle"]))
BASE = parse(stack({"name": "x"}))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(experiment, min_size=2, max_size=8, unique_by=lambda e: e.name), run_ids)
@example([Experiment(name="a", repeats=2), Experiment(name="a-r1")], "r1")  # both outcomes, whatever is drawn
@example([Experiment(name="1" + "a" * 28), Experiment(name="x1" + "a" * 28)], "abcdefgh-1")
def test_a_stack_passes_only_if_no_two_runs_share_an_object_name(experiments, run_id):
    cfg = replace(BASE, experiments=tuple(experiments), run_id=run_id, experiment_sources=())
    owner = {}
    shared = False
    for i, e in enumerate(cfg.experiments):
        for run in e.runs():
            for name in set(object_names(run, run_id).values()):
                shared |= owner.setdefault(name, (i, run.repeat)) != (i, run.repeat)
    assert bool(name_collisions(cfg)) == shared
