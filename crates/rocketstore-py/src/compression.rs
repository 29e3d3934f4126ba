//! Body compression arguments and `decompress_body` (the codecs are the engine's
//! `rocketstore::compression`).

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rocketstore::compression::{
    BodyCodec, CodecError, CompressOptions, Compression, DEFAULT_MAX_DECOMPRESSED,
};

use crate::error::{corruption, invalid_config};

// The signatures below spell RocketMQ's defaults as literals (Python's stubs show them).
const _: () = assert!(rocketstore::compression::DEFAULT_LEVEL == 5);
const _: () = assert!(rocketstore::compression::DEFAULT_COMPRESS_OVER == 4096);
const _: () = assert!(DEFAULT_MAX_DECOMPRESSED == 67_108_864);

/// `compression` / `compress_level` / `compress_over` keyword arguments as options (`None`:
/// bodies are stored as given).
pub(crate) fn compress_options(
    py: Python<'_>,
    compression: Option<&str>,
    level: i32,
    over: usize,
) -> PyResult<Option<CompressOptions>> {
    let Some(name) = compression else {
        return Ok(None);
    };
    let codec = name.parse::<Compression>().map_err(|e| {
        invalid_config(
            py,
            "compression",
            format!("invalid compression: {e}"),
            Vec::new(),
        )
    })?;
    let opts = CompressOptions { codec, level, over };
    opts.check().map_err(|e| {
        invalid_config(
            py,
            "compress_level",
            format!("invalid compress_level: {e}"),
            Vec::new(),
        )
    })?;
    Ok(Some(opts))
}

/// A body that does not decompress, as `CorruptionError` (`prefix` says which).
pub(crate) fn codec_error(
    py: Python<'_>,
    e: &CodecError,
    offset: Option<u64>,
    prefix: &str,
) -> PyErr {
    corruption(py, format!("{prefix}{e}"), offset, "compressed body")
}

/// The body of a message as a RocketMQ consumer sees it: ``body`` decompressed if
/// ``sys_flag`` marks it compressed (SYSFLAG bit 0; the codec in bits 8-10: LZ4, Zstandard or
/// zlib, as RocketMQ's producers write them), otherwise ``body`` itself.
///
/// The store keeps bodies as the producer sent them; :meth:`MessageStore.get_message` and the
/// other reads return them that way, with the record's ``sys_flag``. ``max_size`` bounds the
/// decompressed size (64 MiB by default). The interpreter is released while it runs.
///
/// Raises :class:`CorruptionError` if the body is not valid data of its codec or expands
/// past ``max_size``.
///
/// Example:
///
/// ```python
/// body = rocketstore.decompress_body(msg.body, msg.sys_flag)
/// ```
#[pyfunction]
#[pyo3(signature = (body, sys_flag, *, max_size = 67_108_864))]
pub(crate) fn decompress_body<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyBytes>,
    sys_flag: i32,
    max_size: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = body.as_bytes();
    let mut out = Vec::new();
    let got = py.detach(|| BodyCodec::default().decompress(sys_flag, bytes, max_size, &mut out));
    match got {
        Ok(true) => Ok(PyBytes::new(py, &out)),
        Ok(false) => Ok(body.clone()),
        Err(e) => Err(codec_error(py, &e, None, "")),
    }
}

/// Compresses ``body`` as a RocketMQ producer does with ``compression`` (``"lz4"``,
/// ``"zstd"`` or ``"zlib"``) at ``level``, and returns ``(stored_body, sys_flag_bits)``: the
/// bytes to store and the SYSFLAG bits that mark them (``0x101``, ``0x201`` or ``0x301``).
///
/// :meth:`MessageStore.put_batch` does this itself with its ``compression`` argument; this
/// function is for checking data or for other writers.
///
/// Example:
///
/// ```python
/// stored, bits = rocketstore.compress_body(b"x" * 10_000, "lz4")
/// assert rocketstore.decompress_body(stored, bits) == b"x" * 10_000
/// ```
#[pyfunction]
#[pyo3(signature = (body, compression, level = 5))]
pub(crate) fn compress_body<'py>(
    py: Python<'py>,
    body: &[u8],
    compression: &str,
    level: i32,
) -> PyResult<(Bound<'py, PyBytes>, i32)> {
    let Some(opts) = compress_options(py, Some(compression), level, 0)? else {
        return Err(invalid_config(
            py,
            "compression",
            "no compression given".into(),
            Vec::new(),
        ));
    };
    let mut out = Vec::new();
    py.detach(|| BodyCodec::default().compress(opts.codec, opts.level, body, &mut out))
        .map_err(|e| codec_error(py, &e, None, ""))?;
    Ok((PyBytes::new(py, &out), opts.codec.sys_flag()))
}
