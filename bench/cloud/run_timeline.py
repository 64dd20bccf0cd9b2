"""What ``bench run`` on AWS records of its timeline (``bench.results.timeline``), and where it writes it.

The marks come from what the run already sees: its own clock (preflight, ``pulumi up``, the teardown,
the audit), the engine events of ``pulumi up`` (the cluster, the node groups, storage), the Kubernetes
API when it answers (the GPU nodes' Ready condition, each experiment's first container start) and each
experiment's ``summary.json`` (the launcher's start, its first and last step). ``write`` puts
``timeline.json`` beside the run's results: under ./results/<stack>/<run>/ and, when the run knows its
bucket, at ``ResultsLocation.key("timeline.json")`` in it, with the rest of the run's results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import progress
from bench.results import timeline as T
from core.contract import strict_json
from core.contract.results_location import ResultsLocation
from workloads.train.common.files import atomic_write


def recorder(stack: str, ready: Any, *, started: float) -> T.Recorder:
    """A recorder for the run of ``ready`` (preflight's result) that began at ``started`` (epoch seconds)."""
    from infra.cluster.estimate import GPU_ITEM

    cfg = ready.cfg
    gpu = [v for k, v in (getattr(ready.plan, "cost_items", None) or {}).items() if k.startswith(GPU_ITEM)]
    gpu_usd = None if any(v is None for v in gpu) else sum(gpu)  # None: a GPU type with no price in the region
    # an autoscaled group is created empty (infra.cluster.node_group): its nodes come with the Jobs, not with up
    rec = T.Recorder(stack=stack, run_id=cfg.run_id,
                     gpu_nodes=sum(g.desired_size for g in cfg.gpu_node_groups if not g.autoscale),
                     gpu_hourly_usd=gpu_usd, prices=getattr(ready, "prices", None) or None)
    rec.started = started
    return rec


def record_up(rec: T.Recorder, up_progress: Any) -> None:
    """``pulumi up``'s span, and its parts from the engine events (first resource started, last done)."""
    rec.end(T.UP)
    spans = up_progress.spans() if up_progress is not None else {}
    for part, groups in T.UP_PARTS.items():
        got = [spans[g] for g in groups if g in spans]
        if got:
            rec.span(part, min(a for a, _ in got), max(b for _, b in got),
                     f"pulumi engine events of {', '.join(groups)}: first resource started, last done")


def record_nodes_ready(rec: T.Recorder, nodes: list[dict[str, Any]]) -> None:
    """When the last GPU node turned Ready (once; the kubelet's clock, moved onto ours), from the node groups'
    creation; ``nodes``: the cluster's, as the Kubernetes API lists them."""
    from bench.cloud import kube

    if T.NODES_READY in rec.spans:
        return
    try:
        ready = kube.gpu_nodes_ready_at(nodes, rec.gpu_nodes)
    except Exception:  # noqa: BLE001 - a node the API gave in a shape we do not know: the timeline goes without it
        return
    start = rec.spans.get(T.UP_NODE_GROUPS, rec.spans.get(T.UP, (None,)))[0]
    rec.span(T.NODES_READY, start, rec.from_cluster(ready), "node groups' creation to the last GPU node's Ready condition "
                                          "(Kubernetes API)")


def audit(rec: T.Recorder, stack: str, *, root: Path) -> bool:
    """``bench audit`` after a destroy, its span and its lines in the timeline; True when nothing is left."""
    from bench.cloud.audit import audit_after_destroy

    lines: list[str] = []

    def out(text: Any) -> None:
        lines.extend(str(text).splitlines())
        progress.line(text)

    rec.begin(T.AUDIT, "eksbench audit after the destroy")
    ok = audit_after_destroy(stack, root=root, out=out)
    rec.end(T.AUDIT)
    rec.audit = {"clean": ok, "lines": lines[:50]}
    return ok


def summary_lines(doc: dict[str, Any]) -> list[str]:
    """The figures a user can lower, as the run prints them at its end."""
    f = doc.get("figures") or {}
    out = []
    if f.get("minutes_to_first_step") is not None:
        out.append(f"first training step {f['minutes_to_first_step']:.1f} min after the run started")
    if f.get("idle_gpu_node_minutes") is not None:
        out.append(f"GPU node-minutes billed while no experiment was stepping: {f['idle_gpu_node_minutes']:.1f}"
                   + (f" (about ${f['idle_gpu_usd']:.2f} at {doc.get('prices') or 'the GPU price the run recorded'})"
                      if f.get("idle_gpu_usd") else ""))
    return out


def write(doc: dict[str, Any], *, run: ResultsLocation, results_root: Path, bucket: str | None, s3: Any) -> list[str]:
    """``timeline.json`` under ./results/<stack>/<run>/ and beside the run's results in the bucket; where it went."""
    body = strict_json.dumps(doc, indent=1).encode()
    written = []
    local = run.local_dir(results_root) / T.FILE
    try:
        atomic_write(local, lambda f: f.write(body))  # a failed write leaves the previous record whole
        written.append(str(local))
    except OSError as e:
        progress.line(f"warning: could not write {local}: {e}", err=True)
    if bucket:
        key = run.key(T.FILE)
        try:
            s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/json")
            written.append(f"s3://{bucket}/{key}")
        except Exception as e:  # noqa: BLE001 - the local copy is there
            progress.line(f"warning: could not upload s3://{bucket}/{key}: {type(e).__name__}: {e}", err=True)
    return written
