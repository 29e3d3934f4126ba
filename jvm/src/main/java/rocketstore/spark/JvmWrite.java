package rocketstore.spark;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriteSummary;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.execution.arrow.ArrowWriter;
import org.apache.spark.sql.execution.datasources.v2.python.PythonWriterCommitMessage;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The JVM batch writer: {@code df.write.format("rocketstore")} without the JVM -> Python Arrow
 * hop. Tasks hand Spark's rows to {@link NativeWriter} in batches: as plain column arrays
 * ({@link JvmColumns}) when every column is flat, else as Arrow batches ({@link ArrowWriter})
 * serialized as Arrow IPC; the native side builds the same Arrow batch from either and writes
 * each task's store exactly as the Python
 * writer's task does (the same Rust code: queue selection, body digest, {@code put_batch},
 * statistics). The driver side is the Python writer's, unchanged: this write builds the Python
 * data source's own {@code BatchWrite} with an internal option carrying the job id this class
 * picked ({@value #JOB_OPTION}), lets it run the Python {@code writer()} on the driver (which
 * checks the columns and options, creates {@code <root>/_temporary/<job id>} with its live
 * marker and writes the tasks' settings into {@code _jvm_task.json} there), and delegates
 * {@code commit} and {@code abort} to it, so the Python {@code RocketStoreWriter.commit}
 * publishes the stores and writes the manifest as for Python tasks. A JVM task's commit
 * message is a {@link PythonWriterCommitMessage} whose bytes are a minimal pickle that calls
 * {@code rocketstore.spark._writer._from_jvm(json)} when Python unpickles it.
 */
final class JvmWrite {
    private JvmWrite() {}

    /** Spark conf that turns the JVM writer off ({@code false}): every write is the Python one. */
    static final String ENABLED_CONF = "spark.rocketstore.jvmWriter";

    /**
     * Spark conf that keeps every task on the Arrow IPC path ({@code false}), for comparing the
     * two paths; by default flat columns go over as arrays ({@link JvmColumns}).
     */
    static final String COLUMNS_CONF = "spark.rocketstore.jvmWriter.columnArrays";

    /** The internal option that carries the job id to the Python writer. */
    static final String JOB_OPTION = "rocketstore.jvmJobId";

    /** Rows per batch handed to the native writer (at most). */
    static final int BATCH_ROWS = 4096;

    /**
     * Bytes per batch (at most: of string and binary values, checked after every row, on the
     * column path; of Arrow data, checked every 256 rows, on the IPC path).
     */
    static final long BATCH_BYTES = 8L << 20;

    private static final ObjectMapper JSON = new ObjectMapper();

    /** Task attempts the JVM writer started in this JVM (see {@link RocketStoreProvider#jvmWriterTasks}). */
    static final AtomicLong TASKS = new AtomicLong();

    /** Of {@link #TASKS}, those on the column path ({@link JvmColumns}). */
    static final AtomicLong COLUMN_TASKS = new AtomicLong();

    /**
     * Why the Python writer must serve this write, or null if the JVM writer does: the conf
     * {@value #ENABLED_CONF} not {@code false}, the native library loaded, a {@code path}, no
     * {@value #JOB_OPTION} option from the user.
     * Columns and options are checked by the Python writer on the driver either way.
     */
    static String unsupported(LogicalWriteInfo info) {
        String env = Connector.environment(ENABLED_CONF);
        if (env != null) {
            return env;
        }
        String path = info.options().get("path");
        if (path == null || path.isEmpty()) {
            return "no path";
        }
        if (Connector.localRoot(path) == null) {
            return "the root " + path + " is not a local path";
        }
        if (info.options().containsKey(JOB_OPTION)) {
            return "the internal option " + JOB_OPTION + " is given (the Python writer refuses it)";
        }
        return null;
    }

    /**
     * The write builder: a batch write is the JVM writer's, a streaming write the Python
     * table's ({@code python} builds the Python table's builder for the given write info).
     */
    static final class Builder implements WriteBuilder, SupportsTruncate {
        private final LogicalWriteInfo info;
        private final Function<LogicalWriteInfo, WriteBuilder> python;
        private boolean truncate;

        Builder(LogicalWriteInfo info, Function<LogicalWriteInfo, WriteBuilder> python) {
            this.info = info;
            this.python = python;
        }

        @Override
        public WriteBuilder truncate() {
            truncate = true;
            return this;
        }

        private Write pythonWrite(LogicalWriteInfo i) {
            WriteBuilder b = python.apply(i);
            if (truncate) {
                b = ((SupportsTruncate) b).truncate();
            }
            return b.build();
        }

        @Override
        public Write build() {
            return new Write() {
                @Override
                public String description() {
                    return "rocketstore JVM writer";
                }

                /** What the write's physical plan shows (AppendData / OverwriteByExpression). */
                @Override
                public String toString() {
                    return description();
                }

                @Override
                public BatchWrite toBatch() {
                    String jobId = UUID.randomUUID().toString().replace("-", "");
                    String root = Connector.localRoot(info.options().get("path"));
                    Map<String, String> opts = new HashMap<>(info.options().asCaseSensitiveMap());
                    for (String k : new ArrayList<>(opts.keySet())) {
                        if (k.equalsIgnoreCase("path")) {
                            opts.remove(k);
                        }
                    }
                    opts.put("path", root);
                    opts.put(JOB_OPTION, jobId);
                    LogicalWriteInfo withJob = new WithOptions(info, new CaseInsensitiveStringMap(opts));
                    BatchWrite py = pythonWrite(withJob).toBatch();
                    return new Batch(py, root, jobId, info.schema());
                }

                @Override
                public StreamingWrite toStreaming() {
                    return pythonWrite(info).toStreaming();
                }
            };
        }
    }

    /** {@code info} with other options. */
    static final class WithOptions implements LogicalWriteInfo {
        private final LogicalWriteInfo info;
        private final CaseInsensitiveStringMap options;

        WithOptions(LogicalWriteInfo info, CaseInsensitiveStringMap options) {
            this.info = info;
            this.options = options;
        }

        @Override
        public CaseInsensitiveStringMap options() {
            return options;
        }

        @Override
        public String queryId() {
            return info.queryId();
        }

        @Override
        public StructType schema() {
            return info.schema();
        }

        @Override
        public java.util.Optional<StructType> rowIdSchema() {
            return info.rowIdSchema();
        }

        @Override
        public java.util.Optional<StructType> metadataSchema() {
            return info.metadataSchema();
        }
    }

    /** The batch write: JVM tasks, the Python writer's driver side. */
    static final class Batch implements BatchWrite {
        private final BatchWrite python;
        private final String root;
        private final String jobId;
        private final StructType schema;

        Batch(BatchWrite python, String root, String jobId, StructType schema) {
            this.python = python;
            this.root = root;
            this.jobId = jobId;
            this.schema = schema;
        }

        @Override
        public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo physical) {
            // Runs the Python writer() on the driver: checks, the job's directory, the spec.
            python.createBatchWriterFactory(physical);
            Path spec = Paths.get(root, "_temporary", jobId, "_jvm_task.json");
            JsonNode node;
            try {
                node = JSON.readTree(Files.readAllBytes(spec));
            } catch (IOException e) {
                throw new UncheckedIOException("rocketstore JVM writer: cannot read " + spec, e);
            }
            List<String> keys = new ArrayList<>();
            List<String> values = new ArrayList<>();
            for (Map.Entry<String, JsonNode> e : node.get("config").properties()) {
                keys.add(e.getKey());
                values.add(e.getValue().asText());
            }
            return new Factory(
                    root, jobId, schema, SQLConf.get().sessionLocalTimeZone(),
                    keys.toArray(new String[0]), values.toArray(new String[0]),
                    node.get("queue_selector").asText(), node.get("queue_nums").asInt(),
                    node.get("live_marker").asBoolean(),
                    !"false".equalsIgnoreCase(
                            SQLConf.get().getConfString(COLUMNS_CONF, "true").trim()));
        }

        @Override
        public boolean useCommitCoordinator() {
            return python.useCommitCoordinator();
        }

        @Override
        public void onDataWriterCommit(WriterCommitMessage message) {
            python.onDataWriterCommit(message);
        }

        @Override
        public void commit(WriterCommitMessage[] messages) {
            python.commit(messages);
        }

        @Override
        public void commit(WriterCommitMessage[] messages, WriteSummary summary) {
            python.commit(messages, summary);
        }

        @Override
        public void abort(WriterCommitMessage[] messages) {
            python.abort(messages);
        }
    }

    /** Creates each task's writer (serialized to the executors). */
    static final class Factory implements DataWriterFactory {
        private static final long serialVersionUID = 1L;

        final String root;
        final String jobId;
        final StructType schema;
        final String timeZone;
        final String[] keys;
        final String[] values;
        final String selector;
        final int queueNums;
        final boolean liveMarker;
        /** Whether flat columns go over as arrays ({@link #COLUMNS_CONF}). */
        final boolean columnArrays;

        Factory(String root, String jobId, StructType schema, String timeZone, String[] keys,
                String[] values, String selector, int queueNums, boolean liveMarker,
                boolean columnArrays) {
            this.root = root;
            this.jobId = jobId;
            this.schema = schema;
            this.timeZone = timeZone;
            this.keys = keys;
            this.values = values;
            this.selector = selector;
            this.queueNums = queueNums;
            this.liveMarker = liveMarker;
            this.columnArrays = columnArrays;
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
            return new Task(this, partitionId, taskId);
        }
    }

    /**
     * A channel into a growable byte array, handed out without a copy. The IPC writer's
     * off-heap buffers are copied straight into it ({@code Channels.newChannel} of an output
     * stream copies each one twice, through an 8 KiB bounce array).
     */
    private static final class Bytes implements WritableByteChannel {
        private byte[] buf;
        private int size;

        Bytes(int capacity) {
            buf = new byte[capacity];
        }

        @Override
        public int write(ByteBuffer src) {
            int n = src.remaining();
            if (n > buf.length - size) {
                long want = Math.max((long) size + n, 2L * buf.length);
                if ((long) size + n > Integer.MAX_VALUE - 8) {
                    throw new IllegalStateException("rocketstore JVM writer: batch over 2 GiB");
                }
                buf = Arrays.copyOf(buf, (int) Math.min(want, Integer.MAX_VALUE - 8));
            }
            src.get(buf, size, n);
            size += n;
            return n;
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() {
            // The array is reused for the next batch.
        }

        void reset() {
            size = 0;
        }

        byte[] buffer() {
            return buf;
        }

        int size() {
            return size;
        }
    }

    /** One task attempt: rows -> Arrow batches -> the native task writer. */
    static final class Task implements DataWriter<InternalRow> {
        private final int partition;
        private final long taskAttempt;
        private final int attemptNumber;
        private final String path;
        private final long handle;
        /** The batch as plain arrays (flat columns), or null: {@link #arrow} instead. */
        private final JvmColumns columns;
        private final BufferAllocator allocator;
        private final VectorSchemaRoot batch;
        private final ArrowWriter arrow;
        private final Bytes out;
        private int rows;
        private boolean closed;

        Task(Factory f, int partition, long taskAttempt) {
            this.partition = partition;
            this.taskAttempt = taskAttempt;
            TASKS.incrementAndGet();
            TaskContext ctx = TaskContext.get();
            this.attemptNumber = ctx == null ? 0 : ctx.attemptNumber();
            Path jobDir = Paths.get(f.root, "_temporary", f.jobId);
            this.path = jobDir.resolve(String.format("part-%05d-%d", partition, taskAttempt)).toString();
            String marker = f.liveMarker ? jobDir.resolve("_job_live").toString() : "";
            this.handle = NativeWriter.open(
                    path, marker, f.jobId, f.keys, f.values, f.selector, f.queueNums,
                    partition, taskAttempt);
            JvmColumns c = null;
            BufferAllocator a = null;
            VectorSchemaRoot r = null;
            try {
                c = f.columnArrays ? JvmColumns.of(f.schema, BATCH_ROWS) : null;
                if (c != null) {
                    COLUMN_TASKS.incrementAndGet();
                    // The time zone of a timestamp column, as ArrowUtils gives its Arrow type.
                    NativeWriter.columns(handle, c.names, c.kinds, c.nullable, f.timeZone);
                } else {
                    a = ArrowUtils.rootAllocator().newChildAllocator(
                            "rocketstore writer " + path, 0, Long.MAX_VALUE);
                    r = VectorSchemaRoot.create(
                            ArrowUtils.toArrowSchema(f.schema, f.timeZone, true), a);
                }
            } catch (RuntimeException e) {
                if (r != null) {
                    r.close();
                }
                if (a != null) {
                    a.close();
                }
                NativeWriter.close(handle);
                throw e;
            }
            this.columns = c;
            this.allocator = a;
            this.batch = r;
            this.arrow = r == null ? null : ArrowWriter.create(r);
            this.out = r == null ? null : new Bytes(1 << 20);
        }

        private long arrowBytes() {
            long n = 0;
            for (FieldVector v : batch.getFieldVectors()) {
                n += v.getBufferSize();
            }
            return n;
        }

        @Override
        public void write(InternalRow row) {
            if (columns != null) {
                columns.add(row);
                if (columns.full() || columns.bytes() >= BATCH_BYTES) {
                    columns.send(handle);
                }
                return;
            }
            arrow.write(row);
            rows++;
            if (rows >= BATCH_ROWS || ((rows & 255) == 0 && arrowBytes() >= BATCH_BYTES)) {
                send();
            }
        }

        private void send() {
            if (columns != null) {
                if (columns.rows() > 0) {
                    columns.send(handle);
                }
                return;
            }
            if (rows == 0) {
                return;
            }
            arrow.finish();
            out.reset();
            try (ArrowStreamWriter w = new ArrowStreamWriter(batch, null, out)) {
                w.start();
                w.writeBatch();
                w.end();
            } catch (IOException e) {
                throw new UncheckedIOException("rocketstore JVM writer: cannot serialize a batch", e);
            }
            NativeWriter.put(handle, out.buffer(), out.size());
            arrow.reset();
            rows = 0;
        }

        @Override
        public WriterCommitMessage commit() {
            send();
            String stats = NativeWriter.finish(handle);
            StringBuilder json = new StringBuilder(256);
            json.append("{\"partition\": ").append(partition)
                    .append(", \"task_attempt\": ").append(taskAttempt)
                    .append(", \"attempt_number\": ").append(attemptNumber)
                    .append(", \"path\": ");
            try {
                json.append(stats == null ? "null" : JSON.writeValueAsString(path));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            json.append(", \"stats\": ").append(stats == null ? "{}" : stats).append('}');
            return new PythonWriterCommitMessage(pickle(json.toString()));
        }

        @Override
        public void abort() {
            NativeWriter.abort(handle);
        }

        @Override
        public void close() {
            if (closed) {
                return;
            }
            closed = true;
            try {
                if (batch != null) {
                    batch.close();
                    allocator.close();
                }
            } finally {
                NativeWriter.close(handle);
            }
        }
    }

    /**
     * A pickle (protocol 2) of the call {@code rocketstore.spark._writer._from_jvm(json)}:
     * GLOBAL, BINUNICODE, TUPLE1, REDUCE, STOP.
     */
    static byte[] pickle(String json) {
        byte[] global = "crocketstore.spark._writer\n_from_jvm\n".getBytes(StandardCharsets.US_ASCII);
        byte[] text = json.getBytes(StandardCharsets.UTF_8);
        ByteArrayOutputStream b = new ByteArrayOutputStream(text.length + global.length + 16);
        b.write(0x80);
        b.write(2);
        b.write(global, 0, global.length);
        b.write('X');
        int n = text.length;
        b.write(n & 0xff);
        b.write((n >>> 8) & 0xff);
        b.write((n >>> 16) & 0xff);
        b.write((n >>> 24) & 0xff);
        b.write(text, 0, n);
        b.write(0x85);
        b.write('R');
        b.write('.');
        return b.toByteArray();
    }
}
