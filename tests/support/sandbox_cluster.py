"""A stack's plan, scaled down and run pod by pod in the sandbox (tests/support/pod_sandbox.py).

``scaled_config`` shrinks a stack's experiments by its ``local:`` section (as ``bench run
--local`` does) so that ``program.offline.evaluate_config`` builds the cluster's own Jobs for CPU
numbers. ``SandboxCluster`` stands up what the pods reach (moto's S3 server, the real local
etcd, the shared claim's folder with the storage's ownership, the dataset stand-ins in S3 and,
on FSx, their import) and runs the plan's Jobs in the order the cluster would: staging, then
each experiment's training and evaluation. The gate Jobs are skipped: they need the API server.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from core.contract.s3_uri import parse_s3_uri
from tests.support.kubelet_expansion import command_and_args, container_env
from tests.support.plan_manifests import kubernetes_objects
from tests.support.pod_network import PodNetwork
from tests.support.pod_sandbox import Kubelet, World
from tests.support.sandbox_jobs import JobResult, run_job

GATE_SKIPPED = "skipped: the gate resumes Jobs through the Kubernetes API server, which the sandbox has none of"
S3_PORT = 4566  # where AWS_ENDPOINT_URL points inside the pods' network
STANDIN_IMAGEFOLDER = dict(images=16, classes=4, resolution=64, val_images=8)


def kubelet_command(container: dict) -> list[str]:
    """The container's command and args as the kubelet hands them over (its ``$(VAR)`` and ``$$`` expanded)."""
    return command_and_args(container, container_env(container, value_from=lambda e: ""))


def scaled_config(config: dict[str, Any]) -> dict[str, Any]:
    """The stack file's ``config:`` with every experiment scaled by its ``local:`` section:
    ``local.steps`` steps, batch and width as the local run takes them, one process per node, no
    compile, checkpoints a third of the way. Precision and memory format stay the cloud's, so the plan
    checks them against the cloud's GPUs; the pods' trainers, on this CPU, train in what it runs fast
    (workloads.train.common.cpu_choice.precision_on)."""
    from bench.local.plan import local_node_range
    from core.config.model import LocalRun

    local = LocalRun(**config.get("eksbench:local", {}))
    out = []
    for e in config["eksbench:experiments"]:
        e = dict(e)
        nodes = str(e.get("nodes", 1))
        lo, hi = (int(x) for x in nodes.split(":")) if ":" in nodes else (int(nodes), int(nodes))
        lo, hi = local_node_range(lo, hi, local.nodes)
        e["nodes"] = hi if lo == hi else f"{lo}:{hi}"
        e["steps"] = local.steps if e.pop("epochs", 0) else min(e.get("steps", local.steps), local.steps)
        e["batch_size"] = min(e.get("batch_size", local.batch_size), local.batch_size)
        e["gpus_per_node"] = local.procs_per_node
        e["compile"] = False
        if e.get("checkpoint_every"):
            e["checkpoint_every"] = max(1, e["steps"] // 3)
        e["timeout_minutes"] = local.timeout_minutes
        e["args"] = [*e.get("args", []), f"--image-size={local.image_size}",
                     f"--width-per-group={local.width_per_group}", "--workers=0"]
        out.append(e)
    return {**config, "eksbench:experiments": out}


def image_prefix() -> str:
    """This machine's Python installation, the stand-in for the image's: the environment the tests run in (the
    project's venv), whose ``bin/`` comes first on the pods' PATH."""
    return os.path.realpath(sys.prefix)


def image_paths() -> list[str]:
    """What the stand-in image is made of, bound read-only at the same place: the tests' environment and, when it
    is a venv, the interpreter it was made from (its python is a link there, its standard library is there)."""
    return list(dict.fromkeys([image_prefix(), os.path.realpath(sys.base_prefix)]))


class SandboxCluster:
    """``with SandboxCluster(plan, root) as cluster: cluster.run_all()``; S3 through ``cluster.s3``."""

    def __init__(self, plan, root: Path, *, namespace: str = "eksbench"):
        self.plan, self.root, self.namespace = plan, Path(root), namespace
        self.objects = kubernetes_objects(plan.resources)
        self.results: dict[str, JobResult | str] = {}

    def of_kind(self, kind: str) -> list[tuple[str, dict]]:
        return [(n, m) for n, m in self.objects if m["kind"] == kind]

    def __enter__(self) -> "SandboxCluster":
        import logging

        import boto3
        from moto.server import ThreadedMotoServer

        from bench.local.etcd import LocalEtcd, free_port

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._stack = []
        port = free_port()
        self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        self._moto.start()
        self._stack.append(self._moto.stop)
        self.endpoint = f"http://127.0.0.1:{port}"
        self.s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                               aws_access_key_id="testing", aws_secret_access_key="testing")
        self._etcd = LocalEtcd().start()
        self._stack.append(self._etcd.stop)
        self._net = PodNetwork().__enter__()
        self._stack.append(lambda: self._net.__exit__(None, None, None))
        self._net.forward(S3_PORT, port)
        for _, svc in self.of_kind("Service"):
            if svc["metadata"]["name"] == "etcd":
                for p in svc["spec"]["ports"]:
                    self._net.forward(int(p["port"]), int(self._etcd.endpoint.rsplit(":", 1)[1]))
        self._make_buckets()
        self._upload_datasets()
        self.world = self._world()
        return self

    def __exit__(self, *exc) -> None:
        for stop in reversed(self._stack):
            stop()

    # -- what the pods reach ------------------------------------------------------------------
    def _s3_uris(self) -> set[str]:
        words = set()
        for _, job in self.of_kind("Job"):
            spec = job["spec"]["template"]["spec"]
            for c in spec.get("initContainers", []) + spec["containers"]:
                text = " ".join(kubelet_command(c))
                words |= {w.strip("'\"") for w in text.split() if w.strip("'\"").startswith("s3://")}
        for r in self.plan.resources:
            if r["type"].endswith("DataRepositoryAssociation"):
                words.add(r["inputs"]["dataRepositoryPath"])
        return words

    def _make_buckets(self) -> None:
        for bucket in sorted({parse_s3_uri(u)[0] for u in self._s3_uris()}):
            self.s3.create_bucket(Bucket=bucket)

    def _upload_datasets(self) -> None:
        """Each staged dataset's stand-in, prepared as ``bench data prepare`` leaves it: files, then manifest."""
        from datasets import synthetic
        from datasets.catalog import dataset
        from datasets.file_manifest import build_manifest, manifest_bytes
        from datasets.prepare import hash_plan
        from datasets.store import S3Store
        from workloads.train.common.cifar import write_standin

        for _, job in self.of_kind("Job"):
            args = kubelet_command(job["spec"]["template"]["spec"]["containers"][0])
            if "--source" not in args:
                continue
            source = args[args.index("--source") + 1]
            name = source.rstrip("/").rsplit("/", 1)[1]
            work = Path(tempfile.mkdtemp(dir=self.root, prefix=f"dataset-{name}-"))
            if name == "cifar10":
                top = write_standin(work, train=256, test=200).parent
                base = work / "cifar10"
                files = {str(p.relative_to(base)): p for p in top.rglob("*") if p.is_file()}
            else:
                files = synthetic.generate(synthetic.SyntheticSpec(**STANDIN_IMAGEFOLDER), work / "gen")
            entries = hash_plan(files)
            manifest = build_manifest(dataset=name, layout=dataset(name).layout, files=entries,
                                      created_by="sandbox", created_at="2026-11-23T00:00:00Z", params={})
            store = S3Store(*parse_s3_uri(source), client=self.s3)
            store.put_files(entries, on_file=lambda f: None, on_bytes=lambda n: None)
            store.write_manifest(manifest_bytes(manifest))

    def _world(self) -> World:
        pvc = self.of_kind("PersistentVolumeClaim")[0][1]
        pv = self.of_kind("PersistentVolume")[0][1]
        shared = self.root / "shared"
        shared.mkdir()
        owner = None
        inputs = {r["type"]: r["inputs"] for r in self.plan.resources}
        if pv["spec"]["csi"]["driver"] == "efs.csi.aws.com":
            ap = inputs["aws:efs/accessPoint:AccessPoint"]
            info, user = ap["rootDirectory"]["creationInfo"], ap["posixUser"]
            # The access point creates its root directory with creationInfo's owner and mode, and
            # every client acts as posixUser (AWS EFS guide, "Working with Amazon EFS access points").
            os.chown(shared, int(info["ownerUid"]), int(info["ownerGid"]))
            os.chmod(shared, int(info["permissions"], 8))
            owner = (int(user["uid"]), int(user["gid"]))
        else:  # FSx for Lustre: plain POSIX, the root root-owned 0755, each association's path made by FSx
            os.chmod(shared, 0o755)
            for r in self.plan.resources:
                if r["type"].endswith("DataRepositoryAssociation"):
                    self._fsx_import(r["inputs"]["dataRepositoryPath"], shared / r["inputs"]["fileSystemPath"][1:])
        config_maps = {m["metadata"]["name"]: m.get("data", {}) for _, m in self.of_kind("ConfigMap")}
        return World(root=self.root, namespace=self.namespace, claim=pvc["metadata"]["name"], shared=shared,
                     claim_owner=owner, config_maps=config_maps, netns=self._net.path, names=self._names(),
                     env=self._env(), image_paths=image_paths())

    def _fsx_import(self, uri: str, dest: Path) -> None:
        """What the association's import makes visible: every object as a root-owned 0644 file
        (FSx guide, "POSIX metadata support for data repositories": objects without POSIX metadata)."""
        dest.mkdir(parents=True, mode=0o755)
        bucket, prefix = parse_s3_uri(uri)
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                path = dest / obj["Key"][len(prefix):]
                path.parent.mkdir(parents=True, exist_ok=True)
                self.s3.download_file(bucket, obj["Key"], str(path))
                os.chmod(path, 0o644)
        for d in [dest, *(p for p in dest.rglob("*") if p.is_dir())]:
            os.chmod(d, 0o755)

    def _names(self) -> dict[str, str]:
        """Each Service's names at 127.0.0.1 (where its port is forwarded), each Indexed Job pod's
        ``<job>-<i>.<subdomain>[.<ns>[.svc[.cluster.local]]]`` at an address of its own."""
        names = {}
        for _, svc in self.of_kind("Service"):
            n, ns = svc["metadata"]["name"], svc["metadata"].get("namespace", self.namespace)
            if svc["spec"].get("clusterIP") != "None":
                names.update(dict.fromkeys([n, f"{n}.{ns}", f"{n}.{ns}.svc", f"{n}.{ns}.svc.cluster.local"],
                                           "127.0.0.1"))
        for j, (_, job) in enumerate(self.of_kind("Job")):
            spec = job["spec"]
            sub = spec["template"]["spec"].get("subdomain")
            if spec.get("completionMode") == "Indexed" and sub:
                for i in range(int(spec.get("completions", 1))):
                    h = f"{job['metadata']['name']}-{i}.{sub}"
                    names.update(dict.fromkeys([h, f"{h}.{self.namespace}", f"{h}.{self.namespace}.svc",
                                                f"{h}.{self.namespace}.svc.cluster.local"], f"127.0.{j + 1}.{i + 2}"))
        return names

    def _env(self) -> dict[str, str]:
        """The image's env: this machine's Python, moto's S3, and the node's CPU kind as this test run has it (a
        forced EKSBENCH_CPU_BF16 reaches the pods, as a node's CPU would)."""
        from workloads.train.common.cpu_choice import FORCE_BF16_ENV

        cores = os.cpu_count() or 1
        forced = {FORCE_BF16_ENV: os.environ[FORCE_BF16_ENV]} if os.environ.get(FORCE_BF16_ENV) else {}
        return {"PATH": f"{image_prefix()}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "AWS_ENDPOINT_URL": f"http://127.0.0.1:{S3_PORT}", "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing", "OMP_NUM_THREADS": str(max(1, cores // 2)), **forced}

    # -- running the plan ---------------------------------------------------------------------
    def jobs(self) -> list[tuple[str, dict]]:
        """The plan's Jobs in the cluster's order: staging, then each experiment's Jobs as planned."""
        order = list(self.plan.outputs.get("experiment_results", {}))
        rank = {"dataset-staging": 0, "training": 1, "pserver": 1, "evaluation": 2, "gate": 3}

        def key(item):  # an evaluation Job waits (suspended, for its gate) until its training is done
            labels = item[1]["metadata"]["labels"]
            exp = labels.get("eksbench.io/experiment")
            return (order.index(exp) + 1 if exp in order else 0, rank.get(labels.get("app.kubernetes.io/component"), 1))
        return sorted(self.of_kind("Job"), key=key)

    def run(self, job: dict, *, name: str | None = None, timeout: float = 600) -> JobResult | str:
        """Runs ``job``; its result is kept under ``name`` (the plan's resource name) or the Job's own."""
        name = name or job["metadata"]["name"]
        if job["metadata"]["labels"].get("app.kubernetes.io/component") == "gate":
            self.results[name] = GATE_SKIPPED
        else:
            self.results[name] = run_job(Kubelet(self.world), job, timeout=timeout)
        return self.results[name]

    def run_all(self, *, only=lambda name, job: True) -> dict[str, JobResult | str]:
        for name, job in self.jobs():
            if only(name, job):
                self.run(job, name=name)
        return self.results

    def objects_under(self, uri: str) -> dict[str, int]:
        bucket, prefix = parse_s3_uri(uri)
        out = {}
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out.update({o["Key"][len(prefix):]: o["Size"] for o in page.get("Contents", [])})
        return out

    def read(self, uri: str) -> bytes:
        bucket, key = uri.removeprefix("s3://").split("/", 1)
        return self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s: {what}")


def copy_tree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, dirs_exist_ok=True)
