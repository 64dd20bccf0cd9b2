"""infra/file_access: the permission model, by hand and against the kernel (setpriv)."""

import os
import shutil
import subprocess
import tempfile

import pytest

from infra.access.file_access import (
    RUNTIME_DEFAULT_CAPS,
    Owner,
    Process,
    container_process,
    effective_caps,
    may_write,
)
from infra.access.pod_security import (
    efa_container_security_context,
    restricted_container_security_context,
)

EKSBENCH = 10001


def proc(uid, gids=(), caps=()):
    return Process(uid=uid, gids=frozenset(gids or {uid}), caps=frozenset(caps))


def test_root_with_only_ipc_lock_is_an_other_on_a_folder_of_another_user():
    # The p5-fsx case of issue 16: EFA pods run as root with IPC_LOCK only; the folder is 10001's, 0755.
    assert not may_write(Owner(EKSBENCH, EKSBENCH, 0o755), proc(0, {0}, {"IPC_LOCK"}))
    assert not may_write(Owner(EKSBENCH, 0, 0o755), proc(0, {0}, {"CAP_IPC_LOCK"}))
    assert may_write(Owner(0, 0, 0o755), proc(0, {0}, {"IPC_LOCK"}))  # its own folder


def test_only_dac_override_bypasses_the_mode():
    folder = Owner(EKSBENCH, EKSBENCH, 0o755)
    assert may_write(folder, proc(0, {0}, {"DAC_OVERRIDE"}))
    assert not may_write(folder, proc(0, {0}, {"FOWNER", "CHOWN"}))  # owner-only checks, not this one
    assert may_write(folder, proc(0, {0}, RUNTIME_DEFAULT_CAPS))


@pytest.mark.parametrize("owner, process, allowed", [
    (Owner(EKSBENCH, EKSBENCH, 0o755), proc(EKSBENCH), True),           # owner
    (Owner(EKSBENCH, EKSBENCH, 0o555), proc(EKSBENCH), False),          # owner without w
    (Owner(EKSBENCH, EKSBENCH, 0o655), proc(EKSBENCH), False),          # owner without x
    (Owner(0, EKSBENCH, 0o775), proc(EKSBENCH), True),                  # group
    (Owner(0, EKSBENCH, 0o755), proc(EKSBENCH), False),                 # group without w
    (Owner(0, 2000, 0o775), proc(EKSBENCH, {EKSBENCH, 2000}), True),    # supplementary group
    (Owner(0, 0, 0o777), proc(EKSBENCH), True),                         # others (an emptyDir)
    (Owner(0, 0, 0o755), proc(EKSBENCH), False),                        # a root-owned FSx root
    (Owner(EKSBENCH, EKSBENCH, 0o077), proc(EKSBENCH), False),          # owner bits win, even when others' allow
])
def test_owner_then_group_then_others(owner, process, allowed):
    assert may_write(owner, process) is allowed


def test_container_identity_from_the_manifest():
    efa = container_process({}, {"securityContext": efa_container_security_context()})
    assert efa == Process(uid=0, gids=frozenset({0}), caps=frozenset({"IPC_LOCK"}))
    pod = {"securityContext": {"runAsUser": EKSBENCH, "runAsGroup": EKSBENCH, "fsGroup": 3000,
                               "supplementalGroups": [4000]}}
    plain = container_process(pod, {"securityContext": restricted_container_security_context()})
    assert plain == Process(uid=EKSBENCH, gids=frozenset({EKSBENCH, 3000, 4000}), caps=frozenset())
    # An added capability does nothing for a non-root UID.
    assert effective_caps(EKSBENCH, {"capabilities": {"add": ["DAC_OVERRIDE"]}}) == frozenset()
    # Root without a securityContext keeps the runtime's default set; the image's user applies when unset.
    assert container_process({}, {}) == Process(uid=0, gids=frozenset({0}), caps=RUNTIME_DEFAULT_CAPS)
    assert container_process({}, {}, image_uid=65532).uid == 65532
    assert "DAC_OVERRIDE" in effective_caps(0, {"privileged": True})


# --- the model against the kernel ------------------------------------------------------------------

CASES = [
    (Owner(EKSBENCH, EKSBENCH, 0o755), proc(0, {0}, {"IPC_LOCK"})),
    (Owner(EKSBENCH, EKSBENCH, 0o755), proc(0, {0}, {"FOWNER", "CHOWN"})),
    (Owner(EKSBENCH, EKSBENCH, 0o755), proc(0, {0}, {"DAC_OVERRIDE"})),
    (Owner(0, 0, 0o755), proc(0, {0}, {"IPC_LOCK"})),
    (Owner(0, 0, 0o755), proc(EKSBENCH)),
    (Owner(EKSBENCH, EKSBENCH, 0o755), proc(EKSBENCH)),
    (Owner(0, EKSBENCH, 0o775), proc(EKSBENCH)),
    (Owner(0, 3000, 0o775), proc(EKSBENCH, {EKSBENCH, 3000})),
    (Owner(0, 0, 0o777), proc(EKSBENCH)),
    (Owner(EKSBENCH, EKSBENCH, 0o555), proc(EKSBENCH)),
    (Owner(EKSBENCH, EKSBENCH, 0o077), proc(EKSBENCH)),
]


@pytest.mark.skipif(not shutil.which("setpriv") or os.geteuid() != 0,
                    reason="needs util-linux setpriv and root to switch UIDs and capability sets")
def test_the_model_agrees_with_the_kernel():
    """Each case for real: a folder with that owner and mode, then ``mkdir`` in it as that process.

    ``setpriv`` sets the UID, GIDs and (for root) the bounding set, which is what root's
    capabilities become at execve (capabilities(7)); the container runtime does the same."""
    base = tempfile.mkdtemp(dir="/tmp")
    try:
        os.chmod(base, 0o755)  # every UID may pass through
        for i, (owner, process) in enumerate(CASES):
            folder = os.path.join(base, str(i))
            os.mkdir(folder)
            os.chown(folder, owner.uid, owner.gid)
            os.chmod(folder, owner.mode)
            gid = min(process.gids) if process.uid == 0 else process.uid
            caps = ",".join(["-all", *(f"+{c.lower()}" for c in sorted(process.caps))])
            argv = ["setpriv", f"--reuid={process.uid}", f"--regid={gid}",
                    f"--groups={','.join(str(g) for g in sorted(process.gids))}", "--inh-caps=-all",
                    f"--bounding-set={caps}", "--", "mkdir", os.path.join(folder, "x")]
            real = subprocess.run(argv, capture_output=True, text=True)
            assert (real.returncode == 0) is may_write(owner, process), (owner, process, real.stderr)
    finally:
        shutil.rmtree(base)
