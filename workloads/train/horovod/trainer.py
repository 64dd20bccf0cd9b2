"""``python -m workloads.train.horovod``: one Horovod rank of a PyTorch training job.

The same command-line contract (``core.contract.train_args``), workloads (``workloads.train.pytorch.registry``),
metrics lines, checkpoints and summary as ``python -m workloads.train.pytorch``: this is that trainer's
``Run`` with its communication done by Horovod instead of torch.distributed + DDP:
``hvd.DistributedOptimizer`` all-reduces the gradients, ``hvd.broadcast_parameters`` and
``hvd.broadcast_optimizer_state`` start every rank from rank 0's state, and the barriers and the
one flag broadcast are Horovod's. The per-process env (HOROVOD_RANK, HOROVOD_SIZE, the Gloo
rendezvous address, ...) comes from ``workloads.train.horovod.bootstrap``, which starts these
processes on each pod (and, locally, on each loopback "node"); there is no SSH and no MPI.

Mixed precision with a gradient scaler follows Horovod's own example
(horovod/horovod examples/pytorch/pytorch_mnist.py, its ``--use-mixed-precision`` loop): ``backward``, ``optimizer.synchronize()``,
``scaler.unscale_``, then ``scaler.step`` inside ``optimizer.skip_synchronize()``, so the scaler
reads all-reduced gradients and the step does not all-reduce them twice.
"""

from __future__ import annotations

import time

STARTED = time.time()  # before torch is imported: the start-up record counts the imports

from typing import Any  # noqa: E402

from workloads.train.pytorch.trainer import Run  # noqa: E402
from workloads.train.pytorch.trainer import main as train_main  # noqa: E402


def horovod_dist_env(hvd: Any) -> dict[str, int]:
    """The rank's place in the job as Horovod sees it (``trainer.main``'s ``env``); no restarts: a
    Horovod job has a fixed size (framework_support.check_experiment refuses elastic horovod runs)."""
    return {"rank": hvd.rank(), "world_size": hvd.size(), "local_rank": hvd.local_rank(), "restart": 0}


class HorovodRun(Run):
    """``trainer.Run`` with Horovod's collectives (the group is set up by ``hvd.init()`` in ``main``)."""

    def init_group(self, backend: str) -> None:
        """Nothing: ``hvd.init()`` already joined the Gloo rendezvous."""

    def distribute(self, model: Any) -> Any:
        return model  # DistributedOptimizer all-reduces, not a wrapper around the model

    def distribute_optimizer(self, optimizer: Any) -> Any:
        if not self.distributed:
            return optimizer
        import horovod.torch as hvd

        hvd.broadcast_parameters(self.model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        return hvd.DistributedOptimizer(optimizer, named_parameters=self.model.named_parameters())

    def backward_and_step(self, loss: Any) -> None:
        if not self.distributed:
            return super().backward_and_step(loss)
        self.scaler.scale(loss).backward()
        self.optimizer.synchronize()
        self.scaler.unscale_(self.optimizer)  # a no-op when the scaler is off (fp32, bf16)
        with self.optimizer.skip_synchronize():
            self.scaler_step()

    def local_world_size(self) -> int:
        import horovod.torch as hvd

        return hvd.local_size()

    def barrier(self) -> None:
        if self.distributed:
            import horovod.torch as hvd

            hvd.barrier()

    def any_rank(self, flag: bool) -> bool:
        if not self.distributed:
            return flag
        import horovod.torch as hvd
        import torch

        return bool(hvd.allreduce(torch.tensor([1 if flag else 0]), op=hvd.Max, name="any_rank").item())

    def agreed(self, flag: bool) -> bool:
        if not self.distributed:
            return flag
        import horovod.torch as hvd
        import torch

        return bool(hvd.broadcast(torch.tensor([1 if flag else 0]), root_rank=0, name="agreed").item())

    def close(self) -> None:
        import horovod.torch as hvd

        try:
            self.close_source()
        finally:
            self.writer.close()
            hvd.shutdown()


def main(argv: list[str] | None = None) -> int:
    import horovod.torch as hvd

    hvd.init()
    return train_main(argv, process_started=STARTED, run_class=HorovodRun, env=horovod_dist_env(hvd))


if __name__ == "__main__":
    raise SystemExit(main())
