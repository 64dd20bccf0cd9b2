"""``python -m workloads.train.paddle``: one PaddlePaddle parameter-server process, pserver or trainer.

The same command line as ``python -m workloads.train.pytorch`` (``core.contract.train_args``); the role comes from
the environment ``workloads.launch.paddle.paddle_env`` builds (both naming sets; Paddle reads
``TRAINING_ROLE``, ``PADDLE_PSERVERS_IP_PORT_LIST``, ``PADDLE_TRAINERS_NUM``, ``PADDLE_TRAINER_ID``,
``PADDLE_PORT`` and ``POD_IP`` in ``PaddleCloudRoleMaker._ps_env``, and the trainers' barrier
store from ``PADDLE_WITH_GLOO``/``PADDLE_GLOO_RENDEZVOUS``/``PADDLE_GLOO_HTTP_ENDPOINT`` in
``_gloo_init``; python/paddle/distributed/fleet/base/role_maker.py of the 3.0.0 wheel).

Paddle 3's parameter-server route is the static graph through ``paddle.distributed.fleet``:
``fleet.init()``, ``fleet.distributed_optimizer(...).minimize(loss)``, then ``init_server`` +
``run_server`` on a pserver and ``init_worker`` / ``stop_worker`` on a trainer. Facts of the
3.0.0 CPU wheel this code depends on (each seen here, 2026-11-24):

- Its PS passes work on the legacy program IR only (with PIR, the default in 3.x, the trainer
  pass fails in ``Program.clone(for_test=...)``): ``FLAGS_enable_pir_api=0`` before the import,
  as PaddleRec does for every PS model (PaddlePaddle/PaddleRec#1003).
- Synchronous mode (``a_sync=False``) crashes the trainer in ``SendBarrierOp`` (SIGSEGV); plain
  async mode never refreshes a trainer's dense parameters (its loss stays put). GEO mode
  (``a_sync=True`` with ``k_steps``) trains: each trainer updates locally and exchanges its
  parameter deltas with the pservers every ``k_steps`` steps. That is what runs here.
- ``wait_server_ready`` is a no-op in this release, so a trainer that pushes the initial
  parameters before the pservers listen fails ("push dense param failed"): the trainers wait for
  every pserver's port themselves (``wait_for_endpoints``).
- A pserver's ``run_server`` returns once a trainer calls the client's ``stop_server``: trainer 0
  does, after every trainer passed the final barrier, so the pserver Job's pods finish too.

Trainers train on the CPU (``paddle.CPUPlace``): GEO has no GPU path for dense parameters in this release, so the
cluster refuses Paddle experiments (``core.catalog.compat.NO_GPU_TRAINING``) and only local runs train here. A
non-finite loss on any trainer stops every trainer at the same metrics step, as the PyTorch trainer does.

Results: the same files as the PyTorch trainer (``workloads.train.common.metrics``): one line per interval
of steps in ``metrics/rank-<trainer id>.jsonl`` with each step's time, and ``events.jsonl``
(start, run_info, startup, end) from trainer 0, so the launcher's summary has the same fields.
No checkpoints and no resume: a PS run is a throughput measurement here.
"""

from __future__ import annotations

import os
import sys
import time

STARTED = time.time()  # before paddle is imported: the start-up record counts the imports
os.environ.setdefault("FLAGS_enable_pir_api", "0")  # must be set before `import paddle` (see above)

import math  # noqa: E402
import socket  # noqa: E402
from typing import Any, Callable, Mapping  # noqa: E402

from core.catalog.workload_facts import WORKLOADS, input_size  # noqa: E402
from core.contract.names import ENV_LAUNCHED_AT  # noqa: E402
from core.contract.strict_json import nonfinite_name  # noqa: E402
from core.contract.train_args import TrainArgs, parse_train_args  # noqa: E402
from workloads.train.common.data import Position, epoch_ends, next_step, rank_indices  # noqa: E402
from workloads.train.common.metrics import JsonLines, interval_line, metrics_dir  # noqa: E402
from workloads.train.common.schedule import default_lr  # noqa: E402
from workloads.train.common.startup import startup_event  # noqa: E402

GEO_K_STEPS = 10  # local steps between two parameter exchanges with the pservers (GEO mode)


def role_of(environ: Mapping[str, str]) -> str:
    """PSERVER or TRAINER, as Paddle's role maker reads it."""
    role = environ.get("TRAINING_ROLE", "TRAINER")
    if role not in ("PSERVER", "TRAINER"):
        raise ValueError(f"TRAINING_ROLE={role!r}: must be PSERVER or TRAINER")
    return role


def wait_for_endpoints(endpoints: list[str], timeout_s: float) -> None:
    """Return once every ``host:port`` accepts a TCP connection; raise after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    for ep in endpoints:
        host, port = ep.rsplit(":", 1)
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"pserver {ep} did not accept connections within {timeout_s:.0f}s") from None
                time.sleep(0.5)


def cifar_net(paddle: Any, num_classes: int, width: int = 64) -> Any:
    """The ResNet-18-style CIFAR-10 network of workloads/train/pytorch/models.py ``cifar_resnet``, in Paddle."""
    nn = paddle.nn

    class Block(nn.Layer):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2D(cin, cout, 3, stride, 1, bias_attr=False), nn.BatchNorm2D(cout),
                                      nn.ReLU(), nn.Conv2D(cout, cout, 3, 1, 1, bias_attr=False), nn.BatchNorm2D(cout))
            self.skip = (nn.Identity() if stride == 1 and cin == cout else
                         nn.Sequential(nn.Conv2D(cin, cout, 1, stride, bias_attr=False), nn.BatchNorm2D(cout)))

        def forward(self, x: Any) -> Any:
            return nn.functional.relu(self.body(x) + self.skip(x))

    layers: list[Any] = [nn.Conv2D(3, width, 3, 1, 1, bias_attr=False), nn.BatchNorm2D(width), nn.ReLU()]
    cin = width
    for i, w in enumerate([width, width * 2, width * 4, width * 8]):
        layers += [Block(cin, w, 1 if i == 0 else 2), Block(w, w, 1)]
        cin = w
    layers += [nn.AdaptiveAvgPool2D(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return nn.Sequential(*layers)


def resnet50_net(paddle: Any, a: TrainArgs) -> tuple[Any, int]:
    from paddle.vision.models.resnet import BottleneckBlock, ResNet

    return ResNet(BottleneckBlock, 50, width=a.width_per_group, num_classes=1000), 1000


# The workloads this trainer runs (workloads.framework_support.SUPPORTED["paddle"]) -> (network, classes):
# paddle.vision's ResNet-50, or the CIFAR net; both as wide as --width-per-group, as the PyTorch
# models are (workloads/train/pytorch/models.py build_classifier).
MODELS: dict[str, Callable[[Any, TrainArgs], tuple[Any, int]]] = {
    "resnet50": resnet50_net, "cifar10": lambda paddle, a: (cifar_net(paddle, 10, a.width_per_group), 10)}


def build_model(paddle: Any, a: TrainArgs) -> tuple[Any, int]:
    return MODELS[a.workload](paddle, a)


def cifar_arrays(np: Any, data_dir: str) -> tuple[Any, Any, Any, Any]:
    """CIFAR-10's training images, labels, and the mean and std to normalize them by."""
    from workloads.train.common.cifar import MEAN, STD, read_arrays

    x, y, _ = read_arrays(data_dir, train=True)
    return (x, np.asarray(y, dtype=np.int64), np.asarray(MEAN, np.float32).reshape(1, 3, 1, 1),
            np.asarray(STD, np.float32).reshape(1, 3, 1, 1))


# The workloads whose data is read from disk -> its reader; the others train on one fixed synthetic batch.
ARRAYS: dict[str, Callable[[Any, str], tuple[Any, Any, Any, Any]]] = {"cifar10": cifar_arrays}


class Batches:
    """Each trainer's batches: one fixed synthetic batch, or its slice of CIFAR-10's shuffled epoch
    (the PyTorch trainer's positions: ``workloads.train.common.data``), normalized, with random flips."""

    def __init__(self, a: TrainArgs, classes: int, rank: int, world: int):
        import numpy as np

        self.np, self.a, self.rank, self.world = np, a, rank, world
        self.rng = np.random.default_rng(a.seed * 7919 + rank * 104_729)
        if a.workload in ARRAYS:
            self.x, self.y, self.mean, self.std = ARRAYS[a.workload](np, a.data_dir)
            self.size: int | None = len(self.y)
        else:
            self.size = None
            self.fixed = (self.rng.standard_normal((a.batch_size, 3, a.image_size, a.image_size), np.float32),
                          self.rng.integers(0, classes, (a.batch_size, 1), dtype=np.int64))
        self.order: tuple[int, Any] = (-1, None)

    def batch(self, start: Position) -> tuple[Any, Any]:
        np = self.np
        if self.size is None:
            return self.fixed
        if self.order[0] != start.epoch:
            rng = np.random.default_rng(self.a.seed * 100_003 + start.epoch)
            self.order = (start.epoch, rng.permutation(self.size))
        idx = rank_indices(self.order[1], start, self.rank, self.a.batch_size)
        x = self.x[idx].astype(np.float32) / 255.0
        flip = self.rng.random(len(idx)) < 0.5
        x[flip] = x[flip][..., ::-1]
        return np.ascontiguousarray((x - self.mean) / self.std), self.y[idx].reshape(-1, 1)


def device_info(paddle: Any, place: Any, world: int) -> dict[str, Any]:
    """The summary's device record (a CPU: the trainers train on ``paddle.CPUPlace``), with Paddle's versions in the
    place of torch's."""
    import platform

    return {"name": "cpu", "count": 0, "driver": None, "paddle": paddle.__version__, "cuda": paddle.version.cuda(),
            "cudnn": paddle.version.cudnn(), "nccl": None, "processor": platform.processor() or platform.machine()}


def train(a: TrainArgs, environ: Mapping[str, str], marks: dict[str, float]) -> int:
    import paddle

    paddle.enable_static()
    import paddle.distributed.fleet as fleet

    marks["imported"] = time.time()
    role = role_of(environ)
    fleet.init()  # PaddleCloudRoleMaker from the env (and the trainers' gloo store on pserver 0)
    marks["process_group"] = time.time()
    paddle.seed(a.seed)
    main, startup = paddle.static.default_main_program(), paddle.static.default_startup_program()
    net, classes = build_model(paddle, a)
    size = input_size(a.workload, a.image_size)  # CIFAR-10 at its own 32 x 32, whatever --image-size says
    x = paddle.static.data("x", [None, 3, size, size], "float32")
    y = paddle.static.data("y", [None, 1], "int64")
    loss = paddle.nn.functional.cross_entropy(net(x), y)
    world = fleet.worker_num()
    lr = default_lr(a, world)
    strategy = fleet.DistributedStrategy()
    strategy.a_sync = True
    strategy.a_sync_configs = {"k_steps": GEO_K_STEPS}
    optimizer = fleet.distributed_optimizer(paddle.optimizer.Momentum(learning_rate=lr, momentum=0.9), strategy)
    optimizer.minimize(loss)
    if role == "PSERVER":
        print(f"[paddle_ps] pserver {fleet.server_index()}/{fleet.server_num()} serving "
              f"{', '.join(fleet.server_endpoints())}", flush=True)
        fleet.init_server()
        fleet.run_server()  # returns when trainer 0 stops the servers
        print(f"[paddle_ps] pserver {fleet.server_index()} stopped", flush=True)
        return 0
    rank = fleet.worker_index()
    # CPU always: GEO mode has no GPU path for dense parameters (core.catalog.compat.NO_GPU_TRAINING), so the
    # cluster refuses Paddle experiments and only local runs, on CPUs, get here.
    place = paddle.CPUPlace()
    exe = paddle.static.Executor(place)
    exe.run(startup)
    source = Batches(a, classes, rank, world)
    marks["built"] = time.time()
    wait_for_endpoints(fleet.server_endpoints(), a.collective_timeout)
    fleet.init_worker()  # trainer 0 pushes its initial parameters, the others pull them
    marks["resumed"] = time.time()
    return trainer_loop(a, exe, main, loss, source, fleet, rank=rank, world=world, lr=lr, marks=marks,
                        device=device_info(paddle, place, world))


def trainer_loop(a: TrainArgs, exe: Any, main: Any, loss: Any, source: Batches, fleet: Any, *, rank: int,
                 world: int, lr: float, marks: dict[str, float], device: dict[str, Any]) -> int:
    """The timed loop: the PyTorch trainer's metrics lines, then the final barrier and the pservers' stop."""
    mdir = metrics_dir(a.results_dir)
    lines = JsonLines(mdir / f"rank-{rank}.jsonl") if a.harness else None
    events = JsonLines(mdir / "events.jsonl") if a.harness and rank == 0 else None
    record_start(a, events, fleet, rank=rank, world=world, lr=lr, device=device)
    gb = a.batch_size * world
    step, pos, done_here, interval, data_wait, times, diverged = 0, Position(), 0, 0, 0.0, [], False
    t_prev = loop_start = mark = time.perf_counter()
    while (where := next_step(source.size, pos, gb, step, a)) is not None:
        start, after = where
        t0 = time.perf_counter()
        xb, yb = source.batch(start)
        data_wait += time.perf_counter() - t0
        (value,) = exe.run(main, feed={"x": xb, "y": yb}, fetch_list=[loss])  # the fetch waits for the step
        now = time.perf_counter()
        times.append(round(now - mark, 6))
        mark = now
        step, pos, done_here, interval = step + 1, after, done_here + 1, interval + 1
        if done_here == 1 and events:
            events.write(startup_event(marks, time.time(), step=step, restart=0))
        ended = source.size is not None and epoch_ends(source.size, pos, gb)
        last = (not a.by_epochs and step >= a.steps) or (ended and a.by_epochs and pos.epoch + 1 >= a.epochs)
        warmup = done_here <= a.warmup_steps
        if step % a.log_every == 0 or last or done_here == a.warmup_steps:
            loss_value = float(value)
            diverged = any_trainer_diverged(fleet, loss_value)
            if lines:
                lines.write(interval_line(step=step, epoch=start.epoch, loss=loss_value, steps=interval,
                                          samples_per_step=a.batch_size, seconds=now - t_prev, step_times=times,
                                          data_wait=data_wait, lr=lr, world_size=world, rank=rank, warmup=warmup))
            t_prev, interval, data_wait, times = now, 0, 0.0, []
            mark = time.perf_counter()
            t_prev = mark
            if diverged:
                record_divergence(events, rank=rank, step=step, loss_value=loss_value)
                break
    loop_seconds = time.perf_counter() - loop_start
    if events:
        events.write({"event": "end", "step": step, "steps": step, "samples": step * gb,
                      "loop_seconds": round(loop_seconds, 4), "final_save_s": 0.0, "restart": 0,
                      "world_size": world, "diverged": diverged, "wall_time": round(time.time(), 3)})
    for f in (lines, events):
        if f:
            f.close()
    stop_pservers(a, fleet, rank=rank, world=world, step=step, diverged=diverged, loop_seconds=loop_seconds)
    return 0


def record_start(a: TrainArgs, events: JsonLines | None, fleet: Any, *, rank: int, world: int, lr: float,
                 device: dict[str, Any]) -> None:
    """Trainer 0's ``start`` and ``run_info`` events, and every trainer's line on stdout saying what it trains."""
    if events:
        events.write({"event": "start", "step": 0, "restart": 0, "world_size": world, "saved_world_size": None,
                      "lr": lr, "dropped_lines": 0, "wall_time": round(time.time(), 3)})
        events.write({"event": "run_info", "step": 0, "restart": 0, "world_size": world, "nodes": world,
                      "gpus_per_node": device["count"] and 1, "processes_per_node": 1, "device": device,
                      "flops_per_sample": None, "flops_note": "not counted for paddle (no FLOP counter is used)",
                      "precision": "fp32", "lr": lr, "memory_format": "contiguous",
                      "ps_mode": f"geo, k_steps={GEO_K_STEPS}", "pservers": fleet.server_num(),
                      "wall_time": round(time.time(), 3)})
    print(f"[paddle_ps] trainer {rank}/{world} on {device['name']}: {a.workload}, {fleet.server_num()} pservers, "
          f"GEO k_steps {GEO_K_STEPS}, lr {lr:g}" + (f" (precision {a.precision} runs as fp32)"
                                                      if a.precision != "fp32" else ""), flush=True)


def any_trainer_diverged(fleet: Any, loss_value: float) -> bool:
    """Whether the loss is not finite on any trainer. A non-finite loss on any trainer stops every trainer at the
    same metrics step, as the PyTorch trainer does: GEO trainers step apart between exchanges, so each says
    whether its own loss is finite (a gloo all-reduce)."""
    return bool(fleet.util.all_reduce([0 if math.isfinite(loss_value) else 1], "max", "worker")[0])


def record_divergence(events: JsonLines | None, *, rank: int, step: int, loss_value: float) -> None:
    """Say on stdout that the loss diverged at ``step`` (here, or on another trainer), and record it as trainer 0's
    ``diverged`` event."""
    what = nonfinite_name(loss_value) or "on another trainer"
    reason = f"non-finite loss ({what}) at step {step}"
    print(f"[paddle_ps] trainer {rank}: diverged: {reason}; stopping, as every trainer does", flush=True)
    if events:
        events.write({"event": "diverged", "step": step, "reason": reason,
                      "wall_time": round(time.time(), 3)})


def stop_pservers(a: TrainArgs, fleet: Any, *, rank: int, world: int, step: int, diverged: bool,
                  loop_seconds: float) -> None:
    """Every trainer's last step is done before the pservers go: the final barrier, then trainer 0 stops them
    and says how the run ended."""
    fleet.barrier_worker()  # every trainer's last step is done before the pservers go
    fleet.stop_worker()
    if rank == 0:
        fleet.fleet._runtime_handle._worker.stop_server()  # the client's StopServer: run_server returns
        ended = f"diverged at step {step}" if diverged else f"finished at step {step}"
        print(f"[paddle_ps] {a.workload}: {ended} (trainers {world}), loop {loop_seconds:.3f}s", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_train_args(sys.argv[1:] if argv is None else argv)
    if args.workload not in ("resnet50", "cifar10"):
        raise SystemExit(f"--workload {args.workload}: paddle_ps trains resnet50 and cifar10 "
                         f"({WORKLOADS[args.workload].model} has no Paddle version here)")
    marks = {"process": STARTED}
    try:
        marks["launched"] = float(os.environ[ENV_LAUNCHED_AT])
    except (KeyError, ValueError):
        pass
    return train(args, os.environ, marks)


if __name__ == "__main__":
    raise SystemExit(main())
