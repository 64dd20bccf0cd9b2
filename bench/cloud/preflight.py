"""Everything a cloud run checks before it creates anything; each refusal is ONE line, exit 2.

In order, cheapest first: the config (``program.offline.evaluate``, the same validation as ``bench
plan``, which also gives the hourly cost and the provisioning minutes), the whole run's
estimated cost against ``--max-cost``, the Pulumi CLI and a backend, AWS credentials (STS),
the home stack's outputs (its bucket holds the results and the datasets), the region's instance
offerings (EC2), the GPU vCPU quotas (Service Quotas), each needed dataset's manifest, and whether
the run id already has results. boto3 honours
AWS_ENDPOINT_URL, which is how the tests run all of this against moto.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bench import progress
from bench.cloud import capacity_blocks, pulumi_cli
from bench.cloud.pulumi_cli import CLI_MISSING, LOGIN_HOWTO
from bench.errors import Refusal
from bench.results.files import existing_summaries
from core.config.overrides import Overrides
from core.contract.results_location import ResultsLocation, datasets_uri, results_bucket

TEARDOWN_MINUTES = 10.0
# Service Quotas codes for running on-demand / spot vCPUs, by instance family letter.
QUOTAS = {
    ("P", "ON_DEMAND"): ("L-417A185B", "Running On-Demand P instances"),
    ("G", "ON_DEMAND"): ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    ("P", "SPOT"): ("L-7212CCBC", "All P Spot Instance Requests"),
    ("G", "SPOT"): ("L-3819A6DF", "All G and VT Spot Instance Requests"),
}


@dataclass
class Ready:
    cfg: Any  # core.config.model.StackConfig
    plan: Any  # program.offline.Plan
    hourly_usd: float | None  # None: an instance type has no price in the stack's region (``unpriced``)
    provision_minutes: float
    run_minutes: float  # the experiments' window: sum of timeouts (sequential) or the longest (parallel)
    estimate_usd: float | None
    notes: list[str] = field(default_factory=list)
    unpriced: list[str] = field(default_factory=list)  # catalog.no_price of each such type
    prices: str = ""  # where the instance prices come from: region, source, date (catalog.price_label)
    home: dict[str, Any] | None = None  # the home stack's outputs (results.home_stack), read by check_home
    overrides: Overrides = Overrides()  # the command line's --set and --experiment, which pulumi up's program gets too

    @property
    def hourly_text(self) -> str:
        """The hourly cost as printed: with its instance prices' region, source and date, or the types unpriced."""
        if self.hourly_usd is None:
            return f"unknown per hour: {'; '.join(self.unpriced)}"
        return f"${self.hourly_usd:.2f}/h, instances at {self.prices}"

    @property
    def default_deadline_minutes(self) -> float:
        return 2 * self.provision_minutes + self.run_minutes + TEARDOWN_MINUTES


def run_minutes(cfg: Any) -> float:
    timeouts = [e.timeout_minutes * e.repeats for e in cfg.experiments]  # an experiment's repeats run in turn
    if not timeouts:
        return 0.0
    return float(sum(timeouts) if cfg.execution == "sequential" else max(timeouts))


def estimate_usd(hourly: float, provision_minutes: float, window_minutes: float) -> float:
    return hourly * (provision_minutes + window_minutes + TEARDOWN_MINUTES) / 60


def check_config(stack: str, root: Path, overrides: Overrides = Overrides()) -> Ready:
    from core.config.fields import ConfigError
    from program.offline import evaluate
    from program.stack_files import load_stack_config

    try:
        plan = evaluate(stack, root, overrides=overrides)
        cfg = load_stack_config(stack, root, overrides=overrides)
    except ConfigError as e:
        raise Refusal(f"invalid config for stack {stack!r}: " + "; ".join(e.problems)) from None
    est = plan.estimate
    window = run_minutes(cfg)
    hourly, minutes = est["hourly_cost_usd"], float(est["provision_minutes"])
    return Ready(cfg=cfg, plan=plan, hourly_usd=hourly, provision_minutes=minutes, run_minutes=window,
                 estimate_usd=estimate_usd(hourly, minutes, window) if hourly is not None else None,
                 unpriced=list(est.get("unpriced") or []), prices=(est.get("prices") or {}).get("instances", ""),
                 overrides=overrides)


def check_cost(ready: Ready, max_cost: float | None) -> str:
    """The run's estimated cost, with where its prices come from; Refusal above ``--max-cost``, and when an instance
    type has no price in the stack's region, a budget cannot be checked, so ``--max-cost`` is refused outright."""
    if ready.estimate_usd is None:
        why = "; ".join(ready.unpriced)
        if max_cost is not None:
            raise Refusal(f"--max-cost {max_cost:g}: the run's cost cannot be estimated: {why}; run `eksbench prices "
                          "refresh` (with AWS credentials) for AWS's prices of today, or run without --max-cost")
        return f"cost not estimated: {why}"
    how = (f"${ready.hourly_usd:.2f}/h x ({ready.provision_minutes:.0f} min provisioning + "
           f"{ready.run_minutes:.0f} min of experiments ({ready.cfg.execution}) + {TEARDOWN_MINUTES:.0f} min teardown; "
           f"instances at {ready.prices})")
    if max_cost is not None and ready.estimate_usd > max_cost:
        raise Refusal(f"the run is estimated at ${ready.estimate_usd:.2f} ({how}), above --max-cost "
                      f"${max_cost:.2f}: raise --max-cost, lower timeout_minutes, or use fewer/smaller nodes")
    return f"estimated ${ready.estimate_usd:.2f} at most ({how})"


def check_pulumi(env: dict[str, str] | None = None) -> str:
    env = dict(os.environ if env is None else env)
    exe = shutil.which("pulumi", path=env.get("PATH"))
    if exe is None:
        raise Refusal(CLI_MISSING)
    try:
        version = subprocess.run([exe, "version"], capture_output=True, text=True, timeout=30, env=env).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Refusal(f"the Pulumi CLI at {exe} does not run ({e}); reinstall it") from None
    backend = env.get("PULUMI_BACKEND_URL")
    if backend:
        if backend.startswith(("file://", "s3://", "gs://", "azblob://")) and not (
                env.get("PULUMI_CONFIG_PASSPHRASE") is not None or env.get("PULUMI_CONFIG_PASSPHRASE_FILE")):
            raise Refusal(f"PULUMI_BACKEND_URL={backend} needs PULUMI_CONFIG_PASSPHRASE (or "
                          "PULUMI_CONFIG_PASSPHRASE_FILE) for a non-interactive run; set it and retry")
        return f"Pulumi CLI {version}, backend {backend}"
    try:
        who = subprocess.run([exe, "whoami", "--non-interactive"], capture_output=True, text=True, timeout=60,
                             env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Refusal(f"`pulumi whoami` did not answer ({e}); check the network, or set PULUMI_BACKEND_URL") from None
    if who.returncode != 0:
        last = (who.stderr or who.stdout).strip().splitlines()[-1:] or ["no output"]
        raise Refusal(f"the Pulumi CLI has no backend ({last[0]}): {LOGIN_HOWTO}")
    return f"Pulumi CLI {version}, logged in as {who.stdout.strip()}"


def check_credentials(region: str, what: str = "run") -> str:
    """Who the AWS credentials are; Refusal naming ``what`` (``run dev``) and the fix where there are none, the
    profile is not there or they are past their time (``core.catalog.aws.credentials_problem``)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from core.catalog.aws import credentials_problem

    try:
        ident = boto3.client("sts", region_name=region).get_caller_identity()
    except (BotoCoreError, ClientError) as e:
        if line := credentials_problem(e, what):  # none, a profile not there, expired: each its own fix
            raise Refusal(line) from None
        raise Refusal(f"no usable AWS credentials ({type(e).__name__}: {str(e).splitlines()[0]}): set AWS_PROFILE, "
                      "run `aws configure` or `aws sso login`, then retry") from None
    return f"AWS account {ident.get('Account')} as {ident.get('Arn')}"


def check_offerings(cfg: Any) -> str:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from core.catalog import aws as catalog

    wanted = sorted({g.instance_type for g in cfg.gpu_node_groups})
    types = sorted(set(wanted) | set(catalog.GPU_ALTERNATIVES))
    try:
        pages = boto3.client("ec2", region_name=cfg.region).get_paginator("describe_instance_type_offerings").paginate(
            LocationType="region", Filters=[{"Name": "instance-type", "Values": types}])
        offered = {o["InstanceType"] for page in pages for o in page.get("InstanceTypeOfferings") or []}
    except (BotoCoreError, ClientError) as e:
        raise Refusal(f"cannot read the instance offerings of {cfg.region} ({type(e).__name__}: "
                      f"{str(e).splitlines()[0]}): the credentials need ec2:DescribeInstanceTypeOfferings") from None
    missing = [t for t in wanted if t not in offered]
    if missing:
        alternatives = [t for t in catalog.GPU_ALTERNATIVES if t in offered]
        raise Refusal(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not offered in {cfg.region}; "
                      f"offered there: {', '.join(alternatives) or 'none of g5, g6, g6e, p4d, p5'} "
                      "(set instance_type in eksbench:gpu_node_groups)")
    return f"{', '.join(wanted)} offered in {cfg.region}"


def needed_vcpus(cfg: Any) -> dict[tuple[str, str], tuple[int, list[str]]]:
    """(family letter, capacity) -> (vCPUs the desired nodes need, how) for the GPU node groups."""
    from core.catalog import aws as catalog

    need: dict[tuple[str, str], tuple[int, list[str]]] = {}
    for g in cfg.gpu_node_groups:
        spec = catalog.INSTANCE_TYPES.get(g.instance_type)
        family = g.instance_type[:1].upper()
        if spec is None or (family, g.capacity_type) not in QUOTAS:
            continue
        total, how = need.get((family, g.capacity_type), (0, []))
        need[(family, g.capacity_type)] = (total + g.desired_size * spec.vcpus,
                                           how + [f"{g.desired_size} x {g.instance_type} x {spec.vcpus}"])
    return need


def check_quotas(cfg: Any, warn: Callable[[str], None]) -> str:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    sq = boto3.client("service-quotas", region_name=cfg.region)
    done = []
    for (family, capacity), (vcpus, how) in sorted(needed_vcpus(cfg).items()):
        code, title = QUOTAS[(family, capacity)]
        try:
            value = float(sq.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"])
        except (BotoCoreError, ClientError) as e:
            warn(f"warning: could not read the quota '{title}' ({code}) in {cfg.region}: "
                 f"{type(e).__name__}; not checked")
            continue
        if value < vcpus:
            raise Refusal(f"the quota '{title}' ({code}) in {cfg.region} is {value:.0f} vCPUs; the stack needs "
                          f"{vcpus} ({' + '.join(how)}): request an increase in Service Quotas, or lower desired_size")
        done.append(f"{title} {vcpus}/{value:.0f} vCPUs")
    return "; ".join(done) or "no GPU quota to check"


def check_home(cfg: Any, root: Path, read: Callable[[str, Path], dict[str, Any]] | None = None) -> tuple[str, dict | None]:
    """The home stack's outputs (bucket, datasets_uri, ...) when the stack names one in results.home_stack."""
    name = cfg.results.home_stack
    if not name:
        return f"results in the existing bucket {cfg.results.bucket}", None
    if read is None:
        read = pulumi_cli.stack_outputs
    short = name.rsplit("/", 1)[-1]
    try:
        outputs = read(name, root)
    except Exception as e:  # noqa: BLE001 - the CLI's CommandError: no such stack, or no access
        last = (str(e).strip().splitlines() or [type(e).__name__])[-1]
        raise Refusal(f"cannot read the home stack {name} ({last.strip()}): create it first (pulumi up -s {short}, "
                      f"Pulumi.{short}.yaml with eksbench:role: home), or fix results.home_stack in "
                      f"Pulumi.{cfg.stack}.yaml") from None
    try:
        bucket = results_bucket(cfg.results, outputs, region=cfg.region)
    except ValueError as e:
        raise Refusal(str(e)) from None
    return f"home stack {name}: results and datasets in s3://{bucket}/", outputs


def datasets_base(cfg: Any, home: dict[str, Any] | None = None) -> str | None:
    """Where the datasets are: eksbench:datasets_uri, else the home stack's datasets_uri, else the existing
    results bucket's datasets/."""
    if cfg.datasets_uri:
        return cfg.datasets_uri if cfg.datasets_uri.endswith("/") else cfg.datasets_uri + "/"
    if home and home.get("datasets_uri"):
        uri = home["datasets_uri"]
        return uri if uri.endswith("/") else uri + "/"
    if cfg.results.bucket:
        return datasets_uri(cfg.results.bucket)
    return None


def check_datasets(cfg: Any, home: dict[str, Any] | None = None) -> str:
    import boto3

    from core.contract.s3_uri import parse_s3_uri
    from datasets.catalog import CATALOG
    from datasets.file_manifest import MANIFEST_NAME, parse_manifest

    names = sorted({e.dataset for e in cfg.experiments if e.dataset in CATALOG and CATALOG[e.dataset].needs_staging})
    if not names:
        return "no dataset to stage"
    base = datasets_base(cfg, home)
    if base is None:
        raise Refusal(f"dataset {names[0]!r} must be prepared before the run and this stack has nowhere to read it "
                      f"from: set eksbench:results.home_stack in Pulumi.{cfg.stack}.yaml to the home stack (pulumi "
                      f"up -s home; then eksbench data prepare {names[0]} --to "
                      f"\"$(pulumi stack output -s home datasets_uri){names[0]}/\"), or eksbench:datasets_uri")
    s3 = boto3.client("s3", region_name=cfg.region)
    for name in names:
        uri = f"{base}{name}/"
        bucket, prefix = parse_s3_uri(uri)
        try:
            raw = s3.get_object(Bucket=bucket, Key=prefix + MANIFEST_NAME)["Body"].read()
            manifest = parse_manifest(raw, f"{uri}{MANIFEST_NAME}")
        except ValueError as e:
            raise Refusal(f"dataset {name!r}: {e}; prepare it again: eksbench data prepare {name} "
                          f"--to {uri}") from None
        except Exception as e:  # noqa: BLE001 - botocore ClientError: absent, or no access
            raise Refusal(f"dataset {name!r} is not ready: no readable {uri}{MANIFEST_NAME} "
                          f"({type(e).__name__}: {str(e).splitlines()[0]}); the manifest is written last, so the "
                          f"dataset was never prepared there or its upload did not finish: "
                          f"eksbench data prepare {name} --to {uri}") from None
        if manifest.get("dataset") not in (None, name):
            raise Refusal(f"dataset {name!r}: {uri}{MANIFEST_NAME} describes {manifest.get('dataset')!r}")
    return f"dataset(s) {', '.join(names)} prepared under {base}"


def check_rerun(cfg: Any, results_root: Path, resume: bool, home: dict[str, Any] | None = None) -> str:
    """A run id whose results hold a summary.json already is refused unless --resume."""
    from bench.cloud import s3_results

    run = ResultsLocation(results_bucket(cfg.results, home, region=cfg.region), cfg.project, cfg.stack, cfg.run_id)
    local = existing_summaries(run.local_dir(results_root))
    remote: list[str] = []
    if run.bucket:
        try:
            remote = s3_results.summaries_under(s3_results.client(cfg.region), run.uri)
        except Exception:  # noqa: BLE001 - the bucket may not exist yet
            remote = []
    if (local or remote) and not resume:
        where = f"{len(local)} under {run.local_dir(results_root)}" if local else f"{len(remote)} on S3"
        raise Refusal(f"run {cfg.run_id!r} of stack {cfg.stack} already has results ({where} summary.json): set a "
                      f"new eksbench:run_id in Pulumi.{cfg.stack}.yaml, or pass --resume to run it again")
    return f"run id {cfg.run_id}" + (" (resuming)" if local or remote else "")


def preflight(stack: str, root: Path, *, max_cost: float | None, results_root: Path, resume: bool,
              log: Callable[[str], None] = progress.line, overrides: Overrides = Overrides(),
              confirm: Callable[[list[str]], bool] | None = None, deadline_minutes: float | None = None) -> Ready:
    """Run every check in order; raises Refusal at the first failure. ``overrides``: the command line's
    ``--set`` and ``--experiment``, applied to the config every check reads. ``confirm``: shown what the run creates
    and what it costs an hour once the config and the cost are checked, it says whether to go on
    (``bench.cloud.confirm.ask``); None asks nothing."""
    from bench.cloud import node_group_updates
    from bench.cloud.confirm import change_lines, declined

    ready = check_config(stack, root, overrides)
    log(f"preflight: config ok ({len(ready.plan.resources)} resources, {len(ready.cfg.experiments)} experiment(s))")
    log(f"preflight: {check_cost(ready, max_cost)}")
    if confirm is not None and not confirm(change_lines("run", stack, ready.plan)):
        raise Refusal(declined("run", stack))
    log(f"preflight: {check_pulumi()}")
    log(f"preflight: {check_credentials(ready.cfg.region, f'run {stack}')}")
    home_note, ready.home = check_home(ready.cfg, root)
    log(f"preflight: {home_note}")
    log(f"preflight: {check_offerings(ready.cfg)}")
    log(f"preflight: {check_quotas(ready.cfg, lambda m: log(m))}")
    deadline = deadline_minutes or ready.default_deadline_minutes  # the run's (bench.cloud.run)
    log(f"preflight: {capacity_blocks.check_reservations(ready.cfg, deadline)}")
    log(f"preflight: {capacity_blocks.check_updates(ready.cfg)}")
    log(f"preflight: {check_datasets(ready.cfg, ready.home)}")
    log(f"preflight: {check_rerun(ready.cfg, results_root, resume, ready.home)}")
    log(f"preflight: {node_group_updates.check(stack, root, ready, confirm)}")  # a node group rolled under Jobs
    return ready
