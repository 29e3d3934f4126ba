"""Body compression as RocketMQ's producers and consumers do it.

``put_batch(..., compression=...)`` compresses bodies like a RocketMQ producer (SYSFLAG bit 0
plus the codec in bits 8-10), the reads return bodies as stored, and
:func:`rocketstore.decompress_body` decompresses like a RocketMQ consumer. The Java check runs
the exact classes RocketMQ's ``Compressor`` implementations use (lz4-java's LZ4 frame streams,
zstd-jni's streams, ``java.util.zip``), from the jars Spark ships, in both directions.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

import rocketstore
from rocketstore import CorruptionError, InvalidConfigError, MessageStore

CODECS = {"lz4": 0x101, "zstd": 0x201, "zlib": 0x301}
JAVA_CHECK = Path(__file__).resolve().parent / "fixtures" / "java" / "BodyCodecCheck.java"


def _text(n: int, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    words = [b"order", b"shipped", b"customer", b"amount", b"{", b"}", b'"id":', b"42"]
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words) + b" "
    return bytes(out[:n])


def _bodies() -> list[bytes]:
    """Compressible bodies around the threshold, an empty one, and incompressible ones."""
    rng = random.Random(7)
    return [
        _text(5000, 1),
        _text(4095, 2),  # under the default threshold: stored as given
        _text(4096, 3),
        b"",
        rng.randbytes(8000),  # does not shrink: stored as given, without the flag
        _text(200_000, 4),
    ]


@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize("arrow", [True, False], ids=["arrow", "dicts"])
def test_put_batch_compresses_as_a_producer(store_dir: Path, codec: str, arrow: bool) -> None:
    bodies = _bodies()
    with MessageStore(store_dir) as s:
        if arrow:
            table = pa.table({"topic": ["T"] * len(bodies), "body": bodies})
            results = s.put_batch(table, compression=codec)
            offsets = [int(str(o)) for o in results.column("commitlog_offset").to_pylist()]
        else:
            rows = [{"topic": "T", "body": b} for b in bodies]
            offsets = [r.commitlog_offset for r in s.put_batch(rows, compression=codec)]
        got = [s.look_message_by_offset(o) for o in offsets]
    for body, m in zip(bodies, got, strict=True):
        if m.sys_flag & 1:
            assert m.sys_flag & 0x701 == CODECS[codec]
            assert len(m.body) < len(body)
        else:
            assert m.body == body
        assert rocketstore.decompress_body(m.body, m.sys_flag) == body
    flags = [m.sys_flag & 1 for m in got]
    assert flags == [1, 0, 1, 0, 0, 1]


def test_threshold_and_level(store_dir: Path) -> None:
    with MessageStore(store_dir) as s:
        small = _text(300)
        r = s.put_batch(
            [{"topic": "T", "body": small}], compression="zstd", compress_over=0, compress_level=19
        )
        m = s.look_message_by_offset(r[0].commitlog_offset)
        assert m.sys_flag & 0x701 == 0x201
        assert rocketstore.decompress_body(m.body, m.sys_flag) == small
        for level in (0, 23):
            with pytest.raises(InvalidConfigError):
                s.put_batch(
                    [{"topic": "T", "body": small}], compression="zstd", compress_level=level
                )
        with pytest.raises(InvalidConfigError):
            s.put_batch(pa.table({"topic": ["T"], "body": [small]}), compression="snappy")
        assert s.max_commitlog_offset() == r[0].commitlog_offset + r[0].wrote_bytes


def test_bodies_stay_verifiable(store_dir: Path) -> None:
    """``verify_store`` digests the body a consumer sees: a compressed store and a plain one
    with the same bodies have the same body digest, and both pass every check."""
    bodies = _bodies()
    table = pa.table({"topic": ["T"] * len(bodies), "body": bodies})
    digests = []
    for name, codec in (("plain", None), ("lz4", "lz4")):
        with MessageStore(store_dir / name) as s:
            s.put_batch(table, compression=codec)
        report = rocketstore.verify_store(store_dir / name)
        assert report.ok, report
        digests.append(report.body_digest)
    assert digests[0] == digests[1]


def test_decompress_body_rejects_bad_data() -> None:
    stored, bits = rocketstore.compress_body(b"ab" * 50_000, "lz4")
    assert bits == 0x101
    with pytest.raises(CorruptionError):
        rocketstore.decompress_body(stored[:-9], bits)
    with pytest.raises(CorruptionError):
        rocketstore.decompress_body(stored, bits, max_size=99_999)
    with pytest.raises(CorruptionError):
        rocketstore.decompress_body(b"\x00" * 40, 0x401)  # type 4 is not RocketMQ's
    for flag in (0x1, 0x101, 0x201, 0x301):  # garbage for every codec, legacy zlib included
        with pytest.raises(CorruptionError):
            rocketstore.decompress_body(os.urandom(64), flag)
    assert rocketstore.decompress_body(b"plain", 0x300) == b"plain"  # bit 0 clear: as is


def _java() -> tuple[str, Path]:
    java = shutil.which("java")
    jars: Path | None = None
    try:
        import pyspark

        jars = Path(pyspark.__file__).parent / "jars"
    except ImportError:
        pass
    ok = (
        java is not None
        and jars is not None
        and any(jars.glob("lz4-java-*.jar"))
        and any(jars.glob("zstd-jni-*.jar"))
    )
    if not ok:
        reason = "the Java codec check needs java and pyspark's lz4-java and zstd-jni jars"
        if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
            pytest.fail(f"{reason} (CI=true: missing dependencies are errors, not skips)")
        pytest.skip(reason)
    assert java is not None
    assert jars is not None
    return java, jars


def test_rocketmq_java_codecs_agree(store_dir: Path, tmp_path: Path) -> None:
    """Bodies we compress decompress with RocketMQ's Java codecs, and bodies those codecs
    compress decompress here."""
    java, jars = _java()
    bodies = [_text(5000, 1), _text(200_000, 4), _text(4096, 3)]
    jobs: list[str] = []
    expected: dict[Path, bytes] = {}
    ours: dict[Path, tuple[int, bytes]] = {}
    for codec, flag in CODECS.items():
        with MessageStore(store_dir / codec) as s:
            results = s.put_batch(
                pa.table({"topic": ["T"] * len(bodies), "body": bodies}), compression=codec
            )
            for i, o in enumerate(results.column("commitlog_offset").to_pylist()):
                m = s.look_message_by_offset(int(str(o)))
                assert m.sys_flag & 0x701 == flag
                stored = tmp_path / f"ours-{codec}-{i}"
                stored.write_bytes(m.body)
                jobs.append(f"decompress {codec} {stored} {stored}.out")
                expected[Path(f"{stored}.out")] = bodies[i]
        for i, body in enumerate(bodies):
            src = tmp_path / f"java-{codec}-{i}"
            src.write_bytes(body)
            jobs.append(f"compress {codec} {src} {src}.z")
            ours[Path(f"{src}.z")] = (flag, body)
    proc = subprocess.run(
        [java, "-cp", f"{jars}/*", str(JAVA_CHECK)],
        input="\n".join(jobs),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for out, body in expected.items():
        assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(body).digest(), out
    for z, (flag, body) in ours.items():
        assert rocketstore.decompress_body(z.read_bytes(), flag) == body, z
