"""The names of summary.json's fields: written by the launcher (``workloads.train.launch``) and
``workloads.train.summary``, read by ``bench.results``. One spelling each, imported on both sides."""

from __future__ import annotations

EXPERIMENT = "experiment"
STATUS = "status"
SUCCEEDED = "succeeded"  # STATUS's value for a run that exited 0
EXIT_CODE = "exit_code"
ERROR = "error"
STARTED_AT = "started_at"
WALL_TIME_S = "wall_time_s"
IMAGE = "image"
GIT_COMMIT = "git_commit"
RESULTS_URI = "results_uri"
COMMAND = "command"
CONFIG = "config"  # the trainer's arguments (spec.train_args.TrainArgs as a dict)
# The launch shape, from the launcher's own arguments (spec.launch_command.Launched): the most
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
STEP_TIME_P50_S = "step_time_p50_s"  # in THROUGHPUT
STEP_TIME_P95_S = "step_time_p95_s"  # in THROUGHPUT
ACCURACY = "accuracy"
BEST_ACCURACY = "best_accuracy"  # in ACCURACY
TIME_TO_ACCURACY_S = "time_to_accuracy_s"  # in ACCURACY
MFU = "mfu"
TFLOPS_PER_S = "tflops_per_s"
FLOPS_PER_SAMPLE = "flops_per_sample"
LOOP_SECONDS = "loop_seconds"
DATA_WAIT_S = "data_wait_s"
