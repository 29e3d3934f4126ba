"""A Google Cloud Storage JSON-API emulator on loopback for tests: ``gcp-storage-emulator``
(PyPI, in-memory) in a child process on a free port, and the settings a ``gs://`` root on it
needs. The emulator is taken from this interpreter (``python -m gcp_storage_emulator``), else
from the executable ``$ROCKETSTORE_GCS_EMULATOR`` or ``gcp-storage-emulator`` on PATH."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass


def emulator_command() -> list[str] | None:
    """The command that starts the emulator, or None if it is not installed."""
    if importlib.util.find_spec("gcp_storage_emulator") is not None:
        return [sys.executable, "-m", "gcp_storage_emulator"]
    exe = os.environ.get("ROCKETSTORE_GCS_EMULATOR") or shutil.which("gcp-storage-emulator")
    return [exe] if exe else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class GcsServer:
    endpoint: str

    def options(self) -> dict[str, str]:
        """The rocketstore options (the Hadoop GCS connector's names) for this server."""
        return {
            "fs.gs.storage.root.url": self.endpoint,
            "fs.gs.project.id": "rocketstore-test",
            "fs.gs.auth.type": "UNAUTHENTICATED",
        }

    def new_bucket(self) -> str:
        name = f"rs-{uuid.uuid4().hex[:12]}"
        req = urllib.request.Request(
            f"{self.endpoint}/storage/v1/b?project=rocketstore-test",
            data=json.dumps({"name": name}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()
        return name


@contextlib.contextmanager
def gcs_server() -> Iterator[GcsServer]:
    """Starts the emulator (in memory) on a free loopback port; stops it on exit."""
    cmd = emulator_command()
    if cmd is None:
        raise RuntimeError("gcp-storage-emulator is not installed")
    port = _free_port()
    proc = subprocess.Popen(
        [*cmd, "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"gcp-storage-emulator exited with {proc.returncode}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("gcp-storage-emulator did not start within 60 s")
            time.sleep(0.1)
        yield GcsServer(f"http://127.0.0.1:{port}")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
