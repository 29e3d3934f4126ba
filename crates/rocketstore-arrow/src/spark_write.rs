//! The Spark writer's work on one task's Arrow batches, shared by both writers: the Python data
//! source (`rocketstore-py`'s `prepare_batch` and `body_digest`, then `put_batch`) and the JVM
//! batch writer (`rocketstore-jni`, which runs a whole task through [`TaskWriter`]).
//!
//! * [`prepare_batch`]: the queue of each row without one (`queueSelector` over `queueNums`
//!   queues, [`QueueChooser`]) and the batch's body digest (the manifest's `body_digest`, see
//!   `python/rocketstore/spark/_writer.py`), both in one pass over the Arrow buffers.
//! * [`TaskWriter`]: one task attempt's store, the protocol of `RocketStoreWriter._write`: the
//!   store is opened at the first row (with `populate_mapped_file = false` and
//!   `pwrite_commit_log = true` unless the job sets them), every batch is prepared and put,
//!   any status other than `PUT_OK` / `FLUSH_DISK_TIMEOUT` fails the task, and
//!   [`TaskWriter::finish`] flushes, closes and returns the statistics of the commit message
//!   ([`TaskStats::to_json`]); [`TaskWriter::abort`] removes the task's store.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int16Type, Int32Type, Int64Type, Int8Type};
use arrow_array::{Array, ArrayRef, Int32Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use rocketstore::bulk::{self, QueueChooser, QueueSelector};
use rocketstore::{PutStatus, Store, StoreConfig};

use crate::put::{self, Columns, PutError, PutResult};

/// Random access to the values of a binary or string column of any Arrow layout.
#[derive(Debug)]
pub enum ValueBytes<'a> {
    /// binary
    Bin(&'a arrow_array::BinaryArray),
    /// large_binary
    LargeBin(&'a arrow_array::LargeBinaryArray),
    /// binary_view
    BinView(&'a arrow_array::BinaryViewArray),
    /// string
    Str(&'a arrow_array::StringArray),
    /// large_string
    LargeStr(&'a arrow_array::LargeStringArray),
    /// string_view
    StrView(&'a arrow_array::StringViewArray),
}

impl<'a> ValueBytes<'a> {
    /// `a` viewed as bytes; a type error (naming `column`) unless binary or string.
    pub fn of(a: &'a dyn Array, column: &str) -> PutResult<Self> {
        Ok(match a.data_type() {
            DataType::Binary => ValueBytes::Bin(a.as_binary()),
            DataType::LargeBinary => ValueBytes::LargeBin(a.as_binary()),
            DataType::BinaryView => ValueBytes::BinView(a.as_binary_view()),
            DataType::Utf8 => ValueBytes::Str(a.as_string()),
            DataType::LargeUtf8 => ValueBytes::LargeStr(a.as_string()),
            DataType::Utf8View => ValueBytes::StrView(a.as_string_view()),
            other => {
                return Err(PutError::Type(format!(
                    "column {column:?} has Arrow type {other}, expected binary or string"
                )))
            }
        })
    }

    /// Row `i` (`None` if null).
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        macro_rules! at {
            ($a:expr, $v:expr) => {
                if $a.is_null(i) {
                    None
                } else {
                    Some($v)
                }
            };
        }
        match self {
            ValueBytes::Bin(a) => at!(a, a.value(i)),
            ValueBytes::LargeBin(a) => at!(a, a.value(i)),
            ValueBytes::BinView(a) => at!(a, a.value(i)),
            ValueBytes::Str(a) => at!(a, a.value(i).as_bytes()),
            ValueBytes::LargeStr(a) => at!(a, a.value(i).as_bytes()),
            ValueBytes::StrView(a) => at!(a, a.value(i).as_bytes()),
        }
    }
}

/// The keys column: one string per row, or a list of strings per row.
enum KeyParts<'a> {
    Joined(ValueBytes<'a>),
    List(&'a [i32], ValueBytes<'a>, &'a dyn Array),
    LargeList(&'a [i64], ValueBytes<'a>, &'a dyn Array),
}

impl<'a> KeyParts<'a> {
    fn of(a: &'a dyn Array) -> PutResult<Self> {
        Ok(match a.data_type() {
            DataType::List(_) => {
                let l = a.as_list::<i32>();
                KeyParts::List(
                    l.value_offsets(),
                    ValueBytes::of(l.values().as_ref(), "keys")?,
                    a,
                )
            }
            DataType::LargeList(_) => {
                let l = a.as_list::<i64>();
                KeyParts::LargeList(
                    l.value_offsets(),
                    ValueBytes::of(l.values().as_ref(), "keys")?,
                    a,
                )
            }
            _ => KeyParts::Joined(ValueBytes::of(a, "keys")?),
        })
    }

    /// The parts of row `i` (nothing for a null row or element).
    fn parts(&self, i: usize) -> Box<dyn Iterator<Item = &'a [u8]> + '_> {
        match self {
            KeyParts::Joined(b) => Box::new(b.get(i).into_iter()),
            KeyParts::List(offs, values, a) if !a.is_null(i) => {
                let (lo, hi) = (offs[i] as usize, offs[i + 1] as usize);
                Box::new((lo..hi).filter_map(move |j| values.get(j)))
            }
            KeyParts::LargeList(offs, values, a) if !a.is_null(i) => {
                let (lo, hi) = (offs[i] as usize, offs[i + 1] as usize);
                Box::new((lo..hi).filter_map(move |j| values.get(j)))
            }
            _ => Box::new(std::iter::empty()),
        }
    }
}

/// The given queue ids (`None` where null), from any integer column.
fn given_queues(a: &dyn Array) -> PutResult<Vec<Option<i32>>> {
    fn conv<T: TryInto<i32>>(v: Option<T>) -> Option<i32> {
        v.and_then(|x| x.try_into().ok())
    }
    Ok(match a.data_type() {
        DataType::Int8 => a.as_primitive::<Int8Type>().iter().map(conv).collect(),
        DataType::Int16 => a.as_primitive::<Int16Type>().iter().map(conv).collect(),
        DataType::Int32 => a.as_primitive::<Int32Type>().iter().collect(),
        DataType::Int64 => a
            .as_primitive::<Int64Type>()
            .iter()
            .map(|v| v.map(|x| i32::try_from(x).unwrap_or(i32::MAX)))
            .collect(),
        other => {
            return Err(PutError::Type(format!(
                "column \"queue_id\" has Arrow type {other}, expected an integer type"
            )))
        }
    })
}

/// The manifest's body digest of a binary or string column: the sum over the values of the
/// first 60 bits of their SHA-256 ([`bulk::body_digest`]).
pub fn body_digest(bodies: &dyn Array) -> PutResult<u128> {
    let values = ValueBytes::of(bodies, "body")?;
    Ok(bulk::body_digest((0..bodies.len()).map(|i| values.get(i))))
}

/// What [`prepare_batch`] computed for one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// The `queue_id` column to put (`None` when the batch has one without nulls).
    pub queues: Option<Vec<i32>>,
    /// The batch's body digest.
    pub digest: u128,
    /// The round robin counter for the next batch.
    pub counter: u64,
}

/// Prepares one Arrow batch of the Spark writer: the queue of each row without one (by
/// `selector` over `queue_nums` queues, the round robin from `counter`) and the body digest.
pub fn prepare_batch(
    batch: &RecordBatch,
    selector: QueueSelector,
    queue_nums: u32,
    counter: u64,
) -> PutResult<Prepared> {
    let n = batch.num_rows();
    let column = |name: &str| batch.column_by_name(name).map(|c| c.as_ref());
    let body =
        column("body").ok_or_else(|| PutError::Type("the batch has no \"body\" column".into()))?;
    let bodies = ValueBytes::of(body, "body")?;
    let given = column("queue_id").map(given_queues).transpose()?;
    let keys = column("keys").map(KeyParts::of).transpose()?;
    let digest = bulk::body_digest((0..n).map(|i| bodies.get(i)));
    if given
        .as_ref()
        .is_some_and(|g| g.iter().all(Option::is_some))
    {
        return Ok(Prepared {
            queues: None,
            digest,
            counter,
        });
    }
    let mut chooser = QueueChooser::new(selector, queue_nums, counter);
    let queues: Vec<i32> = (0..n)
        .map(|i| {
            let g = given.as_ref().and_then(|g| g[i]);
            match &keys {
                Some(k) => chooser.choose(g, Some(&mut k.parts(i))),
                None => chooser.choose(g, None),
            }
        })
        .collect();
    Ok(Prepared {
        queues: Some(queues),
        digest,
        counter: chooser.counter(),
    })
}

/// `batch` with its `queue_id` column replaced by (or extended with) `queues`.
pub fn with_queues(batch: &RecordBatch, queues: Vec<i32>) -> PutResult<RecordBatch> {
    let array: ArrayRef = Arc::new(Int32Array::from(queues));
    let schema = batch.schema();
    let mut fields: Vec<Arc<Field>> = schema.fields().iter().cloned().collect();
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    let field = Arc::new(Field::new("queue_id", DataType::Int32, true));
    match schema.index_of("queue_id") {
        Ok(i) => {
            fields[i] = field;
            columns[i] = array;
        }
        Err(_) => {
            fields.push(field);
            columns.push(array);
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| PutError::Value(format!("cannot set the queue_id column: {e}")))
}

/// A failure of one Spark write task; the message names the task (and the rows at fault).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    /// A batch could not be put (bad input or the engine's failure).
    #[error(
        "{source}\nrocketstore writer: Spark partition {partition} (task attempt \
         {task_attempt}), rows {first}..{last} of the task; nothing of this task is published"
    )]
    Put {
        /// Why.
        source: PutError,
        /// The task's partition.
        partition: i64,
        /// The task attempt id.
        task_attempt: i64,
        /// The batch's first row (counted over the task).
        first: usize,
        /// The batch's last row.
        last: usize,
    },
    /// `put_batch` returned statuses other than `PUT_OK` / `FLUSH_DISK_TIMEOUT`.
    #[error(
        "rocketstore writer: put_batch returned {statuses} for rows {first}.. of Spark \
         partition {partition}; nothing of this task is published"
    )]
    Status {
        /// The statuses, as Python prints a list of them.
        statuses: String,
        /// The batch's first row.
        first: usize,
        /// The task's partition.
        partition: i64,
    },
    /// The job was committed or aborted before this attempt opened its store.
    #[error(
        "rocketstore writer: job {job_id} has already ended (committed or aborted); this task \
         attempt writes nothing"
    )]
    JobEnded {
        /// The job.
        job_id: String,
    },
    /// The job ended (another task failed) while this attempt ran.
    #[error(
        "rocketstore writer: job {job_id} ended while Spark partition {partition} (task \
         attempt {task_attempt}) ran; its store is removed"
    )]
    EndedWhileRunning {
        /// The job.
        job_id: String,
        /// The task's partition.
        partition: i64,
        /// The task attempt id.
        task_attempt: i64,
    },
    /// The task's directory could not be created.
    #[error("rocketstore writer: cannot create {path}: {source}", path = path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Opening, flushing or closing the store failed.
    #[error(transparent)]
    Engine(#[from] rocketstore::Error),
}

/// One write task: where and how it writes (see [`TaskWriter::new`]).
#[derive(Debug, Clone)]
pub struct TaskSpec {
    /// The job id (error messages name it).
    pub job_id: String,
    /// `<root>/_temporary/<job id>/part-<partition>-<task attempt id>`.
    pub path: PathBuf,
    /// `<root>/_temporary/<job id>/_job_live`: the task writes only while it exists.
    pub live_marker: Option<PathBuf>,
    /// The store configuration the job gave.
    pub config: StoreConfig,
    /// Whether the job set `populate_mapped_file` / `pwrite_commit_log` itself.
    pub config_keys: Vec<String>,
    /// `queueSelector`.
    pub selector: QueueSelector,
    /// `queueNums`.
    pub queue_nums: u32,
    /// The Spark partition.
    pub partition: i64,
    /// The task attempt id.
    pub task_attempt: i64,
    /// Body compression (`compressionType`, `compressLevel`, `compressOver`); `None`: bodies
    /// are stored as they are.
    pub compress: Option<rocketstore::compression::CompressOptions>,
}

/// The writer options of body compression, as the Spark writer takes them (names
/// case-insensitive): `compressionType` (`none`, `lz4`, `zstd`, `zlib`; default `none`),
/// `compressLevel` (default 5) and `compressOver` (bytes, default 4096).
pub const COMPRESS_OPTIONS: [&str; 3] = ["compressionType", "compressLevel", "compressOver"];

/// The compression the writer options `pairs` ask for ([`COMPRESS_OPTIONS`]; other pairs are
/// ignored); `None` for `compressionType` `none` or absent.
///
/// # Errors
/// A message naming the option for an unknown codec, a level out of range or a negative
/// threshold.
pub fn compress_options(
    pairs: &[(String, String)],
) -> Result<Option<rocketstore::compression::CompressOptions>, String> {
    use rocketstore::compression::{CompressOptions, Compression};
    let get = |name: &str| {
        pairs
            .iter()
            .rev()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    };
    let codec = match get("compressionType") {
        None => return Ok(None),
        Some(v) if v.is_empty() || v.eq_ignore_ascii_case("none") => return Ok(None),
        Some(v) => v
            .parse::<Compression>()
            .map_err(|e| format!("option 'compressionType': {e} (or \"none\")"))?,
    };
    let mut opts = CompressOptions::new(codec);
    if let Some(v) = get("compressLevel") {
        opts.level = v
            .parse()
            .map_err(|_| format!("option 'compressLevel' must be an integer, not {v:?}"))?;
    }
    if let Some(v) = get("compressOver") {
        opts.over = v.parse().map_err(|_| {
            format!("option 'compressOver' must be a non-negative integer (bytes), not {v:?}")
        })?;
    }
    opts.check()
        .map_err(|e| format!("option 'compressLevel': {e}"))?;
    Ok(Some(opts))
}

/// The statistics of a task's store, as the commit message carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskStats {
    /// Messages written.
    pub messages: u64,
    /// Sum of the records' sizes.
    pub bytes: u64,
    /// Commit log offset of the first record.
    pub min_offset: u64,
    /// The store's `max_commitlog_offset()` after the last record.
    pub max_offset: u64,
    /// topic -> queue id -> next queue offset.
    pub queues: BTreeMap<String, BTreeMap<i32, i64>>,
    /// The body digest.
    pub body_digest: u128,
}

fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

impl TaskStats {
    /// The JSON object of `StoreCommitMessage.stats` (`_StoreStats.as_dict` in
    /// `python/rocketstore/spark/_writer.py`): the same keys, queues sorted by topic and by
    /// queue id, the digest as a decimal string.
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(128);
        let _ = write!(
            out,
            "{{\"messages\": {}, \"bytes\": {}, \"min_offset\": {}, \"max_offset\": {}, \
             \"queues\": {{",
            self.messages, self.bytes, self.min_offset, self.max_offset
        );
        for (t, (topic, queues)) in self.queues.iter().enumerate() {
            if t > 0 {
                out.push_str(", ");
            }
            json_str(&mut out, topic);
            out.push_str(": {");
            for (q, (id, next)) in queues.iter().enumerate() {
                if q > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "\"{id}\": {next}");
            }
            out.push('}');
        }
        let _ = write!(out, "}}, \"body_digest\": \"{}\"}}", self.body_digest);
        out
    }
}

/// One task attempt's store: see the module docs.
#[derive(Debug)]
pub struct TaskWriter {
    spec: TaskSpec,
    store: Option<Store>,
    counter: u64,
    rows: usize,
    stats: TaskStats,
}

const ACCEPTED: [PutStatus; 2] = [PutStatus::PutOk, PutStatus::FlushDiskTimeout];

impl TaskWriter {
    /// A task writer; nothing is created until the first row.
    pub fn new(spec: TaskSpec) -> Self {
        let counter =
            u64::try_from(spec.partition).unwrap_or(0) % u64::from(spec.queue_nums.max(1));
        Self {
            spec,
            store: None,
            counter,
            rows: 0,
            stats: TaskStats::default(),
        }
    }

    /// Rows written so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    fn live(&self) -> bool {
        self.spec.live_marker.as_ref().is_none_or(|m| m.exists())
    }

    fn open(&mut self) -> Result<(), TaskError> {
        if !self.live() {
            return Err(TaskError::JobEnded {
                job_id: self.spec.job_id.clone(),
            });
        }
        let path = &self.spec.path;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| TaskError::Io {
                path: parent.to_owned(),
                source,
            })?;
        }
        if path.exists() {
            // A previous run of this very attempt id cannot exist; be safe.
            let _ = std::fs::remove_dir_all(path);
        }
        let mut config = self.spec.config.clone();
        // As the Python writer: only the pages written are faulted in, and records are
        // written with pwrite (the same bytes), unless the job says otherwise.
        let given = |k: &str| self.spec.config_keys.iter().any(|g| g == k);
        if !given("populate_mapped_file") {
            config.populate_mapped_file = false;
        }
        if !given("pwrite_commit_log") {
            config.pwrite_commit_log = true;
        }
        self.store = Some(Store::open(path, config)?);
        Ok(())
    }

    /// Prepares and puts one batch (nothing for an empty one).
    ///
    /// # Errors
    /// [`TaskError::Put`] for bad input or a failed write, [`TaskError::Status`] for a status
    /// other than `PUT_OK` / `FLUSH_DISK_TIMEOUT`; the caller then [`abort`](Self::abort)s.
    pub fn put(&mut self, batch: &RecordBatch) -> Result<(), TaskError> {
        let n = batch.num_rows();
        if n == 0 {
            return Ok(());
        }
        let first = self.rows;
        let put_err = |source: PutError, spec: &TaskSpec| TaskError::Put {
            source,
            partition: spec.partition,
            task_attempt: spec.task_attempt,
            first,
            last: first + n - 1,
        };
        let prepared = prepare_batch(
            batch,
            self.spec.selector,
            self.spec.queue_nums,
            self.counter,
        )
        .map_err(|e| put_err(e, &self.spec))?;
        let owned;
        let batch = match prepared.queues {
            Some(q) => {
                owned = with_queues(batch, q).map_err(|e| put_err(e, &self.spec))?;
                &owned
            }
            None => batch,
        };
        put::check_schema(&batch.schema()).map_err(|e| put_err(e, &self.spec))?;
        // Row numbers start at 0 in each call of `put::write` (its per-row key and property
        // lists are indexed by them): errors name the row within the batch, the note the rows
        // of the task, as the Python writer's.
        let columns = Columns::of(batch, 0).map_err(|e| put_err(e, &self.spec))?;
        if self.store.is_none() {
            self.open()?;
        }
        let Some(store) = self.store.as_ref() else {
            return Ok(());
        };
        let results = put::write(store, std::slice::from_ref(&columns), self.spec.compress)
            .map_err(|e| put_err(e, &self.spec))?;
        let mut bad: Vec<&str> = Vec::new();
        let mut bytes = 0u64;
        for r in &results {
            if !ACCEPTED.contains(&r.status) && !bad.contains(&r.status.as_str()) {
                bad.push(r.status.as_str());
            }
            bytes += u64::try_from(r.wrote_bytes).unwrap_or(0);
        }
        if !bad.is_empty() {
            let statuses = format!(
                "[{}]",
                bad.iter()
                    .map(|s| format!("'{s}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            return Err(TaskError::Status {
                statuses,
                first,
                partition: self.spec.partition,
            });
        }
        if self.stats.messages == 0 {
            if let Some(r) = results.first() {
                self.stats.min_offset = u64::try_from(r.commitlog_offset).unwrap_or(0);
            }
        }
        self.stats.messages += results.len() as u64;
        self.stats.bytes += bytes;
        self.stats.body_digest = self.stats.body_digest.wrapping_add(prepared.digest);
        self.counter = prepared.counter;
        self.rows += n;
        Ok(())
    }

    /// Flushes and closes the store; its statistics, or `None` if the task had no rows (no
    /// store was created).
    ///
    /// # Errors
    /// The engine's, or [`TaskError::EndedWhileRunning`]; the caller then
    /// [`abort`](Self::abort)s.
    pub fn finish(&mut self) -> Result<Option<TaskStats>, TaskError> {
        let Some(store) = self.store.take() else {
            return Ok(None);
        };
        let result = (|| {
            store.flush()?;
            self.stats.max_offset = store.max_commitlog_offset();
            for (topic, queue_id, next) in store.queue_offsets() {
                self.stats
                    .queues
                    .entry(topic)
                    .or_default()
                    .insert(queue_id, next);
            }
            store.close()
        })();
        drop(store);
        result?;
        if !self.live() {
            return Err(TaskError::EndedWhileRunning {
                job_id: self.spec.job_id.clone(),
                partition: self.spec.partition,
                task_attempt: self.spec.task_attempt,
            });
        }
        Ok(Some(std::mem::take(&mut self.stats)))
    }

    /// Closes the store (if open) and removes the task's directory, then `<job id>` and
    /// `_temporary` above it if they are empty (the last attempt out removes them).
    pub fn abort(&mut self) {
        if let Some(store) = self.store.take() {
            let _ = store.close();
        }
        remove_attempt(&self.spec.path);
    }
}

/// Removes a task attempt's store and its empty parents (`<job id>`, then `_temporary`).
pub fn remove_attempt(path: &Path) {
    let _ = std::fs::remove_dir_all(path);
    let mut dir = path.parent();
    for _ in 0..2 {
        match dir {
            Some(d) if std::fs::remove_dir(d).is_ok() => dir = d.parent(),
            _ => return,
        }
    }
}
