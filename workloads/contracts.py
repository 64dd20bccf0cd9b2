"""The contract between the cluster side and the code in the pods: what runs, with which arguments.

Pure functions (no Pulumi, no I/O):
- which experiments can run at all (``check_experiment``, ``missing_entry_points``; the
  program calls them once, before registering anything);
- the trainer's arguments (``train_args_for``, one ``core.contract.train_args.TrainArgs`` per
  experiment, also the start of ``bench run --local``) and the evaluation command
  (``evaluation_argv``);
- how each framework is launched across the pods of one Indexed Job: a ``Launch`` with the
  argv the results launcher (``workloads.train.harness.launch``) runs, the env every pod shares, and
  a short shell prelude that derives the per-pod part from ``JOB_COMPLETION_INDEX``, which
  only exists at run time. Every per-index value also has a pure function here (e.g.
  ``tf_config``), so tests can check the shell and the Python agree;
- names (``base_name``, ``service_name``, ``paddle_job_names``, ``object_names``: every one a DNS-1035
  label from ``core.contract.k8s_names.dns1035_label``) and the gate's instructions (``gate_spec``).

Frameworks (see workloads/README.md for the reasoning):
- pytorch: torchrun, etcd-v2 (default) or c10d rendezvous, elastic ``min:max`` nodes.
- tensorflow: MultiWorkerMirroredStrategy, ``TF_CONFIG`` from the pod index.
- horovod: the Gloo controller bootstrapped per pod (no SSH, no MPI operator).
- paddle: the parameter-server env contract (TRAINING_ROLE, PSERVER_HOSTS, ...; see ``paddle_env``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping, Protocol

from core.catalog import aws as catalog
from core.catalog import compat, pins
from core.catalog.aws import DEFAULT_REGION
from core.catalog.workload_facts import WORKLOADS
from core.config.gpu_defaults import TORCH_FRAMEWORKS, compile_choice, reads_image_folder, trainer_input_path
from core.config.model import Experiment
from core.contract.k8s_names import dns1035_label
from core.contract.launch_command import (
    ENTRY_MODULES,
    Launched,
    Torchrun,
    launched_torchrun,
    launched_trainer,
    torchrun_argv,
    trainer_argv,
)
from core.contract.names import (
    CHECKPOINT_FILE,
    ENV_FRAMEWORK,
    ENV_HVD_HOSTS,
    ENV_HVD_PORT,
    ENV_HVD_SLOTS,
    ENV_TF_WORKERS,
    EVAL_DIR,
)
from core.contract.train_args import TrainArgs
from infra.environment import Environment
from workloads.pod_script import ensure_modules, launcher_script  # noqa: F401 - the pods' sh script
from workloads.train.horovod.bootstrap import HOROVOD_PORT, horovod_env  # noqa: F401 - one definition, shipped

HOROVOD_BOOTSTRAP_MODULE = "workloads.train.horovod.bootstrap"
GATE_MODULE = "workloads.train.control.gate"  # the gate Job's program; reads gate_spec() from EKSBENCH_GATE

C10D_PORT = 29400  # torchrun's default c10d rendezvous port
TF_PORT = 2222  # conventional MultiWorkerMirroredStrategy worker port
PADDLE_PORT = 6170  # pserver listen port
PADDLE_GLOO_PORT = 6171  # pserver 0: Paddle's HTTP store for the trainers' gloo barriers
CODE_ROOT = "/opt/eksbench"  # PYTHONPATH; the shipped code (core/, workloads/train/) is mounted here
# Which workloads each framework's training path implements.
SUPPORTED = {
    "pytorch": ("resnet50", "cifar10", "maskrcnn", "allreduce"),
    "horovod": ("resnet50", "cifar10"),
    "tensorflow": ("resnet50", "cifar10"),
    "paddle": ("resnet50", "cifar10"),
}
IMAGE_EXAMPLES = {
    "pytorch": pins.TRAINING_IMAGE,
    "tensorflow": pins.training_image(DEFAULT_REGION, pins.TF_DLC_TAG, pins.TF_DLC_REPOSITORY),
    "horovod": pins.horovod_image("<account>", "<region>"),  # no DLC has Horovod: workloads/Dockerfile.horovod
    "paddle": pins.PADDLE_IMAGE,
}
IMAGE_HOW = {"horovod": " (no AWS Deep Learning Container has Horovod since PyTorch 2.0.1): build "
                        "workloads/Dockerfile.horovod (--build-arg BASE_TAG for V100 groups), push it to the "
                        "home stack's repository and set image"}
# A Job name becomes the pod hostname "<job>-<index>" and the label value
# batch.kubernetes.io/job-name: both are limited to 63 characters (RFC 1123 label).
# 40 leaves room for the "-eval-gate" suffix and "-<index>". The Service has the same name (so the
# same limit): it is the pods' subdomain, one label of "<job>-<index>.<svc>.<namespace>.svc.cluster.local".
MAX_BASE_NAME = 40
# What each object of an experiment's run adds to its base name (workloads.job_manifests builds them;
# tests/workloads/test_k8s_names.py checks that they agree with ``object_names``).
NAME_SUFFIXES = {"pserver": "ps", "eval": "eval", "gate": "gate", "eval-gate": "eval-gate"}


# What the results launcher imports in every training pod: boto3 to upload, pynvml to sample the GPUs
# (workloads.train.harness.telemetry; no DLC promises it, and without it a run has no GPU telemetry).
LAUNCHER_MODULES = ("boto3", "pynvml")


@dataclass(frozen=True)
class Launch:
    """What one framework needs in every pod of the training Job."""
    argv: tuple[str, ...]  # what workloads.train.harness.launch runs after "--"
    env: Mapping[str, str] = field(default_factory=dict)  # the same in every pod
    prelude: str = ""  # shell run first; may read $JOB_COMPLETION_INDEX
    port: int | None = None  # where peers reach a pod through the headless Service
    modules: tuple[str, ...] = LAUNCHER_MODULES  # imported by the launcher/rendezvous; pip-installed if missing
    pins: Mapping[str, str] = field(default_factory=lambda: dict(pins.PIP_PINS))  # module -> what pip installs
    launched: Launched = Launched()  # what the launcher records beside argv (torchrun's shape, the trainer's args)


def check_experiment(e: Experiment) -> list[str]:
    """Problems with framework/workload/option pairs, one message each, keys relative to the experiment.

    The config parser prefixes them with ``experiments[i].``.
    """
    out = []
    supported = SUPPORTED.get(e.framework, ())
    if e.workload not in supported:
        ok = [f for f, w in SUPPORTED.items() if e.workload in w]
        out.append(f'framework="{e.framework}": does not run workload "{e.workload}" (supported: '
                   f'{", ".join(supported) or "none"}); use framework {", ".join(ok)}, e.g. "pytorch"')
    if e.framework != "pytorch" and e.elastic:
        out.append(f'nodes="{e.min_nodes}:{e.max_nodes}": elastic runs need framework "pytorch" (torchrun); '
                   f'{e.framework} needs a fixed node count, e.g. {e.max_nodes}')
    row = compat.find_image(e.image)  # an image of the compatibility table: its framework is known
    if row is not None and row.framework != e.framework:
        out.append(f'image="{e.image}": a {row.framework} image; framework "{e.framework}" needs an image that has '
                   f'it installed{IMAGE_HOW.get(e.framework, "")}, e.g. "{IMAGE_EXAMPLES[e.framework]}"')
    evaluated = [w for w, facts in WORKLOADS.items() if facts.evaluates]
    if e.evaluate and (e.framework != "pytorch" or e.workload not in evaluated):
        out.append(f'evaluate=true: evaluation exists for workload "{", ".join(evaluated)}" with framework '
                   f'"pytorch" only (here {e.workload}/{e.framework}); remove it, e.g. evaluate: false')
    if e.evaluate and not e.checkpoint_every and not e.checkpoint_minutes:
        out.append("evaluate=true: the evaluation reads the checkpoint training leaves, and checkpoint_every=0 with "
                   "checkpoint_minutes=0 keeps none; set one, e.g. checkpoint_minutes: 10")
    if e.compile and e.framework not in TORCH_FRAMEWORKS:
        out.append(f'compile=true: torch.compile applies to PyTorch code, not {e.framework}; e.g. compile: false')
    if e.input_path != "auto" and not reads_image_folder(e):
        out.append(f'input_path="{e.input_path}": chooses how a PyTorch trainer decodes an ImageFolder\'s JPEGs, and '
                   f'{e.workload}/{e.framework} on dataset "{e.dataset}" reads none; e.g. input_path: "auto"')
    if e.fabric == "strict" and e.framework != "pytorch":
        out.append(f'fabric="strict": judges NCCL\'s transport in PyTorch runs only (here {e.framework}); '
                   f'e.g. fabric: "check"')
    if e.workload in WORKLOADS and WORKLOADS[e.workload].collective and e.max_nodes * e.gpus_per_node < 2:
        out.append(f'nodes={e.max_nodes}: workload "{e.workload}" times a collective between processes and needs at '
                   f'least 2 (nodes x gpus_per_node = {e.max_nodes * e.gpus_per_node}); e.g. nodes: 2')
    datasets = WORKLOADS[e.workload].datasets if e.workload in WORKLOADS else ()
    if e.dataset not in datasets:
        out.append(f'dataset="{e.dataset}": workload "{e.workload}" trains on {", ".join(datasets)}; '
                   f'e.g. dataset: "{datasets[0]}"')
    return out


def base_name(experiment: Experiment, run_id: str) -> str:
    """``<experiment>-<run_id>`` (``-r<k>`` added for repeat k): the training Job, its pods' peers label and
    the rendezvous id. A DNS-1035 label of at most MAX_BASE_NAME characters (``core.contract.k8s_names``): a name
    that is too long, or starts with a digit, is made valid and ends with a stable hash of its parts."""
    parts = (experiment.name, run_id) + ((f"r{experiment.repeat}",) if experiment.repeat else ())
    return dns1035_label(*parts, limit=MAX_BASE_NAME)


def service_name(experiment: Experiment, run_id: str) -> str:
    """The headless Service: the Job's own name, already a DNS-1035 label (which a Service name must be)."""
    return base_name(experiment, run_id)


def derived_name(job: str, role: str) -> str:
    """The name of one of a run's other objects: ``<job>-<suffix>`` (NAME_SUFFIXES), a DNS-1035 label."""
    return dns1035_label(job, NAME_SUFFIXES[role])


def object_names(experiment: Experiment, run_id: str) -> dict[str, str]:
    """Every Kubernetes object name one run of ``experiment`` may create, by role (as
    ``job_manifests.experiment_manifests`` keys them; the gate's ServiceAccount, Role and RoleBinding share
    the "gate" name). The gate is named whether or not the run gets one (it does when it waits for the
    previous experiment), so a check of these never depends on the order the experiments run in."""
    job = base_name(experiment, run_id)
    out = {"svc": service_name(experiment, run_id), "job": job}
    if experiment.framework == "paddle":
        out["pserver"] = paddle_job_names(job)[1]
    if experiment.evaluate:
        out["eval"] = derived_name(job, "eval")
        out["eval-gate"] = derived_name(job, "eval-gate")
    out["gate"] = derived_name(job, "gate")
    return out


def pod_host(job: str, index: int | str, service: str) -> str:
    """Indexed Job pods are named <job>-<index>; with subdomain=<svc> they resolve as <job>-<index>.<svc>."""
    return f"{job}-{index}.{service}"


# The kubelet's clusterDomain on EKS nodes (awslabs/amazon-eks-ami nodeadm/internal/kubelet/config.go,
# defaultKubeletSubConfig: ClusterDomain "cluster.local"); infra.environment's etcd endpoint uses it too.
CLUSTER_DOMAIN = "cluster.local"


def pod_fqdn(job: str, index: int | str, service: str, namespace: str) -> str:
    """``<job>-<index>.<svc>.<ns>.svc.cluster.local``: the name the kubelet writes into the pod's own
    /etc/hosts, first on its IP's line, when the pod has a subdomain (kubernetes/kubernetes
    pkg/kubelet/kubelet_pods.go ``managedHostsFileContent``: "<ip>\t<hostname>.<hostDomainName>\t<hostname>",
    hostDomainName = "<subdomain>.<namespace>.svc.<clusterDomain>"). So the pod resolves it
    without DNS, as the canonical name of its own hostname."""
    return f"{pod_host(job, index, service)}.{namespace}.svc.{CLUSTER_DOMAIN}"


def entry_file(framework: str) -> str:
    """The file (relative to the repository root, as shipped) that ``python -m`` runs for ``framework``."""
    module = ENTRY_MODULES[framework]
    return f"{module.replace('.', '/')}/__main__.py"


def missing_entry_points(experiments: tuple[Experiment, ...], code_files: Mapping[str, str]) -> list[str]:
    """Experiments whose framework has no training entry point among the shipped files."""
    return [f'experiments[{i}].framework="{e.framework}": workloads/train has no {e.framework} entry point '
            f'({entry_file(e.framework)}, module {ENTRY_MODULES[e.framework]}); use "pytorch" or add it'
            for i, e in enumerate(experiments) if entry_file(e.framework) not in code_files]


class TrainPaths(Protocol):
    """Where an experiment reads data and writes results: the cluster's ``Environment``, or the local runner's."""
    datasets_dir: str

    def experiment_results_dir(self, experiment: Experiment) -> str: ...


# A collective that waits longer than this fails the step (NCCL watchdog), so survivors of a lost
# node stop within minutes instead of NCCL's 10 and torchrun can restart the group. It must stay
# above the longest legitimate wait: rank 0's checkpoint snapshot, an epoch's evaluation, and the
# first step's torch.compile on the slowest rank (max-autotune can take minutes).
CLUSTER_COLLECTIVE_TIMEOUT_S = 300
# torchrun's rendezvous settings, the same on the cluster as in the local run (bench.local.plan.torchrun_command;
# both built by core.contract.launch_command): a new round closes 5 s after min nodes joined, an agent waits up to
# 300 s to join, and agents that miss 3 heartbeats 2 s apart are dropped.
RDZV_CONF = {"join_timeout": 300, "last_call_timeout": 5, "keep_alive_interval": 2, "keep_alive_max_attempt": 3}


def rdzv_conf(**overrides: int) -> str:
    """``--rdzv-conf``'s value: ``join_timeout=300,last_call_timeout=5,...``."""
    return ",".join(f"{k}={v}" for k, v in {**RDZV_CONF, **overrides}.items())


def loader_workers(instance_type: str | None, gpus_per_node: int) -> int:
    """DataLoader workers per process from the instance's vCPUs per GPU: the 75% share the pod
    requests (job_manifests._requests), less one core for the training process itself."""
    spec = catalog.INSTANCE_TYPES.get(instance_type or "")
    if spec is None or not spec.gpus:
        return TrainArgs().workers
    per_gpu = spec.vcpus / spec.gpus
    return max(1, int(per_gpu * 0.75) - 1)


def checkpoint_policy(e: Experiment) -> tuple[int, float]:
    """(checkpoint_every, checkpoint_minutes). A fixed-size synthetic run is a throughput
    measurement: both 0, so it writes no checkpoint at all (workloads.train.pytorch.checkpoint.enabled).
    Elastic runs and real data checkpoint every ``checkpoint_minutes`` and/or ``checkpoint_every``
    steps, and at the end (an evaluated run's weights: evaluate needs real data, so never both 0 here)."""
    if e.dataset == "synthetic" and not e.elastic:
        return 0, 0.0
    return e.checkpoint_every, e.checkpoint_minutes


def compiles(e: Experiment, instance_type: str | None = None) -> bool:
    """Whether the cluster's run of ``e`` (on GPUs of ``instance_type``, its node group's) compiles its model: the
    stack file's ``compile``, else the GPU default's rule (core.config.gpu_defaults.compile_choice, which ``bench
    plan`` prints with its reason)."""
    return bool(compile_choice(e, gpu=True, instance_type=instance_type).value)


def jpeg_input(e: Experiment) -> str:
    """How the cluster's run of ``e`` (on GPUs) decodes an ImageFolder's JPEGs (TrainArgs.input_path): the stack
    file's ``input_path``, else the GPU default (core.config.gpu_defaults.input_path, which ``bench plan`` prints)."""
    return trainer_input_path(e, gpu=True)


def image_pins(e: Experiment) -> dict[str, str]:
    """What pip installs in ``e``'s pods for a module its image lacks: DALI's wheel for the image's CUDA."""
    row = compat.find_image(e.image) or compat.find_image(pins.TRAINING_IMAGE)  # unknown: the pinned DLC's CUDA
    return {**pins.PIP_PINS, pins.DALI_MODULE: pins.dali_pin(row.cuda)}


def trainer_modules(e: Experiment, base: tuple[str, ...]) -> tuple[str, ...]:
    """``base`` and, where the trainer decodes with DALI, DALI (no DLC has it)."""
    return base + ((pins.DALI_MODULE,) if jpeg_input(e) == "dali" else ())


def train_args_for(e: Experiment, env: TrainPaths, *, instance_type: str | None = None) -> TrainArgs:
    """The experiment as the trainer's arguments; what an experiment does not set keeps TrainArgs' default.

    ``instance_type``: the experiment's node group's, for the loader workers per process.
    """
    every, minutes = checkpoint_policy(e)
    return TrainArgs(workload=e.workload, batch_size=e.batch_size, precision=e.precision, steps=e.steps,
                     epochs=e.epochs, dataset=e.dataset,
                     data_dir=env.datasets_dir,  # the dataset is a folder under it
                     results_dir=env.experiment_results_dir(e), checkpoint_every=every, checkpoint_minutes=minutes,
                     image_size=WORKLOADS[e.workload].image_size, channels_last=e.channels_last,
                     compile=compiles(e, instance_type), compile_mode=e.compile_mode,
                     target_accuracy=e.target_accuracy, input_path=jpeg_input(e),
                     workers=loader_workers(instance_type, e.gpus_per_node),
                     collective_timeout=CLUSTER_COLLECTIVE_TIMEOUT_S)


def train_argv(e: Experiment, env: Environment, *, instance_type: str | None = None) -> tuple[str, ...]:
    """``-m <entry module>`` and its arguments (the trainers' CLI contract, core.contract.train_args, for every framework);
    the experiment's own ``args`` come last, so they win."""
    return trainer_argv(train_args_for(e, env, instance_type=instance_type), e.args,
                        module=ENTRY_MODULES[e.framework])


def entry_command(e: Experiment, env: Environment, *, nodes: int, procs_per_node: int,
                  prefix: tuple[str, ...] = ("python3",)) -> tuple[tuple[str, ...], Launched]:
    """``prefix`` + ``train_argv``, and the Launched the launcher records (``nodes`` x ``procs_per_node``)."""
    return prefix + train_argv(e, env), launched_trainer(nodes=nodes, procs_per_node=procs_per_node,
                                                         args=train_args_for(e, env), extra=e.args)


def pytorch_launch(e: Experiment, env: Environment, *, job: str, service: str, gpus: int,
                   instance_type: str | None = None) -> Launch:
    """torchrun on every pod; the rendezvous id is the Job name, stable for one experiment and run."""
    if e.rdzv_backend == "c10d":
        # The c10d store is hosted by the agent whose host matches the endpoint: pod index 0. torch
        # decides it by comparing the endpoint's host with its hostname, the canonical name
        # getaddrinfo gives for that hostname (from /etc/hosts), or a DNS answer
        # (torch/distributed/elastic/rendezvous/utils.py _matches_machine_hostname, used by
        # c10d_rendezvous_backend._create_tcp_store when is_host is not set). The short
        # "<job>-0.<svc>" matches only through DNS, which may not have the headless Service's
        # record yet; the full name matches pod 0's /etc/hosts line at once (pod_fqdn).
        endpoint, port = f"{pod_fqdn(job, 0, service, env.namespace)}:{C10D_PORT}", C10D_PORT
    else:
        endpoint, port = env.etcd_endpoint, None
    agent = Torchrun(min_nodes=e.min_nodes, max_nodes=e.max_nodes, nproc_per_node=gpus, max_restarts=e.max_restarts,
                     rdzv_backend=e.rdzv_backend, rdzv_endpoint=endpoint, rdzv_id=job, rdzv_conf=rdzv_conf())
    train = train_args_for(e, env, instance_type=instance_type)
    modules = trainer_modules(e, ("etcd", *LAUNCHER_MODULES) if e.rdzv_backend == "etcd-v2" else LAUNCHER_MODULES)
    return Launch(argv=torchrun_argv(agent) + trainer_argv(train, e.args, module=ENTRY_MODULES[e.framework]),
                  port=port, modules=modules, pins=image_pins(e), env={ENV_FRAMEWORK: "pytorch"},
                  launched=launched_torchrun(agent, train, e.args))


def tf_workers(job: str, service: str, nodes: int) -> list[str]:
    return [f"{pod_host(job, i, service)}:{TF_PORT}" for i in range(nodes)]


def tf_config(workers: list[str], index: int) -> str:
    """TF_CONFIG for MultiWorkerMirroredStrategy worker ``index`` (compact JSON, as the prelude prints it)."""
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}},
                      separators=(",", ":"))


def tensorflow_launch(e: Experiment, env: Environment, *, job: str, service: str, gpus: int) -> Launch:
    workers = json.dumps(tf_workers(job, service, e.max_nodes), separators=(",", ":"))
    # Same bytes as tf_config(workers, index): the worker list comes from the env, the index from the Job.
    prelude = (f'export TF_CONFIG="{{\\"cluster\\":{{\\"worker\\":${{{ENV_TF_WORKERS}}}}},'
               '\\"task\\":{\\"type\\":\\"worker\\",\\"index\\":${JOB_COMPLETION_INDEX}}}"')
    # one worker process per pod (MultiWorkerMirroredStrategy drives the pod's GPUs)
    argv, launched = entry_command(e, env, nodes=e.max_nodes, procs_per_node=1)
    return Launch(argv=argv, prelude=prelude, port=TF_PORT, launched=launched,
                  env={ENV_FRAMEWORK: "tensorflow", ENV_TF_WORKERS: workers})


def horovod_launch(e: Experiment, env: Environment, *, job: str, service: str, gpus: int) -> Launch:
    """Every pod runs workloads.train.horovod.bootstrap, which starts one process per GPU with horovod_env()."""
    hosts = ",".join(pod_host(job, i, service) for i in range(e.max_nodes))
    # gpus ranks per pod, each "python3 -m workloads.train.horovod <args>"
    argv, launched = entry_command(e, env, nodes=e.max_nodes, procs_per_node=gpus,
                                   prefix=("python3", "-m", HOROVOD_BOOTSTRAP_MODULE, "python3"))
    return Launch(argv=argv, port=HOROVOD_PORT, launched=launched, modules=trainer_modules(e, LAUNCHER_MODULES),
                  pins=image_pins(e), env={ENV_FRAMEWORK: "horovod", ENV_HVD_HOSTS: hosts, ENV_HVD_SLOTS: str(gpus),
                       ENV_HVD_PORT: str(HOROVOD_PORT)})


def paddle_job_names(job: str) -> tuple[str, str]:
    """(trainer Job, pserver Job): two Indexed Jobs, so pservers hold no GPUs."""
    return job, derived_name(job, "pserver")


# Per-pod paddle variables, set by the prelude from JOB_COMPLETION_INDEX (the rest is the same in every pod).
PADDLE_PER_POD = ("SERVER_ENDPOINT", "TRAINER_INDEX", "PADDLE_TRAINER_ID", "POD_IP")


def paddle_env(e: Experiment, *, job: str, service: str, role: str, index: int) -> dict[str, str]:
    """The env one paddle pod gets: role PSERVER or TRAINER, with its index (``paddle_ps_env`` on
    the pods' DNS names). Since the pserver list holds the pods' DNS names (fixed before any pod
    has an IP), a pserver's POD_IP is its own DNS name, so Paddle's lookup of ``POD_IP:PADDLE_PORT``
    in the list finds it. Trainers get POD_IP from the downward API (status.podIP, job_manifests);
    every paddle pod also has that IP as EKSBENCH_POD_IP.
    """
    _, ps_job = paddle_job_names(job)
    pservers = [f"{pod_host(ps_job, i, service)}:{PADDLE_PORT}" for i in range(e.pservers)]
    trainers = [f"{pod_host(job, i, service)}:{PADDLE_PORT}" for i in range(e.max_nodes)]
    env = paddle_ps_env(pservers=pservers, trainers=trainers, role=role, index=index, task=job)
    if role != "PSERVER":
        del env["POD_IP"]  # the downward API's (job_manifests)
    return env


def paddle_ps_env(*, pservers: list[str], trainers: list[str], role: str, index: int, task: str,
                  gloo_port: int = PADDLE_GLOO_PORT) -> dict[str, str]:
    """One paddle process's env from the endpoint lists (``host:port``); the cluster's pods and the
    local run (bench.local.paddle) both build it here. Both naming sets:

    - Fluid-era names, from PaddlePaddle's AWS benchmarking tool (PaddlePaddle/Paddle,
      tools/aws_benchmarking/README.md, the Fluid 0.x/1.x days): TASK_NAME, TRAINING_ROLE,
      PSERVER_HOSTS = PSERVERS (comma-separated pserver endpoints), TRAINERS (count),
      SERVER_ENDPOINT (a pserver's own endpoint) and TRAINER_INDEX (a trainer's index).
    - What Paddle 2.x/3.x fleet reads: ``PaddleCloudRoleMaker._ps_env`` in
      python/paddle/distributed/fleet/base/role_maker.py (checked at PaddlePaddle/Paddle
      d4038ff and in the 3.0.0 wheel): PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINER_ENDPOINTS,
      PADDLE_TRAINERS_NUM, TRAINING_ROLE, PADDLE_TRAINER_ID (trainers), and PADDLE_PORT and
      POD_IP for every role (3.0.0 requires both of a trainer too), joined as ``POD_IP:PADDLE_PORT``.
    - The trainers' barrier store, as Paddle's own PS launcher sets it
      (python/paddle/distributed/fleet/launch_utils.py ``ParameterServerLauncher``):
      PADDLE_WITH_GLOO=1 (gloo among the trainers; set in every pod, since pserver 0 serves the store),
      PADDLE_GLOO_RENDEZVOUS=3 (HTTP) and
      PADDLE_GLOO_HTTP_ENDPOINT, served by pserver 0 (``_gloo_init``: "self._is_server() and
      self._server_index() == 0" starts the HTTP store) on ``gloo_port``.
    """
    ps, own = ",".join(pservers), (pservers if role == "PSERVER" else trainers)[index]
    host, port = own.rsplit(":", 1)
    env = {"TASK_NAME": task, "TRAINING_ROLE": role, "PSERVER_HOSTS": ps, "PSERVERS": ps,
           "TRAINERS": str(len(trainers)), ENV_FRAMEWORK: "paddle",
           "PADDLE_PSERVERS_IP_PORT_LIST": ps, "PADDLE_TRAINER_ENDPOINTS": ",".join(trainers),
           "PADDLE_TRAINERS_NUM": str(len(trainers)), "PADDLE_PORT": port, "POD_IP": host,
           "PADDLE_WITH_GLOO": "1", "PADDLE_GLOO_RENDEZVOUS": "3",
           "PADDLE_GLOO_HTTP_ENDPOINT": f"{pservers[0].rsplit(':', 1)[0]}:{gloo_port}"}
    if role == "PSERVER":
        env["SERVER_ENDPOINT"] = own
    else:
        env["TRAINER_INDEX"] = env["PADDLE_TRAINER_ID"] = str(index)
    return env


def paddle_launch(e: Experiment, env: Environment, *, job: str, service: str, role: str) -> Launch:
    static = {k: v for k, v in paddle_env(e, job=job, service=service, role=role, index=0).items()
              if k not in PADDLE_PER_POD}
    _, ps_job = paddle_job_names(job)
    host = f"{ps_job}-${{JOB_COMPLETION_INDEX}}.{service}"
    prelude = (f'export POD_IP="{host}" SERVER_ENDPOINT="{host}:{PADDLE_PORT}"' if role == "PSERVER" else
               'export TRAINER_INDEX="${JOB_COMPLETION_INDEX}" PADDLE_TRAINER_ID="${JOB_COMPLETION_INDEX}"')
    # one process per pod; the pserver Job has e.pservers pods, the trainer Job e.max_nodes
    argv, launched = entry_command(e, env, nodes=e.pservers if role == "PSERVER" else e.max_nodes, procs_per_node=1)
    return Launch(argv=argv, env=static, prelude=prelude, port=PADDLE_PORT, launched=launched)


def launch_for(e: Experiment, env: Environment, *, job: str, service: str, gpus: int,
               role: str = "TRAINER", instance_type: str | None = None) -> Launch:
    """The framework's launch contract; ``role`` matters for paddle only (PSERVER|TRAINER)."""
    if e.framework == "pytorch":
        return pytorch_launch(e, env, job=job, service=service, gpus=gpus, instance_type=instance_type)
    if e.framework == "tensorflow":
        return tensorflow_launch(e, env, job=job, service=service, gpus=gpus)
    if e.framework == "horovod":
        return horovod_launch(e, env, job=job, service=service, gpus=gpus)
    if e.framework == "paddle":
        return paddle_launch(e, env, job=job, service=service, role=role)
    raise ValueError(f"framework={e.framework!r}: no launch contract; use one of {', '.join(SUPPORTED)}")


def evaluation_argv(workload: str, *, results_dir: str, data_dir: str) -> tuple[str, ...]:
    """``-m workloads.train.pytorch.evaluate`` and its arguments: the checkpoint training left in ``results_dir``
    (CHECKPOINT_FILE), evaluated into ``<results_dir>/<EVAL_DIR>``."""
    return ("-m", "workloads.train.pytorch.evaluate", "--workload", workload, "--checkpoint",
            f"{results_dir}/{CHECKPOINT_FILE}", "--data-dir", data_dir, "--results-dir", f"{results_dir}/{EVAL_DIR}")


def gate_spec(*, namespace: str, wait: list[tuple[str, str | None]], resume: list[str],
              require_success: list[str] = ()) -> str:
    """The gate's instructions as JSON (``EKSBENCH_GATE`` for workloads.train.control.gate).

    ``wait``: (job, alt) pairs; a job counts as done when it is Complete, Failed or gone, or when
    ``alt`` Failed (an evaluation that will never be started because its training failed).
    ``require_success``: waited jobs that must not have Failed for ``resume`` to happen.
    """
    return json.dumps({"namespace": namespace, "wait": [list(p) for p in wait], "resume": list(resume),
                       "require_success": list(require_success)}, sort_keys=True)
