"""The README's experiment snippet (its stack YAML) runs with `eksbench run <stack> --local` as written: the keys
only a cluster needs (GPU node groups, the API endpoint's access, the home stack) are not asked of a local run, and
are still required of one on AWS."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from program.stack_files import ROOT
from tests.bench.commands.test_set_values import run_cli
from tests.support.readme_steps import blocks


def readme_snippet() -> str:
    (snippet,) = [b for b in blocks((ROOT / "README.md").read_text(), "yaml") if "eksbench:experiments" in b]
    return snippet


@pytest.fixture
def snippet_project(tmp_path) -> Path:
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.snippet.yaml").write_text(readme_snippet())
    return tmp_path


def test_the_readme_snippet_plans_as_a_local_run_as_written(capsys, snippet_project):
    code, out, err = run_cli(capsys, "run", "snippet", "--local", "--dry-run", "--project-dir", str(snippet_project))
    assert (code, err) == (0, [])
    assert re.match(r"stack snippet, run \S+: 3 experiment\(s\) \(9 runs with repeats\)", out[0]), out[0]
    assert sum(1 for x in out if re.match(r"\s+resnet50-n[124] repeat \d/3: resnet50,", x)) == 9


def test_the_readme_snippet_still_needs_its_cluster_keys_on_aws(capsys, snippet_project):
    code, _, err = run_cli(capsys, "plan", "snippet", "--project-dir", str(snippet_project))
    assert code == 2 and any(x.strip().startswith("gpu_node_groups: is required") for x in err), err
    filled = readme_snippet() + '  eksbench:gpu_node_groups: [{name: gpu, instance_type: p5.48xlarge, max_size: 4}]\n'
    (snippet_project / "Pulumi.snippet.yaml").write_text(filled)
    code, _, err = run_cli(capsys, "plan", "snippet", "--project-dir", str(snippet_project))
    assert code == 2
    assert any(x.strip().startswith("cluster.public_access_cidrs: is required") for x in err), err
    assert any(x.strip().startswith("results.home_stack: is required") for x in err), err
