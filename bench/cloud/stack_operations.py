"""What ``pulumi up`` and ``pulumi destroy`` look like to the user, and destroy with its retry.

``UpProgress`` turns the Automation API's engine events into one line per resource group (an
eksbench component: Network, EksCluster, ...) when it starts and when it is done, with the
elapsed time. ``destroy_with_retry`` runs ``pulumi destroy`` (never ``remove=True``: that would
delete the user's stack file), once more on failure, then reports the resources left and the
command that finishes the job. Used by the cloud backend, ``bench destroy`` and ``bench status``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from bench import progress
from bench.cloud.pulumi_cli import running_cli


def clock_text(seconds: float) -> str:
    seconds = int(max(0, seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60:2d}:{rest % 60:02d}"


# --- pulumi up progress ------------------------------------------------------------------------------

def resource_group(urn: str) -> str:
    """The top eksbench component a resource belongs to (from its URN's type chain), else a coarse kind."""
    try:
        chain = urn.split("::")[2].split("$")
    except IndexError:
        return "other"
    chain = [t for t in chain if t != "pulumi:pulumi:Stack"] or ["pulumi:pulumi:Stack"]
    for t in chain:
        if t.startswith("eksbench:"):
            return t.rsplit(":", 1)[-1]
    head = chain[0]
    if head == "pulumi:pulumi:Stack":
        return "stack"
    if head.startswith("pulumi:providers:"):
        return "providers"
    return head.split(":", 1)[0]


@dataclass
class _Group:
    name: str
    planned: int = 0
    started: int = 0
    done: int = 0
    failed: int = 0
    t0: float | None = None
    announced_done: bool = False
    wall_start: float | None = None  # epoch seconds (the run's timeline)
    wall_done: float | None = None


class UpProgress:
    """Turns engine events into a line per resource group: started, done (n resources, time), failed."""

    def __init__(self, planned_urns: list[str], *, verb: str = "up", clock: Callable[[], float] = time.monotonic,
                 out: Callable[[str], None] = progress.line, wall: Callable[[], float] = time.time):
        self.verb, self.clock, self.out, self.wall = verb, clock, out, wall
        self.t0 = clock()
        self.groups: dict[str, _Group] = {}
        self.in_flight: dict[str, str] = {}
        self.errors: list[str] = []
        for urn in planned_urns:
            g = self._group(resource_group(urn))
            g.planned += 1
        self._lock = threading.Lock()

    def _group(self, name: str) -> _Group:
        return self.groups.setdefault(name, _Group(name))

    def _say(self, text: str, err: bool = False) -> None:
        self.out(f"[{clock_text(self.clock() - self.t0)}] {self.verb}: {text}") if not err else \
            progress.line(f"[{clock_text(self.clock() - self.t0)}] {self.verb}: {text}", err=True)

    def __call__(self, event: Any) -> None:
        with self._lock:
            self._on(event)

    def _on(self, event: Any) -> None:
        pre, outs, failed = event.resource_pre_event, event.res_outputs_event, event.res_op_failed_event
        if pre is not None:
            meta = pre.metadata
            if meta.op.value in ("same", "read"):
                return
            g = self._group(resource_group(meta.urn))
            self.in_flight[meta.urn] = g.name
            g.started += 1
            if g.t0 is None:
                g.t0, g.wall_start = self.clock(), self.wall()
                total = f" ({g.planned} planned)" if g.planned else ""
                self._say(f"{g.name} started{total}")
        elif outs is not None:
            name = self.in_flight.pop(outs.metadata.urn, None)
            if name is None:
                return
            g = self.groups[name]
            g.done += 1
            g.wall_done = self.wall()
            if not g.announced_done and g.done >= max(g.planned, 1) and g.done >= g.started:
                g.announced_done = True
                self._say(f"{g.name} done ({g.done} resources, {clock_text(self.clock() - (g.t0 or self.t0)).strip()})")
        elif failed is not None:
            urn = failed.metadata.urn
            name = self.in_flight.pop(urn, None) or resource_group(urn)
            g = self._group(name)
            g.failed += 1
            self._say(f"{g.name} FAILED at {failed.metadata.type} {urn.rsplit('::', 1)[-1]}", err=True)
        elif event.diagnostic_event is not None and event.diagnostic_event.severity == "error":
            text = event.diagnostic_event.message.strip()
            if text:
                self.errors.append(text)

    def finish(self) -> None:
        """At the end of a successful ``up``: every group started and not yet reported is done."""
        with self._lock:
            for g in self.groups.values():
                if g.t0 is not None and not g.announced_done:
                    g.announced_done = True
                    self._say(f"{g.name} done ({g.done} resources, {clock_text(self.clock() - g.t0).strip()})")

    def spans(self) -> dict[str, tuple[float, float]]:
        """Each group's (first resource started, last resource done), epoch seconds; groups that made nothing
        are left out."""
        with self._lock:
            return {g.name: (g.wall_start, g.wall_done) for g in self.groups.values()
                    if g.wall_start is not None and g.wall_done is not None}

    def pending(self) -> list[str]:
        return [f"{g.name} {g.done}/{max(g.planned, g.started)}" for g in self.groups.values()
                if g.t0 is not None and not g.announced_done]


# --- destroy --------------------------------------------------------------------------------------

def stack_resources(stk: Any) -> list[str]:
    """``type name`` of each resource the stack still holds (``pulumi stack export``)."""
    try:
        deployment = stk.export_stack().deployment or {}
    except Exception:  # noqa: BLE001 - best effort: this is only for the report
        return []
    out = []
    for r in deployment.get("resources") or []:
        if r.get("type", "").startswith(("pulumi:", "eksbench:")):  # the stack, providers, our components
            continue
        out.append(f"{r.get('type')} {r.get('urn', '').rsplit('::', 1)[-1]}")
    return out


def destroy_with_retry(stk: Any, *, stack: str, log: Callable[[str], None] = progress.line,
                       on_event: Callable[[Any], None] | None = None, attempts: int = 2) -> tuple[bool, list[str]]:
    """``destroy`` (never ``remove=True``), retried once; (ok, resources left)."""
    from pulumi.automation import errors as auto_errors

    for attempt in range(1, attempts + 1):
        try:
            stk.destroy(on_event=on_event, suppress_progress=True)
            return True, []
        except auto_errors.ConcurrentUpdateError as e:
            if running_cli():
                log(f"destroy attempt {attempt}: the stack is locked by an update still running")
            else:  # our up() has returned: the lock is stale (a CLI that died), `pulumi cancel` clears it
                log(f"destroy attempt {attempt}: stale lock ({last_line(e)}); clearing it with `pulumi cancel`")
                try:
                    stk.cancel()
                except Exception as c:  # noqa: BLE001
                    log(f"pulumi cancel failed: {last_line(c)}")
        except auto_errors.CommandError as e:
            log(f"destroy attempt {attempt} failed: {last_line(e)}")
        if attempt < attempts:
            time.sleep(2)
    return False, stack_resources(stk)


def scale_to_zero(outputs: dict[str, Any], *, region: str, stack: str) -> bool:
    """``bench run --keep``'s teardown: every GPU node group of the stack to min 0, desired 0 (EKS API)."""
    import boto3

    cluster = outputs.get("cluster_name")
    groups = list(outputs.get("node_groups") or [])[1:]  # [system, *gpu groups]
    if not cluster or not groups:
        progress.line(f"--keep: the stack has no GPU node groups to scale down (up did not finish?); "
                      f"it is left as it is: eksbench destroy {stack}", err=True)
        return False
    eks = boto3.client("eks", region_name=region)
    ok = True
    for name in groups:
        try:
            current = eks.describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]["scalingConfig"]
            eks.update_nodegroup_config(clusterName=cluster, nodegroupName=name, scalingConfig={
                "minSize": 0, "desiredSize": 0, "maxSize": max(1, int(current.get("maxSize", 1)))})
            progress.line(f"--keep: node group {name} scaled to 0 nodes")
        except Exception as e:  # noqa: BLE001
            ok = False
            progress.line(f"error: could not scale node group {name} to zero: {type(e).__name__}: {e}", err=True)
    after = outputs.get("hourly_cost_after_autostop_usd")  # infra/cluster/estimate.py cost_after_autostop, exported
    from core.catalog import aws as catalog

    figure = (f"about ${after:.2f}/h, system nodes at {catalog.price_label(region)}, the rest at "
              f"{catalog.OTHER_PRICES}: " if isinstance(after, (int, float)) and not isinstance(after, bool) else "")
    progress.line(f"--keep: the stack stays up ({figure}control plane, NAT, system nodes and storage still cost "
                  f"money); destroy it later with: eksbench destroy {stack}")
    return ok


def last_line(e: Exception) -> str:
    text = (getattr(e, "stderr", "") or str(e)).strip().splitlines()
    errors = [line for line in text if "error" in line.lower()]
    last = (errors or text or [type(e).__name__])[-1].strip()
    return last[len("stderr:"):].strip() if last.startswith("stderr:") else last


# --- the backend ------------------------------------------------------------------------------------
