"""The training command line (the contract the Job manifests call), parsed into a frozen object.

Kept apart from the training loop so the manifests' builder, the launcher's summary and
the local runner can parse or build these arguments without importing torch.

Each ``TrainArgs`` field carries its command-line facts as field metadata (``arg``): the help
text, the choices, the value's type and whether the argv always spells it out. The parser
(``build_parser``) and the argv builder (``train_args_to_argv``) both come from them, so a new
argument is one field. The flag is the field's name with dashes (``batch_size`` ->
``--batch-size``) unless the metadata names another (``harness`` -> ``--no-harness``).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import Field, asdict, dataclass, field, fields
from typing import Any, Callable, Sequence

from core.catalog.llm import MODEL_SIZES
from core.catalog.workload_facts import WORKLOADS as WORKLOAD_FACTS

WORKLOADS = tuple(WORKLOAD_FACTS)
# fp8: torchao's float8 training of a language model's linear layers (llama3 on H100/H200 only; program.validation)
PRECISIONS = ("fp32", "amp-fp16", "bf16", "fp8")
FP8_RECIPES = ("tensorwise", "rowwise")  # torchao.float8's recipe names (Float8LinearConfig.from_recipe_name)
# A language model's activation checkpointing (workloads.train.pytorch.llama_parallel): none, TorchTitan's
# selective (per-op) or full (every block recomputed in backward).
ACTIVATION_CHECKPOINTS = ("none", "selective", "full")
# How a language model's parameters are sharded over its data-parallel ranks: FSDP2 over all of them, or HSDP
# (replicated across nodes, sharded within one).
SHARDINGS = ("fsdp", "hsdp")
# torch.compile modes; "reduce-overhead" and "max-autotune" capture CUDA graphs on GPU.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# How an ImageFolder's JPEGs become batches (workloads.train.common.data, .dali_input): Pillow in DataLoader
# workers; torchvision's nvJPEG decode_jpeg; NVIDIA DALI. The stack file also takes "auto" (core.config.gpu_defaults).
INPUT_PATHS = ("pillow", "nvjpeg", "dali")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be >= 1")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text}: must be >= 0")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text}: must be >= 0")
    return value


# ``stack_key`` of an argument eksbench sets for every run, which no stack-file key changes.
SET_BY_RUN = ""


def arg(default: Any, help: str | None = None, *, type: Callable[[str], Any] | None = None,
        choices: tuple[str, ...] | None = None, always: bool = True, flag: str | None = None,
        stack_key: str | None = None) -> Any:
    """A ``TrainArgs`` field with its command-line facts. ``always``: the argv spells the value out
    even at its default (the contract the manifests show); otherwise only when it differs. A bool
    with ``always`` is ``--x``/``--no-x``; without, a switch (``--x``, or ``flag="--no-x"`` to
    turn a default-on value off). ``stack_key``: the stack-file key that sets the value (an experiment's own key,
    or a dotted path from the top), or SET_BY_RUN; an experiment's ``args`` may not set such an argument
    (``contract_flag``), since the plan, the summary and the report read the key's value."""
    return field(default=default, metadata={"help": help, "type": type, "choices": choices, "always": always,
                                            "flag": flag, "stack_key": stack_key})


def flag_of(f: Field) -> str:
    """The field's flag as the argv and the parser spell it."""
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


# Field order is argv order: the always-spelled arguments first, then the ones that differ from their default.
@dataclass(frozen=True)
class TrainArgs:
    workload: str = arg("resnet50", choices=WORKLOADS, stack_key="workload")
    batch_size: int = arg(32, "per process", type=_positive, stack_key="batch_size")
    precision: str = arg("fp32", choices=PRECISIONS, stack_key="precision")
    steps: int = arg(100, "global optimizer steps (when --epochs 0); allreduce: timed iterations per message size",
                     type=_positive, stack_key="steps")
    epochs: int = arg(0, "0 = train by --steps", type=_non_negative, stack_key="epochs")
    dataset: str = arg("synthetic", '"synthetic" or a folder name under --data-dir', stack_key="dataset")
    data_dir: str = arg("/data/datasets", stack_key="storage.mount_path")
    results_dir: str = arg("results", stack_key=SET_BY_RUN)
    # steps; 0 = not step-based (tests and the local run set it)
    checkpoint_every: int = arg(0, "checkpoint every N steps (0 = not step-based)", type=_non_negative,
                                stack_key="checkpoint_every")
    image_size: int = arg(224, type=_positive)
    width_per_group: int = arg(64, type=_positive)
    channels_last: bool = arg(True, stack_key="channels_last")
    warmup_steps: int = arg(10, "steps after each (re)start left out of throughput; allreduce: untimed iterations "
                            "per message size", type=_non_negative)
    seed: int = arg(0, type=int)
    collective_timeout: int = arg(300, "seconds", type=_positive)
    compile: bool = arg(False, "torch.compile the model", always=False, stack_key="compile")
    input_path: str = arg("pillow", "ImageFolder: Pillow in the loader workers, nvJPEG (torchvision.io.decode_jpeg) or "
                          "NVIDIA DALI on the device", choices=INPUT_PATHS, always=False, stack_key="input_path")
    target_accuracy: float | None = arg(None, "cifar10: report time to this accuracy", type=float, always=False,
                                        stack_key="target_accuracy")
    lr: float | None = arg(None, "default: 0.1 x global batch / 256 (0.02 for maskrcnn)", type=float,
                           always=False)
    # wall-clock minutes between checkpoints; 0 = off
    checkpoint_minutes: float = arg(10.0, "checkpoint every N minutes of wall time (0 = off); with both 0, no "
                                    "checkpoint at all, not even at the end", type=_non_negative_float, always=False,
                                    stack_key="checkpoint_minutes")
    compile_mode: str = arg("default", "torch.compile mode (reduce-overhead and max-autotune use CUDA graphs)",
                            choices=COMPILE_MODES, always=False, stack_key="compile_mode")
    # a metrics line (one device sync, one .item()) every N steps
    log_every: int = arg(50, "write a metrics line (and sync the device) every N steps", type=_positive,
                         always=False)
    workers: int = arg(2, "data loader processes (ImageFolder)", type=_non_negative, always=False)
    # allreduce: messages double from 8 B up to this (nccl-tests' -b 8 -f 2 -e), less where memory is short
    max_bytes: int = arg(2**30, "allreduce: the largest message in bytes (capped by free memory)", type=_positive,
                         always=False)
    # llama3 (core.catalog.llm): the model, its sequence length, how it is parallelised, its float8 recipe, the
    # validation loss's interval and the target that time to loss is counted to
    model_size: str = arg("tiny", "llama3: the model's shape", choices=MODEL_SIZES, always=False,
                          stack_key="model_size")
    seq_len: int = arg(0, "llama3: tokens per sequence (0: the model's default)", type=_non_negative, always=False,
                       stack_key="seq_len")
    tensor_parallel: int = arg(1, "llama3: tensor-parallel degree, within a node", type=_positive, always=False,
                               stack_key="tensor_parallel")
    sharding: str = arg("fsdp", "llama3: FSDP2 over every data-parallel rank, or HSDP (replicate across nodes)",
                        choices=SHARDINGS, always=False, stack_key="sharding")
    activation_checkpoint: str = arg("none", "llama3: activation checkpointing", choices=ACTIVATION_CHECKPOINTS,
                                     always=False, stack_key="activation_checkpoint")
    fp8_recipe: str = arg("tensorwise", "llama3 with --precision fp8: torchao's float8 recipe", choices=FP8_RECIPES,
                          always=False, stack_key="fp8_recipe")
    val_every: int = arg(0, "llama3: a validation loss every N steps (0: at the end only)", type=_non_negative,
                         always=False, stack_key="val_every")
    target_loss: float | None = arg(None, "llama3: report tokens and time to this validation loss", type=float,
                                    always=False, stack_key="target_loss")
    # False: no metrics files, no checkpoints (the overhead benchmark's bare loop)
    harness: bool = arg(True, "benchmark only: no metrics files and no checkpoints", always=False,
                        flag="--no-harness", stack_key=SET_BY_RUN)

    @property
    def by_epochs(self) -> bool:
        return self.epochs > 0


def option_strings() -> dict[str, Field]:
    """Every option string the trainers' parser (``build_parser``) takes, with its field: each flag, and
    ``--no-<flag>`` beside an always-spelled bool (argparse.BooleanOptionalAction adds it)."""
    out = {}
    for f in fields(TrainArgs):
        out[flag_of(f)] = f
        if isinstance(f.default, bool) and f.metadata["always"]:
            out["--no-" + flag_of(f)[2:]] = f
    return out


def is_option(token: str) -> bool:
    """Whether the trainers' parser reads ``token`` as an option rather than a value: it starts with "-" and is
    neither "-" nor a negative number (argparse's ``_negative_number_matcher``; no option looks like one here)."""
    return token.startswith("-") and token != "-" and not re.fullmatch(r"-\d+|-\d*\.\d+", token)


def option_field(token: str) -> Field | None:
    """The field the trainers' parser gives ``token`` to: ``--flag``, ``--flag=value``, or a prefix of one flag
    (argparse's allow_abbrev, on in ``build_parser``: ``--res=x`` sets ``--results-dir``); None for an option
    no flag (or more than one: ambiguous, which argparse refuses) answers to. argparse.ArgumentParser._parse_optional
    is the order followed: the whole token, then the part before "=", then the prefixes of that part."""
    options = option_strings()
    if token in options:
        return options[token]
    name = token.split("=", 1)[0]
    if name in options:
        return options[name]
    matches = [f for option, f in options.items() if option.startswith(name)] if name.startswith("--") else []
    return matches[0] if len(matches) == 1 else None


def build_parser(prog: str = "python -m workloads.train.pytorch") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Train one benchmark workload (run under torchrun).")
    for f in fields(TrainArgs):
        m, flag = f.metadata, flag_of(f)
        common = {"dest": f.name, "default": f.default, "help": m["help"]}
        if isinstance(f.default, bool) and m["always"]:
            p.add_argument(flag, action=argparse.BooleanOptionalAction, **common)
        elif isinstance(f.default, bool):
            p.add_argument(flag, action="store_false" if flag.startswith("--no-") else "store_true", **common)
        else:
            p.add_argument(flag, type=m["type"] or str, choices=m["choices"], **common)
    return p


def parse_train_args(argv: Sequence[str]) -> TrainArgs:
    ns = build_parser().parse_args(list(argv))
    return TrainArgs(**{f.name: getattr(ns, f.name) for f in fields(TrainArgs)})


def apply_train_args(args: TrainArgs, extra: Sequence[str]) -> TrainArgs | None:
    """``args`` with an experiment's own trainer arguments (``extra``, given after them on the command line,
    so they win) applied, as the trainer will see them; None when ``extra`` is not the trainer's to parse."""
    if not extra:
        return args
    parser = build_parser()
    parser.exit_on_error = False
    try:
        ns, unknown = parser.parse_known_args(list(extra), namespace=argparse.Namespace(**asdict(args)))
    except (argparse.ArgumentError, SystemExit):
        return None
    return None if unknown else TrainArgs(**{f.name: getattr(ns, f.name) for f in fields(TrainArgs)})


def train_args_to_argv(args: TrainArgs) -> list[str]:
    """The command line that parses back to ``args`` (what the runner and manifests pass)."""
    out = []
    for f in fields(TrainArgs):
        value, flag = getattr(args, f.name), flag_of(f)
        if not f.metadata["always"] and value == f.default:
            continue
        if isinstance(f.default, bool):
            out.append(flag if not f.metadata["always"] else flag if value else "--no-" + flag[2:])
        else:
            out.append(f"{flag}={value}")
    return out
