"""One container of a registered manifest, started in a plain shell the way the kubelet starts it, with
``python3`` and ``python`` standing in to record the argv each call gets.

The env and the command are what the kubelet makes of the manifest (tests/support/kubelet_expansion.py:
``$(VAR)`` and ``$$`` expanded, the downward API's values filled in, an Indexed Job's
``JOB_COMPLETION_INDEX`` added), so a test sees what the pod's script really hands its programs: the
launcher's argv, and through it the trainer's. Nothing of the image, volumes or security context is
modelled (tests/support/pod_sandbox.py runs whole pods).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Mapping

from core.contract.names import ZONE_FIELD
from tests.support.kubelet_expansion import command_and_args, container_env

POD_IP = "10.0.0.7"
INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
# Records its argv (a JSON list a line) and succeeds, for every "python3 ..." and "python ..." the script runs.
RECORDER = ("import json, os, sys\n"
            "with open(os.environ['EKSBENCH_TEST_ARGV_LOG'], 'a') as f:\n"
            "    f.write(json.dumps(sys.argv[1:]) + '\\n')\n")


def pod_containers(manifest: Mapping) -> list[dict]:
    """The init containers then the containers of a Job's or Deployment's pod template."""
    spec = manifest["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def run_container(container: Mapping, tmp_path: Path, *, index: int | None = None) -> tuple[dict[str, str], list]:
    """(the container's env as the kubelet resolved it, the argv of every python call its command made, in order)."""
    def value_from(e: Mapping) -> str:
        path = e["valueFrom"]["fieldRef"]["fieldPath"]
        return {"status.podIP": POD_IP, INDEX_FIELD: str(index), ZONE_FIELD: ""}[path]

    env = container_env(container, value_from, index)
    command = command_and_args(container, env)
    bin_dir, log = tmp_path / "bin", tmp_path / "argv.jsonl"
    bin_dir.mkdir(exist_ok=True)
    for name in ("python3", "python"):
        (bin_dir / name).write_text(f"#!{sys.executable}\n{RECORDER}")
        (bin_dir / name).chmod(0o755)
    log.write_text("")
    run = subprocess.run(command, env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), **env,
                                       "EKSBENCH_TEST_ARGV_LOG": str(log)},
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, (command, run.stdout, run.stderr)
    return env, [json.loads(line) for line in log.read_text().splitlines()]


def launched_command(calls: list) -> list[str]:
    """What the results launcher (``python3 -m workloads.train.harness.launch ... -- CMD``) was told to run."""
    from core.contract.launch_command import LAUNCHER_MODULE

    launcher = [c for c in calls if c[:2] == ["-m", LAUNCHER_MODULE]]
    assert len(launcher) == 1, calls
    return launcher[0][launcher[0].index("--") + 1:]
