"""What the AWS backend knows of a stack without running it: ``status`` and ``logs``.

status: the stack's state when the Pulumi CLI answers (last operation, result, resources held, outputs),
    and each run on S3 with each experiment's status, under the stack's results prefix: the
    ``results_prefix`` output while the stack exists, else ``results.bucket`` or the home stack's bucket.
logs: an experiment's node logs from the cluster while its pods run (``follow`` streams), else from S3
    once the launcher uploaded them.

``CloudBackend`` (bench/cloud/backend.py) takes these from ``CloudObservation``; it needs ``stack``,
``cfg``, ``root`` (the project directory) and nothing of a run.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Iterator

from bench.cloud import pulumi_cli
from bench.cloud.stack_operations import stack_resources
from core.catalog.aws import credentials_problem
from core.contract.names import LOG_TIMES_SUFFIX, PROGRESS_FILE, SUMMARY_FILE, TIMELINE_FILE, node_name
from core.contract.results_location import (
    ResultsLocation,
    log_name,
    repeat_number,
)
from core.contract.results_location import results_bucket as resolve_results_bucket
from core.contract.results_location import segment_problem
from core.contract.s3_uri import parse_s3_uri


def results_bucket(cfg: Any, root: Path) -> str | None:
    """Where the stack's results are once the stack itself is gone: ``results.bucket``, or the bucket
    the home stack (``results.home_stack``) exports; None when neither can be read."""
    if not cfg.results.home_stack:
        return resolve_results_bucket(cfg.results, None, region=cfg.region)
    try:
        home = pulumi_cli.stack_outputs(cfg.results.home_stack, root)
        return resolve_results_bucket(cfg.results, home, region=cfg.region)
    except Exception:  # noqa: BLE001 - no CLI, no backend, no home: local results still work
        return None


def deployed(stack: str, root: Path, results_root: Path) -> bool:
    """Whether this machine has seen the stack on AWS, known offline (no CLI, no network): eksbench has driven
    Pulumi for it from this project (its work dir, ``pulumi_cli.work_dir``, is made the first time: run on AWS,
    up, preview, destroy, status --cloud), or a cloud run of it left its ``timeline.json`` under the results
    root. ``bench status`` asks Pulumi and S3 only then, or when told to (``--cloud``)."""
    if (Path(root) / pulumi_cli.WORK_DIR / stack).is_dir():
        return True
    try:
        return any((Path(results_root) / stack).glob(f"*/{TIMELINE_FILE}"))
    except OSError:
        return False


def s3_status_rows(stack_results: ResultsLocation, region: str | None,
                   autostops: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One ``bench.results.overview.status_row`` per experiment of each run on S3 (each repeat apart:
    ``<exp>/repeat_<k>/``), runs by name; each run's ``autostop.json`` goes into ``autostops``."""
    from bench.cloud import s3_results
    from bench.results.overview import status_row
    from workloads.autostop_component import RECORD

    s3 = s3_results.client(region)
    rows: list[dict[str, Any]] = []

    def names(uri: str) -> list[str]:
        """The folders under ``uri`` that can be a level of the layout; any other key is a warning, not a path."""
        out = []
        for name in s3_results.child_prefixes(s3, uri):
            why = segment_problem(name)
            if why:
                warnings.warn(f"{uri}{name!r}/: {why}; skipped", stacklevel=2)
            else:
                out.append(name)
        return out

    for run_id in names(stack_results.uri):
        run = stack_results.child(run_id)
        record = s3_results.read_json(s3, run.uri, RECORD)
        if record is not None and autostops is not None:
            autostops[run_id] = record
        for exp in names(run.uri):
            where = run.child(exp)
            repeats = sorted(k for k in map(repeat_number, s3_results.child_prefixes(s3, where.uri)) if k)
            for k, uri in ([(k, where.repeat_run(k).uri) for k in repeats] or [(None, where.uri)]):
                summary = s3_results.read_json(s3, uri, SUMMARY_FILE)  # {} when there but unreadable
                progress = None if summary is not None else s3_results.read_json(s3, uri, PROGRESS_FILE)
                missing = f"step {progress.get('step')}/{progress.get('total')}" if progress else "not written yet"
                rows.append(status_row(run=run_id, experiment=exp, repeat=k, summary=summary, results=uri,
                                       missing=missing))
    return rows


def s3_runs(stack_results: ResultsLocation, region: str | None,
            autostops: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, str]]:
    """Each run's experiments on S3 and their status, with why it stopped when it did not succeed."""
    from bench.results.overview import by_run

    return by_run(s3_status_rows(stack_results, region, autostops))


def after_autostop_usd(cfg: Any, outputs: dict[str, Any], today: str | None = None) -> float | None:
    """USD per hour the stack bills with its GPU groups at zero (``infra.cluster.estimate.cost_after_autostop``): the
    stack's own output when it has one, else the estimate from the config (NAT gateways: none in an existing
    VPC, one for ``single``, one per zone for ``per_az``, as infra/network/vpc.py makes them); None where the
    system nodes have no price in the stack's region (``after_autostop_prices`` says so)."""
    import datetime

    from infra.cluster.estimate import cost_after_autostop, hourly_cost

    value = outputs.get("hourly_cost_after_autostop_usd")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    net = cfg.network
    nat = 0 if net.existing_vpc_id else 1 if net.nat == "single" else len(net.azs) or net.az_count
    return cost_after_autostop(hourly_cost(cfg, nat_gateways=nat, today=today or datetime.date.today().isoformat()))


def after_autostop_prices(cfg: Any) -> str:
    """Where ``after_autostop_usd``'s prices come from (region, source, date), or why there is no figure."""
    from core.catalog import aws as catalog

    s = cfg.system_nodes
    if s.desired_size and catalog.usd_per_hour(s.instance_type, cfg.region) is None:
        return catalog.no_price(s.instance_type, cfg.region)
    return f"system nodes at {catalog.price_label(cfg.region)}; the rest at {catalog.OTHER_PRICES}"


# Kubernetes puts the completion index of an Indexed Job's pod on it as this annotation (and, from 1.28, a label
# of the same name): kubernetes.io/docs/concepts/workloads/controllers/job/#completion-mode. The launcher's node id
# is node-<that index> (workloads.train.harness.launch), so ``--node`` names a pod as it names a log file.
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def pod_node(pod: dict[str, Any]) -> str:
    """The node id of an experiment's pod (``node-1``), else its name."""
    meta = pod.get("metadata") or {}
    index = str((meta.get("annotations") or {}).get(COMPLETION_INDEX) or "")
    return node_name(int(index)) if index.isdigit() else str(meta.get("name"))


def cluster_logs(cfg: Any, outputs: dict[str, Any], experiment: str, follow: bool, *, tail: int | None = None,
                 node: str | None = None, timestamps: bool = False) -> Iterator[str] | None:
    """The experiment's pods' logs (the last 200 lines of each, or ``tail``; ``follow`` streams one pod:
    ``node``'s, else the first; ``timestamps``: each line's time, as the kubelet received it); None when the
    cluster cannot be asked or runs no pod of it."""
    from bench.cloud import kube
    from bench.results.node_logs import kubelet_time, node_filter

    try:
        client = kube.KubeClient(kube.access_from_kubeconfig(outputs["kubeconfig"], outputs["cluster_name"],
                                                             cfg.region))
        pods = client.pods(cfg.namespace, kube.experiment_selector(experiment, cfg.run_id))
    except Exception:  # noqa: BLE001 - no cluster access: fall back to S3
        return None
    if not pods:
        return None
    keep = node_filter([pod_node(p) for p in pods], node, f"{experiment}'s pods")
    pods = [p for p in pods if keep(pod_node(p))]

    def shown(name: str, line: str) -> str:
        return f"{name}: " + (" ".join(kubelet_time(line)) if timestamps else line)

    def lines() -> Iterator[str]:
        if follow:
            first = pods[0]["metadata"]["name"]
            yield from (shown(first, line) for line in client.follow(cfg.namespace, first, timestamps=timestamps,
                                                                     tail=50 if tail is None else tail))
            return
        for pod in pods:
            name = pod["metadata"]["name"]
            for reason in kube.pod_reasons(pod):
                yield f"{name}: [{reason}]"
            yield from (shown(name, line) for line in client.log_tail(
                cfg.namespace, name, lines=200 if tail is None else tail, timestamps=timestamps))
    return lines()


class CloudObservation:
    """``status`` and ``logs`` of the AWS backend (TorchX's ``Scheduler.describe`` and ``log_iter``)."""

    stack: str
    cfg: Any
    root: Path

    def status(self) -> dict[str, Any]:
        """``{"state", "outputs", "rows": [one bench.results.overview.status_row per experiment run on S3],
        "autostop": {run id: autostop.json},
        "after_autostop_usd", "after_autostop_prices", "where": the S3 prefix, "notes"}``;
        what cannot be read is a note, never an error; one naming how to make AWS's credentials serve is also
        ``aws_problem``."""
        out: dict[str, Any] = {"state": None, "outputs": {}, "rows": [], "autostop": {}, "notes": []}
        try:
            stk = pulumi_cli.open_stack(self.stack, self.root, check_config=False, create=False)
            info = stk.info()

            out["state"] = {"last": info.kind if info else None, "result": info.result if info else None,
                            "ended": str(info.end_time) if info and info.end_time else None,
                            "resources": len(stack_resources(stk))}
            out["outputs"] = {k: v.value for k, v in stk.outputs().items()}
            out["after_autostop_usd"] = after_autostop_usd(self.cfg, out["outputs"])
            out["after_autostop_prices"] = after_autostop_prices(self.cfg)
        except Exception as e:  # noqa: BLE001 - no CLI, no backend: say so, show the results anyway
            out["notes"].append(f"stack state unknown: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
        prefix = out["outputs"].get("results_prefix")
        bucket = parse_s3_uri(prefix)[0] if prefix else results_bucket(self.cfg, self.root)
        if bucket:
            stack_results = ResultsLocation(bucket, self.cfg.project, self.stack)
            try:
                out["rows"] = s3_status_rows(stack_results, self.cfg.region, out["autostop"])
                out["where"] = stack_results.uri
            except Exception as e:  # noqa: BLE001
                # no credentials, a profile not there, credentials past their time: the note names the fix
                if line := credentials_problem(e, f"status {self.stack}"):
                    out["aws_problem"] = line
                out["notes"].append(line or f"S3 results not readable at {stack_results.uri}: {type(e).__name__}")
        else:
            out["notes"].append("no S3 results location known (results.bucket is unset and the home stack's "
                                "outputs could not be read)")
        return out

    def logs(self, experiment: str, *, run_id: str | None = None, follow: bool = False, tail: int | None = None,
             node: str | None = None, timestamps: bool = False) -> Iterator[str]:
        """The experiment's node logs: the cluster while its pods run, else S3 (``tail``: each log's last
        ``tail`` lines; ``node``: one node's; ``timestamps``: each line's time). FileNotFoundError (saying
        where it looked) when neither has them; ValueError (naming the nodes there) for a node that has none."""
        from bench.cloud import s3_results
        from bench.results.node_logs import node_filter

        cfg = self.cfg
        outputs: dict[str, Any] = {}
        try:
            outputs = pulumi_cli.outputs(self.stack, self.root) if (run_id in (None, cfg.run_id)) else {}
        except Exception:  # noqa: BLE001 - no CLI / no stack: S3 and local files still work
            outputs = {}
        if outputs.get("kubeconfig"):
            cluster = cluster_logs(cfg, outputs, experiment, follow, tail=tail, node=node, timestamps=timestamps)
            if cluster is not None:
                return cluster
        uri = (outputs.get("experiment_results") or {}).get(experiment)
        bucket = None if uri else results_bucket(cfg, self.root)
        if bucket:
            uri = ResultsLocation(bucket, cfg.project, self.stack, run_id or cfg.run_id, experiment).uri
        if uri:
            try:
                s3 = s3_results.client(cfg.region)
                listed = s3_results.keys_under(s3, uri)
            except Exception as e:  # noqa: BLE001
                if line := credentials_problem(e, f"S3 ({uri}) not readable"):  # local logs may still be there
                    raise FileNotFoundError(f"not in the cluster; {line}") from None
                listed = []
            keys = [(k, rel) for k, rel in listed if log_name(rel) and rel.endswith(".log")]
            if keys:
                bucket = uri[len("s3://"):].split("/", 1)[0]
                keep = node_filter([log_name(rel) for _, rel in keys], node, uri)
                keys = [(k, rel) for k, rel in keys if keep(log_name(rel))]
                times = None
                if timestamps:  # each log's times file, where its launcher uploaded one
                    present = {k for k, _ in listed}
                    times = {k: k + LOG_TIMES_SUFFIX for k, _ in keys if k + LOG_TIMES_SUFFIX in present}
                return s3_log_lines(s3, bucket, keys, tail=tail, times=times)
        raise FileNotFoundError("not in the cluster, not on S3" + (f" ({uri})" if uri else ""))


def s3_log_lines(s3: Any, bucket: str, keys: list[tuple[str, str]], *, tail: int | None,
                 times: dict[str, str] | None) -> Iterator[str]:
    """The lines of each log object (``<node>: <line>``), streamed: a 200 MB log is never held whole. ``tail``:
    each log's last lines, kept as they stream past (memory: ``tail`` lines); ``times``: each log key's times
    key (None: no timestamps; a log without one: its lines undated)."""
    from collections import deque

    from bench.results.node_logs import LineTimes, offset_lines, time_text
    from bench.results.safe_paths import LINE_CHUNK

    def from_position(key: str):
        def open_at(pos: int):
            body = s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={pos}-")["Body"] if pos else \
                s3.get_object(Bucket=bucket, Key=key)["Body"]
            return body.iter_chunks(LINE_CHUNK)
        return open_at

    for key, rel in keys:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
        lines = offset_lines(body.iter_chunks(LINE_CHUNK))
        dated = LineTimes(from_position(times[key])) if times and key in times else None
        for offset, _, line in (lines if tail is None else deque(lines, maxlen=tail)):
            stamp = "" if times is None else time_text(dated.at(offset) if dated else None) + " "
            yield f"{log_name(rel)}: {stamp}{line}"
