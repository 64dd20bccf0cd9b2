"""The report's accuracy section: each run's time to its target accuracy, and the energy it took where the run
measured power (summary.json's ``telemetry`` block, ``energy_to_accuracy_j``)."""

from __future__ import annotations

from bench.report.blocks import empty_section, esc, figure

ENERGY_TO_ACCURACY = ("Energy to accuracy: the nodes' energy (GPUs', or CPU packages' through RAPL) over the time "
                      "to accuracy: from the trainer's start to the evaluation that first reached the target.")


def accuracy_section(df) -> str:
    from bench.report.bar_plots import bar_figure
    from bench.report.figures import labels

    head = "<h2>Time to accuracy</h2>"
    fig = bar_figure(df, "time_to_accuracy_s", "seconds to target accuracy", "Time to accuracy")
    acc = df[df["accuracy"].notna()]
    reached = ", ".join(f"{name} {a:.3f}" for name, a in zip(labels(acc), acc["accuracy"]))
    if fig is None:
        return empty_section("Time to accuracy", "no run set a target accuracy (target_accuracy in the experiment)"
                             + (f"; accuracy measured: {reached}." if reached else
                                " or measured one (evaluate in the experiment)."))
    energy = bar_figure(df, "energy_to_accuracy_j", "joules, all nodes", "Energy to accuracy")
    return head + (f"<p>Accuracy: {esc(reached)}.</p>" if reached else "") + figure(fig, "time to accuracy", "") + (
        "" if energy is None else f"<p>{ENERGY_TO_ACCURACY}</p>" + figure(energy, "energy to accuracy", ""))
