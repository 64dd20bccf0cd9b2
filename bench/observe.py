"""``python -m bench status <stack>`` and ``python -m bench logs <stack> <experiment> [--follow]``.

status: the stack's state when the Pulumi CLI answers (last operation, result, resources
    held), then each run with each experiment's status, from the local results
    (``./results/<stack>/<run-id>/``) and from S3 (the stack's results prefix: the
    ``results_prefix`` output while the stack exists, else ``results.bucket`` or the home stack's bucket).
logs: the experiment's node logs, from where they are: the cluster while its pods run
    (``--follow`` streams), S3 once the launcher uploaded them, or a local run's files
    (``--follow`` tails them until summary.json appears).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from bench import pulumi_cli
from bench.errors import fail
from bench.stack_operations import stack_resources
from spec.results_location import ResultsLocation, results_bucket as resolve_results_bucket
from spec.s3_uri import parse_s3_uri
from program.stack_files import ROOT


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("status", help="stack state and each run's experiment status (local and S3)")
    s.add_argument("stack")
    s.add_argument("--project-dir", default=str(ROOT), metavar="DIR")
    s.add_argument("--results-root", default="results", metavar="DIR")
    s.set_defaults(func=cmd_status)
    g = sub.add_parser("logs", help="an experiment's logs: cluster while it runs, S3 afterwards, local files")
    g.add_argument("stack")
    g.add_argument("experiment")
    g.add_argument("--run-id", metavar="ID", help="default: the latest run (local) / the stack's run_id (AWS)")
    g.add_argument("--follow", "-f", action="store_true", help="keep printing new lines until the experiment ends")
    g.add_argument("--project-dir", default=str(ROOT), metavar="DIR")
    g.add_argument("--results-root", default="results", metavar="DIR")
    g.set_defaults(func=cmd_logs)


# --- status -------------------------------------------------------------------------------------------

def _local_runs(results_root: Path, stack: str) -> dict[str, dict[str, str]]:
    from bench.result_readers import read_summary

    runs: dict[str, dict[str, str]] = {}
    base = results_root / stack
    if not base.is_dir():
        return runs
    for run in sorted(p for p in base.iterdir() if p.is_dir()):
        exps = {}
        for exp in sorted(p for p in run.iterdir() if p.is_dir() and not p.name.startswith("_")):
            try:
                exps[exp.name] = (read_summary((exp / "summary.json").read_bytes(), f"{exp}/summary.json") or {}).get("status") or "?"
            except (OSError, ValueError):
                exps[exp.name] = "no summary (running, or stopped before its launcher finished)"
        runs[run.name] = exps
    return runs


def _s3_runs(stack_results: ResultsLocation, region: str | None) -> dict[str, dict[str, str]]:
    from bench import s3_results

    s3 = s3_results.client(region)
    runs: dict[str, dict[str, str]] = {}
    for run_id in s3_results.child_prefixes(s3, stack_results.uri):
        exps = {}
        run = stack_results.child(run_id)
        for exp in s3_results.child_prefixes(s3, run.uri):
            uri = run.child(exp).uri
            summary = s3_results.read_json(s3, uri, "summary.json")
            progress = None if summary else s3_results.read_json(s3, uri, "progress.json")
            if summary:
                exps[exp] = summary.get("status", "?")
            elif progress:
                exps[exp] = f"running (step {progress.get('step')}/{progress.get('total')})"
            else:
                exps[exp] = "no summary yet"
        runs[run_id] = exps
    return runs


def results_bucket(cfg: Any, root: Path) -> str | None:
    """Where the stack's results are once the stack itself is gone: ``results.bucket``, or the bucket
    the home stack (``results.home_stack``) exports; None when neither can be read."""
    if not cfg.results.home_stack:
        return resolve_results_bucket(cfg.results, None, region=cfg.region)
    try:
        home = pulumi_cli.stack_outputs(cfg.results.home_stack, root)
        return resolve_results_bucket(cfg.results, home, region=cfg.region)
    except Exception:  # noqa: BLE001 - no CLI, no backend, no home: local results still work
        return None


def stack_status(stack: str, root: Path, results_root: Path) -> dict[str, Any]:
    from program.stack_files import load_stack_config

    cfg = load_stack_config(stack, root)
    out: dict[str, Any] = {"stack": stack, "state": None, "outputs": {}, "local_runs": {}, "s3_runs": {},
                           "notes": []}
    try:
        stk = pulumi_cli.open_stack(stack, root, check_config=False, create=False)
        info = stk.info()

        out["state"] = {"last": info.kind if info else None, "result": info.result if info else None,
                        "ended": str(info.end_time) if info and info.end_time else None,
                        "resources": len(stack_resources(stk))}
        out["outputs"] = {k: v.value for k, v in stk.outputs().items()}
    except Exception as e:  # noqa: BLE001 - no CLI, no backend: say so, show the results anyway
        out["notes"].append(f"stack state unknown: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    out["local_runs"] = _local_runs(results_root.resolve(), stack)
    prefix = out["outputs"].get("results_prefix")
    bucket = parse_s3_uri(prefix)[0] if prefix else results_bucket(cfg, root)
    if bucket:
        stack_results = ResultsLocation(bucket, cfg.project, stack)
        try:
            out["s3_runs"] = _s3_runs(stack_results, cfg.region)
            out["s3_prefix"] = stack_results.uri
        except Exception as e:  # noqa: BLE001
            out["notes"].append(f"S3 results not readable at {stack_results.uri}: {type(e).__name__}")
    else:
        out["notes"].append("no S3 results location known (results.bucket is unset and the home stack's "
                            "outputs could not be read)")
    return out


def render_status(st: dict[str, Any]) -> str:
    lines = [f"stack {st['stack']}"]
    state = st["state"]
    if state:
        lines.append(f"  pulumi: last {state['last']} {state['result']}"
                     + (f" at {state['ended']}" if state["ended"] else "")
                     + f", {state['resources']} resource(s) held"
                     + (" (costs money: `python -m bench destroy " + st["stack"] + "`)" if state["resources"] else ""))
    for note in st["notes"]:
        lines.append(f"  {note}")
    for where, runs in (("local", st["local_runs"]), (st.get("s3_prefix", "S3"), st["s3_runs"])):
        if not runs:
            continue
        lines.append(f"  runs in {where}:")
        for run_id, exps in runs.items():
            lines.append(f"    {run_id}")
            lines += [f"      {name}: {status}" for name, status in exps.items()] or ["      (no experiments)"]
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    from spec.fields import ConfigError

    try:
        st = stack_status(args.stack, Path(args.project_dir), Path(args.results_root))
    except ConfigError as e:
        return fail(f"invalid config for stack {args.stack!r}: " + "; ".join(e.problems))
    print(render_status(st))
    return 0


# --- logs ---------------------------------------------------------------------------------------------

def _latest_local_run(results_root: Path, stack: str, experiment: str) -> Path | None:
    base = results_root / stack
    runs = sorted((p for p in base.glob(f"*/{experiment}") if p.is_dir()), key=lambda p: p.stat().st_mtime)
    return runs[-1] if runs else None


def _local_logs(exp_dir: Path, follow: bool) -> Iterator[str]:
    logs = exp_dir / "logs"
    positions: dict[Path, int] = {}
    while True:
        for path in sorted(logs.glob("*.log")) if logs.is_dir() else []:
            with open(path, "rb") as f:
                f.seek(positions.get(path, 0))
                data = f.read()
                positions[path] = f.tell()
            for line in data.decode("utf-8", "replace").splitlines():
                yield f"{path.stem}: {line}"
        if not follow or (exp_dir / "summary.json").exists():
            return
        time.sleep(1.0)


def _cluster_logs(cfg: Any, outputs: dict[str, Any], experiment: str, follow: bool) -> Iterator[str] | None:
    from bench import kube

    try:
        client = kube.KubeClient(kube.access_from_kubeconfig(outputs["kubeconfig"], outputs["cluster_name"],
                                                             cfg.region))
        pods = client.pods(cfg.namespace, kube.experiment_selector(experiment, cfg.run_id))
    except Exception:  # noqa: BLE001 - no cluster access: fall back to S3
        return None
    if not pods:
        return None

    def lines() -> Iterator[str]:
        if follow:
            first = pods[0]["metadata"]["name"]
            yield from (f"{first}: {line}" for line in client.follow(cfg.namespace, first))
            return
        for pod in pods:
            name = pod["metadata"]["name"]
            for reason in kube.pod_reasons(pod):
                yield f"{name}: [{reason}]"
            yield from (f"{name}: {line}" for line in client.log_tail(cfg.namespace, name, lines=200))
    return lines()


def experiment_logs(stack: str, experiment: str, *, root: Path, results_root: Path, run_id: str | None = None,
                    follow: bool = False) -> Iterator[str]:
    """Lines of the experiment's logs, from the cluster, S3 or local files (first that has them)."""
    from bench import s3_results
    from program.stack_files import load_stack_config

    cfg = load_stack_config(stack, root)
    if experiment not in {e.name for e in cfg.experiments}:
        raise ValueError(f"no experiment {experiment!r} in stack {stack}")
    outputs: dict[str, Any] = {}
    try:
        outputs = pulumi_cli.outputs(stack, root) if (run_id in (None, cfg.run_id)) else {}
    except Exception:  # noqa: BLE001 - no CLI / no stack: S3 and local files still work
        outputs = {}
    if outputs.get("kubeconfig"):
        cluster = _cluster_logs(cfg, outputs, experiment, follow)
        if cluster is not None:
            return cluster
    uri = (outputs.get("experiment_results") or {}).get(experiment)
    bucket = None if uri else results_bucket(cfg, root)
    if bucket:
        uri = ResultsLocation(bucket, cfg.project, stack, run_id or cfg.run_id, experiment).uri
    if uri:
        try:
            s3 = s3_results.client(cfg.region)
            keys = [(k, rel) for k, rel in s3_results.keys_under(s3, uri) if rel.startswith("logs/")]
        except Exception:  # noqa: BLE001
            keys = []
        if keys:
            bucket = uri[len("s3://"):].split("/", 1)[0]

            def s3_lines() -> Iterator[str]:
                for key, rel in keys:
                    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8", "replace")
                    yield from (f"{Path(rel).stem}: {line}" for line in body.splitlines())
            return s3_lines()
    if run_id:
        local = ResultsLocation(None, cfg.project, stack, run_id, experiment).local_dir(results_root.resolve())
    else:
        local = _latest_local_run(results_root.resolve(), stack, experiment)
    if local is not None and local.is_dir():
        return _local_logs(local, follow)
    raise FileNotFoundError(f"no logs for {stack}/{experiment}: not in the cluster, not on S3"
                            + (f" ({uri})" if uri else "") + f", not under {results_root / stack}")


def cmd_logs(args: argparse.Namespace) -> int:
    from spec.fields import ConfigError

    try:
        for line in experiment_logs(args.stack, args.experiment, root=Path(args.project_dir),
                                    results_root=Path(args.results_root), run_id=args.run_id, follow=args.follow):
            print(line, flush=True)
    except ConfigError as e:
        return fail(f"invalid config for stack {args.stack!r}: " + "; ".join(e.problems))
    except (ValueError, FileNotFoundError) as e:
        return fail(str(e))
    except BrokenPipeError:
        sys.stderr.close()
    return 0
