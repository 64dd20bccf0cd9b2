"""The TensorFlow trainer (``python -m workloads.train.tensorflow``, with the PyTorch trainer's CLI).

Keras models (``tf_models``) trained with ``tf.distribute.MultiWorkerMirroredStrategy`` from the
``TF_CONFIG`` the cluster's prelude exports (``workloads.launch.tensorflow.tf_config``; the local run builds
the same on loopback): one process per node, one replica per GPU (one on a CPU, or the logical CPU
devices of ``EKSBENCH_CPU_DEVICES``: ``make_strategy``), gradients all-reduced with NCCL on GPUs and
TensorFlow's ring collectives over gRPC on CPUs (``CommunicationOptions``). Precision: the Keras
mixed-precision policy (``mixed_float16`` with the step's own loss scale for ``amp-fp16``,
``mixed_bfloat16`` for ``bf16``) on GPUs; on a CPU the choice of ``cpu_choice.choose``. The recipe is
PyTorch's: SGD with momentum 0.9 and coupled L2 1e-4 (``step``: why not Keras' decay and loss-scale
optimizer), the linear-scaling learning rate with its large-batch warm-up (``schedule.lr_at``) for
the replicas in the run. A non-finite loss (the global one, the same on every worker) stops every
worker at that step, as the PyTorch trainer's does.

It writes what PyTorch's trainer writes, so the launcher's summary is the same: per worker
``metrics/rank-<task index>.jsonl`` (lines of ``log_every`` steps with each step's time, the
slowest replica's, since ``float(loss)`` waits for the step's all-reduce), and from worker 0
``metrics/events.jsonl`` (start, run_info with the device, versions and FLOPs per sample counted by
TensorFlow's profiler on the forward + backward graph, startup, end). Not here: checkpoints and
resume (the run restarts from scratch), evaluation, elastic sizes (``check_experiment`` refuses them), and
``--collective-timeout`` (a worker's first step traces and optimises the graph for minutes on a busy CPU,
so its collectives keep TensorFlow's default of no timeout; the experiment's timeout bounds the run).
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from core.catalog.workload_facts import input_size
from core.contract.names import ENV_CPU_DEVICES, ENV_LAUNCHED_AT
from core.contract.strict_json import nonfinite_name
from core.contract.train_args import TrainArgs, parse_train_args
from workloads.train.common.cpu_choice import precision_on, read_cpu_facts
from workloads.train.common.device import nvidia_driver
from workloads.train.common.files import own_tempdir
from workloads.train.common.metrics import JsonLines, interval_line, metrics_dir
from workloads.train.common.schedule import default_lr, lr_at
from workloads.train.common.startup import startup_event
from workloads.train.tensorflow.data import SOURCES
from workloads.train.tensorflow.models import MODELS
from workloads.train.tensorflow.step import LossScale, build_optimizer, build_train_step

POLICIES = {"fp32": "float32", "amp-fp16": "mixed_float16", "bf16": "mixed_bfloat16"}
MODEL = "Keras, the layers of the PyTorch model (workloads/train/tensorflow/models.py)"


def task(environ: dict[str, str]) -> tuple[int, int]:
    """(this worker's index, the number of workers) from ``TF_CONFIG``; (0, 1) without one."""
    config = json.loads(environ.get("TF_CONFIG") or "{}")
    workers = (config.get("cluster") or {}).get("worker") or [None]
    return int((config.get("task") or {}).get("index", 0)), len(workers)


def precision_for(requested: str, gpu: bool) -> str:
    return precision_on("gpu" if gpu else "cpu", requested)


def flops_per_sample(tf: Any, model: Any, image_size: int) -> tuple[float | None, str]:
    """Training FLOPs per sample: 3 x the forward pass's convolution and matmul FLOPs, as TensorFlow's profiler
    counts them on the model's traced forward graph (batch 1). Three forward passes' worth is the usual
    convention (the backward pass costs about two); PyTorch's FlopCounterMode counts the backward as it runs,
    which skips the first convolution's input gradient, so for the same layers it reads a few per cent less."""
    try:
        forward = tf.function(lambda x: model(x, training=False))
        graph = forward.get_concrete_function(tf.TensorSpec((1, image_size, image_size, 3))).graph
        options = {**tf.compat.v1.profiler.ProfileOptionBuilder.float_operation(), "output": "none",
                   "account_type_regexes": ["Conv2D", "MatMul", "BatchMatMulV[23]"]}
        info = tf.compat.v1.profiler.profile(graph=graph, run_meta=tf.compat.v1.RunMetadata(), cmd="op",
                                             options=options)
        return 3.0 * info.total_float_ops, "3 x the forward convolutions and matmuls (tf.compat.v1.profiler)"
    except Exception as e:  # noqa: BLE001 - a summary without FLOPs beats no run
        return None, f"TensorFlow's profiler could not count FLOPs: {type(e).__name__}: {e}"


def device_info(tf: Any, keras: Any, gpus: list[Any], replicas: int) -> dict[str, Any]:
    build = tf.sysconfig.get_build_info()
    info = {"name": "cpu", "count": 0, "driver": None, "tensorflow": tf.__version__, "keras": keras.__version__,
            "cuda": build.get("cuda_version"), "cudnn": build.get("cudnn_version"),
            "processor": platform.processor() or platform.machine(), "cpu_capability": read_cpu_facts().describe()}
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        info.update(name=details.get("device_name", "GPU"), count=replicas, driver=nvidia_driver())
        del info["processor"], info["cpu_capability"]
    return info


def make_strategy(tf: Any, gpus: list[Any], environ: Mapping[str, str]) -> Any:
    """MultiWorkerMirroredStrategy over this worker's GPUs (NCCL), else over the CPU (ring collectives over gRPC).

    ``EKSBENCH_CPU_DEVICES=N`` (a local run of a one-node experiment) splits the CPU into N logical devices and
    mirrors over them: the shape of a pod whose worker drives N GPUs. MultiWorkerMirroredStrategy itself mirrors
    over the GPUs or ``/cpu:0`` alone; ``_from_local_devices`` (TensorFlow's own tests' constructor) takes a device
    list, for one worker only (it initialises the strategy locally, whatever TF_CONFIG says)."""
    impl = tf.distribute.experimental.CommunicationImplementation
    options = tf.distribute.experimental.CommunicationOptions(implementation=impl.NCCL if gpus else impl.RING)
    devices = int(environ.get(ENV_CPU_DEVICES) or 1)
    if gpus or devices <= 1:
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    if task(environ)[1] > 1:
        raise SystemExit(f"{ENV_CPU_DEVICES}={devices}: logical CPU devices mirror within one worker only; "
                         "this run has several (TF_CONFIG)")
    # One worker: its TF_CONFIG (the local run gives one-worker runs one too) would configure the collectives for
    # that cluster in the constructor, and _initialize_local again ("Collective ops are already configured").
    os.environ.pop("TF_CONFIG", None)
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * devices)
    return tf.distribute.MultiWorkerMirroredStrategy._from_local_devices(
        [f"/cpu:{i}" for i in range(devices)], communication_options=options)


@dataclass
class Run:
    """What the loop needs, built once by ``main``."""
    a: TrainArgs
    tf: Any
    rank: int
    workers: int
    replicas: int
    size: int | None
    steps: int
    train_step: Callable[[Any, Any], Any]
    optimizer: Any
    scale: LossScale
    batches: Any
    lines: JsonLines | None
    events: JsonLines | None
    gpus: bool
    marks: dict[str, float]

    @property
    def per_worker(self) -> int:
        """Samples one worker trains per step: its replicas' batches."""
        return self.a.batch_size * self.replicas // self.workers

    def lr(self, step: int) -> float:
        """The rate of 0-based step ``step``: PyTorch's schedule (``schedule.lr_at``) for this many replicas."""
        return lr_at(self.a, self.replicas, step, size=self.size)


def metrics_line(run: Run, step: int, loss: float, interval: int, seconds: float, times: list[float],
                 data_wait: float, lr: float) -> dict[str, Any]:
    """One metrics line, shaped as the PyTorch trainer's (the launcher's summary reads both)."""
    a, tf = run.a, run.tf
    peak = round(tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**30, 3) if run.gpus else None
    return interval_line(step=step, epoch=((step - 1) * a.batch_size * run.replicas) // run.size if run.size else 0,
                         loss=loss, steps=interval, samples_per_step=run.per_worker, seconds=seconds,
                         step_times=times, data_wait=data_wait, lr=lr, world_size=run.workers, rank=run.rank,
                         warmup=step <= a.warmup_steps, peak_memory_gib=peak,
                         loss_scale=(run.scale.scale.numpy(), run.scale.skipped.numpy()) if run.scale.enabled
                         else None)


def train(run: Run) -> tuple[int, float, dict[str, Any] | None]:
    """The loop: (steps done, its seconds, the divergence that stopped it or None). The loss each step returns is
    the global one, the same on every worker, so a non-finite loss stops every worker at the same step."""
    a = run.a
    times: list[float] = []
    t_prev = t_step = loop_start = time.perf_counter()
    data_wait, interval, step, diverged = 0.0, 0, 0, None
    while step < run.steps:
        lr = run.lr(step)
        run.optimizer.learning_rate = lr
        t0 = time.perf_counter()
        x, y = next(run.batches)
        data_wait += time.perf_counter() - t0
        loss = float(run.train_step(x, y))  # waits for this step's all-reduce: the slowest replica's time
        step, t = step + 1, time.perf_counter()
        times.append(t - t_step)
        t_step, interval = t, interval + 1
        if step == 1 and run.events:
            run.events.write(startup_event(run.marks, time.time(), step=step, restart=0))
        if not math.isfinite(loss):
            diverged = {"step": step, "reason": f"non-finite loss ({nonfinite_name(loss)}) at step {step}"}
        if run.lines and (step % a.log_every == 0 or step == run.steps or step == a.warmup_steps or diverged):
            run.lines.write(metrics_line(run, step, loss, interval, t - t_prev, times, data_wait, lr))
            t_prev, times, data_wait, interval = t, [], 0.0, 0
        if diverged:
            print(f"[workloads.train.tensorflow] worker {run.rank}: diverged: {diverged['reason']}; stopping, as "
                  "every worker does at this step", flush=True)
            if run.events:
                run.events.write({"event": "diverged", **diverged, "wall_time": round(time.time(), 3)})
            break
    return step, time.perf_counter() - loop_start, diverged


def main(argv: list[str] | None = None) -> int:
    """One worker of the job: join the others, build the model and its step, record the start, train, record the
    end, and meet every worker once more before leaving."""
    process_started = time.time()
    a = parse_train_args(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    marks = start_marks(process_started)
    rank, workers, gpus, strategy = join_workers(tf, marks)
    run, model, precision = build_run(a, tf, keras, strategy, rank=rank, workers=workers, gpus=gpus, marks=marks)
    info = run_info(run, keras, gpus, precision)
    record_start(run, info, precision)
    done, loop, diverged = train(run)
    record_end(run, model, info, done, loop, diverged)
    # Every worker's last line is on disk before worker 0 (and its launcher's summary) finishes.
    strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)
    ended = f"diverged at step {done}" if diverged else f"finished at step {done}"
    print(f"[workloads.train.tensorflow] {a.workload}: {ended} ({workers} workers), loop {loop:.3f}s", flush=True)
    # 0 even when diverged, as the PyTorch trainer: the "diverged" event is the record, and the results launcher
    # turns it into the run's status and exit code.
    return 0


def start_marks(process_started: float) -> dict[str, float]:
    """The start-up record's first marks: the process's start, TensorFlow imported, and the launcher's start."""
    marks = {"process": process_started, "imported": time.time()}
    if os.environ.get(ENV_LAUNCHED_AT):
        marks["launched"] = float(os.environ[ENV_LAUNCHED_AT])
    return marks


def join_workers(tf: Any, marks: dict[str, float]) -> tuple[int, int, list[Any], Any]:
    """This worker's index, the number of workers, its GPUs, and the strategy that mirrors over them (joined)."""
    rank, workers = task(dict(os.environ))
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus and os.environ.get("OMP_NUM_THREADS"):  # the local run's share of the cores
        tf.config.threading.set_intra_op_parallelism_threads(int(os.environ["OMP_NUM_THREADS"]))
    strategy = make_strategy(tf, gpus, os.environ)
    marks["process_group"] = time.time()
    return rank, workers, gpus, strategy


def build_run(a: TrainArgs, tf: Any, keras: Any, strategy: Any, *, rank: int, workers: int, gpus: list[Any],
              marks: dict[str, float]) -> tuple[Run, Any, str]:
    """The precision policy, the data, the model, its optimizer and step, and the metrics files: the ``Run``, its
    model (for the FLOPs after the loop) and the precision it trains in."""
    replicas = strategy.num_replicas_in_sync
    precision = precision_for(a.precision, bool(gpus))
    keras.mixed_precision.set_global_policy(POLICIES[precision])
    dataset_fn, size, num_classes = SOURCES[a.workload](tf, a)
    steps = a.epochs * (size // (a.batch_size * replicas)) if a.by_epochs and size else a.steps
    keras.utils.set_random_seed(a.seed)
    with strategy.scope():
        model = MODELS[a.workload](keras, image_size=input_size(a.workload, a.image_size), num_classes=num_classes,
                                   width_per_group=a.width_per_group)
    optimizer = build_optimizer(keras, strategy, model, default_lr(a, replicas))
    scale = LossScale(tf, strategy, enabled=precision == "amp-fp16")
    train_step = build_train_step(tf, keras, strategy, model, optimizer, scale, global_batch=a.batch_size * replicas)
    batches = iter(strategy.distribute_datasets_from_function(dataset_fn))
    marks["built"] = time.time()
    mdir = metrics_dir(a.results_dir)
    run = Run(a=a, tf=tf, rank=rank, workers=workers, replicas=replicas, size=size, steps=steps,
              train_step=train_step, optimizer=optimizer, scale=scale, batches=batches,
              lines=JsonLines(mdir / f"rank-{rank}.jsonl") if a.harness else None,
              events=JsonLines(mdir / "events.jsonl") if a.harness and rank == 0 else None,
              gpus=bool(gpus), marks=marks)
    return run, model, precision


def run_info(run: Run, keras: Any, gpus: list[Any], precision: str) -> dict[str, Any]:
    """Worker 0's ``run_info`` event: the run's shape, device, model, precision and first rate (its FLOPs are
    counted after the loop)."""
    workers, replicas = run.workers, run.replicas
    return {"event": "run_info", "step": 0, "restart": 0, "world_size": workers, "nodes": workers,
            "gpus_per_node": replicas // workers if gpus else 0, "processes_per_node": 1, "replicas": replicas,
            "devices_per_process": replicas // workers,
            "device": device_info(run.tf, keras, gpus, replicas), "model": MODEL, "flops_per_sample": None,
            "flops_note": "counted after the loop", "precision": precision, "lr": run.lr(0),
            "memory_format": "NHWC"}


def record_start(run: Run, info: dict[str, Any], precision: str) -> None:
    """Worker 0's ``start`` and ``run_info`` events, and every worker's line on stdout saying what it trains."""
    if run.events:
        run.events.write({"event": "start", "step": 0, "restart": 0, "world_size": run.workers, "lr": run.lr(0),
                          "wall_time": round(time.time(), 3)})
        run.events.write({**info, "wall_time": round(time.time(), 3)})
    run.marks["resumed"] = time.time()
    print(f"[workloads.train.tensorflow] worker {run.rank}/{run.workers}, {run.replicas} replica(s) on "
          f"{'GPU' if run.gpus else 'CPU'}: {run.a.workload} {run.a.dataset}, {precision}, lr {run.lr(0):g}",
          flush=True)


def record_end(run: Run, model: Any, info: dict[str, Any], done: int, loop: float,
               diverged: dict[str, Any] | None) -> None:
    """Worker 0's last events (``run_info`` again with the FLOPs, the ``end``), then every metrics file closed."""
    a = run.a
    if run.events:  # FLOPs counted after the loop cost it nothing; a second run_info (the summary reads the last)
        flops, note = flops_per_sample(run.tf, model, input_size(a.workload, a.image_size))
        run.events.write({**info, "flops_per_sample": flops, "flops_note": note, "wall_time": round(time.time(), 3)})
        run.events.write({"event": "end", "step": done, "steps": done, "samples": done * a.batch_size * run.replicas,
                          "loop_seconds": round(loop, 4), "final_save_s": 0.0, "restart": 0,
                          "world_size": run.workers, "diverged": diverged is not None,
                          "wall_time": round(time.time(), 3)})
    for f in (run.lines, run.events):
        if f:
            f.close()


if __name__ == "__main__":
    with own_tempdir("eksbench-tf-"):  # AutoGraph's files, which os._exit below would otherwise leave behind
        code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Every file is closed and every worker passed the last collective: leave now. A worker still tearing
    # TensorFlow down after the coordination leader (worker 0) exited logs failed heartbeats to it.
    os._exit(code)
