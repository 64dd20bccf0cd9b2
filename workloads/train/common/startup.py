"""Where a training attempt's time before its first step went (the ``startup`` event).

Phases, each from the wall-clock marks the trainer takes: ``launch`` (the launcher's start,
``EKSBENCH_LAUNCHED_AT``, to this process's start: torchrun, its rendezvous and the spawn),
``imports`` (torch and the trainer), ``process_group``, ``build`` (model, data source,
optimizer), ``flops`` (the model's FLOP count, on the meta device, where the trainer counts
one), ``resume`` (checkpoint and the start barriers), ``first_step`` and, for a compiled model,
``compile``: the first step's time beyond an ordinary step's (the second one), which
``first_step`` then leaves out. The phases add up to ``time_to_first_step_s``.
"""

from __future__ import annotations

from typing import Any

# (phase, the marks it may start from (the first one present), the mark it ends at)
STARTUP_PHASES = (("launch", ("launched",), "process"), ("imports", ("process",), "imported"),
                  ("process_group", ("imported",), "process_group"), ("build", ("process_group",), "built"),
                  ("flops", ("built",), "flops_counted"), ("resume", ("flops_counted", "built"), "resumed"),
                  ("first_step", ("resumed",), "first_step"))


def compile_share(first_step_s: float, second_step_s: float) -> float:
    """The first step's extra time on a compiled model: its duration less the second step's (which runs the
    compiled code), never below 0. The second step may itself still warm up (CUDA graphs record on a later
    call), so this is a lower bound of the compile time."""
    return max(0.0, first_step_s - second_step_s)


def startup_event(marks: dict[str, float], first_step_done: float, *, step: int, restart: int,
                  compile_s: float | None = None) -> dict[str, Any]:
    """Where this attempt's time before its first step went: seconds per phase, from the launcher's
    start (``EKSBENCH_LAUNCHED_AT``: torchrun and its rendezvous) or this process's, to the first
    step's end. ``resume`` holds the checkpoint and the start barriers; ``flops`` the FLOP count.
    ``compile_s`` (a compiled model, ``compile_share``): split off the first step as ``compile``."""
    at = {**marks, "first_step": first_step_done}
    phases = {}
    for name, starts, end in STARTUP_PHASES:
        start = next((s for s in starts if s in at), None)
        if start is not None and end in at:
            phases[name] = at[end] - at[start]
    if compile_s is not None and "first_step" in phases:
        phases["compile"] = min(compile_s, phases["first_step"])
        phases["first_step"] -= phases["compile"]
    origin = at.get("launched", at.get("process", first_step_done))
    return {"event": "startup", "step": step, "restart": restart,
            "phases_s": {name: round(s, 3) for name, s in phases.items()},
            "time_to_first_step_s": round(first_step_done - origin, 3), "wall_time": round(first_step_done, 3)}
