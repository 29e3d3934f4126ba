"""A real S3 protocol server on loopback for tests: moto's server (``moto[server]``) in a child
process on a free port, and helpers to make buckets and read objects with boto3."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

#: Credentials moto accepts (any non-empty pair).
ACCESS_KEY = "rocketstore-test"
SECRET_KEY = "rocketstore-test-secret"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class S3Server:
    """A running server: its endpoint and the settings a root on it needs."""

    endpoint: str
    proc: subprocess.Popen[bytes]

    def options(self) -> dict[str, str]:
        """The Spark / rocketstore options (Hadoop s3a names) for this server."""
        return {
            "fs.s3a.endpoint": self.endpoint,
            "fs.s3a.access.key": ACCESS_KEY,
            "fs.s3a.secret.key": SECRET_KEY,
            "fs.s3a.path.style.access": "true",
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
        )

    def new_bucket(self) -> str:
        name = f"rs-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        out: list[str] = []
        pages = (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        )
        for page in pages:
            out.extend(o["Key"] for o in page.get("Contents", []))
        return sorted(out)

    def get(self, bucket: str, key: str) -> bytes:
        return bytes(self.client().get_object(Bucket=bucket, Key=key)["Body"].read())

    def sha256(self, bucket: str, key: str) -> str:
        return hashlib.sha256(self.get(bucket, key)).hexdigest()


@contextlib.contextmanager
def s3_server() -> Iterator[S3Server]:
    """Starts ``python -m moto.server`` on a free loopback port; stops it on exit."""
    port = _free_port()
    env = {**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"moto.server exited with {proc.returncode}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("moto.server did not start within 60 s")
            time.sleep(0.1)
        yield S3Server(endpoint, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
