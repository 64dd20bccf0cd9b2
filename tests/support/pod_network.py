"""The pods' network for tests/support/pod_sandbox.py: one network namespace with its own loopback.

Every pod of a sandboxed cluster joins this namespace (``nsenter --net``), so the ports the pods'
commands hard-code (etcd's 2379, c10d's 29400, torchrun's agents) are free whatever else this
machine runs. The Services outside the pods (etcd, moto's S3) listen on host loopback; a
forwarder accepts on the namespace's loopback at the Service's port and copies bytes to the host
port. A socket stays in the namespace it was created in, and ``setns(2)`` changes only the
calling thread's namespace, so each listener is made on a short-lived thread that entered the
namespace (setns(2): "CLONE_NEWNET ... the calling thread"), and the forwarding threads stay
in this process's own.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import threading

CLONE_NEWNET = 0x40000000  # linux/sched.h


class PodNetwork:
    """``with PodNetwork() as net: net.forward(2379, host_port)``; ``net.path`` for ``nsenter --net=``."""

    def __init__(self):
        self._holder: subprocess.Popen | None = None
        self._listeners: list[socket.socket] = []
        self.path = ""

    def __enter__(self) -> "PodNetwork":
        r, w = os.pipe()
        # bwrap --unshare-net brings the new namespace's loopback up; `sleep` holds the namespace.
        self._holder = subprocess.Popen(
            ["bwrap", "--dev-bind", "/", "/", "--unshare-net", "--die-with-parent", "--info-fd", str(w),
             "sleep", "infinity"], pass_fds=(w,), stdin=subprocess.DEVNULL)
        os.close(w)
        with os.fdopen(r) as f:
            info = json.loads(f.read())
        self.path = f"/proc/{info['child-pid']}/ns/net"
        return self

    def __exit__(self, *exc) -> None:
        for s in self._listeners:
            s.close()
        if self._holder:
            self._holder.kill()
            self._holder.wait()

    def _in_namespace(self, make):
        out: list = []

        def run():
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(self.path, os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    out.append(OSError(ctypes.get_errno(), "setns"))
                    return
                out.append(make())
            except OSError as e:
                out.append(e)
            finally:
                os.close(fd)
        t = threading.Thread(target=run)
        t.start()
        t.join()
        if isinstance(out[0], Exception):
            raise out[0]
        return out[0]

    def forward(self, port: int, host_port: int) -> None:
        """Connections to 127.0.0.1:``port`` inside the namespace reach 127.0.0.1:``host_port`` here."""
        def listen():
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
            s.listen(64)
            return s
        listener = self._in_namespace(listen)
        self._listeners.append(listener)
        threading.Thread(target=self._accept, args=(listener, host_port), daemon=True).start()

    @staticmethod
    def _accept(listener: socket.socket, host_port: int) -> None:
        while True:
            try:
                inside, _ = listener.accept()
            except OSError:
                return
            try:
                outside = socket.create_connection(("127.0.0.1", host_port))
            except OSError:
                inside.close()
                continue
            for a, b in ((inside, outside), (outside, inside)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()


def pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until either side ends, then shut both down."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
