"""A throwaway etcd on loopback for torchrun's ``etcd-v2`` rendezvous (local runs and tests).

torch's etcd rendezvous backends speak the etcd v2 API, which etcd 3.4/3.5 serve only with
``--enable-v2=true`` and 3.6 removed (etcd v3.6 release notes). A system etcd may already hold
2379/2380, so both ports are picked free, the data dir is a temp dir, and the process is
killed (and the dir removed) on exit, or by the kernel when the process that started it dies
(``bench.proc.die_with_parent``), so even ``kill -9`` of ``bench`` leaves no etcd behind.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

MEMBER = "eksbench-local"  # the member name our etcd is started with (and checked for)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def etcd_command(binary: str, *, data_dir: str, client_port: int, peer_port: int) -> list[str]:
    client = f"http://127.0.0.1:{client_port}"
    peer = f"http://127.0.0.1:{peer_port}"
    return [binary, "--enable-v2=true", "--name", MEMBER, "--data-dir", data_dir,
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"{MEMBER}={peer}", "--log-level", "error"]


class LocalEtcd:
    """``with LocalEtcd() as etcd: etcd.endpoint`` -> "127.0.0.1:<port>"."""

    def __init__(self, binary: str | None = None, startup_timeout: float = 20.0, tmp_root: str | None = None,
                 keep_log: str | Path | None = None):
        self.binary = binary or shutil.which("etcd")
        if not self.binary:
            raise FileNotFoundError("no etcd binary on PATH")
        self.startup_timeout = startup_timeout
        self.tmp_root = tmp_root  # where the temp data dir goes (default: the system temp dir)
        self.keep_log = Path(keep_log) if keep_log else None  # where a failed start's log is copied (it outlives tmp)
        self.proc: subprocess.Popen | None = None
        self.endpoint = ""

    def start(self) -> "LocalEtcd":
        from bench.proc import die_with_parent

        if self.tmp_root:
            Path(self.tmp_root).mkdir(parents=True, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix="eksbench-etcd-", dir=self.tmp_root)
        for _ in range(3):  # a port picked free can be taken before etcd binds it: retry
            client, peer = free_port(), free_port()
            log = open(Path(self.tmp) / "etcd.log", "wb")
            self.proc = subprocess.Popen(etcd_command(self.binary, data_dir=str(Path(self.tmp) / "data"),
                                                      client_port=client, peer_port=peer),
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=die_with_parent(signal.SIGKILL))  # never outlives bench
            log.close()
            if self._wait_healthy(client, peer):
                self.endpoint = f"127.0.0.1:{client}"
                return self
            self.stop(remove=False)
        raise RuntimeError(self._failure())

    def _failure(self) -> str:
        """One line: the cause as etcd's log gives it, and where that log is kept (the temp dir goes at teardown)."""
        log = Path(self.tmp) / "etcd.log"
        try:
            lines = [x for x in log.read_bytes()[-4096:].decode("utf-8", "replace").splitlines() if x.strip()]
        except OSError:
            lines = []
        kept = log
        if self.keep_log is not None:
            try:
                self.keep_log.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(log, self.keep_log)
                kept = self.keep_log
            except OSError:
                pass
        cause = lines[-1][:300] if lines else "it wrote nothing"
        return f"etcd did not become healthy within {self.startup_timeout:.0f}s (3 tries): {cause}; log: {kept}"

    def _wait_healthy(self, port: int, peer: int) -> bool:
        """True once the etcd we started answers on ``port``: its v2 API lists one member, named as ours, whose peer
        URL is the port we gave it. A listener that took the port first (ours then fails to bind) would answer
        too; only our own etcd knows that peer port."""
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/members", timeout=1) as r:
                    members = json.loads(r.read(65536)).get("members") or []
                if any(m.get("name") == MEMBER and f"http://127.0.0.1:{peer}" in (m.get("peerURLs") or [])
                       for m in members if isinstance(m, dict)):
                    return self.proc.poll() is None
            except (OSError, ValueError, AttributeError):
                pass
            time.sleep(0.1)
        return False

    def stop(self, remove: bool = True) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if remove:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> "LocalEtcd":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
