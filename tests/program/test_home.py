"""The home stack (Pulumi.home.yaml, program/home.py) and how experiment stacks read it, under the mock engine."""

import copy

import pytest
import yaml

from core.config.fields import ConfigError
from program.home import HOME_OUTPUTS
from program.mocks import EksbenchMocks, RecordingMonitor, home_stack_outputs
from program.offline import evaluate, evaluate_config
from program.stack_files import ROOT

DEV = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
HOME = yaml.safe_load((ROOT / "Pulumi.home.yaml").read_text())["config"]


@pytest.fixture(scope="module")
def home():
    return evaluate("home")


def of_type(plan, prefix):
    return [r for r in plan.resources if r["type"].startswith(prefix)]


def test_home_plans_a_protected_retained_bucket_and_repository_and_no_cluster(home):
    custom = [r for r in home.resources if not r["type"].startswith("eksbench:")]
    assert {r["type"].split(":")[0] for r in custom} == {"aws"}  # no eks, kubernetes, ec2, iam
    assert not of_type(home, "aws:ec2/") and not of_type(home, "aws:iam/")
    (bucket,) = of_type(home, "aws:s3/bucket:Bucket")
    assert bucket["inputs"].get("forceDestroy") is not True
    for r in custom:  # `pulumi destroy -s home` refuses (protect); a forced one still leaves them (retain)
        assert r["protect"] and r["retain_on_delete"], r["name"]
    (repo,) = of_type(home, "aws:ecr/repository:Repository")
    i = repo["inputs"]
    assert i["imageTagMutability"] == "IMMUTABLE" and i["imageScanningConfiguration"] == {"scanOnPush": True}
    assert i["encryptionConfigurations"] == [{"encryptionType": "KMS"}] and i.get("forceDelete") is not True
    assert home.estimate["hourly_cost_usd"] == 0


def test_home_bucket_is_encrypted_tls_only_and_never_public(home):
    import json

    pab = of_type(home, "aws:s3/bucketPublicAccessBlock")[0]["inputs"]
    assert all(pab[k] for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))
    sse = of_type(home, "aws:s3/bucketServerSideEncryptionConfiguration")[0]["inputs"]
    assert sse["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
    policy = json.loads(of_type(home, "aws:s3/bucketPolicy")[0]["inputs"]["policy"])
    assert policy["Statement"][0]["Effect"] == "Deny"
    assert policy["Statement"][0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


@pytest.mark.parametrize("reference, region", [("organization/eksbench/home", "us-west-2"),
                                               ("acme/eksbench/home-us-east-1", "us-east-1")])
def test_the_mock_stack_reference_answers_exactly_what_build_home_exports(reference, region):
    """The outputs an experiment stack's plan reads are those a home stack's plan exports, keys and values."""
    _, project, stack = reference.split("/")
    exported = evaluate_config(stack, {**HOME, "aws:region": region}).outputs
    assert set(exported) == set(HOME_OUTPUTS)
    assert home_stack_outputs(reference, region) == exported
    assert exported["datasets_uri"] == f"s3://{exported['bucket']}/datasets/"
    assert exported["results_uri"] == f"s3://{exported['bucket']}/{project}/"


def test_an_experiment_stack_reads_the_home_and_never_creates_or_deletes_a_bucket(home):
    """`pulumi destroy -s dev` deletes what dev's state holds: here no bucket, no repository, and a
    StackReference, which is read (never created or deleted)."""
    dev = evaluate("dev")
    assert not of_type(dev, "aws:s3/") and not of_type(dev, "aws:ecr/")
    (ref,) = of_type(dev, "pulumi:pulumi:StackReference")
    assert ref["read"] and ref["inputs"]["name"] == "organization/eksbench/home"
    assert all(r["read"] for r in dev.resources if r["type"].startswith("pulumi:pulumi:"))
    bucket = home.outputs["bucket"]
    assert dev.outputs["results_bucket"] == bucket
    assert dev.outputs["dataset_uri"] == home.outputs["datasets_uri"]
    # Every run of every stack lands under <bucket>/<project>/<stack>/<run-id>/<experiment>/.
    assert dev.outputs["results_prefix"] == f"s3://{bucket}/eksbench/dev/run-001/"
    assert dev.outputs["experiment_results"] == {
        e["name"]: f"s3://{bucket}/eksbench/dev/run-001/{e['name']}/" for e in DEV["eksbench:experiments"]}


def test_an_existing_bucket_is_the_other_source():
    config = copy.deepcopy(DEV)
    config["eksbench:results"] = {"bucket": "team-results"}
    plan = evaluate_config("dev", config)
    assert not of_type(plan, "aws:s3/") and not of_type(plan, "pulumi:pulumi:StackReference")
    assert plan.outputs["results_prefix"] == "s3://team-results/eksbench/dev/run-001/"
    assert plan.outputs["dataset_uri"] == "s3://team-results/datasets/"


@pytest.mark.parametrize("outputs, expected", [
    ({}, "results.home_stack='o/eksbench/home': that stack has no output 'bucket'; create it first (pulumi up -s home"),
    ({"bucket": "b", "region": "eu-west-1"}, "that home stack is in eu-west-1, this stack in us-west-2; name a home"),
])
def test_a_home_stack_without_a_bucket_or_in_another_region_is_refused(outputs, expected):
    from program.home import home_bucket

    with pytest.raises(ValueError) as e:
        home_bucket("o/eksbench/home", outputs.get("bucket"), outputs.get("region"), region="us-west-2")
    assert str(e.value).startswith(expected) if expected.startswith("results") else expected in str(e.value)
    assert home_bucket("o/eksbench/home", "b", "us-west-2", region="us-west-2") == "b"


def test_a_home_stack_in_another_region_fails_the_program():
    """The same check inside the program (pulumi up): the StackReference's answer, under the mock engine."""
    mocks = EksbenchMocks(stacks={"organization/eksbench/home": {"bucket": "b", "region": "eu-west-1"}})
    with pytest.raises(Exception) as e:
        evaluate_config("dev", DEV, mocks=mocks, monitor=RecordingMonitor(mocks))
    assert "that home stack is in eu-west-1, this stack in us-west-2" in str(e.value)


@pytest.mark.parametrize("extra, expected", [
    ({"eksbench:gpu_node_groups": [{"name": "g", "instance_type": "g5.xlarge"}]},
     'gpu_node_groups=[{"instance_type": "g5.xlarge", "name": "g"}]: unknown key in a home stack'),
    ({"eksbench:experiments": []}, "experiments=[]: unknown key in a home stack"),
    ({"eksbench:results": {"bucket": "b"}}, "results={\"bucket\": \"b\"}: unknown key in a home stack"),
    ({"eksbench:execution": "sequential"}, 'execution="sequential": is an experiment stack\'s key'),
    ({"eksbench:tags": ["x"]}, "tags=[\"x\"]: must be a mapping of strings to strings"),
])
def test_home_shape_is_validated_like_every_stack(extra, expected):
    monitor = RecordingMonitor(EksbenchMocks())
    with pytest.raises(ConfigError) as e:
        evaluate_config("home", {**HOME, **extra}, mocks=monitor.mocks, monitor=monitor)
    assert any(p.startswith(expected) for p in e.value.problems), e.value.problems
    assert monitor.registrations == []


def test_home_accepts_the_project_defaults_the_cli_hands_every_stack():
    """Pulumi.yaml declares run_id, namespace and execution with defaults; the CLI passes them to home too."""
    plan = evaluate_config("home", {**HOME, "eksbench:run_id": "run-001", "eksbench:namespace": "eksbench",
                                    "eksbench:execution": "parallel"})
    assert set(plan.outputs) == set(HOME_OUTPUTS)
