"""Store roots given as URIs: ``file://`` everywhere a path goes, remote roots on a real S3
protocol server (moto's, on loopback), and every other scheme refused before anything runs.

The remote tests write with Spark (``local[2]``), read back, verify, and check the commit
protocol: the manifest is the commit point, a task killed mid-upload and a driver killed
before its commit (SIGKILL of a child process) publish nothing, and a rerun then gives every
row once. The downloaded stores are compared byte for byte (SHA-256) with the objects the
tasks uploaded and with the manifest, and load in the independent Java broker-store loader
(tests/fixtures/java/BrokerStoreReader.java) with no problem and the records rocketstore reads.

The streaming sink on a remote root publishes each micro-batch with one manifest that records
the query and batch id: a streaming query into ``s3a://`` and into a ``file://`` URI is read
back whole (batch reader and streaming source), a micro-batch replayed after a restart (its
commit gone from the checkpoint) or committed twice publishes nothing twice, a retried task's
first upload is never published, and a commit that loses its manifest to a batch job retries
without deleting the winner's stores.

Commits racing from one newest manifest (batch vs batch, sink vs batch; the loser copying after
the winner's manifest exists) never write the same names: the winner's objects stay intact and
the loser removes only its own copies. A root whose manifests list plain ``store-<n>`` names
still reads and takes appends.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import skip_or_fail

from rocketstore._remote import REMOTE_SCHEMES, resolve_root
from rocketstore.exceptions import UnsupportedRootError

ROOT = Path(__file__).resolve().parent.parent
CHILD = Path(__file__).with_name("_remote_kill_child.py")


# --------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3() -> Iterator[Any]:
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
    except ImportError as e:
        skip_or_fail(f"needs moto[server] (requirements-dev.txt): {e}")
    from tests.s3_server import s3_server

    with s3_server() as server:
        yield server


@pytest.fixture
def bucket(s3: Any) -> str:
    return str(s3.new_bucket())


@pytest.fixture(scope="module")
def gcs() -> Iterator[Any]:
    from tests.gcs_server import emulator_command, gcs_server

    if emulator_command() is None:
        skip_or_fail("needs gcp-storage-emulator (requirements-dev.txt)")
    with gcs_server() as server:
        yield server


def _df(spark: Any, n: int, partitions: int = 2, tag: str = "") -> Any:
    from pyspark.sql import functions as F

    return spark.range(0, n, 1, partitions).select(
        F.concat(F.lit("Topic"), (F.col("id") % 3).cast("string")).alias("topic"),
        F.concat(F.lit(f"body{tag}-"), F.col("id").cast("string")).cast("binary").alias("body"),
        F.concat(F.lit("k"), F.col("id").cast("string")).alias("keys"),
        F.lit("TagA").alias("tags"),
    )


def _bodies(df: Any) -> list[bytes]:
    return sorted(bytes(r.body) for r in df.select("body").collect())


def _fs_items(opts: dict[str, str]) -> list[str]:
    return [x for k, v in opts.items() for x in ("-c", f"{k}={v}")]


#: The name a remote commit publishes a store under: its number, then the commit's own token.
_PUBLISHED = re.compile(r"^(store-\d{5})-[0-9a-f]{16}$")


def _number(path: str) -> str:
    """``store-<n>`` of a published remote store's path (which must carry a token)."""
    m = _PUBLISHED.match(path)
    assert m, f"{path!r} is not store-<n>-<token>"
    return m.group(1)


def _numbers(entries: list[dict[str, Any]]) -> list[str]:
    return [_number(str(e["path"])) for e in entries]


# --------------------------------------------------------------------------------------
# URIs (no Spark)
# --------------------------------------------------------------------------------------


def test_file_uris_are_local_paths(tmp_path: Path) -> None:
    assert resolve_root(f"file://{tmp_path}/a b") == (f"{tmp_path}/a b", None)
    assert resolve_root(f"file:{tmp_path}/x") == (f"{tmp_path}/x", None)
    assert resolve_root(f"file://localhost{tmp_path}/%41") == (f"{tmp_path}/A", None)
    # A colon in a relative name without // is a local path, as on any POSIX system.
    assert resolve_root("dir:x")[0] == os.path.abspath("dir:x")


@pytest.mark.parametrize(
    "root",
    ["ftp://host/stores", "s3n://bucket/x", "wasbs://c@a.blob.core.windows.net/x", "http://h/x"],
)
def test_unserved_schemes_are_refused(root: str) -> None:
    with pytest.raises(UnsupportedRootError) as info:
        resolve_root(root)
    scheme = root.split(":", 1)[0]
    assert info.value.scheme == scheme
    assert {"s3a", "file"} <= set(info.value.supported)
    assert f"{scheme}://" in str(info.value)
    assert "s3a://" in str(info.value)


@pytest.mark.parametrize(
    "root",
    ["s3://", "s3:bucket/x", "gs:///x", "abfss://account.dfs.core.windows.net/x", "file://h/x"],
)
def test_malformed_uris_are_refused(root: str) -> None:
    with pytest.raises(UnsupportedRootError):
        resolve_root(root)


@pytest.mark.parametrize("scheme", REMOTE_SCHEMES)
def test_remote_uris_parse(scheme: str) -> None:
    authority = "c@acct.dfs.core.windows.net" if scheme.startswith("abfs") else "bkt"
    uri, remote = resolve_root(f"{scheme}://{authority}/a/b/", {"fs.s3a.endpoint": "h:1"})
    assert remote is not None
    assert uri == f"{scheme}://{authority}/a/b"
    assert remote.child("store-00000") == f"{uri}/store-00000"
    assert remote.rel_of(f"{uri}/store-00000") == "store-00000"


# --------------------------------------------------------------------------------------
# Refused before any task runs (Spark)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("root", ["ftp://host/stores", "s3n://bucket/stores"])
def test_spark_refuses_unserved_scheme_before_any_task(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, root: str
) -> None:
    monkeypatch.chdir(tmp_path)
    sc = spark.sparkContext
    group = f"refuse-{root.split(':', maxsplit=1)[0]}"
    sc.setJobGroup(group, "refused roots")
    try:
        with pytest.raises(Exception, match=r"UnsupportedRootError|rocketstore serves") as info:
            _df(spark, 10).write.format("rocketstore").mode("append").save(root)
        assert "s3a://" in str(info.value)
        with pytest.raises(Exception, match="rocketstore serves"):
            spark.read.format("rocketstore").load(root).count()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert sc.statusTracker().getJobIdsForGroup(group) == []
    assert list(tmp_path.iterdir()) == [], "nothing may be written locally"


# --------------------------------------------------------------------------------------
# file:// roots
# --------------------------------------------------------------------------------------


def test_file_uri_round_trip(spark: Any, tmp_path: Path) -> None:
    from rocketstore.spark import verify

    root = tmp_path / "stores"
    df = _df(spark, 500)
    df.write.format("rocketstore").mode("append").save(f"file://{root}")
    assert sorted(p.name for p in root.iterdir() if p.name.startswith("store-")) == [
        "store-00000",
        "store-00001",
    ]
    back = spark.read.format("rocketstore").load(f"file://{root}")
    assert _bodies(back) == _bodies(df)
    assert {r.store for r in back.select("store").distinct().collect()} == {
        str(root / "store-00000"),
        str(root / "store-00001"),
    }
    report = verify(spark, f"file://{root}", expected=df)
    assert report.ok, str(report)


def test_local_commits_to_one_root_run_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two jobs committing to one local root at once: the second waits for the first's lock on
    the root, then reads the manifest it wrote, so neither loses the other's stores."""
    import threading

    from pyspark.sql.types import BinaryType, StringType, StructField, StructType
    from tests._remote_kill_child import batches

    from rocketstore.spark._writer import RocketStoreWriter

    root = tmp_path / "stores"
    schema = StructType([StructField("topic", StringType()), StructField("body", BinaryType())])
    first = RocketStoreWriter({"path": f"file://{root}"}, schema, overwrite=False)
    second = RocketStoreWriter({"path": str(root)}, schema, overwrite=False)
    _as_task(monkeypatch, 0, 1)
    one = first.write(iter(batches(0, 30)))
    _as_task(monkeypatch, 1, 2)
    two = second.write(iter(batches(1, 20)))

    real = RocketStoreWriter._write_manifest
    racer: list[threading.Thread] = []

    def write_manifest(self: RocketStoreWriter, *args: Any, **kwargs: Any) -> None:
        if self is first and not racer:
            # The second job commits while the first has renamed its store but not yet
            # written its manifest: it must wait for the root's lock, whatever the timing.
            racer.append(threading.Thread(target=second.commit, args=([two],)))
            racer[0].start()
            racer[0].join(0.5)
        real(self, *args, **kwargs)

    monkeypatch.setattr(RocketStoreWriter, "_write_manifest", write_manifest)
    first.commit([one])
    racer[0].join(60)
    assert not racer[0].is_alive()
    manifest = json.loads((root / "_SUCCESS").read_text())
    assert [(e["path"], e["job_id"], e["messages"]) for e in manifest["stores"]] == [
        ("store-00000", first.job_id, 30),
        ("store-00001", second.job_id, 20),
    ]
    assert manifest["job_id"] == second.job_id


# --------------------------------------------------------------------------------------
# S3 roots (moto's server)
# --------------------------------------------------------------------------------------


def _manifest(s3: Any, bucket: str, prefix: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(s3.get(bucket, f"{prefix}/_SUCCESS"))
    return data


def test_s3_write_read_verify_byte_identical(
    spark: Any, s3: Any, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rocketstore.spark import verify

    monkeypatch.chdir(tmp_path)
    uri = f"s3a://{bucket}/root"
    opts = {**s3.options(), "cacheDir": str(tmp_path / "cache")}
    df = _df(spark, 3000)
    df.write.format("rocketstore").mode("append").options(**opts).save(uri)
    assert not (tmp_path / "s3a:").exists()

    keys = s3.keys(bucket)
    assert "root/_manifests/00000000000000000001.json" in keys
    # (pyarrow leaves an empty directory marker, "root/_temporary/", where it deleted a tree)
    assert not [k for k in keys if "/_temporary/" in k and not k.endswith("/")], "uploads left"
    manifest = _manifest(s3, bucket, "root")
    assert manifest["commit"] == 1
    assert s3.get(bucket, "root/_manifests/00000000000000000001.json") == s3.get(
        bucket, "root/_SUCCESS"
    )
    assert _numbers(manifest["stores"]) == ["store-00000", "store-00001"]
    assert len({e["path"].rsplit("-", 1)[1] for e in manifest["stores"]}) == 1, "one token"
    assert manifest["totals"]["messages"] == 3000

    back = spark.read.format("rocketstore").options(**opts).load(uri)
    rows = back.collect()
    assert len(rows) == 3000
    assert sorted(bytes(r.body) for r in rows) == _bodies(df)
    assert {r.store for r in rows} == {f"{uri}/{e['path']}" for e in manifest["stores"]}
    # Per queue, with a topic filter, and the index table: the same stores.
    per_queue = (
        spark.read.format("rocketstore")
        .options(**opts)
        .option("partitioning", "queue")
        .option("topics", "Topic1")
        .load(uri)
    )
    assert per_queue.count() == 1000
    index = spark.read.format("rocketstore").options(**opts).option("table", "index").load(uri)
    assert index.count() == 2 * 3000  # each key and each UNIQ_KEY

    report = verify(spark, uri, expected=df, **opts)
    assert report.ok, str(report)
    assert report.messages == 3000

    # Byte for byte: what the tasks hashed while uploading = the objects = the downloads.
    copies = list((tmp_path / "cache").glob("*/store"))
    assert len(copies) == 2
    by_name: dict[str, Path] = {}
    for done in (tmp_path / "cache").glob("*/.complete"):
        by_name[json.loads(done.read_text())["uri"]] = done.parent / "store"
    for entry in manifest["stores"]:
        local = by_name[f"{uri}/{entry['path']}"]
        files = [f for f in entry["files"] if not f.get("dir")]
        assert {f["name"] for f in files} >= {"commitlog/00000000000000000000", "checkpoint"}
        for f in files:
            key = f"root/{entry['path']}/{f['name']}"
            assert s3.sha256(bucket, key) == f["sha256"], key
            assert _extents_sha256(local / f["name"], f) == f["sha256"], key
            assert (local / f["name"]).stat().st_size == f["size"]

    # The downloads load in the independent Java loader (the broker's load and recovery, every
    # consume queue unit and index key checked) with no problem and the records read above.
    from tests.rmq_fixture import java_available, load_broker_store

    if not java_available():
        skip_or_fail("the Java store loader needs java and javac 17+ (the rest passed)")
    for entry in manifest["stores"]:
        got = load_broker_store(by_name[f"{uri}/{entry['path']}"])
        assert got["problem_count"] == 0, got["problem_details"]
        assert got["abnormal"] is False
        assert got["cq_units"] == entry["messages"]
        # Each record's KEYS and UNIQ_KEY are found through the index's hash slot chains.
        assert all(len(r["indexed_keys"]) == 2 for r in got["records"])
        loaded = sorted(
            (
                r["topic"],
                r["queue_id"],
                r["queue_offset"],
                r["commitlog_offset"],
                r["body_sha256"],
                " ".join(r["keys"]),
                r["uniq_key"],
            )
            for r in got["records"]
        )
        read = sorted(
            (
                r.topic,
                r.queue_id,
                r.queue_offset,
                r.commitlog_offset,
                hashlib.sha256(bytes(r.body)).hexdigest(),
                r.keys,
                r.uniq_key,
            )
            for r in rows
            if r.store == f"{uri}/{entry['path']}"
        )
        assert len(read) == entry["messages"]
        assert loaded == read


def _extents_sha256(path: Path, f: dict[str, Any]) -> str:
    """SHA-256 of the data extents of a downloaded file (the uploaded object's bytes)."""
    h = hashlib.sha256()
    with path.open("rb") as src:
        for offset, length in f.get("extents", [[0, f["size"]]]):
            src.seek(offset)
            h.update(src.read(length))
    return h.hexdigest()


def test_upload_then_fetch_is_byte_identical_and_sparse(
    s3: Any, bucket: str, tmp_path: Path
) -> None:
    import rocketstore
    from rocketstore._remote import resolve_root

    local = tmp_path / "written"
    with rocketstore.MessageStore(local, mapped_file_size_commit_log=1 << 20) as store:
        for i in range(3000):
            store.put(f"Topic{i % 3}", f"body-{i}".encode() * 80, keys=[f"k{i}"], tags="T")
    _, remote = resolve_root(
        f"s3a://{bucket}/r", {**s3.options(), "cacheDir": str(tmp_path / "cache")}
    )
    assert remote is not None
    files = remote.upload_store(local, "_temporary/job/part-00000-0")
    remote.copy_store("_temporary/job/part-00000-0", "store-00000", files)
    fetched = remote.fetch({"path": "store-00000", "files": files})
    written = sorted(p.relative_to(local) for p in local.rglob("*") if p.is_file())
    assert sorted(p.relative_to(fetched) for p in fetched.rglob("*") if p.is_file()) == written
    assert len([p for p in written if p.parts[0] == "commitlog"]) > 1
    for rel in written:
        a, b = local / rel, fetched / rel
        assert (
            hashlib.sha256(a.read_bytes()).hexdigest() == hashlib.sha256(b.read_bytes()).hexdigest()
        ), rel
        assert b.stat().st_blocks <= a.stat().st_blocks + 8, f"{rel}: holes kept"
    # The files' lengths are RocketMQ's (a 1 MiB commit log, a 20 MB index file); their data is
    # a few MB (index slot pages are made real 256 KiB at a time, the zero pages punched at close).
    assert sum(int(f["size"]) for f in files) > 50 * sum(
        sum(n for _, n in f.get("extents", [[0, f["size"]]])) for f in files
    ), "holes are not uploaded"
    # A second fetch is the cached copy; a damaged object fails the download.
    assert remote.fetch({"path": "store-00000", "files": files}) == fetched
    s3.client().put_object(Bucket=bucket, Key="r/store-00000/checkpoint", Body=b"x" * 4096)
    with pytest.raises(OSError, match="SHA-256"):
        remote.fetch({"path": "store-00000", "files": [*files, {"name": "extra", "size": 0}]})


def test_gcs_remote_root_protocol_and_byte_identical_fetch(gcs: Any, tmp_path: Path) -> None:
    """A ``gs://`` root on a GCS emulator through ``pyarrow``'s ``GcsFileSystem``: upload,
    server-side copy, the manifest create (a second create of one commit is a conflict), the
    newest-manifest probe, and a download byte-identical to the store written."""
    import rocketstore
    from rocketstore._remote import manifest_name
    from rocketstore.exceptions import CommitConflictError

    bucket = gcs.new_bucket()
    local = tmp_path / "written"
    with rocketstore.MessageStore(local, mapped_file_size_commit_log=1 << 20) as store:
        for i in range(400):
            store.put(f"Topic{i % 3}", f"gcs-{i}".encode() * 50, keys=[f"k{i}"], tags="T")
    _, remote = resolve_root(
        f"gs://{bucket}/root", {**gcs.options(), "cacheDir": str(tmp_path / "cache")}
    )
    assert remote is not None
    files = remote.upload_store(local, "_temporary/job/part-00000-0")
    remote.copy_store("_temporary/job/part-00000-0", "store-00000-0123456789abcdef", files)
    remote.delete_tree("_temporary/job")
    assert remote.latest_manifest() == (0, None)
    entry = {"path": "store-00000-0123456789abcdef", "files": files}
    data = json.dumps({"commit": 1, "stores": [entry]}).encode()
    remote.create_exclusive(manifest_name(1), data)
    with pytest.raises(CommitConflictError):
        remote.create_exclusive(manifest_name(1), data)
    assert remote.latest_manifest()[0] == 1
    fetched = remote.fetch(entry)
    written = sorted(p.relative_to(local) for p in local.rglob("*") if p.is_file())
    assert sorted(p.relative_to(fetched) for p in fetched.rglob("*") if p.is_file()) == written
    for rel in written:
        assert (local / rel).read_bytes() == (fetched / rel).read_bytes(), rel
    with rocketstore.MessageStore(fetched, read_only=True) as store:
        assert store.max_offset_in_queue("Topic1", 0) > 0
    assert remote.orphans(0.0) == [], "the listed store is no orphan; uploads were deleted"


@pytest.mark.slow
def test_gcs_spark_write_read_verify(spark: Any, gcs: Any, tmp_path: Path) -> None:
    from rocketstore.spark import verify

    uri = f"gs://{gcs.new_bucket()}/root"
    opts = {**gcs.options(), "cacheDir": str(tmp_path / "cache")}
    df = _df(spark, 1000)
    df.write.format("rocketstore").mode("append").options(**opts).save(uri)
    back = spark.read.format("rocketstore").options(**opts).load(uri)
    assert _bodies(back) == _bodies(df)
    report = verify(spark, uri, expected=df, **opts)
    assert report.ok, str(report)


def test_s3_append_overwrite_and_streaming_source(
    spark: Any, s3: Any, bucket: str, tmp_path: Path
) -> None:
    uri = f"s3://{bucket}/a/b"
    opts = {**s3.options(), "cacheDir": str(tmp_path / "cache")}
    first, second = _df(spark, 400, tag="x"), _df(spark, 300, 1, tag="y")
    first.write.format("rocketstore").mode("append").options(**opts).save(uri)
    second.write.format("rocketstore").mode("append").options(**opts).save(uri)
    manifest = _manifest(s3, bucket, "a/b")
    assert manifest["commit"] == 2
    assert _numbers(manifest["stores"]) == ["store-00000", "store-00001", "store-00002"]
    read = spark.read.format("rocketstore").options(**opts).load(uri)
    assert _bodies(read) == sorted(_bodies(first) + _bodies(second))

    # The streaming source: every committed message once (availableNow), per queue.
    (
        spark.readStream.format("rocketstore")
        .options(**opts)
        .load(uri)
        .writeStream.format("memory")
        .queryName("remote_stream")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
        .awaitTermination()
    )
    streamed = spark.sql("select body from remote_stream")
    assert _bodies(streamed) == _bodies(read)

    third = _df(spark, 50, 1, tag="z")
    third.write.format("rocketstore").mode("overwrite").options(**opts).save(uri)
    manifest = _manifest(s3, bucket, "a/b")
    assert manifest["commit"] == 3
    assert _numbers(manifest["stores"]) == ["store-00003"]
    assert _bodies(spark.read.format("rocketstore").options(**opts).load(uri)) == _bodies(third)
    stores = {k.split("/")[2] for k in s3.keys(bucket, "a/b/store-")}
    assert stores == {manifest["stores"][0]["path"]}, "overwrite deletes the replaced stores"


def test_s3_reader_without_manifest_is_a_clear_error(spark: Any, s3: Any, bucket: str) -> None:
    with pytest.raises(Exception, match="no rocketstore manifest"):
        spark.read.format("rocketstore").options(**s3.options()).load(f"s3a://{bucket}/x").count()


# --------------------------------------------------------------------------------------
# Killed task, killed driver, rerun
# --------------------------------------------------------------------------------------


def _writer(s3: Any, uri: str, tmp_path: Path) -> Any:
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    from rocketstore.spark._writer import RocketStoreWriter

    schema = StructType([StructField("topic", StringType()), StructField("body", BinaryType())])
    options = {"path": uri, **s3.options(), "cacheDir": str(tmp_path / "cache")}
    return RocketStoreWriter(options, schema, overwrite=False)


def _child(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The killed task's local store stays where it was built: in the test's directory. The
    # child imports the rocketstore this process runs (PYTHONPATH kept after the repository).
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "ROCKETSTORE_LOCAL_DIR": str(tmp_path)}
    return subprocess.run(
        [sys.executable, str(CHILD), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def _expected_bodies(partitions: list[int], rows: int) -> list[bytes]:
    return sorted(f"p{p}-{i}".encode().ljust(4096, b".") for p in partitions for i in range(rows))


def _as_task(monkeypatch: pytest.MonkeyPatch, partition: int, attempt: int) -> None:
    """The writer sees this Spark task identity until the test ends (restored after it, so no
    other test in this worker process inherits it)."""
    from rocketstore.spark import _writer as writer_module

    monkeypatch.setattr(writer_module, "_task_identity", lambda: (partition, attempt, 0))


def test_task_killed_mid_upload_then_retried(
    spark: Any, s3: Any, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests._remote_kill_child import batches

    uri = f"s3a://{bucket}/killed-task"
    writer = _writer(s3, uri, tmp_path)
    pickled = tmp_path / "writer.pkl"
    pickled.write_bytes(pickle.dumps(writer))
    proc = _child(tmp_path, "task", str(pickled), "0", "7", "3000")
    assert proc.returncode == -9, proc.stderr[-3000:]
    partial = s3.keys(bucket, f"killed-task/_temporary/{writer.job_id}/part-00000-7/")
    assert partial, "the killed attempt had uploaded part of its store"
    assert not s3.keys(bucket, "killed-task/_manifests/")

    # Spark's retry of the partition (another attempt id), then the job's commit.
    _as_task(monkeypatch, 0, 8)
    message = writer.write(iter(batches(0, 3000)))
    writer.commit([message])

    left = [k for k in s3.keys(bucket, "killed-task/_temporary/") if not k.endswith("/")]
    assert not left, "the killed attempt's upload is gone"
    manifest = _manifest(s3, bucket, "killed-task")
    assert [(_number(e["path"]), e["task_attempt"]) for e in manifest["stores"]] == [
        ("store-00000", 8)
    ]
    opts = {**s3.options(), "cacheDir": str(tmp_path / "cache")}
    back = spark.read.format("rocketstore").options(**opts).load(uri)
    assert _bodies(back) == _expected_bodies([0], 3000)


def test_driver_killed_before_commit_then_rerun(
    spark: Any, s3: Any, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests._remote_kill_child import batches

    from rocketstore.spark import verify

    uri = f"s3a://{bucket}/killed-driver"
    opts = {**s3.options(), "cacheDir": str(tmp_path / "cache")}
    # A committed job: what readers must keep seeing.
    committed = _df(spark, 200, 1, tag="old")
    committed.write.format("rocketstore").mode("append").options(**opts).save(uri)

    killed = _writer(s3, uri, tmp_path)
    pickled = tmp_path / "writer.pkl"
    pickled.write_bytes(pickle.dumps(killed))
    proc = _child(tmp_path, "driver", str(pickled), "500")
    assert proc.returncode == -9, proc.stderr[-3000:]
    # The killed commit had copied its stores to their published names, without a manifest.
    assert s3.keys(bucket, "killed-driver/store-00001-")
    assert _manifest(s3, bucket, "killed-driver")["commit"] == 1
    before = spark.read.format("rocketstore").options(**opts).load(uri)
    assert _bodies(before) == _bodies(committed), "nothing half-published is visible"

    # The rerun: a new job with the same rows; every row once.
    rerun = _writer(s3, uri, tmp_path)
    messages = []
    for p in (0, 1):
        _as_task(monkeypatch, p, 200 + p)
        messages.append(rerun.write(iter(batches(p, 500))))
    rerun.commit(messages)
    after = spark.read.format("rocketstore").options(**opts).load(uri)
    assert _bodies(after) == sorted(_bodies(committed) + _expected_bodies([0, 1], 500))
    report = verify(spark, uri, **opts)
    assert report.ok, str(report)
    assert report.messages == 1200


def _copies_of(monkeypatch: pytest.MonkeyPatch, remote: Any) -> list[str]:
    """The store names ``remote`` (that very object) copies to from now on."""
    from rocketstore._remote import RemoteRoot

    real = RemoteRoot.copy_store
    names: list[str] = []

    def copy_store(self: RemoteRoot, src: str, dest: str, files: Any) -> None:
        if self is remote:
            names.append(dest)
        real(self, src, dest, files)

    monkeypatch.setattr(RemoteRoot, "copy_store", copy_store)
    return names


def _after_reading(monkeypatch: pytest.MonkeyPatch, remote: Any, then: Any) -> list[int]:
    """``remote`` (that very object) reads the newest manifest, then ``then()`` runs before
    the read's result is used: another job commits between this commit's read and its copies.
    Only the first read; returns the list of times it ran."""
    from rocketstore._remote import RemoteRoot

    real = RemoteRoot.latest_manifest
    ran: list[int] = []

    def latest_manifest(self: RemoteRoot) -> Any:
        got = real(self)
        if self is remote and not ran:
            ran.append(got[0])
            then()
        return got

    monkeypatch.setattr(RemoteRoot, "latest_manifest", latest_manifest)
    return ran


def _intact(s3: Any, bucket: str, prefix: str, entry: dict[str, Any]) -> None:
    """Every file of a manifest entry is the object it lists (SHA-256 of the object)."""
    for f in entry["files"]:
        if not f.get("dir"):
            key = f"{prefix}/{entry['path']}/{f['name']}"
            assert s3.sha256(bucket, key) == f["sha256"], key


def test_remote_commits_from_one_manifest_never_write_the_same_names(
    spark: Any, s3: Any, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests._remote_kill_child import batches

    from rocketstore.exceptions import CommitConflictError
    from rocketstore.spark import verify

    uri = f"s3a://{bucket}/race-batch"
    opts = {**s3.options(), "cacheDir": str(tmp_path / "cache")}
    old = _df(spark, 100, 1, tag="old")
    old.write.format("rocketstore").mode("append").options(**opts).save(uri)
    winner, loser = _writer(s3, uri, tmp_path), _writer(s3, uri, tmp_path)
    _as_task(monkeypatch, 0, 1)
    won = winner.write(iter(batches(0, 300)))
    _as_task(monkeypatch, 0, 2)
    lost = loser.write(iter(batches(0, 500)))

    # The loser reads manifest 1; the winner then commits from manifest 1 too (copies, creates
    # manifest 2); only then does the loser copy, and its create of manifest 2 fails.
    ran = _after_reading(monkeypatch, loser.remote, lambda: winner.commit([won]))
    copied = _copies_of(monkeypatch, loser.remote)
    with pytest.raises(CommitConflictError):
        loser.commit([lost])
    loser.abort([lost])
    assert ran == [1]

    manifest = _manifest(s3, bucket, "race-batch")
    assert manifest["commit"] == 2
    assert _numbers(manifest["stores"]) == ["store-00000", "store-00001"]
    published = manifest["stores"][1]
    assert published["job_id"] == winner.job_id
    # Both chose number 1; the loser's name is its own, and its copies are gone.
    assert [_number(n) for n in copied] == ["store-00001"]
    assert copied[0] != published["path"]
    assert not s3.keys(bucket, f"race-batch/{copied[0]}/")
    _intact(s3, bucket, "race-batch", published)
    back = spark.read.format("rocketstore").options(**opts).load(uri)
    assert _bodies(back) == sorted(_bodies(old) + _expected_bodies([0], 300))
    report = verify(spark, uri, **opts)
    assert report.ok, str(report)
    assert report.messages == 400


def test_remote_commit_whose_copy_fails_deletes_its_copies(
    s3: Any, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests._remote_kill_child import batches

    from rocketstore._remote import RemoteRoot

    writer = _writer(s3, f"s3a://{bucket}/copy-fails", tmp_path)
    messages = []
    for p in (0, 1):
        _as_task(monkeypatch, p, 60 + p)
        messages.append(writer.write(iter(batches(p, 50))))
    real = RemoteRoot.copy_store
    copied: list[str] = []

    def copy_store(self: RemoteRoot, src: str, dest: str, files: Any) -> None:
        copied.append(dest)
        if len(copied) == 2:
            raise OSError("copy failed")
        real(self, src, dest, files)

    monkeypatch.setattr(RemoteRoot, "copy_store", copy_store)
    with pytest.raises(OSError, match="copy failed"):
        writer.commit(messages)
    assert [_number(n) for n in copied] == ["store-00000", "store-00001"]
    assert not s3.keys(bucket, "copy-fails/store-"), "the copies are removed"
    assert not s3.keys(bucket, "copy-fails/_manifests/")


def test_remote_root_of_plain_store_names_reads_and_appends(
    spark: Any, s3: Any, bucket: str, tmp_path: Path
) -> None:
    """A root whose manifest lists ``store-<n>`` (published before names carried a token):
    read as before, and the next commit numbers its stores above it."""
    from rocketstore._remote import manifest_name
    from rocketstore.spark import verify

    uri = f"s3a://{bucket}/plain"
    opts = {**s3.options(), "cacheDir": str(tmp_path / "cache")}
    first = _df(spark, 200, 1, tag="plain")
    first.write.format("rocketstore").mode("append").options(**opts).save(uri)
    _, remote = resolve_root(uri, opts)
    assert remote is not None
    manifest = _manifest(s3, bucket, "plain")
    (entry,) = manifest["stores"]
    remote.copy_store(entry["path"], "store-00000", entry["files"])
    remote.delete_tree(entry["path"])
    entry["path"] = "store-00000"
    data = (json.dumps(manifest, indent=1) + "\n").encode()
    remote.write_bytes(manifest_name(1), data)
    remote.write_bytes("_SUCCESS", data)

    second = _df(spark, 300, 2, tag="new")
    second.write.format("rocketstore").mode("append").options(**opts).save(uri)
    manifest = _manifest(s3, bucket, "plain")
    paths = [e["path"] for e in manifest["stores"]]
    assert paths[0] == "store-00000"
    assert [_number(p) for p in paths[1:]] == ["store-00001", "store-00002"]
    back = spark.read.format("rocketstore").options(**opts).load(uri)
    assert _bodies(back) == sorted(_bodies(first) + _bodies(second))
    report = verify(spark, uri, **opts)
    assert report.ok, str(report)
    one = _cli("inspect", f"{uri}/store-00000", "--json", *_fs_items(s3.options()), cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    assert sum(q["next_offset"] for q in json.loads(one.stdout)["queues"]) == 200


# --------------------------------------------------------------------------------------
# The streaming sink
# --------------------------------------------------------------------------------------


def _json_rows(tag: str, n: int) -> list[dict[str, str]]:
    return [{"topic": "Orders", "body": f"{tag}-{i}", "keys": f"k{i % 7}"} for i in range(n)]


def _write_json(src: Path, name: str, rows: list[dict[str, str]], mtime: float) -> None:
    tmp = src / f".{name}.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.utime(tmp, (mtime, mtime))  # the file source takes the oldest files first
    tmp.rename(src / name)


def _run_sink(spark: Any, src: Path, root: str, ckpt: Path, opts: dict[str, str]) -> None:
    """One availableNow run of a file-source query into the sink: a micro-batch per file."""
    q = (
        spark.readStream.schema("topic string, body string, keys string")
        .option("maxFilesPerTrigger", 1)
        .json(str(src))
        .writeStream.format("rocketstore")
        .options(**opts)
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start(root)
    )
    q.awaitTermination(180)
    assert q.exception() is None


def _read_back(
    spark: Any, root: str, opts: dict[str, str], name: str
) -> tuple[Counter[str], Counter[str]]:
    """Every body the batch reader and the streaming source (one availableNow run) read."""
    batch = spark.read.format("rocketstore").options(**opts).load(root).select("body")
    q = (
        spark.readStream.format("rocketstore")
        .options(**opts)
        .load(root)
        .select("body")
        .writeStream.format("memory")
        .queryName(name)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(180)
    assert q.exception() is None
    streamed = spark.sql(f"select body from {name}")
    return (
        Counter(bytes(r.body).decode() for r in batch.collect()),
        Counter(bytes(r.body).decode() for r in streamed.collect()),
    )


def _uploads_left(s3: Any, bucket: str, prefix: str) -> list[str]:
    # (pyarrow leaves an empty directory marker where it deleted a tree)
    return [k for k in s3.keys(bucket, f"{prefix}/_temporary/") if not k.endswith("/")]


def _sink_files(src: Path, files: list[tuple[str, int]], t0: float) -> Counter[str]:
    """Source files ``<tag>.json`` of ``n`` rows each, oldest first; returns their bodies."""
    src.mkdir(exist_ok=True)
    for i, (tag, n) in enumerate(files):
        _write_json(src, f"{tag}.json", _json_rows(tag, n), t0 + i)
    return Counter(r["body"] for tag, n in files for r in _json_rows(tag, n))


def test_stream_sink_s3_round_trip(spark: Any, s3: Any, bucket: str, tmp_path: Path) -> None:
    uri = f"s3a://{bucket}/sink"
    opts = {**s3.options(), "cacheDir": str(tmp_path / "cache")}
    want = _sink_files(tmp_path / "src", [("a", 30), ("b", 20)], time.time() - 100)
    _run_sink(spark, tmp_path / "src", uri, tmp_path / "ckpt", opts)

    # One manifest per micro-batch (one file, one task, one store each), recording the batch.
    manifest = _manifest(s3, bucket, "sink")
    assert manifest["commit"] == 2
    (query,) = manifest["streams"]
    assert manifest["streams"] == {query: 1}
    assert [(_number(e["path"]), e["query_id"], e["batch_id"]) for e in manifest["stores"]] == [
        ("store-00000", query, 0),
        ("store-00001", query, 1),
    ]
    assert not _uploads_left(s3, bucket, "sink")
    batch, streamed = _read_back(spark, uri, opts, "remote_sink_back")
    assert batch == want
    assert streamed == want


@pytest.mark.slow
def test_stream_sink_s3_restart_replays_a_batch_once(
    spark: Any, s3: Any, bucket: str, tmp_path: Path
) -> None:
    uri = f"s3a://{bucket}/sink"
    opts = {**s3.options(), "cacheDir": str(tmp_path / "cache")}
    src, ckpt = tmp_path / "src", tmp_path / "ckpt"
    t0 = time.time() - 100
    want = _sink_files(src, [("a", 30), ("b", 20), ("c", 10)], t0)
    _run_sink(spark, src, uri, ckpt, opts)
    manifest = _manifest(s3, bucket, "sink")
    assert manifest["commit"] == 3
    (query,) = manifest["streams"]

    # The driver "died" after creating batch 2's manifest, before recording the batch in the
    # checkpoint: Spark replays it, and the manifest's record makes the replay publish nothing.
    (ckpt / "commits" / "2").unlink()
    (ckpt / "commits" / ".2.crc").unlink(missing_ok=True)
    want += _sink_files(src, [("d", 15)], t0 + 10)
    _run_sink(spark, src, uri, ckpt, opts)
    manifest = _manifest(s3, bucket, "sink")
    assert manifest["commit"] == 4
    assert manifest["streams"] == {query: 3}
    assert [e["batch_id"] for e in manifest["stores"]] == [0, 1, 2, 3]
    assert not _uploads_left(s3, bucket, "sink"), "the replay's uploads are removed"
    batch, streamed = _read_back(spark, uri, opts, "remote_sink_replayed")
    assert batch == want
    assert streamed == want


def test_stream_sink_file_uri_round_trip(spark: Any, tmp_path: Path) -> None:
    from rocketstore.spark._stream_writer import SINK_METADATA

    root = tmp_path / "sink"
    want = _sink_files(tmp_path / "src", [("a", 25), ("b", 12)], time.time() - 100)
    _run_sink(spark, tmp_path / "src", f"file://{root}", tmp_path / "ckpt", {"stores": "2"})
    # A file:// URI is a local root: the long-lived stores of the local sink.
    assert json.loads((root / SINK_METADATA).read_text())["stores"] == 2
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == ["store-00000", "store-00001"]
    batch, streamed = _read_back(spark, f"file://{root}", {}, "file_sink_back")
    assert batch == want
    assert streamed == want


class _SinkTasks:
    """Runs the stream sink's tasks on a remote root through its own code, as Spark's tasks
    of one query would (the task identity Spark sets is patched in)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, options: dict[str, str]) -> None:
        from tests._sink_driver import SCHEMA

        from rocketstore.spark._stream_writer import RocketStoreStreamWriter

        self.monkeypatch, self.options = monkeypatch, options
        self.sink = RocketStoreStreamWriter(options, SCHEMA)

    def restart(self) -> None:
        """A new driver: the query's sink made again."""
        self.__init__(self.monkeypatch, self.options)  # type: ignore[misc]

    def task(self, run: str, batch: int, partition: int, attempt: int, bodies: list[str]) -> Any:
        import pyarrow as pa

        from rocketstore.spark import _stream_writer
        from rocketstore.spark import _writer as writer_module

        ident = ("q1", run, batch, partition, 0)
        self.monkeypatch.setattr(_stream_writer, "_stream_identity", lambda: ident)
        self.monkeypatch.setattr(writer_module, "_task_identity", lambda: (partition, attempt, 0))
        rows = pa.RecordBatch.from_pydict(
            {"topic": ["Orders"] * len(bodies), "body": bodies, "keys": ["k"] * len(bodies)}
        )
        return self.sink.write(iter([rows]))


def test_stream_sink_remote_task_retry_and_replayed_commit(
    spark: Any, s3: Any, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = f"s3a://{bucket}/replay"
    opts = {**s3.options(), "cacheDir": str(tmp_path / "cache")}
    d = _SinkTasks(monkeypatch, {"path": uri, **opts})
    b0 = [[f"b0p{p}-{i}" for i in range(40)] for p in (0, 1)]
    # Partition 0's first attempt uploads its store, then its task fails: Spark retries it and
    # hands commit the retry's message only.
    d.task("run-1", 0, 0, 10, b0[0])
    assert s3.keys(bucket, "replay/_temporary/stream-q1/0/run-1/part-00000-10/")
    first = [d.task("run-1", 0, 0, 11, b0[0]), d.task("run-1", 0, 1, 12, b0[1])]
    d.sink.commit(first, 0)
    manifest = _manifest(s3, bucket, "replay")
    assert manifest["commit"] == 1
    assert manifest["streams"] == {"q1": 0}
    assert [(_number(e["path"]), e["task_attempt"]) for e in manifest["stores"]] == [
        ("store-00000", 11),
        ("store-00001", 12),
    ]
    assert not _uploads_left(s3, bucket, "replay"), "the failed attempt's upload is removed"

    # A restarted driver replays batch 0 (its commit was not in the checkpoint): the tasks
    # upload again, the commit finds the batch in the newest manifest and publishes nothing.
    d.restart()
    d.sink.commit([d.task("run-2", 0, p, 20 + p, b0[p]) for p in (0, 1)], 0)
    # The first run's commit called again: nothing either.
    d.sink.commit(first, 0)
    assert _manifest(s3, bucket, "replay")["commit"] == 1
    assert not s3.keys(bucket, "replay/_manifests/00000000000000000002.json")
    assert not _uploads_left(s3, bucket, "replay"), "the replay's uploads are removed"

    # A micro-batch without rows publishes nothing; the next one with rows does.
    d.sink.commit([d.task("run-2", 1, 0, 30, [])], 1)
    assert _manifest(s3, bucket, "replay")["commit"] == 1
    b2 = [f"b2p0-{i}" for i in range(7)]
    d.sink.commit([d.task("run-2", 2, 0, 31, b2)], 2)
    manifest = _manifest(s3, bucket, "replay")
    assert manifest["commit"] == 2
    assert manifest["streams"] == {"q1": 2}
    assert _numbers(manifest["stores"]) == ["store-00000", "store-00001", "store-00002"]

    back = spark.read.format("rocketstore").options(**opts).load(uri).select("body")
    assert Counter(bytes(r.body).decode() for r in back.collect()) == Counter(b0[0] + b0[1] + b2)


def test_stream_sink_remote_commit_retries_after_a_conflict(
    spark: Any, s3: Any, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rocketstore._remote import RemoteRoot

    uri = f"s3a://{bucket}/race"
    opts = {**s3.options(), "cacheDir": str(tmp_path / "cache")}
    d = _SinkTasks(monkeypatch, {"path": uri, **opts})
    bodies = [f"s-{i}" for i in range(50)]
    messages = [d.task("run-1", 0, 0, 40, bodies)]
    # A batch job commits while the sink's commit runs: both read the same newest manifest
    # (none) and copied to store-00000-<their own token>; the job creates manifest 1 first.
    other = _df(spark, 100, 1, tag="job")
    real = RemoteRoot.create_exclusive
    raced: list[str] = []

    def create(self: RemoteRoot, rel: str, data: bytes) -> None:
        if not raced:
            raced.append(rel)
            other.write.format("rocketstore").mode("append").options(**opts).save(uri)
        real(self, rel, data)

    monkeypatch.setattr(RemoteRoot, "create_exclusive", create)
    d.sink.commit(messages, 0)
    assert raced == ["_manifests/00000000000000000001.json"]
    manifest = _manifest(s3, bucket, "race")
    assert manifest["commit"] == 2
    assert manifest["streams"] == {"q1": 0}
    assert _numbers(manifest["stores"]) == ["store-00000", "store-00001"]
    back = spark.read.format("rocketstore").options(**opts).load(uri).select("body")
    got = Counter(bytes(r.body).decode() for r in back.collect())
    assert got == Counter(bodies + [f"bodyjob-{i}" for i in range(100)])


def test_stream_sink_remote_commit_copying_after_the_winner_keeps_its_stores(
    spark: Any, s3: Any, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rocketstore.spark import verify

    uri = f"s3a://{bucket}/race-late"
    opts = {**s3.options(), "cacheDir": str(tmp_path / "cache")}
    d = _SinkTasks(monkeypatch, {"path": uri, **opts})
    bodies = [f"late-{i}" for i in range(60)]
    messages = [d.task("run-1", 0, 0, 50, bodies)]
    # The sink's commit reads the newest manifest (none); a batch job then commits from it
    # too; only then does the sink copy (to the number the job published) and lose.
    other = _df(spark, 100, 1, tag="job")
    remote = d.sink.writer.remote
    ran = _after_reading(
        monkeypatch,
        remote,
        lambda: other.write.format("rocketstore").mode("append").options(**opts).save(uri),
    )
    copied = _copies_of(monkeypatch, remote)
    d.sink.commit(messages, 0)
    assert ran == [0]

    manifest = _manifest(s3, bucket, "race-late")
    assert manifest["commit"] == 2
    assert manifest["streams"] == {"q1": 0}
    job, batch = manifest["stores"]
    assert _number(job["path"]) == "store-00000"
    assert "query_id" not in job
    # First try: number 0, as the job's, under the sink's own name (deleted); the retry: 1.
    assert [_number(n) for n in copied] == ["store-00000", "store-00001"]
    assert copied[0] != job["path"]
    assert copied[1] == batch["path"]
    assert not s3.keys(bucket, f"race-late/{copied[0]}/")
    _intact(s3, bucket, "race-late", job)
    back = spark.read.format("rocketstore").options(**opts).load(uri).select("body")
    got = Counter(bytes(r.body).decode() for r in back.collect())
    assert got == Counter(bodies + [f"bodyjob-{i}" for i in range(100)])
    report = verify(spark, uri, **opts)
    assert report.ok, str(report)


def test_stream_sink_remote_refuses_stores_option(s3: Any) -> None:
    from tests._sink_driver import SCHEMA

    from rocketstore.exceptions import InvalidConfigError
    from rocketstore.spark._stream_writer import RocketStoreStreamWriter

    options = {"path": "s3a://bucket/sink", **s3.options(), "stores": "4"}
    with pytest.raises(InvalidConfigError, match="stores") as info:
        RocketStoreStreamWriter(options, SCHEMA)
    assert info.value.key == "stores"


# --------------------------------------------------------------------------------------
# The rocketstore command
# --------------------------------------------------------------------------------------


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_cli_inspect_verify_dump_remote_and_refused(
    spark: Any, s3: Any, bucket: str, tmp_path: Path
) -> None:
    uri = f"s3a://{bucket}/cli"
    opts = s3.options()
    _df(spark, 600).write.format("rocketstore").mode("append").options(**opts).save(uri)
    fs = _fs_items(opts)

    paths = [e["path"] for e in _manifest(s3, bucket, "cli")["stores"]]
    assert _numbers(_manifest(s3, bucket, "cli")["stores"]) == ["store-00000", "store-00001"]

    out = _cli("inspect", uri, *fs, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert paths[0] in out.stdout
    assert paths[1] in out.stdout
    assert "600 messages" in out.stdout

    one = _cli("inspect", f"{uri}/{paths[1]}", "--json", *fs, cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    assert sum(q["next_offset"] for q in json.loads(one.stdout)["queues"]) == 300

    out = _cli("verify", "--no-spark", uri, *fs, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ALL CHECKS PASSED" in out.stdout

    out = _cli("dump", uri, "--topic", "Topic0", "--queue", "0", "--max", "3", *fs, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "body-" in out.stdout

    out = _cli("inspect", "ftp://host/x", cwd=tmp_path)
    assert out.returncode == 3, out.stderr
    assert "ftp://" in out.stderr
    assert "s3a://" in out.stderr
    out = _cli("rebuild-indexes", uri, *fs, cwd=tmp_path)
    assert out.returncode != 0
    assert "local stores only" in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing written locally"


def test_cli_sweep_lists_then_deletes_only_old_orphans(
    s3: Any, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """``rocketstore sweep``: what a driver killed between its copies and its manifest left
    (a published-looking copy, its job's uploads) is listed, kept while younger than
    ``--min-age``, deleted only with ``--delete``; the committed store and the manifests stay."""
    from tests._remote_kill_child import batches

    from rocketstore.cli import main

    uri = f"s3a://{bucket}/sweep"
    committed = _writer(s3, uri, tmp_path)
    _as_task(monkeypatch, 0, 1)
    committed.commit([committed.write(iter(batches(0, 20)))])
    (entry,) = _manifest(s3, bucket, "sweep")["stores"]
    # The killed job: its task uploaded, its driver copied to a store name, then died.
    killed = _writer(s3, uri, tmp_path)
    _as_task(monkeypatch, 0, 2)
    message = killed.write(iter(batches(0, 10)))
    files = message.stats["files"]
    orphan = "store-00001-00000000deadbeef"
    killed.remote.copy_store(str(message.path), orphan, files)
    before = s3.keys(bucket, "sweep/")
    fs = _fs_items(s3.options())

    def sweep(*args: str) -> Any:
        assert main(["sweep", uri, "--json", *args, *fs]) == 0
        return json.loads(capsys.readouterr().out)

    found = sweep()  # default --min-age 24 h: everything here is seconds old
    assert [o["name"] for o in found["orphans"]] == [f"_temporary/{killed.job_id}", orphan]
    assert not any(o["old_enough"] for o in found["orphans"])
    assert found["orphans"][1]["files"] == len([f for f in files if not f.get("dir")])
    assert sweep("--min-age", "0")["deleted"] == []  # a dry run without --delete
    assert s3.keys(bucket, "sweep/") == before
    assert sweep("--min-age", "0", "--delete")["deleted"] == [f"_temporary/{killed.job_id}", orphan]
    after = [k for k in s3.keys(bucket, "sweep/") if not k.endswith("/")]
    assert after == [
        k for k in before if not k.startswith(("sweep/_temporary/", f"sweep/{orphan}/"))
    ]
    assert "sweep/_manifests/00000000000000000001.json" in after
    _intact(s3, bucket, "sweep", entry)
    assert sweep()["orphans"] == []

    assert main(["sweep", "--min-age", "0", str(tmp_path)]) == 2  # a local root is refused
    assert "remote roots" in capsys.readouterr().err


def test_s3_settings_from_the_spark_conf(spark: Any, s3: Any, bucket: str) -> None:
    """``spark.hadoop.fs.s3a.*`` in the session's conf, no options: the JVM connector hands
    them to the Python data source; ``ingest`` and ``verify`` read them themselves."""
    from rocketstore.spark import ingest, verify
    from rocketstore.spark._jvm import session_has_connector

    if not session_has_connector(spark):
        pytest.skip("the session's conf reaches the Python data source through the JVM connector")
    conf = {f"spark.hadoop.{k}": v for k, v in s3.options().items()}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        uri = f"s3a://{bucket}/conf"
        df = _df(spark, 300)
        summary = ingest(df, uri, stores=2)
        assert summary["root"] == uri
        assert summary["messages"] == 300
        assert [_number(p) for p in summary["stores"]] == ["store-00000", "store-00001"]
        df.write.format("rocketstore").mode("append").save(uri)
        assert spark.read.format("rocketstore").load(uri).count() == 600
        report = verify(spark, uri)
        assert report.ok, str(report)
    finally:
        for k in conf:
            spark.conf.unset(k)


def test_download_cache_is_bounded(
    s3: Any, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rocketstore
    from rocketstore import _remote

    monkeypatch.setattr(_remote, "_IN_USE_SECONDS", 0.0)
    _, remote = resolve_root(
        f"s3a://{bucket}/cache",
        {**s3.options(), "cacheDir": str(tmp_path / "cache"), "cacheMaxBytes": "1"},
    )
    assert remote is not None
    entries = []
    for name in ("store-00000", "store-00001"):
        local = tmp_path / name
        with rocketstore.MessageStore(local) as store:
            store.put("T", name.encode())
        entries.append({"path": name, "files": remote.upload_store(local, name)})
    first = remote.fetch(entries[0])
    assert first.is_dir()
    second = remote.fetch(entries[1])
    assert second.is_dir()
    assert not first.exists(), "the least recently used store is evicted past the bound"
    with rocketstore.MessageStore(second, read_only=True) as store:
        assert store.max_commitlog_offset() > 0
