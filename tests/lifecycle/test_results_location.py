"""bench status/logs find a stack's S3 results after the stack is destroyed, through its home stack."""

from types import SimpleNamespace

from bench import automation
from bench.cloud import observe as cloud_observe
from bench.cloud import pulumi_cli


def cfg(**results):
    return SimpleNamespace(results=SimpleNamespace(home_stack=results.get("home_stack"), bucket=results.get("bucket")),
                           region="us-west-2")


def test_an_existing_bucket_is_used_as_it_is():
    assert cloud_observe.results_bucket(cfg(bucket="team-results"), root=None) == "team-results"


def test_the_home_stack_names_the_bucket(monkeypatch):
    seen = []
    monkeypatch.setattr(pulumi_cli, "stack_outputs", lambda name, root: seen.append(name) or {"bucket": "home-bkt"})
    assert cloud_observe.results_bucket(cfg(home_stack="organization/eksbench/home"), root=None) == "home-bkt"
    assert seen == ["organization/eksbench/home"]


def test_an_unreadable_home_is_no_location_not_an_error(monkeypatch):
    def fail(name, root):
        raise automation.AutomationError("the Pulumi CLI is not on PATH")

    monkeypatch.setattr(pulumi_cli, "stack_outputs", fail)
    assert cloud_observe.results_bucket(cfg(home_stack="organization/eksbench/home"), root=None) is None
