"""The names two processes agree on: files a run leaves, env vars a pod reads, labels the cluster carries.

One home each. The launcher, the trainers, the Job manifests, ``bench`` and its readers import them
from here, so a rename is one edit and no reader looks for a file under an old name
(``tests/core/test_names.py`` finds a second spelling anywhere in the code).
"""

from __future__ import annotations

# ---- files and folders under an experiment's results folder (workloads/train/harness/launch.py) ----
SUMMARY_FILE = "summary.json"  # the launcher's record of the run, written last (node 0)
PROGRESS_FILE = "progress.json"  # step/total and samples/s while the run goes (bench run's progress lines)
EVAL_FILE = "eval.json"  # the evaluation's test accuracy, in EVAL_DIR
EVAL_DIR = "eval"  # the evaluation Job's results folder, under the experiment's
TIMELINE_FILE = "timeline.json"  # bench run's phases on AWS, in the run's folder
METRICS_DIR = "metrics"  # per-rank metrics lines, events, evaluation lines
ALLREDUCE_LINES_FILE = "allreduce.jsonl"  # under METRICS_DIR: the allreduce workload's busbw lines
CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_FILE = f"{CHECKPOINT_DIR}/latest.pt"  # rank 0 writes it atomically; every rank resumes from it
CHECKPOINT_META_FILE = f"{CHECKPOINT_DIR}/latest.json"
LOGS_DIR = "logs"
TELEMETRY_DIR = "telemetry"  # each node's hardware samples (workloads/train/harness/telemetry.py)
LOCAL_RESULTS_ROOT = "results"  # where local runs land and S3 runs are copied home, under the working folder


def node_name(index: int | str) -> str:
    """``node-<i>``: the name of a run's i-th node in its logs and file names."""
    return f"node-{index}"


def node_log(node: str) -> str:
    """``logs/<node>.log``: a node's log, relative to the experiment's results folder."""
    return f"{LOGS_DIR}/{node}.log"


LOG_TIMES_SUFFIX = ".times"  # a node log's name plus this: when each of its lines was captured


def node_log_times(node: str) -> str:
    """``logs/<node>.log.times``: beside a node's log, when each of its lines was captured, one line each:
    ``<byte offset of the log line> <epoch seconds>`` (the launcher writes it, ``bench logs --timestamps``
    reads it; the log itself stays the command's output, byte for byte)."""
    return f"{node_log(node)}{LOG_TIMES_SUFFIX}"


def node_telemetry(node: str) -> str:
    """``telemetry/<node>.jsonl``: a node's hardware samples (GPUs through NVML, else the CPU's RAPL energy), one
    JSON object a line, relative to the experiment's results folder."""
    return f"{TELEMETRY_DIR}/{node}.jsonl"


def repeat_suffix(repeat: int | str) -> str:
    """``-r<k>``: what a repeat adds to a name (run ids of local repeats, Jobs, Kubernetes names)."""
    return f"-r{repeat}"


def cluster_name(project: str, stack: str) -> str:
    """The EKS cluster of a stack (the program creates it; the audit looks for what names it)."""
    return f"{project}-{stack}"[:100]


# ---- env vars the pods (and local runs) read ----
ENV_FRAMEWORK = "EKSBENCH_FRAMEWORK"
ENV_RUN_ID = "EKSBENCH_RUN_ID"
ENV_EXPERIMENT = "EKSBENCH_EXPERIMENT"
ENV_IMAGE = "EKSBENCH_IMAGE"
ENV_GIT_COMMIT = "EKSBENCH_GIT_COMMIT"
ENV_POD_IP = "EKSBENCH_POD_IP"
ENV_GATE = "EKSBENCH_GATE"  # the gate Job's instructions (JSON)
ENV_AUTOSTOP = "EKSBENCH_AUTOSTOP"  # the autostop controller's settings (JSON)
ENV_LAUNCHED_AT = "EKSBENCH_LAUNCHED_AT"  # when the launcher started, for the trainers' start-up record
ENV_STOP_REASON_FILE = "EKSBENCH_STOP_REASON_FILE"  # where whoever stops a launcher writes why
ENV_RUN_FLAGS_FILE = "EKSBENCH_RUN_FLAGS_FILE"  # lines the launcher adds to its summary's flags (a shared CPU)
ENV_CPU_BF16 = "EKSBENCH_CPU_BF16"  # 1|0: answer as a CPU with or without bf16 instructions
ENV_VENVS = "EKSBENCH_VENVS"  # where the framework venvs live on this machine
ENV_CACHE = "EKSBENCH_CACHE"  # where a local run keeps what it measured of this machine (~/.cache/eksbench)
# logical CPU devices a TensorFlow worker mirrors over: a local run's stand-in for the GPUs one pod's worker drives
ENV_CPU_DEVICES = "EKSBENCH_CPU_DEVICES"
ENV_PROJECT_DIR = "EKSBENCH_PROJECT_DIR"  # the project the CLI reads stacks from, when not --project-dir
ENV_OVERRIDES = "EKSBENCH_OVERRIDES"  # eksbench run's --set values and --experiment, CLI to program (JSON)
ENV_TF_WORKERS = "EKSBENCH_TF_WORKERS"
ENV_HVD_HOSTS = "EKSBENCH_HVD_HOSTS"
ENV_HVD_SLOTS = "EKSBENCH_HVD_SLOTS"
ENV_HVD_PORT = "EKSBENCH_HVD_PORT"
ENV_EFA = "EKSBENCH_EFA"
ENV_FABRIC = "EKSBENCH_FABRIC"
# What ran: the node group's facts, written into the pods' env by the Job manifests.
ENV_INSTANCE_TYPE = "EKSBENCH_INSTANCE_TYPE"
ENV_NODE_GROUP = "EKSBENCH_NODE_GROUP"
ENV_AMI_TYPE = "EKSBENCH_AMI_TYPE"
ENV_CAPACITY_TYPE = "EKSBENCH_CAPACITY_TYPE"
ENV_PLACEMENT_GROUP = "EKSBENCH_PLACEMENT_GROUP"
ENV_ZONE = "EKSBENCH_ZONE"
ENV_REGION = "AWS_REGION"  # AWS's own variable (boto3 reads it), set by the Job to the stack's region
# The node's zone label (Kubernetes well-known labels), copied onto a pod at binding where the
# PodTopologyLabelsAdmission feature is on (KEP-4742: alpha 1.33, beta 1.35): the downward API then gives it.
ZONE_LABEL = "topology.kubernetes.io/zone"
ZONE_FIELD = f"metadata.labels['{ZONE_LABEL}']"

# ---- labels on the cluster's objects ----
EXPERIMENT_LABEL = "eksbench.io/experiment"  # on every pod of an experiment (workloads.job_manifests.experiment_labels)
RUN_ID_LABEL = "eksbench.io/run-id"  # on every Job of a run
REPEAT_LABEL = "eksbench.io/repeat"  # on one repeat's pods (repeats: N)
PEERS_LABEL = "eksbench.io/peers"  # the pods of one experiment, which its NetworkPolicy lets talk
# On a node whose Lustre client installed and loaded (infra.cluster.node_group's user data); the pods
# that mount FSx select it (infra.environment Environment.claim_node_selector), so a node without one takes none.
LUSTRE_CLIENT_LABEL = "eksbench.io/lustre-client"
LUSTRE_CLIENT_READY = "ready"
# On the Auto Scaling group of a GPU group that opts in to Cluster Autoscaler, suffixed with the cluster's name
# ("<key>/<cluster>": "owned"): the autoscaler discovers only groups carrying it, and its role scales only those.
# EKS's own k8s.io/cluster-autoscaler/* tags are on every managed node group, opted in or not.
AUTOSCALER_DISCOVERY_TAG = "eksbench.io/cluster-autoscaler"

# ---- objects two processes find by name ----
# The ConfigMap naming the autostop generation the stack's last `pulumi up` made (workloads.autostop_component): a
# controller of an older generation stands down instead of scaling the groups the newer run needs.
AUTOSTOP_OWNER_CONFIG_MAP = "eksbench-autostop-owner"
