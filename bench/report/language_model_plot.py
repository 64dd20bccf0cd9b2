"""The language-model section's figures and the scaling arithmetic behind one of them: ``loss_figure`` (training
loss by step from the ranks' metrics lines, validation loss by tokens from the summaries), ``scaling_table`` (per
node sweep of one model and precision: tokens/s per GPU at N nodes over that at the fewest), ``anchor_scaling`` (the
same of each published series of the same GPU, model and precision, ``core.catalog.llm_anchors``) and
``scaling_figure`` (both against GPUs)."""

from __future__ import annotations

from typing import Any

from bench.report.figures import MAX_CURVES, labels, new_figure, plain_text, thinned
from bench.results.language_model import gpu_model, is_language_model
from bench.terminal import safe_line

RUN_KEY = ["stack", "run_id", "experiment", "repeat"]
GROUP = ("model_size", "gpu", "instance_type", "gpus_per_node", "precision", "seq_len", "batch_size",
         "tensor_parallel")
MAX_GROUPS = 4  # scaling panels
SCALING_COLUMNS = [("group", "sweep"), ("nodes", "nodes"), ("gpus", "GPUs"), ("runs", "runs"),
                   ("tokens_per_gpu", "tokens/s per GPU"), ("efficiency", "efficiency")]


def _language_model_runs(df) -> list[tuple[tuple, str, dict[str, Any]]]:
    """(run key, the report's label, row) of each language-model run, the first MAX_CURVES."""
    rows = df.to_dict("records")
    keys = list(zip(*(df[k] for k in RUN_KEY)))
    return [(k, name, r) for k, name, r in zip(keys, labels(df), rows) if is_language_model(r)][:MAX_CURVES]


def _train_curves(steps, runs) -> list[tuple[str, Any, Any, int]]:
    """(label, steps, mean loss over ranks, k steps a point) of each run's training loss, at most MAX_POINTS."""
    import numpy as np

    from bench.report.step_plots import run_numbers

    if steps.empty:
        return []
    run, keys = run_numbers(steps)
    number = {k: i for i, k in enumerate(keys)}
    has = steps["loss"].notna().to_numpy()
    out = []
    for key, name, _ in runs:
        if key not in number:
            continue
        curve = steps.loc[has & (run == number[key]), ["step", "loss"]].groupby("step")["loss"].mean()
        if not curve.empty:
            at, mean, k = thinned(curve.values, np.add)
            out.append((name, curve.index[at], mean, k))
    return out


def _val_curve(row: dict[str, Any]) -> tuple[list[float], list[float]]:
    """(tokens, validation loss) of a run's validations in token order, those with both."""
    points = sorted((v["tokens"], v["val_loss"]) for v in row.get("val_losses") or []
                    if isinstance(v, dict) and v.get("tokens") is not None and v.get("val_loss") is not None)
    return [t for t, _ in points], [loss for _, loss in points]


@plain_text
def loss_figure(steps, df):
    """Left: each language-model run's training loss by step; right: its validation loss by tokens trained, with its
    target loss dashed. None where neither was logged."""
    runs = _language_model_runs(df)
    train = _train_curves(steps, runs)
    vals = [(name, *_val_curve(r), r.get("target_loss")) for _, name, r in runs]
    vals = [v for v in vals if v[1]]
    if not train and not vals:
        return None
    fig, (left, right) = new_figure(1, 2, figsize=(11, 4))
    for name, x, y, k in train:
        left.plot(x, y, label=name + (f" ({k} steps a point)" if k > 1 else ""))
    targets = set()
    most = max((t for _, tokens, _, _ in vals for t in tokens), default=0)
    scale, unit = next(((s, u) for s, u in ((1e9, "billion"), (1e6, "million"), (1e3, "thousand")) if most >= s),
                       (1, ""))  # a local run trains thousands of tokens, a cluster's billions
    for name, tokens, losses, target in vals:
        right.plot([t / scale for t in tokens], losses, "o-", ms=3, label=name)
        if isinstance(target, (int, float)) and target == target and target not in targets:
            targets.add(target)
            right.axhline(target, ls="--", lw=1, color="gray", label=f"target {target:g}")
    left.set(xlabel="step", ylabel="training loss (mean over ranks)", title="Training loss")
    right.set(xlabel=f"{unit} tokens trained".strip(), ylabel="validation loss", title="Validation loss")
    for ax, drawn in ((left, train), (right, vals)):
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "none logged", ha="center", va="center", transform=ax.transAxes, color="gray")
    fig.tight_layout()
    return fig


def scaling_table(df):
    """Per sweep over nodes (one run's language-model experiments of the same model, GPU, instance, precision,
    sequence length, batch and tensor parallelism at two or more node counts): the mean tokens/s per GPU over
    repeats at each size and efficiency(N) = that / the same at the fewest nodes measured."""
    import pandas as pd

    ok = df[(df["status"] == "succeeded") & df["tokens_per_s_per_device"].notna() & df["nodes"].notna()]
    many_runs = ok[["stack", "run_id"]].drop_duplicates().shape[0] > 1
    out = []
    for (stack, run_id, *key), g in ok.fillna({c: "?" for c in GROUP}).groupby(["stack", "run_id", *GROUP],
                                                                              sort=True):
        by_n = g.groupby("nodes")["tokens_per_s_per_device"].agg(["mean", "size"]).sort_index()
        if len(by_n) < 2:
            continue
        first = by_n["mean"].iloc[0]
        model = gpu_model(g.iloc[0].to_dict())
        name = safe_line((f"{run_id}: " if many_runs else "") + f"{str(key[0]).upper()} {key[4]} on {model or key[1]}")
        for n, (tokens, runs) in by_n.iterrows():
            per = key[3] if isinstance(key[3], (int, float)) else None
            out.append({"group": name, "nodes": int(n), "gpus": int(n * per) if per else None, "runs": int(runs),
                        "tokens_per_gpu": round(tokens), "efficiency": round(tokens / first, 3),
                        "gpu_model": model, "model_size": key[0], "precision": key[4]})
    return pd.DataFrame(out, columns=[c for c, _ in SCALING_COLUMNS] + ["gpu_model", "model_size", "precision"])


def anchor_scaling(ours):
    """Each published series (one publisher's figures of one setting at several GPU counts) of the GPU, model and
    precision of a sweep in ``ours``: tokens/s per GPU at each count and over that at its fewest."""
    import pandas as pd

    from core.catalog.llm_anchors import ANCHORS

    wanted = set(zip(ours["gpu_model"], ours["model_size"], ours["precision"]))
    series: dict[tuple, list] = {}
    for a in ANCHORS:
        if (a.gpu_model, a.model_size, a.precision) in wanted:
            series.setdefault((a.gpu_model, a.model_size, a.precision, a.publisher, a.compiled, a.parallelism),
                              []).append(a)
    out = []
    for (gpu, size, precision, publisher, compiled, parallelism), rows in series.items():
        if len({a.gpus for a in rows}) < 2:
            continue
        rows = sorted(rows, key=lambda a: a.gpus)
        label = f"{publisher} {size.upper()} {precision}{' compiled' if compiled else ''} ({parallelism})"
        for a in rows:
            out.append({"series": label, "gpus": a.gpus, "tokens_per_gpu": round(a.tokens_per_s_per_gpu),
                        "efficiency": round(a.tokens_per_s_per_gpu / rows[0].tokens_per_s_per_gpu, 3),
                        "gpu_model": gpu, "model_size": size, "precision": precision})
    return pd.DataFrame(out, columns=["series", "gpus", "tokens_per_gpu", "efficiency", "gpu_model", "model_size",
                                      "precision"])


@plain_text
def scaling_figure(ours, theirs):
    """Per sweep: our efficiency against GPUs (solid), each published series of its GPU, model and precision
    (dotted), and 100%."""
    if ours.empty:
        return None
    groups = list(dict.fromkeys(ours["group"]))[:MAX_GROUPS]
    fig, axes = new_figure(1, len(groups), figsize=(5.5 * len(groups), 3.8), squeeze=False)
    for ax, name in zip(axes[0], groups):
        g = ours[ours["group"] == name]
        by_gpus = bool(g["gpus"].notna().all())
        x = g["gpus"] if by_gpus else g["nodes"]
        ax.axhline(1.0, ls="--", color="gray", label="ideal (100%)")
        ax.plot(x, g["efficiency"], "o-", color="#C44E52", lw=2, label="this sweep")
        key = (g["gpu_model"].iloc[0], g["model_size"].iloc[0], g["precision"].iloc[0])
        same = theirs[(theirs["gpu_model"] == key[0]) & (theirs["model_size"] == key[1])
                      & (theirs["precision"] == key[2])] if by_gpus and not theirs.empty else theirs.iloc[:0]
        for series, s in same.groupby("series", sort=False):
            ax.plot(s["gpus"], s["efficiency"], "s:", ms=4, label=series)
        ax.set_xscale("log", base=2)
        ticks = sorted(set(x.astype(int)) | set(same["gpus"].astype(int) if not same.empty else []))
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_ylim(0, 1.15)
        ax.set(xlabel="GPUs" if by_gpus else "nodes", ylabel="tokens/s per GPU vs the fewest", title=name)
        ax.title.set_fontsize(9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="lower left")
    fig.tight_layout()
    return fig
