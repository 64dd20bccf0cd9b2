"""The set-up scripts (.ci/): what README command 1 runs as a new user would, and framework venvs that two set-ups
can build at once.

`.ci/front-door` itself (a fresh venv from the install files, then every README step) is what CI runs first; here
are the pieces it rests on: the steps read from the README, the check for room on the disk, and
`.ci/setup-framework`'s lock.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.readme_steps import command_1, front_door_script, front_door_steps
from tests.test_import_graph import ROOT

README = (ROOT / "README.md").read_text()


def test_command_1_sets_up_a_venv_then_runs_from_it():
    """Debian's and Ubuntu's python3 refuse pip installs outside a venv (PEP 668): command 1 makes one and uses it."""
    assert command_1(README) == "bash .ci/setup && . .venv/bin/activate && eksbench run dev --local"


def test_the_front_door_runs_what_the_readme_shows_after_command_1():
    steps = front_door_steps(README, "/tmp/scratch")
    assert steps[0] == command_1(README)
    names = [s.split()[1] if s.startswith("eksbench ") else s.split()[0] for s in steps]
    for shown in ("status", "logs", "report", "plan", "compare", "jupyter"):
        assert shown in names, f"the front door does not run the README's {shown}"
    assert "pip install -e '.[notebook]'" in steps
    assert names.index("pip") < names.index("jupyter")
    assert any(s.startswith("python3 - <<'PY'\nfrom bench import results") for s in steps)
    assert not any("--max-cost" in s or "automation.run(" in s for s in steps)  # AWS: not here


def test_the_front_door_stops_at_the_first_step_that_fails(tmp_path):
    """A failure inside command 1's ``&&`` chain ends the script there, with that failure's exit code."""
    readme = ("```bash\nbash .ci/setup && . .venv/bin/activate && eksbench run dev --local\n```\n"
              "```bash\neksbench status dev\n```\n")
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "setup").write_text("exit 3\n")
    done = subprocess.run(["bash", "-c", front_door_script(readme, str(tmp_path))], cwd=tmp_path, text=True,
                          capture_output=True, timeout=60)
    assert done.returncode == 3, done
    assert "$ eksbench status dev" not in done.stdout and "command not found" not in done.stderr, done


def test_ci_runs_the_front_door_before_the_test_packages():
    run = (ROOT / ".ci" / "run").read_text()
    assert run.index("bash .ci/front-door") < run.index("bash .ci/setup-tests")


def test_the_setup_scripts_install_nothing_outside_a_venv():
    """Every pip of the set-up runs as a venv's python (lib.sh pip_install, PIP=<venv>/bin/python -m pip)."""
    for script in ["setup", "setup-tests", "setup-framework", "lib.sh", "frameworks/horovod.sh"]:
        text = (ROOT / ".ci" / script).read_text()
        assert "python3 -m pip" not in text, script
    assert 'pip=${PIP:-$PY -m pip}' in (ROOT / ".ci" / "lib.sh").read_text()


def bash_lib(snippet: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"set -euo pipefail; source .ci/lib.sh; {snippet}"], cwd=ROOT, text=True,
                          capture_output=True, env={**os.environ, **env}, timeout=120)


def test_an_old_python_is_refused_with_what_to_do(tmp_path):
    old = tmp_path / "python3"
    old.write_text("#!/bin/sh\nif [ \"$1\" = -c ]; then case \"$2\" in *version_info*'<'*) exit 1;; "
                   "*) echo 3.9.2;; esac; fi\n")
    old.chmod(0o755)
    done = bash_lib("base_python", tmp_path, EKSBENCH_PYTHON=str(old))
    assert done.returncode == 1
    assert "needs Python 3.11 or newer" in done.stderr and "3.9.2" in done.stderr and "EKSBENCH_PYTHON" in done.stderr


# --- a disk without room: stopped before anything is made ----------------------------------------------------------


@pytest.fixture
def full_disk(tmp_path) -> Path:
    """A folder holding a `df` that reports 1 MB free on every file system, to put first on PATH."""
    bin_dir = tmp_path / "full-disk-bin"
    bin_dir.mkdir()
    df = bin_dir / "df"
    df.write_text('#!/bin/sh\necho "Filesystem 1048576-blocks Used Available Capacity Mounted on"\n'
                  'echo "/dev/full 8000 7999 1 100% /"\n')
    df.chmod(0o755)
    return bin_dir


# If a check failed to stop it, pip must fail at once rather than fetch torch: no index, no local wheels.
NO_PIP_SOURCES = {"PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": ""}


def test_need_space_names_the_folder_the_room_and_what_is_free(tmp_path, full_disk):
    where = tmp_path / "not" / "made" / "venv"
    done = bash_lib(f"need_space {where} 7500 'installing the packages'", tmp_path,
                    PATH=f"{full_disk}:{os.environ['PATH']}")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    for part in ("installing the packages needs about 7500 MB free", str(where), "mounted at /", "1 MB free",
                 "EKSBENCH_VENV"):
        assert part in done.stderr, done.stderr
    assert bash_lib(f"need_space {where} 1 'x'", tmp_path).returncode == 0  # the real df: 1 MB is free here


def test_setup_stops_before_making_the_venv_when_the_disk_has_no_room(tmp_path, full_disk):
    if not shutil.which("etcd"):
        pytest.skip("no etcd on PATH: .ci/setup would install it with apt first (.ci/setup-tests installs it)")
    venv = tmp_path / "venv"
    done = subprocess.run(["bash", ".ci/setup"], cwd=ROOT, text=True, capture_output=True, timeout=120,
                          env={**os.environ, **NO_PIP_SOURCES, "EKSBENCH_VENV": str(venv),
                               "PATH": f"{full_disk}:{os.environ['PATH']}"})
    assert done.returncode == 1, done
    assert "installing eksbench and its packages" in done.stderr and "needs about 7500 MB free" in done.stderr
    assert not venv.exists() and "pip install" not in done.stdout + done.stderr


# --- .ci/setup-framework: two set-ups at once --------------------------------------------------------------------


@pytest.fixture
def toy_project(tmp_path) -> Path:
    """A copy of the project's scripts and the modules that name a framework venv, with a framework "toy": no
    packages, and a build hook that counts its builds and takes 3 s."""
    project = tmp_path / "project"
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in [".ci", "bench", "core", "program"]:
        shutil.copytree(ROOT / folder, project / folder, ignore=ignore)
    (project / "requirements-toy.txt").write_text("# no packages\n")
    (project / ".ci" / "frameworks" / "toy.sh").write_text(
        'framework_build() { echo "$$ $1" >> "$TOY_BUILDS"; sleep 3; }\n')
    return project


def setup_framework(project: Path, tmp_path: Path, path_first: Path | None = None) -> subprocess.Popen:
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    env = {**os.environ, **NO_PIP_SOURCES, "EKSBENCH_VENVS": str(tmp_path / "venvs"),
           "TOY_BUILDS": str(tmp_path / "builds"), "EKSBENCH_VENV": str(tmp_path / "none"),
           "PATH": f"{path_first}:{path}" if path_first else path}
    return subprocess.Popen(["bash", ".ci/setup-framework", "toy"], cwd=project, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(procs: list[subprocess.Popen]) -> list[tuple[int, str, str]]:
    """Each one's exit code, stdout and stderr."""
    outputs = [p.communicate(timeout=180) for p in procs]
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs)]


@pytest.mark.local_run
def test_two_setups_at_once_build_one_venv_and_both_use_it(toy_project, tmp_path):
    done = finish([setup_framework(toy_project, tmp_path) for _ in range(2)])
    assert [code for code, _, _ in done] == [0, 0], done
    paths = {out.strip() for _, out, _ in done}
    assert len(paths) == 1, done
    venv = Path(paths.pop())
    assert (venv / "COMPLETE").is_file() and (venv / "bin" / "python").exists()
    builds = (tmp_path / "builds").read_text().splitlines()
    assert len(builds) == 1, f"two set-ups both built the venv: {builds}"
    assert any("waiting" in err for _, _, err in done), done


@pytest.mark.local_run
def test_a_complete_venv_is_kept_and_a_stopped_build_is_redone(toy_project, tmp_path):
    (first,) = finish([setup_framework(toy_project, tmp_path)])
    venv = Path(first[1].strip())
    (venv / "kept").write_text("")
    finish([setup_framework(toy_project, tmp_path)])
    assert (venv / "kept").exists() and len((tmp_path / "builds").read_text().splitlines()) == 1
    (venv / "COMPLETE").unlink()  # what a stopped build leaves
    finish([setup_framework(toy_project, tmp_path)])
    assert not (venv / "kept").exists() and (venv / "COMPLETE").is_file()
    assert len((tmp_path / "builds").read_text().splitlines()) == 2


@pytest.mark.local_run
def test_a_framework_build_stops_first_when_the_disk_has_no_room(toy_project, tmp_path, full_disk):
    proc = setup_framework(toy_project, tmp_path, path_first=full_disk)
    ((code, out, err),) = finish([proc])
    assert code == 1 and out == "", (code, out, err)
    assert "building the toy venv (requirements-toy.txt) needs about 500 MB free" in err and "EKSBENCH_VENVS" in err
    assert not (tmp_path / "builds").exists() and not list((tmp_path / "venvs").glob("toy-*/bin"))
