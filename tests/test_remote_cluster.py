"""A remote root on ``local-cluster[2,1,1024]``: two executor JVMs, each with its own local
directories and Python workers from a packed environment, nothing shared with the driver but
the S3 server (moto's, on loopback). Ingest, read back, verify against the source; the S3
settings are the session's ``spark.hadoop.fs.s3a.*`` conf only."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests import test_spark_cluster as cluster

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(900)]

JOB = """
import json, os, sys
from pyspark.sql import SparkSession, functions as F

uri, settings = sys.argv[1], json.loads(sys.argv[2])
builder = SparkSession.builder.master("local-cluster[2,1,1024]").appName("rocketstore-remote")
for key, value in {
    "spark.archives": sys.argv[3] + "#environment",
    "spark.executor.memory": "512m",
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    **{"spark.hadoop." + k: v for k, v in settings.items()},
}.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
import rocketstore.spark
from rocketstore.spark import ingest, verify

df = spark.range(0, 20000, 1, 4).select(
    F.concat(F.lit("Topic"), (F.col("id") % 5).cast("string")).alias("topic"),
    F.concat(F.lit("body-"), F.col("id").cast("string")).cast("binary").alias("body"),
    F.concat(F.lit("k"), F.col("id").cast("string")).alias("keys"),
)
summary = ingest(df, uri, stores=4)
back = spark.read.format("rocketstore").load(uri)
report = verify(spark, uri, expected=df)
print("RESULT " + json.dumps({
    "ingested": summary["messages"],
    "stores": summary["stores"],
    "rows": back.count(),
    "distinct": back.select("body").distinct().count(),
    "ok": report.ok,
    "report": str(report) if not report.ok else "",
    "verified_by": [s["verified_by"] for s in report.to_dict()["stores"]],
    "driver_pid": os.getpid(),
}))
spark.stop()
"""


def test_remote_root_on_local_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("needs Java 17+")
    pytest.importorskip("moto.server")
    import pyspark
    from tests.s3_server import s3_server

    pip_home = Path(pyspark.__file__).parent
    spark_home = tmp_path / "spark-home"
    spark_home.mkdir()
    for entry in pip_home.iterdir():
        if entry.name not in ("work", "__pycache__"):
            (spark_home / entry.name).symlink_to(entry)
    # The driver's commit creates the manifest with boto3 (If-None-Match): pack it too.
    monkeypatch.setattr(
        cluster,
        "PACKED_DISTRIBUTIONS",
        (*cluster.PACKED_DISTRIBUTIONS, "boto3", "botocore", "s3transfer", "jmespath", "urllib3"),
    )
    env, archive = cluster.pack_environment(tmp_path)
    driver_dir = tmp_path / "driver"
    driver_dir.mkdir()
    (driver_dir / "environment").symlink_to(env, target_is_directory=True)
    (driver_dir / "job.py").write_text(JOB)
    environ = {
        **os.environ,
        "SPARK_HOME": str(spark_home),
        "SPARK_LOCAL_DIRS": str(tmp_path / "local"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": "./environment/bin/python",
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    try:
        with s3_server() as s3:
            bucket = s3.new_bucket()
            proc = subprocess.run(
                [
                    sys.executable,
                    "job.py",
                    f"s3a://{bucket}/stores",
                    json.dumps(s3.options()),
                    str(archive),
                ],
                cwd=driver_dir,
                env=environ,
                capture_output=True,
                text=True,
                timeout=840,
                check=False,
            )
            assert proc.returncode == 0, proc.stderr[-4000:]
            line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
            result = json.loads(line[len("RESULT ") :])
            keys = s3.keys(bucket, "stores/")
        assert result["ingested"] == 20000
        # store-<n>-<token>: the commit's own token after each number.
        assert [re.sub(r"-[0-9a-f]{16}$", "", p) for p in result["stores"]] == [
            f"store-{i:05d}" for i in range(4)
        ]
        assert result["rows"] == result["distinct"] == 20000
        assert result["ok"], result["report"]
        for runner in result["verified_by"]:
            # Checked by an executor's Python worker (its own process and environment copy).
            assert runner["python"].endswith("environment/bin/python"), runner
            assert runner["python"].startswith(str(spark_home / "work")), runner
        assert "stores/_manifests/00000000000000000001.json" in keys
        assert not [k for k in keys if "/_temporary/" in k and not k.endswith("/")]
        assert not (driver_dir / "s3a:").exists()
    finally:
        archive.unlink(missing_ok=True)
        shutil.rmtree(spark_home / "work", ignore_errors=True)
