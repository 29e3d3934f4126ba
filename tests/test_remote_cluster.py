"""A remote root on ``local-cluster[2,1,1024]``: two executor JVMs, each with its own local
directories and Python workers from a packed environment, nothing shared with the driver but
the S3 server (moto's, on loopback). Ingest, read back, verify against the source; the S3
settings are the session's ``spark.hadoop.fs.s3a.*`` conf only.

The streaming round trip runs in one cluster session: a file-source query (a micro-batch per
file, two tasks each) into the streaming sink on an ``s3a://`` root and on a ``file://`` root,
each read back by the batch reader and by the streaming source (every row exactly once) and
verified against the source rows.

The kill test runs two cluster sessions: a job whose first task attempt to have uploaded two
files SIGKILLs its executor's JVM (the test-only kill points of ``rocketstore._remote``, set
through ``spark.executorEnv``), then a job whose driver is SIGKILLed before its manifest; the
second session reruns that job."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests import test_spark_cluster as cluster

from rocketstore import _remote

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


STREAM_JOB = """
import json, os, sys
from pyspark.sql import SparkSession, functions as F

s3_uri, file_uri, settings, src, work = (
    sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[5], sys.argv[6]
)
builder = SparkSession.builder.master("local-cluster[2,1,1024]").appName("rocketstore-stream")
for key, value in {
    "spark.archives": sys.argv[4] + "#environment",
    "spark.executor.memory": "512m",
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    **{"spark.hadoop." + k: v for k, v in settings.items()},
}.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
import rocketstore.spark
from rocketstore.spark import verify

schema = "topic string, body string, keys string"
expected = spark.read.schema(schema).json(src).select(
    "topic", F.col("body").cast("binary").alias("body"), "keys"
)
out = {"driver_pid": os.getpid()}
for name, uri in (("s3a", s3_uri), ("file", file_uri)):
    # A micro-batch per source file, two tasks each (on the two executors).
    q = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .json(src)
        .repartition(2)
        .writeStream.format("rocketstore")
        .options(**({"stores": "2"} if name == "file" else {}))
        .option("checkpointLocation", os.path.join(work, name + "-sink-ckpt"))
        .trigger(availableNow=True)
        .start(uri)
    )
    q.awaitTermination()
    assert q.exception() is None, q.exception()
    batches = [p["batchId"] for p in q.recentProgress if p["numInputRows"] > 0]
    back = spark.read.format("rocketstore").load(uri).select("body", "store")
    read = spark.readStream.format("rocketstore").load(uri).select("body")
    s = (
        read.writeStream.format("memory")
        .queryName(name + "_back")
        .option("checkpointLocation", os.path.join(work, name + "-source-ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    s.awaitTermination()
    assert s.exception() is None, s.exception()
    streamed = spark.sql("select body from " + name + "_back")
    report = verify(spark, uri, expected=expected)
    out[name] = {
        "batches": batches,
        "bodies": sorted(bytes(r.body).decode() for r in back.collect()),
        "streamed": sorted(bytes(r.body).decode() for r in streamed.collect()),
        "stores": sorted({r.store for r in back.select("store").distinct().collect()}),
        "ok": report.ok,
        "report": str(report) if not report.ok else "",
        "messages": report.messages,
        "verified_by": [s["verified_by"] for s in report.to_dict()["stores"]],
    }
print("RESULT " + json.dumps(out))
spark.stop()
"""


class _Cluster:
    """What a ``local-cluster`` job needs: a private SPARK_HOME (executor directories under
    it), the packed environment (with boto3 for the driver's conditional manifest create), a
    driver directory, and the environment variables of the driver process."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            pytest.skip("needs Java 17+")
        pytest.importorskip("moto.server")
        import pyspark

        pip_home = Path(pyspark.__file__).parent
        self.spark_home = tmp_path / "spark-home"
        self.spark_home.mkdir()
        for entry in pip_home.iterdir():
            if entry.name not in ("work", "__pycache__"):
                (self.spark_home / entry.name).symlink_to(entry)
        # The driver's commit creates the manifest with boto3 (If-None-Match): pack it too.
        monkeypatch.setattr(
            cluster,
            "PACKED_DISTRIBUTIONS",
            (
                *cluster.PACKED_DISTRIBUTIONS,
                *("boto3", "botocore", "s3transfer", "jmespath", "urllib3"),
            ),
        )
        env, self.archive = cluster.pack_environment(tmp_path)
        self.driver_dir = tmp_path / "driver"
        self.driver_dir.mkdir()
        (self.driver_dir / "environment").symlink_to(env, target_is_directory=True)
        self.environ = {
            **os.environ,
            "SPARK_HOME": str(self.spark_home),
            "SPARK_LOCAL_DIRS": str(tmp_path / "local"),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": "./environment/bin/python",
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }

    def run(self, job: str, *args: str) -> dict[str, Any]:
        """Runs ``job`` (a driver script) with ``args`` and the archive; returns its RESULT."""
        (self.driver_dir / "job.py").write_text(job)
        proc = subprocess.run(
            [sys.executable, "job.py", *args],
            cwd=self.driver_dir,
            env=self.environ,
            capture_output=True,
            text=True,
            timeout=840,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
        result: dict[str, Any] = json.loads(line[len("RESULT ") :])
        return result

    def check_runners(self, runners: list[dict[str, Any]]) -> None:
        for runner in runners:
            # Checked by an executor's Python worker (its own process and environment copy).
            assert runner["python"].endswith("environment/bin/python"), runner
            assert runner["python"].startswith(str(self.spark_home / "work")), runner

    def cleanup(self) -> None:
        self.archive.unlink(missing_ok=True)
        shutil.rmtree(self.spark_home / "work", ignore_errors=True)


def test_remote_root_on_local_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.s3_server import s3_server

    c = _Cluster(tmp_path, monkeypatch)
    try:
        with s3_server() as s3:
            bucket = s3.new_bucket()
            uri = f"s3a://{bucket}/stores"
            result = c.run(JOB, uri, json.dumps(s3.options()), str(c.archive))
            keys = s3.keys(bucket, "stores/")
        assert result["ingested"] == 20000
        # store-<n>-<token>: the commit's own token after each number.
        assert [re.sub(r"-[0-9a-f]{16}$", "", p) for p in result["stores"]] == [
            f"store-{i:05d}" for i in range(4)
        ]
        assert result["rows"] == result["distinct"] == 20000
        assert result["ok"], result["report"]
        c.check_runners(result["verified_by"])
        assert "stores/_manifests/00000000000000000001.json" in keys
        assert not [k for k in keys if "/_temporary/" in k and not k.endswith("/")]
        assert not (c.driver_dir / "s3a:").exists()
    finally:
        c.cleanup()


def test_stream_sink_round_trip_on_local_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.s3_server import s3_server

    c = _Cluster(tmp_path, monkeypatch)
    src = tmp_path / "src"
    src.mkdir()
    want: list[str] = []
    for i, tag in enumerate(("a", "b", "c")):
        rows = [
            {"topic": f"Orders{n % 2}", "body": f"{tag}-{n}", "keys": f"k{tag}{n}"}
            for n in range(1500)
        ]
        want += [r["body"] for r in rows]
        tmp = src / f".{tag}.tmp"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(tmp, (1_700_000_000 + i, 1_700_000_000 + i))  # the oldest file first
        tmp.rename(src / f"{tag}.json")
    file_root = tmp_path / "file-root"
    try:
        with s3_server() as s3:
            bucket = s3.new_bucket()
            result = c.run(
                STREAM_JOB,
                f"s3a://{bucket}/sink",
                f"file://{file_root}",
                json.dumps(s3.options()),
                str(c.archive),
                str(src),
                str(tmp_path / "work"),
            )
            keys = s3.keys(bucket, "sink/")
            manifest = json.loads(s3.get(bucket, "sink/_SUCCESS"))
        for name in ("s3a", "file"):
            got = result[name]
            assert got["batches"] == [0, 1, 2], got["batches"]
            assert got["bodies"] == sorted(want), f"{name}: batch read, every row once"
            assert got["streamed"] == sorted(want), f"{name}: streaming source, every row once"
            assert got["ok"], got["report"]
            c.check_runners(got["verified_by"])
        # s3a: a manifest per micro-batch, each listing the batch's stores (one per task).
        assert manifest["commit"] == 3
        (query,) = manifest["streams"]
        assert manifest["streams"] == {query: 2}
        assert sorted({e["batch_id"] for e in manifest["stores"]}) == [0, 1, 2]
        assert len(manifest["stores"]) == 6
        assert result["s3a"]["messages"] == len(want)
        assert result["s3a"]["stores"] == sorted(
            f"s3a://{bucket}/sink/{e['path']}" for e in manifest["stores"]
        )
        assert not [k for k in keys if "/_temporary/" in k and not k.endswith("/")]
        assert not (c.driver_dir / "s3a:").exists()
        # file:// is a local root: the sink's long-lived stores (``stores=2``), which also hold
        # its progress records.
        assert result["file"]["stores"] == [
            str(file_root / "store-00000"),
            str(file_root / "store-00001"),
        ]
    finally:
        c.cleanup()


KILL_JOB = """
import json, os, sys
from pyspark.sql import SparkSession, functions as F

uri, settings, phase, markers = sys.argv[1], json.loads(sys.argv[2]), sys.argv[4], sys.argv[5]
conf = {
    "spark.archives": sys.argv[3] + "#environment",
    "spark.executor.memory": "512m",
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    "spark.task.maxFailures": "4",
    **{"spark.hadoop." + k: v for k, v in settings.items()},
}
if phase == "kill":
    # Test-only kill points (rocketstore._remote.kill_point_for_tests): the first task attempt
    # to have uploaded two files of its store kills its executor's JVM.
    conf["spark.executorEnv.ROCKETSTORE_TEST_KILL_EXECUTOR_AFTER_UPLOADS"] = "2"
    conf["spark.executorEnv.ROCKETSTORE_TEST_KILL_MARKERS"] = markers
builder = SparkSession.builder.master("local-cluster[2,1,1024]").appName("rocketstore-kill")
for key, value in conf.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
import rocketstore.spark
from rocketstore.spark import verify


def rows(tag, n, parts):
    return spark.range(0, n, 1, parts).select(
        F.concat(F.lit("Topic"), (F.col("id") % 5).cast("string")).alias("topic"),
        F.concat(F.lit(tag + "-"), F.col("id").cast("string")).cast("binary").alias("body"),
        F.concat(F.lit("k"), F.col("id").cast("string")).alias("keys"),
    )


def bodies():
    back = spark.read.format("rocketstore").load(uri).select("body")
    return sorted(bytes(r.body).decode() for r in back.collect())


first, second = rows("first", 8000, 4), rows("second", 4000, 2)
out = {}
if phase == "kill":
    # An executor killed mid-upload: Spark relaunches it and retries the task.
    first.write.format("rocketstore").mode("append").save(uri)
    report = verify(spark, uri, expected=first)
    out["first"] = {"bodies": bodies(), "ok": report.ok, "report": str(report)}
    print("RESULT " + json.dumps(out), flush=True)
    # The driver killed before its commit creates the manifest (the test sets
    # ROCKETSTORE_TEST_KILL_DRIVER_BEFORE_MANIFEST=2 for this phase: the second commit).
    second.write.format("rocketstore").mode("append").save(uri)
    print("the driver was to be killed before its commit", flush=True)
else:
    # The rerun: what readers see first, then the same job again.
    out["before"] = bodies()
    second.write.format("rocketstore").mode("append").save(uri)
    report = verify(spark, uri, expected=first.unionByName(second))
    out["after"] = {"bodies": bodies(), "ok": report.ok, "report": str(report)}
    out["messages"] = report.messages
    print("RESULT " + json.dumps(out), flush=True)
spark.stop()
"""


def test_executor_and_driver_killed_then_rerun_on_local_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two cluster sessions. The first writes a job in which the first task attempt to have
    uploaded two files of its store SIGKILLs its executor's JVM (Spark relaunches the executor
    and retries the task), reads it back and verifies it; then a second job whose driver
    (its Python process and JVM) is SIGKILLed after copying its stores to their published
    names, before the manifest. The second session reruns that job: readers never see the
    killed job's stores, every row is there once after the rerun, and verify agrees."""
    import signal

    from tests.s3_server import s3_server

    c = _Cluster(tmp_path, monkeypatch)
    markers = tmp_path / "markers"
    markers.mkdir()
    want_first = sorted(f"first-{i}" for i in range(8000))
    want_second = sorted(f"second-{i}" for i in range(4000))
    try:
        with s3_server() as s3:
            bucket = s3.new_bucket()
            uri = f"s3a://{bucket}/stores"
            args = (uri, json.dumps(s3.options()), str(c.archive))
            (c.driver_dir / "job.py").write_text(KILL_JOB)
            killed = subprocess.Popen(
                [sys.executable, "job.py", *args, "kill", str(markers)],
                cwd=c.driver_dir,
                env={
                    **c.environ,
                    _remote.KILL_MARKERS: str(markers),
                    _remote.KILL_BEFORE_MANIFEST: "2",
                },
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            try:
                stdout, stderr = killed.communicate(timeout=840)
            finally:
                # What the killed driver's JVM had started (its executors), if still running.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(killed.pid, signal.SIGKILL)
            assert killed.returncode == -signal.SIGKILL, stderr[-4000:]
            # The executor's JVM itself died (not only the task's Python worker).
            assert "ExecutorLostFailure" in stderr, stderr[-4000:]
            line = next(x for x in stdout.splitlines() if x.startswith("RESULT "))
            first = json.loads(line[len("RESULT ") :])["first"]
            executor = json.loads((markers / _remote.KILL_AFTER_UPLOADS).read_text())
            driver = json.loads((markers / _remote.KILL_BEFORE_MANIFEST).read_text())
            keys_killed = s3.keys(bucket, "stores/")
            manifest_1 = json.loads(s3.get(bucket, "stores/_manifests/00000000000000000001.json"))

            rerun = c.run(KILL_JOB, *args, "rerun", str(markers))
            keys = s3.keys(bucket, "stores/")
            manifest = json.loads(s3.get(bucket, "stores/_SUCCESS"))

        # 1. The executor killed mid-upload: the retried job committed every row once.
        assert len(executor["uploaded"]) >= 2, executor
        m = re.fullmatch(r"_temporary/([^/]+)/part-(\d{5})-(\d+)", executor["rel"])
        assert m, executor
        job_1, partition, attempt = m.group(1), int(m.group(2)), int(m.group(3))
        assert first["bodies"] == want_first, "every row of the first job once"
        assert first["ok"], first["report"]
        assert sorted(e["partition"] for e in manifest_1["stores"]) == [0, 1, 2, 3]
        assert {e["job_id"] for e in manifest_1["stores"]} == {job_1}
        assert (partition, attempt) not in [
            (e["partition"], e["task_attempt"]) for e in manifest_1["stores"]
        ], "the killed attempt's partial upload is not published"
        assert not [k for k in keys_killed if k.startswith(f"stores/_temporary/{job_1}/")]

        # 2. The driver killed before the commit: its copies exist, no manifest lists them.
        job_2 = driver["job_id"]
        copies = {e["path"] for e in driver["stores"]}
        assert len(copies) == 2, driver
        assert {k.split("/")[1] for k in keys_killed if k.split("/")[1] in copies} == copies
        assert "stores/_manifests/00000000000000000002.json" not in keys_killed
        assert rerun["before"] == want_first, "nothing the killed job copied is read"
        assert rerun["after"]["bodies"] == sorted(want_first + want_second), "every row once"
        assert rerun["after"]["ok"], rerun["after"]["report"]
        assert rerun["messages"] == 12000
        assert manifest["commit"] == 2
        assert not copies & {e["path"] for e in manifest["stores"]}
        assert job_2 not in {e["job_id"] for e in manifest["stores"]}
        # Only the killed job's uploads are left under _temporary (unlisted; never read).
        assert not [
            k
            for k in keys
            if "/_temporary/" in k
            and not k.endswith("/")
            and not k.startswith(f"stores/_temporary/{job_2}/")
        ]
    finally:
        c.cleanup()
