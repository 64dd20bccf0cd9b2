"""``eksbench run <stack> --experiment NAME --set KEY=VALUE`` on AWS, end to end against the fake Pulumi CLI (driven by
the real Automation API) and a moto server: the CLI gets the overrides in its environment, which it hands the program
(tests/bench/commands/test_set_values.py runs __main__.py with it), and only that experiment is watched and collected."""

from __future__ import annotations

import json

import pytest

from core.config.overrides import Overrides
from core.contract.names import ENV_OVERRIDES
from tests.support import fake_pulumi

pytestmark = pytest.mark.local_run


def test_one_experiment_with_a_set_value_reaches_pulumi_up_and_is_the_only_one_run(project):
    assert fake_pulumi.OVERRIDES == ENV_OVERRIDES
    stack = project.write_stack()
    out = project.outputs(names=("beta",))
    project.scenario = {"outputs": out, "up_step_s": 0.02,
                        "experiments": {"beta": {"uri": out["experiment_results"]["beta"], "after": 0.3,
                                                 "status": "succeeded"}}}
    done = project.run(stack, "--experiment", "beta", "--set", "experiments[1].steps=7")
    assert done.returncode == 0, done.stdout + done.stderr
    (up,) = [c for c in project.calls() if "up" in c.get("argv", [])[:2]]  # after --non-interactive, if given
    sent = Overrides.from_env(up["overrides"])
    assert sent.experiment == "beta" and [(s.key, s.path, s.value) for s in sent.settings] == [
        ("eksbench:experiments", (1, "steps"), 7)]
    assert "preflight: config ok" in done.stdout and ", 1 experiment(s))" in done.stdout
    assert json.loads((project.results / stack / "r1" / "beta" / "summary.json").read_text())["status"] == "succeeded"
    assert not (project.results / stack / "r1" / "alpha").exists()
    assert "experiments[1]" not in (project.dir / f"Pulumi.{stack}.yaml").read_text()  # the file as written
