"""A test double of the ``pulumi`` CLI, for the real Automation API (``pulumi.automation``) to drive.

Installed as ``<tmp>/bin/pulumi`` by ``tests/lifecycle/conftest.py``. Implements what pulumi
3.272's automation module calls for create_or_select_stack / up / outputs / destroy / cancel /
export (read from ``pulumi/automation/_local_workspace.py`` and ``_stack.py``, and checked by
recording every invocation):

    version                                   -> v3.272.0 (PulumiCommand's check)
    whoami [--json]                           -> preflight's backend check
    stack select --stack S / stack init S     -> create_or_select (select fails "no stack named")
    up --yes --skip-preview ... --event-log tcp://H:P --stack S
                                              -> engine events over gRPC (pulumirpc.Events), the
                                                 stack's outputs, and the Jobs: a detached writer
                                                 puts each experiment's summary.json on S3 (moto)
    stack output --json [--show-secrets]      -> outputs
    stack history --json ...                  -> UpdateSummary for up()/destroy()'s result
    destroy --skip-preview --yes ...          -> clears resources (or fails, per scenario)
    cancel --yes --stack S                    -> clears a lock
    stack export --show-secrets --stack S     -> the resources left

State lives in $FAKE_PULUMI_STATE (a directory): state.json and calls.jsonl (one JSON line per
invocation: argv, pid, $EKSBENCH_OVERRIDES where the invocation got it, and events such as "sigint"). The scenario is JSON in
$FAKE_PULUMI_SCENARIO:

    {"up": "ok" | "fail" | "hang", "up_step_s": 0.05, "resources": [[type, name, group], ...],
     "outputs": {...}, "experiments": {name: {"uri": "s3://b/p/", "after": 0.5, "status": "succeeded"}},
     "destroy": "ok" | "fail" | "fail_once", "destroy_s": 0, "whoami": "ok" | "fail",
     "outputs_by_stack": {stack: {...}}}  (several stacks sharing one scenario)

Like the real CLI: a SIGINT during ``up`` cancels gracefully (the in-flight resource finishes,
exit 255 "update canceled"); the stack is locked while ``up``/``destroy`` runs, and a
``destroy`` meanwhile fails with the file backend's lock message (ConcurrentUpdateError).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STATE = Path(os.environ.get("FAKE_PULUMI_STATE", "/tmp/fake-pulumi"))
OVERRIDES = "EKSBENCH_OVERRIDES"  # core.contract.names.ENV_OVERRIDES (this file runs as a script, outside the tree)
VERSION = "v3.272.0"
DEFAULT_RESOURCES = [
    ["eksbench:infra:Network", "network", None],
    ["aws:ec2/vpc:Vpc", "network-vpc", "eksbench:infra:Network"],
    ["aws:ec2/natGateway:NatGateway", "network-nat-0", "eksbench:infra:Network"],
    ["eksbench:infra:EksCluster", "cluster", None],
    ["eks:index:Cluster", "cluster-eks", "eksbench:infra:EksCluster"],
    ["eksbench:workloads:ExperimentSuite", "experiments", None],
    ["kubernetes:batch/v1:Job", "experiments-job", "eksbench:workloads:ExperimentSuite"],
]


def scenario() -> dict:
    raw = os.environ.get("FAKE_PULUMI_SCENARIO", "{}")
    return json.loads(Path(raw).read_text()) if raw and not raw.lstrip().startswith("{") else json.loads(raw or "{}")


def record(**fields) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "calls.jsonl", "a") as f:
        f.write(json.dumps({"t": time.time(), "pid": os.getpid(), **fields}) + "\n")


def load() -> dict:
    try:
        return json.loads((STATE / "state.json").read_text())
    except (OSError, ValueError):
        return {"stacks": {}}


def save(state: dict, stack: str) -> None:
    """Write ``stack``'s entry of ``state`` into the state file, leaving the other stacks' as they are on
    disk now: two ``bench run``s of two stacks drive two fakes at once, and writing back a whole state
    read earlier lost the other stack's entry (a stack created in between vanished)."""
    import fcntl

    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "state.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fresh = load()
        fresh["stacks"][stack] = state["stacks"][stack]
        tmp = STATE / f".state.{os.getpid()}"
        tmp.write_text(json.dumps(fresh))
        os.replace(tmp, STATE / "state.json")


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def fail(message: str, code: int = 255, stdout: str = "") -> int:
    if stdout:
        print(stdout)
    print(message, file=sys.stderr)
    return code


def opt(argv: list[str], name: str) -> str | None:
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def urn(stack: str, typ: str, name: str, parent: str | None) -> str:
    chain = f"{parent}${typ}" if parent else typ
    return f"urn:pulumi:{stack}::eksbench::{chain}::{name}"


def history_entry(kind: str, result: str, started: float) -> dict:
    fmt = lambda t: time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(t))  # noqa: E731
    return {"kind": kind, "startTime": fmt(started), "endTime": fmt(time.time()), "message": "",
            "environment": {}, "config": {}, "result": result, "version": 1, "resourceChanges": {}}


class Events:
    """Engine events to the Automation API's gRPC server (pulumirpc.Events/StreamEvents)."""

    def __init__(self, target: str | None):
        self.seq = 0
        self.queue = None
        if not target or not target.startswith("tcp://"):
            return
        import queue

        import grpc
        from pulumi.runtime.proto import events_pb2, events_pb2_grpc

        self.pb = events_pb2
        self.queue = queue.Queue()
        self.channel = grpc.insecure_channel(target[len("tcp://"):])
        stub = events_pb2_grpc.EventsStub(self.channel)

        def requests():
            while True:
                item = self.queue.get()
                if item is None:
                    return
                yield self.pb.EventRequest(event=json.dumps(item))

        self.future = stub.StreamEvents.future(requests())

    def send(self, **event) -> None:
        if self.queue is None:
            return
        self.seq += 1
        self.queue.put({"sequence": self.seq, "timestamp": int(time.time()), **event})

    def close(self) -> None:
        if self.queue is None:
            return
        self.send(cancelEvent={})
        self.queue.put(None)
        try:
            self.future.result(timeout=10)
        except Exception:  # noqa: BLE001
            pass
        self.channel.close()


def step(op: str, stack: str, typ: str, name: str, parent: str | None) -> dict:
    return {"metadata": {"op": op, "urn": urn(stack, typ, name, parent), "type": typ, "provider": ""}}


def cmd_up(argv: list[str], stack: str) -> int:
    sc = scenario()
    state = load()
    st = state["stacks"].setdefault(stack, {"resources": [], "outputs": {}, "history": []})
    if alive(st.get("lock")):
        return fail(f"error: the stack is currently locked by 1 lock(s). ({stack}: pid {st['lock']})")
    st["lock"] = os.getpid()
    save(state, stack)
    interrupted = []

    def on_sigint(signum, _frame):
        interrupted.append(signum)
        record(event="sigint", command="up")

    signal.signal(signal.SIGINT, on_sigint)
    signal.signal(signal.SIGTERM, on_sigint)
    events = Events(opt(argv, "--event-log"))
    started = time.time()
    events.send(preludeEvent={"config": {}})
    resources = sc.get("resources") or DEFAULT_RESOURCES
    delay = float(sc.get("up_step_s", 0.05))
    created: list[list] = []
    outcome = "ok"
    i = 0
    while True:
        if interrupted:
            outcome = "canceled"
            break
        if i >= len(resources):
            if sc.get("up") == "hang":  # an update that takes long: only a SIGINT ends it
                time.sleep(0.05)
                continue
            break
        typ, name, parent = resources[i]
        events.send(resourcePreEvent=step("create", stack, typ, name, parent))
        time.sleep(delay)  # the in-flight operation finishes even when SIGINT arrives meanwhile
        if sc.get("up") == "fail" and i == len(resources) - 1:
            events.send(resOpFailedEvent={**step("create", stack, typ, name, parent), "status": 1, "steps": 1})
            events.send(diagnosticEvent={"message": f"creating {typ} ({name}): InvalidParameterException: "
                                                    "fake failure for the test\n", "color": "never",
                                         "severity": "error", "urn": urn(stack, typ, name, parent)})
            outcome = "failed"
            break
        events.send(resOutputsEvent=step("create", stack, typ, name, parent))
        created.append([typ, name, parent])
        i += 1
    state = load()
    st = state["stacks"][stack]
    st["resources"] = created
    st["lock"] = None
    if outcome == "ok":
        st["outputs"] = (sc.get("outputs_by_stack") or {}).get(stack) or sc.get("outputs") or {}
    st["history"].insert(0, history_entry("update", "succeeded" if outcome == "ok" else "failed", started))
    save(state, stack)
    events.send(summaryEvent={"maybeCorrupt": False, "durationSeconds": int(time.time() - started),
                              "resourceChanges": {"create": len(created)}, "policyPacks": {}})
    events.close()
    record(event="up-" + outcome, resources=len(created))
    if outcome == "canceled":
        return fail("error: update canceled")
    if outcome == "failed":
        return fail("error: update failed", stdout="Diagnostics:\n  error: fake failure for the test")
    start_jobs(sc)
    print(f"Resources:\n    + {len(created)} created\n\nDuration: {int(time.time() - started)}s")
    return 0


def start_jobs(sc: dict) -> None:
    """The training Jobs run after up returns (skipAwait): a detached writer plays them."""
    if not sc.get("experiments"):
        return
    proc = subprocess.Popen([sys.executable, __file__, "__jobs"], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    record(event="jobs-started", jobs_pid=proc.pid)


def run_jobs() -> int:
    import boto3

    sc = scenario()
    s3 = boto3.client("s3", region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    t0, jobs_started = time.monotonic(), time.time()
    pending = dict(sc.get("experiments") or {})
    while pending:
        for name, spec in sorted(pending.items(), key=lambda kv: kv[1].get("after", 0)):
            if time.monotonic() - t0 < float(spec.get("after", 0)):
                continue
            bucket, _, prefix = spec["uri"][len("s3://"):].partition("/")
            if spec.get("status") == "never":  # a Job that never ends (deadline tests)
                del pending[name]
                break
            ok = spec.get("status", "succeeded") == "succeeded"
            iso = lambda t: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f"{t % 1:.6f}"[1:] + "Z"  # noqa: E731
            # the launcher's fields (workloads/train/harness/outcome.py summary_document, summary.py "startup")
            summary = {"started_at": iso(jobs_started + 0.01), "ended_at": iso(time.time()),
                       "startup": {"time_to_first_step_s": 0.05, "phases_s": {"first_step": 0.05}},
                       "experiment": name, "status": "succeeded" if ok else "failed", "exit_code": 0 if ok else 1,
                       "wall_time_s": 12.5, "coverage": {"steps": spec.get("steps", 20)},
                       "throughput": {"samples_per_s_total": 1234.5, "samples_per_s_per_process": 617.25},
                       "error": None if ok else "RuntimeError: CUDA error: out of memory",
                       "log_tail": [] if ok else ["Traceback (most recent call last):",
                                                  "RuntimeError: CUDA error: out of memory"]}
            s3.put_object(Bucket=bucket, Key=prefix + "logs/node-0.log", Body=b"[workloads.train] rank 0/2\n")
            s3.put_object(Bucket=bucket, Key=prefix + "metrics/rank-0.jsonl", Body=b'{"step": 1}\n')
            s3.put_object(Bucket=bucket, Key=prefix + "checkpoints/latest.pt", Body=b"x" * 1024)
            s3.put_object(Bucket=bucket, Key=prefix + "summary.json", Body=json.dumps(summary).encode())
            record(event="summary-written", experiment=name, status=summary["status"])
            del pending[name]
            break
        time.sleep(0.02)
    return 0


def cmd_destroy(argv: list[str], stack: str) -> int:
    sc = scenario()
    state = load()
    st = state["stacks"].get(stack)
    if st is None:
        return fail(f"error: no stack named '{stack}' found")
    if alive(st.get("lock")):
        record(event="destroy-locked")
        return fail(f"error: the stack is currently locked by 1 lock(s). ({stack}: pid {st['lock']})")
    mode = sc.get("destroy", "ok")
    attempts = st.get("destroy_attempts", 0) + 1
    st["destroy_attempts"] = attempts
    started = time.time()
    events = Events(opt(argv, "--event-log"))
    if mode == "fail" or (mode == "fail_once" and attempts == 1):
        st["history"].insert(0, history_entry("destroy", "failed", started))
        save(state, stack)
        events.close()
        record(event="destroy-failed", attempt=attempts)
        return fail("error: deleting aws:ec2/vpc:Vpc (network-vpc): DependencyViolation: the vpc has "
                    "dependencies and cannot be deleted")
    signal.signal(signal.SIGINT, lambda *_: (record(event="sigint", command="destroy"), sys.exit(255)))
    st["lock"] = os.getpid()
    save(state, stack)
    time.sleep(float(sc.get("destroy_s", 0)))
    state = load()
    st = state["stacks"][stack]
    st["lock"] = None
    for typ, name, parent in reversed(st["resources"]):
        events.send(resourcePreEvent=step("delete", stack, typ, name, parent))
        events.send(resOutputsEvent=step("delete", stack, typ, name, parent))
    st["resources"], st["outputs"] = [], {}
    st["history"].insert(0, history_entry("destroy", "succeeded", started))
    save(state, stack)
    events.close()
    record(event="destroyed")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["__jobs"]:
        return run_jobs()
    # The environment the real CLI hands the program it runs: eksbench's --set and --experiment (core.config.overrides).
    record(argv=argv, **({"overrides": os.environ[OVERRIDES]} if OVERRIDES in os.environ else {}))
    args = [a for a in argv if a != "--non-interactive"]
    stack = opt(args, "--stack")
    words = [a for a in args if not a.startswith("-")]
    if args[:1] == ["version"]:
        print(VERSION)
        return 0
    if words[:1] == ["whoami"]:
        if scenario().get("whoami") == "fail":
            return fail("error: PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI sessions")
        print(json.dumps({"user": "tester", "url": "file://fake"}) if "--json" in args else "tester")
        return 0
    state = load()
    if words[:2] == ["stack", "select"]:
        if stack not in state["stacks"]:
            return fail(f"error: no stack named '{stack}' found")
        return 0
    if words[:2] == ["stack", "init"]:
        name = words[2] if len(words) > 2 else stack
        if name in state["stacks"]:
            return fail(f"error: stack '{name}' already exists")
        state["stacks"][name] = {"resources": [], "outputs": {}, "history": []}
        save(state, name)
        return 0
    st = state["stacks"].get(stack or "")
    if words[:2] == ["stack", "output"]:
        print(json.dumps((st or {}).get("outputs") or {}))
        return 0
    if words[:2] == ["stack", "history"]:
        history = (st or {}).get("history") or []
        size = opt(args, "--page-size")
        print(json.dumps(history[:int(size)] if size else history))
        return 0
    if words[:2] == ["stack", "export"]:
        resources = [{"urn": urn(stack, t, n, p), "type": t} for t, n, p in (st or {}).get("resources") or []]
        print(json.dumps({"version": 3, "deployment": {"resources": resources}}))
        return 0
    if words[:1] == ["up"]:
        return cmd_up(args, stack)
    if words[:1] == ["destroy"]:
        return cmd_destroy(args, stack)
    if words[:1] == ["cancel"]:
        if st is not None:
            st["lock"] = None
            save(state, stack)
        record(event="cancelled")
        return 0
    return fail(f"fake pulumi: unsupported command {args}", code=1)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
