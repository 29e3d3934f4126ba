"""Store roots given as URIs: ``file://`` (a local path) and remote roots on object stores and
HDFS (``s3://``, ``s3a://``, ``gs://``, ``abfs://``, ``abfss://``, ``hdfs://``).

A store is a directory of memory-mapped files, so it is never written or read in place on a
remote file system: a writer builds its store on the local disk and uploads the closed store's
files (:meth:`RemoteRoot.upload_store`); a reader downloads the files of a store it needs into a
local cache bounded in size (:meth:`RemoteRoot.fetch`) and opens the local copy.

What a remote root holds (``<root>`` is the URI)::

    <root>/_manifests/<commit, 20 digits>.json   one per committed job, created once (the
                                                   commit point; conditionally where supported)
    <root>/_SUCCESS                                a copy of the newest manifest (a hint)
    <root>/store-<n>-<token>/<the store's files>   the published stores (``n`` orders them,
                                                   ``token`` is the publishing commit's own;
                                                   older roots: ``store-<n>``)
    <root>/_temporary/<job id>/part-<p>-<attempt>/ what write tasks uploaded; never read
    <root>/_temporary/stream-<query id>/<batch id>/<run id>/part-<p>-<attempt>/
                                                   what the stream sink's tasks uploaded

Readers never list the root: the newest manifest is found from the hint by probing the next
commit numbers (``_manifests/<c + 1>.json``, ...), and each store is the exact list of files
(name, size, SHA-256) its manifest entry records. The files a task uploaded but no manifest lists
(a killed task, a driver killed before its commit) are therefore never read.

The client is ``pyarrow.fs`` (already a dependency: S3, GCS, Azure Data Lake and HDFS in one
API, native code that releases the interpreter). For S3 the conditional create of a manifest
(``If-None-Match: *``) needs ``boto3`` (``pip install 'rocketstore[s3]'``), which ``pyarrow.fs``
does not expose; without it the create is a check then a write (see docs/spark.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from rocketstore.exceptions import CommitConflictError, InvalidConfigError, UnsupportedRootError

__all__ = [
    "REMOTE_SCHEMES",
    "SUPPORTED_SCHEMES",
    "RemoteRoot",
    "is_remote",
    "local_work_dir",
    "resolve_root",
    "split_settings",
]

#: Remote schemes served (each through ``pyarrow.fs``).
REMOTE_SCHEMES = ("s3", "s3a", "gs", "abfs", "abfss", "hdfs")
#: Every scheme a root may have (a path without a scheme is a local path).
SUPPORTED_SCHEMES = ("file", *REMOTE_SCHEMES)

#: Where the newest manifest's copy (the hint) lives, as on a local root.
MANIFEST = "_SUCCESS"
#: Directory of the commit manifests, one per committed job.
MANIFESTS = "_manifests"
#: Directory of what tasks uploaded (as on a local root, never read).
TEMPORARY = "_temporary"

#: Default bound of a process's download cache, bytes (the option ``cacheMaxBytes``).
DEFAULT_CACHE_BYTES = 8 << 30

#: Setting name prefixes taken from options (``fs.s3a.endpoint``, ...) and Spark's Hadoop conf
#: (``spark.hadoop.fs.s3a.endpoint``).
_SETTING_PREFIXES = ("fs.", "spark.hadoop.fs.")
#: Options of a remote root that are not file system settings.
ROOT_OPTIONS = ("cacheDir", "cacheMaxBytes")

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):(.*)$", re.S)
_CHUNK = 8 << 20
#: A cached store used this recently is never evicted (a task may be opening it).
_IN_USE_SECONDS = 60.0
_UPLOAD_THREADS = 4

# Test-only kill points (tests/test_remote_cluster.py kills an executor during its upload and a
# driver just before its commit on a Spark cluster). Inert unless both the point's variable and
# KILL_MARKERS are set, which nothing but that test does; each fires once per marker directory.
KILL_AFTER_UPLOADS = "ROCKETSTORE_TEST_KILL_EXECUTOR_AFTER_UPLOADS"  # a number of files
KILL_BEFORE_MANIFEST = "ROCKETSTORE_TEST_KILL_DRIVER_BEFORE_MANIFEST"  # a commit number
KILL_MARKERS = "ROCKETSTORE_TEST_KILL_MARKERS"  # a directory: the test's coordination only


def kill_point_for_tests(variable: str, note: Mapping[str, Any], value: str | None = None) -> None:
    """Test-only: if ``variable`` (equal to ``value`` where given) and :data:`KILL_MARKERS` are
    set and this point has not fired yet (its marker, created exclusively, records ``note``),
    SIGKILLs the JVM this Python worker descends from (an executor, or the driver's JVM and the
    driver process above it), then this process. Does nothing otherwise."""
    markers, set_to = os.environ.get(KILL_MARKERS), os.environ.get(variable)
    if not markers or not set_to or (value is not None and set_to != value):
        return
    try:
        fd = os.open(os.path.join(markers, variable), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as f:
        json.dump(dict(note), f)
    victims: list[int] = []
    pid = os.getppid()
    while pid > 1:  # up to the nearest java process (a worker is forked by pyspark's daemon)
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if comm == "java":
            victims.append(pid)
            if variable == KILL_BEFORE_MANIFEST and ppid > 1:
                victims.append(ppid)  # the driver process that started the JVM
            break
        pid = ppid
    for victim in [*reversed(victims), os.getpid()]:
        os.kill(victim, signal.SIGKILL)


def _unsupported(text: str, scheme: str, why: str) -> UnsupportedRootError:
    served = ", ".join(f"{s}://" for s in SUPPORTED_SCHEMES)
    err = UnsupportedRootError(
        f"store root {text!r}: {why}; rocketstore serves local paths and {served} URIs"
    )
    err.key = "path"
    err.scheme = scheme
    err.supported = SUPPORTED_SCHEMES
    return err


def _scheme_of(text: str) -> tuple[str, str] | None:
    """``(scheme, rest)`` if ``text`` is a URI (``scheme://...``, or ``scheme:/...`` of a scheme
    rocketstore knows), else None (a local path, even one with a colon in a name)."""
    m = _URI.match(text)
    if m is None:
        return None
    scheme, rest = m.group(1).lower(), m.group(2)
    if rest.startswith("//") or scheme in SUPPORTED_SCHEMES:
        return scheme, rest
    return None


def is_remote(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a URI of a remote scheme (it is not checked any further)."""
    found = _scheme_of(os.fspath(path)) if isinstance(path, str) else None
    return found is not None and found[0] in REMOTE_SCHEMES


def split_settings(options: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``(settings, rest)``: the file system settings among ``options`` (``fs.*`` and
    ``spark.hadoop.fs.*`` keys, returned without ``spark.hadoop.``) and ``cacheDir`` /
    ``cacheMaxBytes``; ``rest`` is everything else. Setting names keep their case
    (Hadoop's are case-sensitive); Spark hands data source options lower-cased, which is how
    every Hadoop setting rocketstore reads is spelled apart from the bucket names in them."""
    settings: dict[str, str] = {}
    rest: dict[str, str] = {}
    root_options = {o.lower() for o in ROOT_OPTIONS}
    for k, v in options.items():
        low = k.lower()
        if low.startswith(_SETTING_PREFIXES):
            name = k[len("spark.hadoop.") :] if low.startswith("spark.hadoop.") else k
            settings[name.lower()] = str(v)
        elif low in root_options:
            settings[low] = str(v)
        else:
            rest[k] = v
    return settings, rest


def resolve_root(
    path: str | os.PathLike[str], options: Mapping[str, str] | None = None
) -> tuple[str, RemoteRoot | None]:
    """``(absolute local path, None)`` for a local path or a ``file://`` URI, ``(URI,
    RemoteRoot)`` for a remote root; :class:`UnsupportedRootError` for any other scheme.

    ``options`` holds the file system settings (``fs.s3a.endpoint``, ...; see
    :func:`split_settings`); other keys are ignored.

    Example::

        resolve_root("file:///data/stores")  # ('/data/stores', None)
        uri, remote = resolve_root("s3a://bucket/stores", {"fs.s3a.endpoint": "http://h:9000"})
    """
    if not isinstance(path, str):
        return os.path.abspath(os.fspath(path)), None
    text = path
    found = _scheme_of(text)
    if found is None:
        return os.path.abspath(text), None
    scheme, rest = found
    if scheme == "file":
        if rest.startswith("//"):
            authority, _, local = rest[2:].partition("/")
            if authority not in ("", "localhost"):
                raise _unsupported(
                    text, scheme, f"a file:// URI names a path on this host, not on {authority!r}"
                )
            local = "/" + local
        else:
            local = rest
        if not local.startswith("/"):
            raise _unsupported(text, scheme, "a file: URI needs an absolute path")
        return os.path.abspath(unquote(local)), None
    if scheme not in REMOTE_SCHEMES:
        raise _unsupported(text, scheme, f"{scheme}:// is not a scheme rocketstore serves")
    if not rest.startswith("//"):
        raise _unsupported(text, scheme, f"a {scheme} URI is {scheme}://<bucket or host>/<path>")
    authority, _, prefix = rest[2:].partition("/")
    prefix = unquote(prefix).strip("/")
    if not authority and scheme != "hdfs":
        raise _unsupported(text, scheme, f"a {scheme} URI names its bucket: {scheme}://BUCKET/")
    if scheme in ("abfs", "abfss") and "@" not in authority:
        raise _unsupported(
            text, scheme, f"an {scheme} URI is {scheme}://CONTAINER@ACCOUNT.dfs.core.windows.net/"
        )
    if any(part in (".", "..") for part in prefix.split("/")):
        raise _unsupported(text, scheme, "the path may not have '.' or '..' parts")
    settings, _ = split_settings(options or {})
    uri = f"{scheme}://{authority}/{prefix}".rstrip("/")
    remote = RemoteRoot(uri=uri, scheme=scheme, authority=authority, prefix=prefix)
    remote.settings = {k: v for k, v in settings.items() if k.startswith("fs.")}
    if "cachedir" in settings:
        remote.cache_dir = settings["cachedir"]
    if "cachemaxbytes" in settings:
        try:
            remote.cache_max_bytes = int(settings["cachemaxbytes"])
        except ValueError:
            remote.cache_max_bytes = -1
        if remote.cache_max_bytes < 0:
            err = InvalidConfigError(
                "option 'cacheMaxBytes' must be a byte count >= 0, not "
                f"{settings['cachemaxbytes']!r}"
            )
            err.key = "cacheMaxBytes"
            raise err
    return uri, remote


def local_work_dir() -> Path:
    """The local directory where write tasks build stores and readers cache downloads:
    ``ROCKETSTORE_LOCAL_DIR``, else the first of Spark's ``SPARK_LOCAL_DIRS`` (set for
    executors), else YARN's ``LOCAL_DIRS``, else the system temporary directory."""
    for var in ("ROCKETSTORE_LOCAL_DIR", "SPARK_LOCAL_DIRS", "LOCAL_DIRS"):
        value = os.environ.get(var, "")
        for d in value.split(","):
            if d.strip():
                return Path(d.strip())
    return Path(tempfile.gettempdir())


def _false(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "false"


@dataclass
class RemoteRoot:
    """A store root on a remote file system; picklable (the client is made again where used).

    ``settings`` are Hadoop-style file system settings (``fs.s3a.endpoint``, ...), the ones
    listed in docs/spark.md are honoured; credentials not given there come from the client's
    standard chain (``AWS_*`` variables, ``~/.aws``, instance roles; Google application default
    credentials; ...).
    """

    uri: str
    scheme: str
    authority: str
    prefix: str
    settings: dict[str, str] = field(default_factory=dict)
    cache_dir: str | None = None
    cache_max_bytes: int = DEFAULT_CACHE_BYTES
    _fs: Any = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_fs"] = None
        return state

    # ---- names ---------------------------------------------------------------------------

    def child(self, rel: str) -> str:
        """The URI of ``rel`` below the root."""
        return f"{self.uri}/{rel}".rstrip("/") if rel not in ("", ".") else self.uri

    def rel_of(self, uri: str) -> str:
        """``rel`` of a URI :meth:`child` made (``.`` for the root itself)."""
        if uri == self.uri:
            return "."
        if not uri.startswith(self.uri + "/"):
            raise ValueError(f"{uri} is not below {self.uri}")
        return uri[len(self.uri) + 1 :]

    def _path(self, rel: str = "") -> str:
        """The path of ``rel`` in ``pyarrow.fs``'s terms."""
        if self.scheme in ("abfs", "abfss"):
            base = self.authority.split("@", 1)[0]
        elif self.scheme == "hdfs":
            base = ""
        else:
            base = self.authority
        parts = [p for p in (base, self.prefix, rel) if p and p != "."]
        path = "/".join(parts)
        return "/" + path if self.scheme == "hdfs" else path

    # ---- the client ----------------------------------------------------------------------

    def _setting(self, name: str) -> str | None:
        """``fs.s3a.<name>``, the per-bucket ``fs.s3a.bucket.<bucket>.<name>`` first."""
        if self.scheme in ("s3", "s3a"):
            bucket = self.settings.get(f"fs.s3a.bucket.{self.authority.lower()}.{name}")
            return bucket if bucket is not None else self.settings.get(f"fs.s3a.{name}")
        return self.settings.get(name)

    def _s3_endpoint(self) -> tuple[str | None, str]:
        """``(host[:port] or None, scheme)`` from ``fs.s3a.endpoint`` (with or without a
        scheme) and ``fs.s3a.connection.ssl.enabled``."""
        endpoint = self._setting("endpoint")
        if not endpoint:
            return None, "https"
        scheme = "http" if _false(self._setting("connection.ssl.enabled")) else "https"
        if "://" in endpoint:
            scheme, endpoint = endpoint.split("://", 1)
        return endpoint.rstrip("/"), scheme

    def _s3_region(self) -> str | None:
        region = self._setting("endpoint.region")
        if region:
            return region
        if self._s3_endpoint()[0] is not None:  # a non-AWS server: no region lookup
            return (
                os.environ.get("AWS_REGION")
                or os.environ.get("AWS_DEFAULT_REGION")
                or ("us-east-1")
            )
        return None

    def _s3_credentials(self) -> dict[str, Any]:
        provider = self._setting("aws.credentials.provider") or ""
        if "Anonymous" in provider:
            return {"anonymous": True}
        access, secret = self._setting("access.key"), self._setting("secret.key")
        if access and secret:
            creds: dict[str, Any] = {"access_key": access, "secret_key": secret}
            token = self._setting("session.token")
            if token:
                creds["session_token"] = token
            return creds
        return {}

    def filesystem(self) -> Any:
        """The ``pyarrow.fs`` file system of the root (made once per process)."""
        if self._fs is not None:
            return self._fs
        from pyarrow import fs

        if self.scheme in ("s3", "s3a"):
            kw: dict[str, Any] = dict(self._s3_credentials())
            endpoint, scheme = self._s3_endpoint()
            if endpoint is not None:
                kw["endpoint_override"] = endpoint
                kw["scheme"] = scheme
                if _false(self._setting("path.style.access")):
                    kw["force_virtual_addressing"] = True
            region = self._s3_region()
            if region:
                kw["region"] = region
            self._fs = fs.S3FileSystem(**kw)
        elif self.scheme == "gs":
            gkw: dict[str, Any] = {}
            url = self.settings.get("fs.gs.storage.root.url")
            if url:
                gscheme, _, host = url.partition("://")
                gkw["endpoint_override"], gkw["scheme"] = host.rstrip("/"), gscheme
            project = self.settings.get("fs.gs.project.id")
            if project:
                gkw["project_id"] = project
            if (self.settings.get("fs.gs.auth.type") or "").upper() == "UNAUTHENTICATED":
                gkw["anonymous"] = True  # e.g. an emulator (the GCS connector's own value)
            self._fs = fs.GcsFileSystem(**gkw)
        elif self.scheme in ("abfs", "abfss"):
            host = self.authority.split("@", 1)[1]
            account = host.split(".", 1)[0]
            akw: dict[str, Any] = {"account_name": account}
            key = self.settings.get(f"fs.azure.account.key.{host.lower()}")
            if key:
                akw["account_key"] = key
            self._fs = fs.AzureFileSystem(**akw)
        else:  # hdfs
            host, _, port = self.authority.partition(":")
            try:
                self._fs = fs.HadoopFileSystem(host or "default", int(port) if port else 8020)
            except OSError as e:
                raise OSError(
                    f"{self.uri}: HDFS needs libhdfs and a Hadoop client (HADOOP_HOME, "
                    f"CLASSPATH from `hadoop classpath --glob`, JAVA_HOME): {e}"
                ) from e
        return self._fs

    # ---- objects -------------------------------------------------------------------------

    def exists(self, rel: str) -> bool:
        from pyarrow import fs

        info = self.filesystem().get_file_info(self._path(rel))
        return bool(info.type != fs.FileType.NotFound)

    def read_bytes(self, rel: str) -> bytes | None:
        """The object's bytes, None if there is none."""
        try:
            with self.filesystem().open_input_stream(self._path(rel)) as f:
                return bytes(f.read())
        except FileNotFoundError:
            return None

    def write_bytes(self, rel: str, data: bytes) -> None:
        with self.filesystem().open_output_stream(self._path(rel), metadata={}) as f:
            f.write(data)

    def create_exclusive(self, rel: str, data: bytes) -> None:
        """Creates ``rel`` only if it does not exist; :class:`CommitConflictError` if it does.

        On S3 with boto3 installed: one ``PUT`` with ``If-None-Match: *`` (atomic on the
        server). Elsewhere: a check, then the write (two jobs committing at the same instant
        are not told apart).
        """
        if self.scheme in ("s3", "s3a"):
            client = self._boto3_client()
            if client is not None:
                from botocore.exceptions import ClientError

                bucket = self.authority
                key = self._path(rel)[len(bucket) + 1 :]
                try:
                    client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
                except ClientError as e:
                    code = str(e.response.get("Error", {}).get("Code", ""))
                    if code in ("PreconditionFailed", "ConditionalRequestConflict", "412"):
                        raise self._conflict(rel) from None
                    raise
                return
        if self.exists(rel):
            raise self._conflict(rel)
        self.write_bytes(rel, data)

    def _conflict(self, rel: str) -> CommitConflictError:
        err = CommitConflictError(
            f"{self.child(rel)} exists: another job committed to {self.uri} at the same time; "
            "nothing of this job is published (rerun it)"
        )
        err.path = self.child(rel)
        return err

    def _boto3_client(self) -> Any:
        """An S3 client of boto3 with the root's settings, or None without boto3."""
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            return None
        endpoint, scheme = self._s3_endpoint()
        creds = self._s3_credentials()
        kw: dict[str, Any] = {}
        if endpoint is not None:
            kw["endpoint_url"] = f"{scheme}://{endpoint}"
        region = self._s3_region()
        if region:
            kw["region_name"] = region
        if "access_key" in creds:
            kw["aws_access_key_id"] = creds["access_key"]
            kw["aws_secret_access_key"] = creds["secret_key"]
            kw["aws_session_token"] = creds.get("session_token")
        style = (
            "path"
            if endpoint is not None and not _false(self._setting("path.style.access"))
            else "auto"
        )
        config = Config(s3={"addressing_style": style})
        if creds.get("anonymous"):
            from botocore import UNSIGNED

            config = config.merge(Config(signature_version=UNSIGNED))
        return boto3.client("s3", config=config, **kw)

    def delete_tree(self, rel: str) -> None:
        """Deletes everything below ``rel`` (nothing if there is nothing)."""
        fs = self.filesystem()
        with contextlib.suppress(FileNotFoundError):
            fs.delete_dir(self._path(rel))

    def list_files(self, rel: str) -> list[dict[str, Any]]:
        """Every file below ``rel`` as ``{"name", "size"}`` (names relative to ``rel``); used
        only for a store whose manifest entry lists no files (copied there by other tools)."""
        from pyarrow import fs

        base = self._path(rel)
        sel = fs.FileSelector(base, recursive=True, allow_not_found=True)
        out = []
        for info in self.filesystem().get_file_info(sel):
            if info.type == fs.FileType.File:
                out.append({"name": info.path[len(base) + 1 :], "size": int(info.size or 0)})
        return sorted(out, key=lambda f: str(f["name"]))

    # ---- stores ------------------------------------------------------------------------

    def upload_store(self, local: Path, rel: str) -> list[dict[str, Any]]:
        """Uploads every file of the (closed) store at ``local`` below ``rel``; returns the
        file list a manifest entry records: ``{"name", "size", "sha256"}`` per file (plus
        ``extents`` for a sparse one) and ``{"name": "dir/", "dir": true}`` per empty
        directory.

        A store's files have their full RocketMQ sizes (a commit log file is
        ``mappedFileSizeCommitLog`` bytes, an index file its whole slot table) but a closed
        store keeps only the blocks it uses: the rest are holes. So the object holds the
        file's data blocks only, one after the other (``SEEK_DATA``/``SEEK_HOLE``), and
        ``extents`` lists where each goes (``[offset, length]``); ``sha256`` is the object's
        hash, computed as the file is read for the upload. A download writes each extent at
        its offset and extends the file to ``size``: byte for byte the file the task wrote,
        with the same holes."""
        files: list[str] = []
        listing: list[dict[str, Any]] = []
        for dirpath, dirnames, filenames in os.walk(local):
            here = Path(dirpath)
            if not dirnames and not filenames and here != local:
                listing.append({"name": here.relative_to(local).as_posix() + "/", "dir": True})
            files.extend((here / f).relative_to(local).as_posix() for f in filenames)
        fs = self.filesystem()
        kill_after = int(os.environ.get(KILL_AFTER_UPLOADS) or 0)  # test-only; 0 in normal use
        lock = threading.Lock()
        done_names: list[str] = []

        def put(name: str) -> dict[str, Any]:
            h = hashlib.sha256()
            sent = 0
            with (
                open(local / name, "rb") as src,
                fs.open_output_stream(self._path(f"{rel}/{name}"), metadata={}) as dst,
            ):
                size = os.fstat(src.fileno()).st_size
                extents = _extents(src.fileno(), size)
                for offset, length in extents:
                    src.seek(offset)
                    done = 0
                    while done < length:
                        chunk = src.read(min(_CHUNK, length - done))
                        if not chunk:
                            raise OSError(f"{local / name}: shrank while it was uploaded")
                        h.update(chunk)
                        dst.write(chunk)
                        done += len(chunk)
                    sent += done
            out: dict[str, Any] = {"name": name, "size": size, "sha256": h.hexdigest()}
            if extents != [(0, size)]:
                out["extents"] = [list(e) for e in extents]
            if kill_after:
                with lock:
                    done_names.append(name)
                    if len(done_names) >= kill_after:
                        kill_point_for_tests(
                            KILL_AFTER_UPLOADS, {"rel": rel, "uploaded": done_names}
                        )
            return out

        with ThreadPoolExecutor(_UPLOAD_THREADS, thread_name_prefix="rocketstore-upload") as ex:
            listing.extend(ex.map(put, sorted(files)))
        return sorted(listing, key=lambda f: str(f["name"]))

    def copy_store(self, src: str, dest: str, files: Iterable[Mapping[str, Any]]) -> None:
        """Copies the listed files from ``src`` to ``dest`` (server side where the store can)."""
        fs = self.filesystem()
        names = [str(f["name"]) for f in files if not f.get("dir")]

        def copy(name: str) -> None:
            fs.copy_file(self._path(f"{src}/{name}"), self._path(f"{dest}/{name}"))

        with ThreadPoolExecutor(_UPLOAD_THREADS * 2, thread_name_prefix="rocketstore-copy") as ex:
            list(ex.map(copy, names))

    # ---- manifests ---------------------------------------------------------------------

    def latest_manifest(self) -> tuple[int, dict[str, Any] | None]:
        """``(commit number, manifest)`` of the newest committed job, ``(0, None)`` if none.

        Starts at the commit the ``_SUCCESS`` hint names and probes the next numbers: a driver
        killed after its manifest was created but before the hint was written still counts.
        A ``_SUCCESS`` without a commit number (a root copied from a local one) is the manifest.
        """
        raw = self.read_bytes(MANIFEST)
        hint: dict[str, Any] | None = None
        if raw is not None:
            try:
                data = json.loads(raw)
            except ValueError:
                data = None
            if isinstance(data, dict):
                hint = data
        commit = int(hint.get("commit", 0)) if hint is not None else 0
        newest = commit
        while self.exists(manifest_name(newest + 1)):
            newest += 1
        if newest == 0:
            return 0, hint
        if hint is not None and newest == commit:
            return commit, hint
        data = json.loads(self.read_bytes(manifest_name(newest)) or b"null")
        if not isinstance(data, dict):
            raise ValueError(f"{self.child(manifest_name(newest))} is not a rocketstore manifest")
        return newest, data

    # ---- orphans -------------------------------------------------------------------------

    def orphans(self, min_age_seconds: float, now: float | None = None) -> list[dict[str, Any]]:
        """What no reader will ever read: the ``store-*`` prefixes the newest manifest does not
        list (copies of a commit whose driver died before its manifest, stores an ``overwrite``
        replaced whose deletion did not finish) and the ``_temporary/<job>`` prefixes (uploads
        of killed jobs and attempts). One dict per prefix: ``name``, ``files``, ``bytes``,
        ``age_seconds`` (of its newest object) and ``old_enough`` (``age_seconds >=
        min_age_seconds``: a commit or job in flight writes objects younger than that).

        Lists the root (the only operation that does: readers and commits never list). The
        manifest is read after the listing, so a store a commit publishes meanwhile is listed
        by it; one copied after the listing is not seen at all.
        """
        from pyarrow import fs

        base = self._path()
        now = time.time() if now is None else now
        groups: dict[str, dict[str, Any]] = {}
        sel = fs.FileSelector(base, recursive=True, allow_not_found=True)
        for info in self.filesystem().get_file_info(sel):
            if info.type != fs.FileType.File:
                continue
            rel = info.path[len(base) + 1 :] if base else info.path
            parts = rel.split("/")
            if parts[0] == TEMPORARY and len(parts) > 2:
                name = f"{TEMPORARY}/{parts[1]}"
            elif parts[0].startswith("store-") and len(parts) > 1:
                name = parts[0]
            else:
                continue  # manifests, _SUCCESS, anything not ours
            g = groups.setdefault(name, {"name": name, "files": 0, "bytes": 0, "mtime": 0.0})
            g["files"] += 1
            g["bytes"] += int(info.size or 0)
            mtime = info.mtime.timestamp() if info.mtime is not None else now
            g["mtime"] = max(g["mtime"], mtime)
        _, manifest = self.latest_manifest()
        listed = {
            str(e.get("path"))
            for e in (manifest or {}).get("stores", [])
            if isinstance(e, dict) and e.get("path")
        }
        out = []
        for name in sorted(groups):
            if name in listed:
                continue
            g = groups[name]
            age = max(0.0, now - float(g.pop("mtime")))
            out.append({**g, "age_seconds": age, "old_enough": age >= min_age_seconds})
        return out

    # ---- the download cache ------------------------------------------------------------

    def cache_root(self) -> Path:
        return Path(self.cache_dir) if self.cache_dir else local_work_dir() / "rocketstore-cache"

    def store_files(self, entry: Mapping[str, Any]) -> list[dict[str, Any]]:
        files = entry.get("files")
        if isinstance(files, list):
            return [dict(f) for f in files]
        return self.list_files(str(entry.get("path", ".")))

    def fetch(self, entry: Mapping[str, Any]) -> Path:
        """The local copy of the store of manifest entry ``entry``, downloaded if the cache
        has no complete copy of exactly these files; each file's size and SHA-256 are checked
        against the entry (a mismatch is an ``OSError`` and nothing is cached).

        Processes share the cache: a store is downloaded into a private directory and renamed
        into place, under a lock per store so that two tasks of one executor download it once.
        Least recently used stores are then removed until the cache is within its bound
        (the store just fetched, and any other used in the last minute, which a task of
        another worker may be opening, are kept whatever their size).
        """
        import fcntl

        rel = str(entry.get("path", "."))
        files = self.store_files(entry)
        key = hashlib.sha256(
            json.dumps([self.uri, rel, files], sort_keys=True).encode()
        ).hexdigest()[:24]
        root = self.cache_root()
        root.mkdir(parents=True, exist_ok=True)
        home = root / key
        store = home / "store"
        done = home / ".complete"
        with open(root / f".{key}.lock", "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            if done.exists():
                os.utime(done)
                return store
            tmp = root / f".tmp-{key}-{uuid.uuid4().hex[:8]}"
            try:
                size = self._download(rel, files, tmp / "store")
                if home.exists():
                    shutil.rmtree(home)
                os.rename(tmp, home)
                done.write_text(json.dumps({"uri": self.child(rel), "bytes": size}))
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        self._evict(keep=key)
        return store

    def _download(self, rel: str, files: list[dict[str, Any]], dest: Path) -> int:
        fs = self.filesystem()
        dest.mkdir(parents=True)

        def get(f: dict[str, Any]) -> int:
            name = str(f["name"])
            target = (dest / name).resolve()
            if dest.resolve() not in target.parents:
                raise OSError(f"{self.child(rel)}: file name {name!r} leaves the store")
            if f.get("dir"):
                target.mkdir(parents=True, exist_ok=True)
                return 0
            target.parent.mkdir(parents=True, exist_ok=True)
            h = hashlib.sha256()
            got = 0
            size = int(f.get("size", 0))
            extents = f.get("extents")
            places = [(int(o), int(n)) for o, n in extents] if extents is not None else None
            with (
                fs.open_input_stream(self._path(f"{rel}/{name}")) as src,
                open(target, "wb") as out,
            ):
                # The object's bytes go, in order, to the extents (all of it from 0 without).
                for offset, length in places if places is not None else [(0, 1 << 62)]:
                    out.seek(offset)
                    done = 0
                    while done < length:
                        chunk = src.read(min(_CHUNK, length - done))
                        if not chunk:
                            break
                        h.update(chunk)
                        out.write(chunk)
                        done += len(chunk)
                    got += done
                want_len = sum(n for _, n in places) if places is not None else size
                want_hash = f.get("sha256")
                if got != want_len or (want_hash is not None and h.hexdigest() != want_hash):
                    raise OSError(
                        f"{self.child(rel)}/{name}: downloaded {got} bytes with SHA-256 "
                        f"{h.hexdigest()}, the manifest lists {want_len} bytes with {want_hash}"
                    )
                if src.read(1):
                    raise OSError(f"{self.child(rel)}/{name}: longer than its extents")
                out.truncate(size)  # what no extent covers: holes, as the task left them
            return got

        with ThreadPoolExecutor(_UPLOAD_THREADS, thread_name_prefix="rocketstore-fetch") as ex:
            return sum(ex.map(get, files))

    def _evict(self, keep: str) -> None:
        root = self.cache_root()
        entries: list[tuple[float, int, Path]] = []
        total = 0
        for done in root.glob("*/.complete"):
            try:
                size = int(json.loads(done.read_text()).get("bytes", 0))
                when = done.stat().st_mtime
            except (OSError, ValueError):
                continue
            total += size
            if done.parent.name != keep:
                entries.append((when, size, done.parent))
        recent = time.time() - _IN_USE_SECONDS
        for when, size, home in sorted(entries):
            if total <= self.cache_max_bytes or when > recent:
                break
            # Open files of a store being read stay readable after the unlink.
            with contextlib.suppress(OSError):
                (home / ".complete").unlink()
                shutil.rmtree(home, ignore_errors=True)
                total -= size


def _extents(fd: int, size: int) -> list[tuple[int, int]]:
    """``(offset, length)`` of each data region of the open file ``fd`` (``size`` bytes);
    what they do not cover are holes. The whole file where the file system cannot tell (no
    ``SEEK_DATA``)."""
    import errno

    out: list[tuple[int, int]] = []
    pos = 0
    try:
        while pos < size:
            data = os.lseek(fd, pos, os.SEEK_DATA)
            hole = min(os.lseek(fd, data, os.SEEK_HOLE), size)
            out.append((data, hole - data))
            pos = hole
    except OSError as e:
        if e.errno != errno.ENXIO:  # ENXIO: no data at or after pos
            return [(0, size)]
    finally:
        os.lseek(fd, 0, os.SEEK_SET)
    return out


def manifest_name(commit: int) -> str:
    """The name of commit ``commit``'s manifest below the root."""
    return f"{MANIFESTS}/{commit:020d}.json"


def spark_settings(spark: Any) -> dict[str, str]:
    """The file system settings of a SparkSession's conf: its ``spark.hadoop.fs.*`` entries
    (from the launch conf and ``spark.conf.set``) as ``fs.*``.

    Example::

        spark_settings(spark)  # {'fs.s3a.endpoint': 'http://minio:9000', ...}
    """
    pairs = list(spark.sparkContext.getConf().getAll())
    pairs.extend(dict(spark.conf.getAll).items())
    return {
        k[len("spark.hadoop.") :].lower(): str(v)
        for k, v in pairs
        if k.startswith("spark.hadoop.fs.")
    }


def materialize(
    uri: str, settings: Mapping[str, str], workdir: Path
) -> tuple[Path, RemoteRoot, dict[str, Any]]:
    """Downloads the stores of a remote root (or the one store a URI below it names) and
    lays them out in ``workdir/root`` as a local root (the downloaded stores, the manifest as
    ``_SUCCESS``). Returns ``(local path, remote root, manifest)``: the local path
    is the root, or the one store. For the ``rocketstore`` command (``inspect``, ``dump``).
    """
    _, remote = resolve_root(uri, settings)
    if remote is None:
        raise ValueError(f"{uri} is not a remote root")
    remote.cache_dir = str(workdir / "cache")
    _, manifest = remote.latest_manifest()
    store: str | None = None
    if manifest is None and "/" in remote.prefix:  # maybe one store of a root
        parent_uri, _, name = remote.uri.rpartition("/")
        _, parent = resolve_root(parent_uri, settings)
        if parent is not None:
            parent.cache_dir = remote.cache_dir
            _, manifest = parent.latest_manifest()
            if manifest is not None:
                remote, store = parent, name
    if manifest is None:
        raise FileNotFoundError(
            2, "no rocketstore manifest (_SUCCESS, _manifests/) at the remote root", uri
        )
    entries = [e for e in manifest.get("stores", []) if isinstance(e, dict) and "path" in e]
    if store is not None:
        entries = [e for e in entries if str(e["path"]) == store]
        if not entries:
            raise FileNotFoundError(2, "the manifest does not list this store", uri)
    local = workdir / "root"
    local.mkdir(parents=True, exist_ok=True)
    (local / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    for entry in entries:
        target = local / str(entry["path"])
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(remote.fetch(entry), target)  # the cache is workdir's own
    return (local / store if store is not None else local), remote, manifest
