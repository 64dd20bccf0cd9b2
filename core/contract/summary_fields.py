"""The names of summary.json's fields: written by the launcher (``workloads.train.harness.launch``) and
``workloads.train.harness.summary``, read by ``bench.results.frames``. One spelling each, imported on both sides."""

from __future__ import annotations

import signal

from core.contract.names import ENV_RUN_FLAGS_FILE, ENV_STOP_REASON_FILE

EXPERIMENT = "experiment"
STATUS = "status"
# STATUS's values, one per way a run ends (workloads.train.harness.outcome.run_status decides):
SUCCEEDED = "succeeded"  # the command exited 0 and its loss stayed finite
FAILED = "failed"  # the command failed on its own (an exception, a crash, a failed pod set-up)
DIVERGED = "diverged"  # a non-finite loss ended training (the trainer's record; DIVERGENCE says where and why)
INTERRUPTED = "interrupted"  # stopped by a signal: SIGINT (Ctrl-C), SIGTERM, SIGHUP; STOP_REASON says which
DEADLINE = "deadline"  # stopped by `bench run --deadline`
TIMEOUT = "timeout"  # stopped by the experiment's timeout_minutes
NOT_RUN = "not run"  # never started: its run stopped first (written by `bench run --local`, not by a launcher)
STATUSES = (SUCCEEDED, FAILED, DIVERGED, INTERRUPTED, DEADLINE, TIMEOUT, NOT_RUN)
# The launcher's exit code for a diverged run whose command exited 0 (the trainer exits 0 so that torchrun does
# not restart it into the same divergence); the Job fails at once on it (workloads.job_manifests).
DIVERGED_EXIT_CODE = 87
# The launcher's exit code for a trainer that exited 0 without recording one step (no metrics line, no all-reduce
# size): such a run is no result, and a retry would record nothing either; the Job fails at once on it.
NO_STEPS_EXIT_CODE = 88
COVERAGE = "coverage"  # {steps, duplicate_lines, missing_steps}: the global steps the ranks' metrics lines cover
STOP_REASON = "stop_reason"  # why a run that did not succeed stopped, one line
# Where whoever stops a launcher (`bench run --local`: its deadline, an experiment's timeout, Ctrl-C) writes
# the cause (INTERRUPTED, DEADLINE, TIMEOUT) before its SIGTERM; without it a signal reads as INTERRUPTED (a
# pod cannot tell a Job's deadline from a drain or a deletion: each is a SIGTERM from the kubelet).
STOP_REASON_ENV = ENV_STOP_REASON_FILE
# A stop by a signal the user sent to `bench run` names it after the cause: "interrupted SIGINT". `bench run` stops
# its launchers with SIGTERM whatever it got, so the launcher records the user's signal instead of its own: its
# words here as the stop reason, and 128 + its number as the exit code (130 for Ctrl-C, as the shell says).
USER_SIGNALS = {"SIGINT": "Ctrl-C", "SIGTERM": "SIGTERM", "SIGHUP": "SIGHUP (the terminal hung up)"}
# Where `bench run --local` writes flags for its launchers' summaries (another local run shares the CPU), one a line.
RUN_FLAGS_ENV = ENV_RUN_FLAGS_FILE
DIVERGENCE = "divergence"  # {step, reason} where a non-finite loss ended training; null when it did not
AMP = "amp"  # amp-fp16: {loss_scale, skipped_steps} from rank 0's last metrics line
EXIT_CODE = "exit_code"
ERROR = "error"
STARTED_AT = "started_at"
WALL_TIME_S = "wall_time_s"
IMAGE = "image"
GIT_COMMIT = "git_commit"
RESULTS_URI = "results_uri"
COMMAND = "command"
CONFIG = "config"  # the trainer's arguments (core.contract.train_args.TrainArgs as a dict)
# The launch shape, from the launcher's own arguments (core.contract.launch_command.Launched): the most
# nodes and the processes per node, known even when the trainer never reported.
LAUNCH = "launch"
LAUNCH_NODES = "nodes"
LAUNCH_PROCS_PER_NODE = "procs_per_node"
INSTANCE_TYPE = "instance_type"
FRAMEWORK = "framework"
# What the trainer reported (its run_info event)
NODES = "nodes"
GPUS_PER_NODE = "gpus_per_node"
DEVICE = "device"
WORLD_SIZES = "world_sizes"
RESTARTS = "restarts"
THROUGHPUT = "throughput"
SAMPLES_PER_S_TOTAL = "samples_per_s_total"  # in THROUGHPUT
SAMPLES_PER_S_PER_PROCESS = "samples_per_s_per_process"  # in THROUGHPUT
# in THROUGHPUT: per device a process drives (a GPU; a TensorFlow worker drives all of its node's), per process on a
# CPU run; what the report calls "per GPU"
SAMPLES_PER_S_PER_DEVICE = "samples_per_s_per_device"
DEVICES_PER_PROCESS = "devices_per_process"  # in THROUGHPUT, from the trainer's run_info (1 where it says nothing)
STEP_TIME_P50_S = "step_time_p50_s"  # in THROUGHPUT
STEP_TIME_P95_S = "step_time_p95_s"  # in THROUGHPUT
ACCURACY = "accuracy"
BEST_ACCURACY = "best_accuracy"  # in ACCURACY
TIME_TO_ACCURACY_S = "time_to_accuracy_s"  # in ACCURACY
MFU = "mfu"
# A language model's block (workloads.train.harness.language_model_summary) and its figures
LANGUAGE_MODEL = "language_model"
TOKENS_PER_S = "tokens_per_s"  # in LANGUAGE_MODEL: every GPU's tokens together
TOKENS_PER_S_PER_DEVICE = "tokens_per_s_per_device"  # in LANGUAGE_MODEL: per GPU (per process on a CPU run)
FLOPS_PER_TOKEN = "flops_per_token"  # in LANGUAGE_MODEL
FINAL_VAL_LOSS = "final_val_loss"  # in LANGUAGE_MODEL
TOKENS_TO_TARGET = "tokens_to_target_loss"  # in LANGUAGE_MODEL: tokens trained when validation first reached it
TIME_TO_TARGET_LOSS_S = "time_to_target_loss_s"  # in LANGUAGE_MODEL
TFLOPS_PER_S = "tflops_per_s"
FLOPS_PER_SAMPLE = "flops_per_sample"
LOOP_SECONDS = "loop_seconds"
SAMPLES_PER_EPOCH = "samples_per_epoch"  # samples trained per epoch (None: synthetic data, no epochs)
STARTUP = "startup"  # the first attempt's start-up: phases_s and time_to_first_step_s (workloads.train.common.startup)
DATA_WAIT_S = "data_wait_s"
# The allreduce workload's bus bandwidth (workloads.train.harness.fabric_check.busbw_summary)
BUSBW = "busbw"
BUSBW_CURVE = "curve"  # in BUSBW: [{bytes, time_us, algbw_gbps, busbw_gbps}], ascending bytes
BUSBW_PEAK_GBPS = "peak_gbps"  # in BUSBW
BUSBW_AT_1GIB_GBPS = "at_1gib_gbps"  # in BUSBW
BUSBW_EXPECTED = "expected"  # in BUSBW: the published figure and the comparison (core.catalog.fabric.busbw_check)
# The NCCL transport judged against the node group's fabric (core.catalog.fabric.fabric_verdict)
FABRIC = "fabric"
FLAGS = "flags"  # what the run is marked with: "degraded (NCCL on sockets)", "busbw below expected (...)"
# What ran, one flat object (workloads.train.harness.what_ran): each field null where the pod cannot know it,
# with the reason in WHAT_RAN_UNKNOWN ({field: why}). `bench compare` and the report list what differs.
WHAT_RAN = "what_ran"
WHAT_RAN_UNKNOWN = "what_ran_unknown"
IMAGE_DIGEST = "image_digest"
TORCH = "torch"
CUDA = "cuda"
CUDNN = "cudnn"
NCCL = "nccl"
AWS_OFI_NCCL = "aws_ofi_nccl"
EFA_INSTALLER = "efa_installer"
DRIVER = "driver"
KERNEL = "kernel"
AMI_TYPE = "ami_type"
AMI_RELEASE = "ami_release"
ZONE = "zone"
REGION = "region"  # the AWS region the pod ran in: what its instance is priced at (core.catalog.aws.usd_per_hour)
CAPACITY_TYPE = "capacity_type"
PLACEMENT_GROUP = "placement_group"
NODE_GROUP = "node_group"
WHAT_RAN_FIELDS = (IMAGE, IMAGE_DIGEST, TORCH, CUDA, CUDNN, NCCL, AWS_OFI_NCCL, EFA_INSTALLER, DRIVER, KERNEL,
                   AMI_TYPE, AMI_RELEASE, INSTANCE_TYPE, REGION, ZONE, CAPACITY_TYPE, PLACEMENT_GROUP, NODE_GROUP,
                   NODES)


def stop_text(cause: str, signal_name: str | None = None) -> str:
    """What the stop file holds: the cause, and the signal the user sent where one (of USER_SIGNALS) stopped the run."""
    return f"{cause} {signal_name}" if signal_name in USER_SIGNALS else cause


def parse_stop(text: str, causes: tuple[str, ...]) -> tuple[str | None, str | None]:
    """(cause, the user's signal) from a stop file's text; (None, None) where the cause is not one of ``causes``,
    and no signal where it names none of USER_SIGNALS."""
    words = text.split()
    cause = words[0] if words and words[0] in causes else None
    sent = words[1] if cause and len(words) == 2 and words[1] in USER_SIGNALS else None
    return cause, sent


def signal_exit_code(signal_name: str) -> int:
    """128 + the signal's number, as a shell reports a process a signal ended: SIGINT 130, SIGTERM 143."""
    return 128 + signal.Signals[signal_name].value


# The node's hardware as the launcher's sampler read it (workloads.train.harness.telemetry_summary): one object.
TELEMETRY = "telemetry"
TELEMETRY_SOURCE = "source"  # in TELEMETRY: "nvml" (GPUs), "rapl" (the CPU's energy counters) or null
TELEMETRY_REASON = "reason"  # in TELEMETRY: why there is no (GPU) telemetry, one line; null where there is
UTIL_MEAN_PCT = "util_mean_pct"  # in TELEMETRY: the GPUs' SM utilisation, mean over samples and GPUs
UTIL_P95_PCT = "util_p95_pct"
MEMORY_PEAK_BYTES = "memory_peak_bytes"  # in TELEMETRY: the most memory one GPU held
MEMORY_TOTAL_BYTES = "memory_total_bytes"  # in TELEMETRY: that GPU's total
POWER_MEAN_W = "power_mean_w"  # in TELEMETRY: all nodes' GPUs (or CPU packages) together
ENERGY_J = "energy_j"  # in TELEMETRY: the energy over the run, all nodes together, measured as ENERGY_SOURCE says
# in TELEMETRY: how ENERGY_J (and POWER_MEAN_W, ENERGY_TO_ACCURACY_J) was measured, for the whole run: the difference
# of NVML's energy counter (every GPU had it throughout), the integral of the sampled GPU power (a GPU before Volta,
# or a counter that failed or went back), or the CPU packages' RAPL counters; null where nothing measured energy
ENERGY_SOURCE = "energy_source"
ENERGY_FROM_COUNTER, ENERGY_FROM_POWER, ENERGY_FROM_RAPL = "nvml_energy_counter", "power_integral", "rapl"
ENERGY_SOURCES = (ENERGY_FROM_COUNTER, ENERGY_FROM_POWER, ENERGY_FROM_RAPL)
# in TELEMETRY: all nodes' energy over the window TIME_TO_ACCURACY_S counts (the trainer's start to the evaluation that
# first reached the target accuracy; each end read off between the two samples around it); null where no evaluation
# reached it, power was not measured, or a node's samples do not cover the window
ENERGY_TO_ACCURACY_J = "energy_to_accuracy_j"
THROTTLE_S = "throttle_s"  # in TELEMETRY: GPU-seconds spent with a clock held down (power, thermal, slowdown)
IDLE_SHARE = "idle_share"  # in TELEMETRY: share of the steady time's GPU samples with SM utilisation 0
