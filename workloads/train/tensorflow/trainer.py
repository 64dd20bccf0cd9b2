"""The TensorFlow trainer (``python -m workloads.train.tensorflow``, with the PyTorch trainer's CLI).

Keras models (``tf_models``) trained with ``tf.distribute.MultiWorkerMirroredStrategy`` from the
``TF_CONFIG`` the cluster's prelude exports (``workloads.contracts.tf_config``; the local run builds
the same on loopback): one process per node, one replica per GPU (one on a CPU), gradients
all-reduced with NCCL on GPUs and TensorFlow's ring collectives over gRPC on CPUs
(``CommunicationOptions``). Precision: the Keras mixed-precision policy (``mixed_float16`` with a
loss-scale optimizer for ``amp-fp16``, ``mixed_bfloat16`` for ``bf16``) on GPUs; on a CPU the
choice of ``cpu_choice.choose`` (fp32 without bf16 instructions). SGD with momentum 0.9, weight
decay 1e-4 and the linear-scaling learning rate (``schedule.default_lr``), as PyTorch's.

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
import os
import platform
import sys
import time
from typing import Any

from core.catalog.workload_facts import input_size
from core.contract.names import ENV_LAUNCHED_AT
from core.contract.train_args import parse_train_args
from workloads.train.common.cpu_choice import precision_on, read_cpu_facts
from workloads.train.common.device import nvidia_driver
from workloads.train.common.metrics import JsonLines, metrics_dir
from workloads.train.common.schedule import default_lr
from workloads.train.common.startup import startup_event
from workloads.train.tensorflow.data import SOURCES
from workloads.train.tensorflow.models import MODELS

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


def main(argv: list[str] | None = None) -> int:
    process_started = time.time()
    a = parse_train_args(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    marks = {"process": process_started, "imported": time.time()}
    if os.environ.get(ENV_LAUNCHED_AT):
        marks["launched"] = float(os.environ[ENV_LAUNCHED_AT])
    rank, workers = task(dict(os.environ))
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus and os.environ.get("OMP_NUM_THREADS"):  # the local run's share of the cores
        tf.config.threading.set_intra_op_parallelism_threads(int(os.environ["OMP_NUM_THREADS"]))
    precision = precision_for(a.precision, bool(gpus))
    keras.mixed_precision.set_global_policy(POLICIES[precision])
    impl = tf.distribute.experimental.CommunicationImplementation
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=tf.distribute.experimental.
                                                         CommunicationOptions(implementation=impl.NCCL if gpus
                                                                              else impl.RING))
    marks["process_group"] = time.time()
    replicas = strategy.num_replicas_in_sync
    per_worker = a.batch_size * replicas // workers  # samples one worker trains per step
    dataset_fn, size, num_classes = SOURCES[a.workload](tf, a)
    steps = a.epochs * (size // (a.batch_size * replicas)) if a.by_epochs and size else a.steps
    lr = default_lr(a, replicas)
    keras.utils.set_random_seed(a.seed)
    with strategy.scope():
        model = MODELS[a.workload](keras, image_size=input_size(a.workload, a.image_size), num_classes=num_classes,
                                   width_per_group=a.width_per_group)
        optimizer = keras.optimizers.SGD(learning_rate=lr, momentum=0.9, weight_decay=1e-4)
        if precision == "amp-fp16":
            optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
    batches = iter(strategy.distribute_datasets_from_function(dataset_fn))

    @tf.function
    def train_step(x: Any, y: Any) -> Any:
        def replica(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                per_sample = keras.losses.sparse_categorical_crossentropy(y, model(x, training=True), from_logits=True)
                loss = tf.nn.compute_average_loss(per_sample, global_batch_size=a.batch_size * replicas)
                scaled = optimizer.scale_loss(loss)
            grads = tape.gradient(scaled, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica, args=(x, y)), axis=None)

    marks["built"] = time.time()
    mdir = metrics_dir(a.results_dir)
    lines = JsonLines(mdir / f"rank-{rank}.jsonl") if a.harness else None
    events = JsonLines(mdir / "events.jsonl") if a.harness and rank == 0 else None
    info = {"event": "run_info", "step": 0, "restart": 0, "world_size": workers, "nodes": workers,
            "gpus_per_node": replicas // workers if gpus else 0, "processes_per_node": 1, "replicas": replicas,
            "device": device_info(tf, keras, gpus, replicas), "model": MODEL, "flops_per_sample": None,
            "flops_note": "counted after the loop", "precision": precision, "lr": lr, "memory_format": "NHWC"}
    if events:
        events.write({"event": "start", "step": 0, "restart": 0, "world_size": workers, "lr": lr,
                      "wall_time": round(time.time(), 3)})
        events.write({**info, "wall_time": round(time.time(), 3)})
    marks["resumed"] = time.time()
    print(f"[workloads.train.tensorflow] worker {rank}/{workers}, {replicas} replica(s) on "
          f"{'GPU' if gpus else 'CPU'}: {a.workload} {a.dataset}, {precision}, lr {lr:g}", flush=True)
    times: list[float] = []
    t_prev = t_step = loop_start = time.perf_counter()
    data_wait, interval = 0.0, 0
    for step in range(1, steps + 1):
        t0 = time.perf_counter()
        x, y = next(batches)
        data_wait += time.perf_counter() - t0
        loss = float(train_step(x, y))  # waits for this step's all-reduce: the slowest replica's time
        t = time.perf_counter()
        times.append(t - t_step)
        t_step, interval = t, interval + 1
        if step == 1 and events:
            events.write(startup_event(marks, time.time(), step=step, restart=0))
        if lines and (step % a.log_every == 0 or step == steps or step == a.warmup_steps):
            peak = (round(tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**30, 3) if gpus else None)
            lines.write({"step": step, "epoch": ((step - 1) * a.batch_size * replicas) // size if size else 0,
                         "loss": round(loss, 5), "steps": interval, "samples": per_worker * interval,
                         "step_time_s": round(t - t_prev, 6),
                         "samples_per_s": round(per_worker * interval / (t - t_prev), 3),
                         "step_times_s": [round(d, 6) for d in times], "data_wait_s": round(data_wait, 6),
                         "peak_memory_gib": peak, "lr": lr, "wall_time": round(time.time(), 3),
                         "world_size": workers, "rank": rank, "restart": 0, "warmup": step <= a.warmup_steps})
            t_prev, times, data_wait, interval = t, [], 0.0, 0
    loop = time.perf_counter() - loop_start
    if events:  # FLOPs counted after the loop cost it nothing; a second run_info (the summary reads the last)
        flops, note = flops_per_sample(tf, model, input_size(a.workload, a.image_size))
        events.write({**info, "flops_per_sample": flops, "flops_note": note, "wall_time": round(time.time(), 3)})
        events.write({"event": "end", "step": steps, "steps": steps, "samples": steps * a.batch_size * replicas,
                      "loop_seconds": round(loop, 4), "final_save_s": 0.0, "restart": 0, "world_size": workers,
                      "wall_time": round(time.time(), 3)})
    for f in (lines, events):
        if f:
            f.close()
    # Every worker's last line is on disk before worker 0 (and its launcher's summary) finishes.
    strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)
    print(f"[workloads.train.tensorflow] {a.workload}: finished at step {steps} ({workers} workers), loop {loop:.3f}s",
          flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Every file is closed and every worker passed the last collective: leave now. A worker still tearing
    # TensorFlow down after the coordination leader (worker 0) exited logs failed heartbeats to it.
    os._exit(code)
