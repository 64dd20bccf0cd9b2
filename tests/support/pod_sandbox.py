"""The plan's Jobs, run here as a kubelet and the Job controller would run their pods.

Each container of a pod runs in bubblewrap: the root file system read-only, the pod's volumes
mounted where its ``volumeMounts`` say, ``/proc`` and ``/dev`` of its own, PID 1 of its own PID
namespace (``--as-pid-1``: SIGTERM reaches the container's own PID 1, as containerd sends it),
the pod's hostname, the capabilities its merged security context leaves, and, for a non-root
UID, ``setpriv`` switching to that UID, GID and groups inside the sandbox (which clears every
capability at the switch; capabilities(7)). bwrap sets no_new_privs on every sandbox, which is
what ``allowPrivilegeEscalation: false`` asks; a container asking for escalation, or for a
writable root, is refused as not modelled. What the pods' commands, env, volumes and security
context say is taken from the plan as it is, and the command, args and env values are then expanded as
the kubelet expands them (tests/support/kubelet_expansion.py: ``$(VAR)``, ``$$``).

What stands in, and for what:
- **The image**: this machine's Python and its packages. Its installation is bound read-only at
  the path it has here and put first on ``PATH`` (``python3``, ``python``, ``pip``, ``torchrun``),
  the ``PATH`` an image's config would give; ``/root`` shows that installation only. Modules the
  pod scripts check for (boto3, python-etcd) are importable, so their ``pip install`` steps skip.
- **GPUs and EFA**: none. CPU instead, with each experiment scaled down by the stack's
  ``local:`` section before it is planned (tests/support/sandbox_cluster.py ``scaled_config``),
  so the Jobs are the cluster builders' own, for smaller numbers. ``resources`` are not enforced;
  ``OMP_NUM_THREADS`` shares this machine's cores between the pods running at once.
- **The node's credentials (EKS Pod Identity)**: static test keys in the env and
  ``AWS_ENDPOINT_URL`` pointing at moto's S3 server.
- **The network**: one network namespace for all pods (tests/support/pod_network.py); every
  pod's IP is 127.0.0.1, and the names pods use (``<pod hostname>.<subdomain>[.<ns>.svc.cluster.local]``,
  each Service) resolve to it through a sandbox ``/etc/hosts``; a Service's port forwards to what
  stands behind it (the real local etcd, moto's S3). Other names do not resolve.
- **The API server**: none. The gate Job (it resumes Jobs through the API) is skipped with that
  reason, and a suspended Job simply runs when its turn comes.
- **Storage**: each volume is a host folder: an emptyDir a fresh 0777 folder (a size-limited tmpfs
  per container for ``medium: Memory``), a configMap its items' files with their modes, the shared
  claim one folder with the storage's ownership: EFS the access point's root directory (owner and
  mode from its creationInfo; every container on it must run as the access point's POSIX user,
  whose identity override is not otherwise modelled), FSx root-owned 0755 with the data repository
  folders made by FSx and the datasets its import brings in. ``fsGroup`` group-owns emptyDir and
  configMap volumes, not the CSI claim (neither driver's claim has an fsType).
- **The scheduler**: each pod is bound to a node by its required pod anti-affinity alone
  (tests/support/pod_placement.py); ``Pod.node`` says which, so a test sees two pods share one.
- **The Job controller**: pods of an Indexed Job start together with ``JOB_COMPLETION_INDEX`` and
  the hostname ``<job>-<index>``; a failed pod is replaced until ``backoffLimit`` failures;
  ``successPolicy`` and ``activeDeadlineSeconds`` end the Job and terminate the pods still running
  (SIGTERM, then SIGKILL after ``terminationGracePeriodSeconds``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from core.contract.names import ZONE_FIELD
from infra.access.file_access import container_process
from tests.support.kubelet_expansion import command_and_args, container_env
from tests.support.pod_failures import diagnose
from tests.support.pod_placement import Nodes

GRACE_DEFAULT = 30  # terminationGracePeriodSeconds' default (Kubernetes API, PodSpec)
CONFIGMAP_MODE = 0o644  # configMap volume defaultMode's default (Kubernetes API, ConfigMapVolumeSource)
QUANTITY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
class SandboxError(AssertionError):
    """A pod that could not run as the manifest says, naming the Job, pod, container and path."""


def quantity(text: str) -> int:
    for suffix, n in QUANTITY.items():
        if str(text).endswith(suffix):
            return int(float(str(text)[:-2]) * n)
    return int(float(text))


@dataclass
class World:
    """The cluster the pods see: the shared claim, the ConfigMaps, names, network and env."""
    root: Path
    namespace: str
    claim: str  # the PersistentVolumeClaim's name
    shared: Path  # host folder standing in for the claim's volume
    claim_owner: tuple[int, int] | None  # EFS: the access point's POSIX user every client becomes
    config_maps: dict[str, dict[str, str]]
    netns: str
    names: dict[str, str]  # every name a pod may resolve: a Service's at 127.0.0.1, a pod's at its own IP
    env: dict[str, str]  # the image's PATH, the node's stand-ins
    image_paths: list[str]  # host paths of the stand-in image, bound read-only at the same place
    nodes: Nodes = field(default_factory=Nodes)  # the scheduler's anti-affinity (tests/support/pod_placement.py)


@dataclass
class Container:
    job: str
    pod: str
    name: str
    log: Path
    proc: subprocess.Popen | None = None
    pid: int | None = None  # the container's PID 1, as this machine sees it
    rc: int | None = None


@dataclass
class Pod:
    job: str
    name: str
    index: int | None
    hostname: str
    spec: dict
    dir: Path
    containers: list[Container] = field(default_factory=list)
    phase: str = "Pending"  # Running, Succeeded, Failed
    failure: str = ""
    stopping: bool = False
    ip: str | None = None
    node: str = ""  # the node the scheduler's anti-affinity gave it
    thread: threading.Thread | None = None

    @property
    def done(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


@dataclass
class JobResult:
    name: str
    succeeded: bool
    reason: str  # Complete, SuccessPolicy, BackoffLimitExceeded, DeadlineExceeded
    pods: list[Pod]

    def failures(self) -> list[str]:
        return [p.failure for p in self.pods if p.failure]


def _mount_tree(targets: set[str], top: str = "/") -> list[str]:
    """bwrap arguments for a read-only view of this machine's root with room for ``targets``:
    a folder with a mount target below it becomes a new directory whose other entries are bound."""
    args: list[str] = []
    for entry in sorted(os.listdir(top)):
        path = os.path.join(top, entry)
        if path in ("/proc", "/dev", "/tmp") or path in targets:
            continue
        below = any(t.startswith(path + "/") for t in targets)
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif below and os.path.isdir(path):
            args += ["--dir", path, *_mount_tree(targets, path)]
        elif os.path.exists(path):
            args += ["--ro-bind", path, path]
    if top == "/":  # folders a target needs that the root lacks: 0755, as containerd makes them (bwrap: 0700)
        missing = {a for t in targets for a in _ancestors(t) if not os.path.lexists(a)}
        for folder in sorted(missing):
            args += ["--perms", "0755", "--dir", folder]
    return args


def _ancestors(path: str) -> list[str]:
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def merged_context(pod_spec: Mapping, container: Mapping) -> dict:
    """The container's securityContext over the pod's, for the fields both carry (Kubernetes API:
    "settings in SecurityContext take precedence" over PodSecurityContext)."""
    pod, ctx = pod_spec.get("securityContext") or {}, container.get("securityContext") or {}
    shared = ("runAsUser", "runAsGroup", "runAsNonRoot", "seccompProfile")
    return {**{k: pod[k] for k in shared if k in pod}, **ctx}


class Kubelet:
    """Runs pods' containers in ``world``."""

    def __init__(self, world: World):
        self.world, self._ips = world, iter(f"127.1.{n // 250}.{n % 250 + 2}" for n in range(62500))

    def pod_ip(self, pod: Pod) -> str:
        """The pod's own address on the shared loopback (127.0.0.0/8 is all local): an Indexed Job's pods
        have the one their DNS name resolves to, others a fresh one. One address per pod matters: torch
        tells rendezvous nodes apart by their FQDN, which getfqdn() reads from /etc/hosts by address."""
        if not pod.ip:
            sub = pod.spec.get("subdomain")
            pod.ip = self.world.names.get(f"{pod.hostname}.{sub}") if sub else None
            pod.ip = pod.ip or next(self._ips)
        return pod.ip

    def volumes(self, pod: Pod) -> dict[str, dict]:
        """{volume name: {"path": host folder} or {"tmpfs": bytes}}, made as the kubelet makes them."""
        out, fs_group = {}, (pod.spec.get("securityContext") or {}).get("fsGroup")
        for v in pod.spec.get("volumes", []):
            d = pod.dir / "volumes" / v["name"]
            if "emptyDir" in v:
                ed = v["emptyDir"] or {}
                if ed.get("medium") == "Memory":
                    out[v["name"]] = {"tmpfs": quantity(ed.get("sizeLimit", "64Mi"))}
                    continue
                d.mkdir(parents=True)
                # kubelet makes an emptyDir 0777 (pkg/volume/emptydir/empty_dir.go), then with fsGroup
                # group-owns it with the setgid bit (pkg/volume/volume_linux.go SetVolumeOwnership).
                if fs_group is not None:
                    os.chown(d, 0, fs_group)
                os.chmod(d, 0o2777 if fs_group is not None else 0o777)
                out[v["name"]] = {"path": d}
            elif "configMap" in v:
                self._config_map(v["configMap"], d, fs_group)
                out[v["name"]] = {"path": d}
            elif "persistentVolumeClaim" in v:
                if v["persistentVolumeClaim"]["claimName"] != self.world.claim:
                    raise SandboxError(f"pod {pod.name}: claim {v['persistentVolumeClaim']['claimName']} is not "
                                       f"the plan's ({self.world.claim})")
                out[v["name"]] = {"path": self.world.shared, "claim": True}
            else:
                raise SandboxError(f"Job {pod.job} pod {pod.name}: volume {v['name']} {sorted(v)}: not modelled")
        return out

    def _config_map(self, source: Mapping, d: Path, fs_group: int | None) -> None:
        data = self.world.config_maps.get(source["name"])
        if data is None:
            raise SandboxError(f"configMap {source['name']}: not in the plan")
        items = source.get("items") or [{"key": k, "path": k} for k in data]
        for item in items:
            if item["key"] not in data:
                raise SandboxError(f"configMap {source['name']}: no key {item['key']}")
            path = d / item["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(data[item["key"]])
            os.chmod(path, item.get("mode", source.get("defaultMode", CONFIGMAP_MODE)))
            if fs_group is not None:
                os.chown(path, 0, fs_group)
        for sub in [d, *(p for p in d.rglob("*") if p.is_dir())]:
            os.chmod(sub, 0o755)

    def _claim_subpath(self, sub: str) -> Path:
        """A missing subPath is made by the kubelet, as root, with the volume root's mode (kubelet_pods.go
        makeMounts: SafeMakeDir(subPath, volumePath, perm of volumePath)); through an EFS access point
        it belongs to the access point's user."""
        path = self.world.shared / sub
        if not path.exists():
            mode = self.world.shared.stat().st_mode & 0o7777
            path.mkdir(parents=True)
            os.chmod(path, mode)
            if self.world.claim_owner:
                os.chown(path, *self.world.claim_owner)
        return path

    def argv(self, pod: Pod, c: dict, volumes: dict[str, dict], env: dict[str, str], command: list[str]) -> list[str]:
        """bwrap's argv for container ``c``; ``command``: its command and args as the kubelet expanded them."""
        where = f"Job {pod.job} pod {pod.name} container {c['name']}"
        ctx = merged_context(pod.spec, c)
        if not ctx.get("readOnlyRootFilesystem"):
            raise SandboxError(f"{where}: a writable root file system is not modelled")
        if ctx.get("allowPrivilegeEscalation", True) or ctx.get("privileged"):
            raise SandboxError(f"{where}: privilege escalation is not modelled (bwrap sets no_new_privs)")
        process = container_process(pod.spec, c)
        mounts = c.get("volumeMounts", [])
        targets = {m["mountPath"] for m in mounts} | {"/etc/hosts"} | set(self.world.image_paths)
        args = ["nsenter", f"--net={self.world.netns}", "bwrap", *_mount_tree(targets),
                "--dev", "/dev", "--proc", "/proc", "--dir", "/tmp"]
        args += ["--ro-bind", str(pod.dir / "hosts"), "/etc/hosts"]
        for m in mounts:
            vol = volumes.get(m["name"])
            if vol is None:
                raise SandboxError(f"{where}: mounts {m['name']}, which the pod does not declare")
            if "tmpfs" in vol:
                args += ["--size", str(vol["tmpfs"]), "--perms", "1777", "--tmpfs", m["mountPath"]]
                continue
            if vol.get("claim") and self.world.claim_owner and (process.uid, min(process.gids)) != \
                    self.world.claim_owner and self.world.claim_owner[0] != process.uid:
                raise SandboxError(f"{where}: runs as {process.uid} on an EFS access point of "
                                   f"{self.world.claim_owner}: the identity override is not modelled")
            src = self._claim_subpath(m["subPath"]) if vol.get("claim") and m.get("subPath") else \
                Path(vol["path"]) / m.get("subPath", "")
            args += ["--ro-bind" if m.get("readOnly") else "--bind", str(src), m["mountPath"]]
        # The stand-in image last: a real image's files are never under a volume, but this one may live under
        # /tmp (a checkout there, its venv with it), where the pod's own /tmp volume would hide it. Folders bwrap
        # makes for it there get 0755, as an image's are (bwrap's own 0700 would shut a non-root UID out).
        for p in self.world.image_paths:
            for folder in _ancestors(p):
                args += ["--perms", "0755", "--dir", folder]
            args += ["--ro-bind", p, p]
        args += ["--remount-ro", "/", "--unshare-pid", "--as-pid-1", "--unshare-uts", "--hostname", pod.hostname,
                 "--unshare-ipc", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        caps = {a.upper().removeprefix("CAP_") for a in (ctx.get("capabilities") or {}).get("add", [])}
        if process.uid == 0:
            args += [x for cap in sorted(caps) for x in ("--cap-add", f"CAP_{cap}")]
        else:  # setpriv needs these to switch; the switch to a non-root UID clears them all
            args += [x for cap in ("SETUID", "SETGID", "SETPCAP") for x in ("--cap-add", f"CAP_{cap}")]
        args += ["--chdir", c.get("workingDir", "/"), "--clearenv"]
        for k, v in env.items():
            args += ["--setenv", k, v]
        if not command:
            raise SandboxError(f"{where}: no command (the image's entrypoint is not modelled)")
        if process.uid != 0:
            groups = sorted(process.gids)
            args += ["--", "setpriv", "--reuid", str(process.uid), "--regid", str(ctx.get("runAsGroup", 0)),
                     "--groups", ",".join(map(str, groups)), "--inh-caps", "-all", "--bounding-set", "-all",
                     "--no-new-privs", "--", *command]
        else:
            args += ["--", *command]
        return args

    def env(self, pod: Pod, c: dict) -> dict[str, str]:
        """The container's own env as the kubelet resolves it (``kubelet_expansion.container_env``: each ``value``
        expanded against the variables declared before it, JOB_COMPLETION_INDEX added as the Job controller adds
        it to an Indexed Job's pods), in order."""
        fields = {"status.podIP": self.pod_ip(pod), "metadata.name": pod.name,
                  "metadata.namespace": self.world.namespace, "spec.nodeName": "sandbox", "status.hostIP": "127.0.0.1",
                  "metadata.annotations['batch.kubernetes.io/job-completion-index']": str(pod.index),
                  # a cluster that does not copy the node's zone label onto pods: the label reads as ""
                  ZONE_FIELD: ""}

        def value_from(e: Mapping) -> str:
            path = (e["valueFrom"].get("fieldRef") or {}).get("fieldPath")
            if path not in fields:
                raise SandboxError(f"Job {pod.job} pod {pod.name} container {c['name']}: env {e['name']} "
                                   f"{e['valueFrom']} not modelled")
            return fields[path]
        return container_env(c, value_from, pod.index)

    def start(self, pod: Pod, c: dict, volumes: dict[str, dict]) -> Container:
        log = pod.dir / "logs" / f"{c['name']}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        run = Container(pod.job, pod.name, c["name"], log)
        declared = self.env(pod, c)
        # The image's env, what the runtime adds, then the container's (which wins); the command and args expanded
        # against the container's own env only, as the kubelet expands them.
        env = {**self.world.env, "HOSTNAME": pod.hostname, **declared}
        argv = self.argv(pod, c, volumes, env, command_and_args(c, declared))
        r, w = os.pipe()
        at = argv.index("--die-with-parent")
        argv[at:at] = ["--info-fd", str(w)]
        with open(log, "ab") as out:
            run.proc = subprocess.Popen(argv, pass_fds=(w,), stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT)
        os.close(w)
        with os.fdopen(r) as f:
            raw = f.read()
        run.pid = json.loads(raw)["child-pid"] if raw.strip() else None
        pod.containers.append(run)
        return run

    def run_pod(self, pod: Pod) -> None:
        """Init containers one by one, then the containers together; the pod's phase at the end."""
        try:
            self.write_hosts(pod)
            volumes = self.volumes(pod)
            pod.phase = "Running"
            for c in pod.spec.get("initContainers", []):
                if pod.stopping:
                    break
                run = self.start(pod, c, volumes)
                run.rc = run.proc.wait()
                if run.rc != 0:
                    return self._fail(pod, run)
            if pod.stopping:
                pod.phase, pod.failure = "Failed", f"Job {pod.job} pod {pod.name}: stopped before its containers"
                return
            runs = [self.start(pod, c, volumes) for c in pod.spec["containers"]]
            for run in runs:
                run.rc = run.proc.wait()
            bad = [run for run in runs if run.rc != 0]
            if bad:
                return self._fail(pod, bad[0])
            pod.phase = "Succeeded"
        except SandboxError as e:
            pod.phase, pod.failure = "Failed", str(e)
        except Exception as e:  # a sandbox fault: fail the pod loudly rather than hang the Job
            pod.phase, pod.failure = "Failed", f"Job {pod.job} pod {pod.name}: sandbox error {e!r}"

    def write_hosts(self, pod: Pod) -> None:
        """The pod's /etc/hosts as the kubelet writes it (its own name under its subdomain), plus every
        name the cluster's DNS would answer, all at the one pod IP."""
        sub = pod.spec.get("subdomain")
        own = [f"{pod.hostname}.{sub}.{self.world.namespace}.svc.cluster.local"] if sub else []
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost", "\t".join([self.pod_ip(pod), *own, pod.hostname]),
                 *(f"{ip}\t{n}" for n, ip in self.world.names.items())]
        (pod.dir / "hosts").write_text("\n".join(lines) + "\n")

    def _fail(self, pod: Pod, run: Container) -> None:
        text = run.log.read_text(errors="replace")
        why = "killed" if run.rc < 0 or run.rc == 137 else diagnose(text)
        if why.startswith("unresolved name: ?"):  # the resolver's message has no name: the ones the spec uses
            spec = json.dumps([c for c in pod.spec["containers"] + pod.spec.get("initContainers", [])
                               if c["name"] == run.name])
            unknown = sorted({n for n in re.findall(r"[a-z0-9-]+(?:\.[a-z0-9-]+)*\.svc(?:\.cluster\.local)?", spec)
                              if n not in self.world.names})
            why = f"unresolved name: {', '.join(unknown) or '?'}" + why[len("unresolved name: ?"):]
        pod.phase = "Failed"
        pod.failure = f"Job {pod.job} pod {pod.name} container {run.name}: exit {run.rc}: {why}"

    def terminate(self, pod: Pod, grace: float) -> None:
        """SIGTERM to each running container's PID 1, SIGKILL after ``grace`` seconds (kubelet killContainer)."""
        pod.stopping = True
        running = [c for c in pod.containers if c.proc and c.proc.poll() is None and c.pid]
        for c in running:
            _signal(c.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(c.proc.poll() is None for c in running):
            time.sleep(0.1)
        for c in running:
            if c.proc.poll() is None:
                _signal(c.pid, signal.SIGKILL)  # PID 1 of its namespace: every process in it goes too
                c.proc.wait()


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass

