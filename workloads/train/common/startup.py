"""Where a training attempt's time before its first step went (the ``startup`` event).

Phases, each from the wall-clock marks the trainer takes: ``launch`` (the launcher's start,
``EKSBENCH_LAUNCHED_AT``, to this process's start: torchrun, its rendezvous and the spawn),
``imports`` (torch and the trainer), ``process_group``, ``build`` (model, data source,
optimizer), ``resume`` (checkpoint, FLOP count, the start barriers) and ``first_step``.
"""

from __future__ import annotations

from typing import Any

STARTUP_PHASES = (("launch", "launched", "process"), ("imports", "process", "imported"),
                  ("process_group", "imported", "process_group"), ("build", "process_group", "built"),
                  ("resume", "built", "resumed"), ("first_step", "resumed", "first_step"))


def startup_event(marks: dict[str, float], first_step_done: float, *, step: int, restart: int) -> dict[str, Any]:
    """Where this attempt's time before its first step went: seconds per phase, from the launcher's
    start (``EKSBENCH_LAUNCHED_AT``: torchrun and its rendezvous) or this process's, to the first
    step's end. ``resume`` holds the FLOP count and the start barriers."""
    at = {**marks, "first_step": first_step_done}
    phases = {name: round(at[b] - at[a], 3) for name, a, b in STARTUP_PHASES if a in at and b in at}
    origin = at.get("launched", at.get("process", first_step_done))
    return {"event": "startup", "step": step, "restart": restart, "phases_s": phases,
            "time_to_first_step_s": round(first_step_done - origin, 3), "wall_time": round(first_step_done, 3)}
