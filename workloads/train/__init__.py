"""Training scripts that run inside the cluster's Jobs (and on this machine for ``bench run --local``).

The Kubernetes Job side calls exactly these command lines, so they are a stable contract:

``python -m workloads.train.pytorch`` (under ``torchrun``; one process per GPU, or per CPU slot)::

    --workload {resnet50,cifar10,maskrcnn}  --batch-size N (per process)
    --precision {fp32,amp-fp16,bf16}        --steps N  --epochs N (0 = train by steps)
    --dataset NAME  --data-dir DIR  --results-dir DIR  --checkpoint-every N
    --image-size N  --width-per-group N  --channels-last/--no-channels-last  --compile
    --warmup-steps N  --seed N  --collective-timeout S
    [--checkpoint-minutes M] [--compile-mode MODE] [--target-accuracy F] [--lr F] [--log-every N]
    [--workers N] [--input-path {pillow,nvjpeg,dali}]

  Data: ``synthetic`` (random tensors), ImageFolder at ``<data-dir>/<dataset>/train/<class>/*.JPEG``,
  CIFAR-10 batches at ``<data-dir>/cifar10/[cifar-10-batches-py/]``, COCO at
  ``<data-dir>/coco2017/{annotations/instances_train2017.json,train2017/}``.
  Results: ``<results-dir>/metrics/rank-<global_rank>.jsonl`` (one JSON line per interval of
  steps, with each step's time, flushed), ``metrics/eval.jsonl`` (cifar10 test accuracy per epoch),
  ``metrics/events.jsonl`` (start/resume with the learning rate, run_info with device and model
  FLOPs, checkpoints, end), ``checkpoints/latest.pt`` (rank 0, atomic replace; loaded with
  ``weights_only=True``) and ``checkpoints/latest.json`` (its non-tensor state). A restarted
  worker group resumes from ``latest.pt`` and drops metric lines past the checkpoint, so every
  step appears once.

``python -m workloads.train.pytorch.evaluate --workload cifar10 --checkpoint FILE --data-dir DIR --results-dir DIR``
  writes ``<results-dir>/eval.json``: overall and per-class test accuracy.

``python -m workloads.train.harness.launch --results-dir DIR [--results-uri s3://b/p/] [--experiment NAME] -- CMD...``
  the in-container wrapper: tees logs, forwards signals, always writes ``summary.json`` (node 0
  only) and uploads to S3. See ``workloads.train.harness.launch``.

``python -m workloads.train.horovod.bootstrap CMD...`` starts one Horovod process per GPU on a pod,
and ``python -m workloads.train.control.gate`` (standard library only) resumes suspended Jobs once the Jobs
it waits for have finished; see their module docstrings.

Rooms (docs/ARCHITECTURE.md; tests/test_layers.py keeps their directions):

- ``common/``: what every framework's trainer shares (data order, CIFAR files, schedule, device
  clock, the CPU's precision choice, metrics lines, start-up record, atomic writes);
- ``pytorch/``, ``tensorflow/``, ``horovod/``, ``paddle/``: one per framework, each run as
  ``python -m workloads.train.<framework>`` with the same arguments (``horovod`` builds on ``pytorch``);
- ``harness/``: the launcher that wraps any of them (logs, exit paths, summary, upload, progress,
  what ran, the fabric check); it never imports a framework;
- ``control/``: the cluster's control programs, ``gate`` and ``autostop`` (standard library and boto3).

Shipped to the pods with ``core/`` (``workloads.code_files.read_code_files``): modules here import
only the standard library, their framework, boto3 and ``core``.
"""
