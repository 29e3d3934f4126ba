package rocketstore.spark;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.Serializable;
import java.util.List;
import java.util.function.Supplier;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * The JVM reader's scan: the required columns only ({@link SupportsPushDownRequiredColumns}),
 * one partition per commit log file, columnar batches built in Rust and read from Arrow IPC
 * bytes into {@link ArrowColumnVector}s. A streaming read of the same table is the Python
 * source's ({@link #toMicroBatchStream}).
 */
final class JvmScan implements Scan, Batch {
    private final StructType readSchema;
    private final JvmRead.Settings settings;
    private final Supplier<ScanBuilder> python;

    JvmScan(StructType readSchema, JvmRead.Settings settings, Supplier<ScanBuilder> python) {
        this.readSchema = readSchema;
        this.settings = settings;
        this.python = python;
    }

    /** Builds the scan of the columns Spark requires. */
    static final class Builder implements ScanBuilder, SupportsPushDownRequiredColumns {
        private StructType schema;
        private final CaseInsensitiveStringMap options;
        private final Supplier<ScanBuilder> python;

        Builder(StructType schema, CaseInsensitiveStringMap options, Supplier<ScanBuilder> python) {
            this.schema = schema;
            this.options = options;
            this.python = python;
        }

        @Override
        public void pruneColumns(StructType required) {
            this.schema = required;
        }

        @Override
        public Scan build() {
            return new JvmScan(schema, new JvmRead.Settings(options), python);
        }
    }

    @Override
    public StructType readSchema() {
        return readSchema;
    }

    @Override
    public String description() {
        return "rocketstore JVM reader [" + String.join(", ", readSchema.fieldNames()) + "] "
                + settings.root;
    }

    @Override
    public Batch toBatch() {
        return this;
    }

    // columnarSupportMode() stays PARTITION_DEFINED: a streaming read of this scan uses the
    // Python source's reader factory (row-based), a batch read ours (columnar).

    /** A streaming read is the Python data source's (offsets, triggers and all). */
    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        return python.get().build().toMicroBatchStream(checkpointLocation);
    }

    @Override
    public InputPartition[] planInputPartitions() {
        List<FilePartition> parts = JvmRead.plan(settings);
        return parts.toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new Factory(readSchema.fieldNames(), settings.verifyCrc, settings.batchSize);
    }

    /** The records {@code [start, end)} of one commit log file of one store. */
    static final class FilePartition implements InputPartition, Serializable {
        private static final long serialVersionUID = 1L;
        final String store;
        final long start;
        final long end;
        final String[] configKeys;
        final String[] configValues;

        FilePartition(String store, long start, long end, String[] keys, String[] values) {
            this.store = store;
            this.start = start;
            this.end = end;
            this.configKeys = keys;
            this.configValues = values;
        }
    }

    static final class Factory implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;
        private final String[] columns;
        private final boolean verifyCrc;
        private final int batchSize;

        Factory(String[] columns, boolean verifyCrc, int batchSize) {
            this.columns = columns;
            this.verifyCrc = verifyCrc;
            this.batchSize = batchSize;
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) {
            return true;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            throw new UnsupportedOperationException("the rocketstore JVM reader reads columnar batches");
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            return new Reader((FilePartition) partition, columns, verifyCrc, batchSize);
        }
    }

    /**
     * Arrow IPC bytes one batch aims at: {@code maxMessagesPerBatch} stays the upper bound of its
     * rows, and after each batch the next one asks for as many rows as fit this size at the last
     * batch's bytes per row. At 1 KiB per record, 16384-row batches (16 MiB, a humongous array
     * for the JVM and buffers that leave the caches) cost 1.5x the CPU of 4 MiB ones
     * (BENCHMARKS.md, "Spark read: a JVM DataSource V2 reader").
     */
    static final long TARGET_BATCH_BYTES = 4L << 20;

    /** Reads one partition batch by batch; each batch's vectors live until the next call. */
    static final class Reader implements PartitionReader<ColumnarBatch> {
        private final FilePartition p;
        private final String[] columns;
        private final boolean verifyCrc;
        private final int batchSize;
        private final BufferAllocator allocator;
        private long handle;
        private long offset;
        private int rows;
        private ArrowStreamReader current;
        private ColumnarBatch batch;

        Reader(FilePartition p, String[] columns, boolean verifyCrc, int batchSize) {
            this.p = p;
            this.columns = columns;
            this.verifyCrc = verifyCrc;
            this.batchSize = batchSize;
            this.allocator = ArrowUtils.rootAllocator()
                    .newChildAllocator("rocketstore " + p.store + "@" + p.start, 0, Long.MAX_VALUE);
            this.offset = p.start;
            this.rows = batchSize;
        }

        @Override
        public boolean next() throws IOException {
            releaseCurrent();
            if (handle == 0) {
                handle = NativeReader.open(p.store, p.configKeys, p.configValues);
            }
            long[] next = new long[1];
            while (offset < p.end) {
                byte[] bytes = NativeReader.readLog(
                        handle, offset, p.end, rows, verifyCrc, columns, p.store, next);
                offset = next[0] <= offset ? p.end : next[0];
                ArrowStreamReader reader = new ArrowStreamReader(new ByteArrayInputStream(bytes), allocator);
                VectorSchemaRoot root = reader.getVectorSchemaRoot();
                if (!reader.loadNextBatch() || root.getRowCount() == 0) {
                    reader.close();
                    continue;
                }
                long fit = (long) root.getRowCount() * TARGET_BATCH_BYTES / Math.max(1, bytes.length);
                rows = (int) Math.max(1, Math.min(batchSize, fit));
                ColumnVector[] vectors = new ColumnVector[root.getFieldVectors().size()];
                for (int i = 0; i < vectors.length; i++) {
                    vectors[i] = new ArrowColumnVector(root.getVector(i));
                }
                current = reader;
                batch = new ColumnarBatch(vectors, root.getRowCount());
                return true;
            }
            return false;
        }

        @Override
        public ColumnarBatch get() {
            return batch;
        }

        private void releaseCurrent() throws IOException {
            batch = null;
            if (current != null) {
                ArrowStreamReader r = current;
                current = null;
                r.close();
            }
        }

        @Override
        public void close() throws IOException {
            try {
                releaseCurrent();
            } finally {
                if (handle != 0) {
                    NativeReader.close(handle);
                    handle = 0;
                }
                allocator.close();
            }
        }
    }
}
