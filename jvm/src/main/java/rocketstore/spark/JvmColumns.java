package rocketstore.spark;

import java.util.Arrays;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A task's batch of rows as plain Java arrays, one per column, for
 * {@link NativeWriter#putColumns}: the layout of Arrow's arrays (values, offsets, validity)
 * without Arrow's vectors or its IPC stream. Each value is copied once, from the row into the
 * column's array (from an {@link UnsafeRow}'s memory directly, without the {@code byte[]}
 * {@link InternalRow#getBinary} allocates per value); the native side copies the arrays once
 * into the Arrow batch it puts, which is the batch the IPC path decodes (same names, types,
 * nullability, values), so the stores written are the same.
 *
 * <p>Only flat columns of the types the {@code KIND_*} constants name are covered
 * ({@link #of} returns null for any other schema, which takes the Arrow IPC path).
 */
final class JvmColumns {
    static final int KIND_STRING = 0;
    static final int KIND_BINARY = 1;
    static final int KIND_INT = 2;
    static final int KIND_LONG = 3;
    static final int KIND_TIMESTAMP = 4;
    static final int KIND_TIMESTAMP_NTZ = 5;

    final String[] names;
    final int[] kinds;
    final boolean[] nullable;
    /** Per column: byte[] (string, binary), int[] or long[]. */
    private final Object[] values;
    /** Per string or binary column: the end of each value in {@code values[c]} ({@code rows + 1}). */
    private final int[][] offsets;
    /** Per column: 1 per valid row (allocated at the first null). */
    private final byte[][] valid;
    /** Per column: whether {@code valid[c]} is in use in this batch. */
    private final boolean[] hasNull;
    private int capacity;
    private int rows;
    /** Bytes of string and binary values in the batch. */
    private long bytes;

    private JvmColumns(String[] names, int[] kinds, boolean[] nullable, int capacity) {
        this.names = names;
        this.kinds = kinds;
        this.nullable = nullable;
        this.capacity = capacity;
        int n = names.length;
        values = new Object[n];
        offsets = new int[n][];
        valid = new byte[n][];
        hasNull = new boolean[n];
        for (int c = 0; c < n; c++) {
            switch (kinds[c]) {
                case KIND_STRING:
                case KIND_BINARY:
                    values[c] = new byte[1 << 16];
                    offsets[c] = new int[capacity + 1];
                    break;
                case KIND_INT:
                    values[c] = new int[capacity];
                    break;
                default:
                    values[c] = new long[capacity];
                    break;
            }
        }
    }

    /** The kind of a Spark type, or -1 if it is not covered. */
    static int kind(DataType t) {
        if (t instanceof StringType) {
            return KIND_STRING;
        }
        if (t instanceof BinaryType) {
            return KIND_BINARY;
        }
        if (t instanceof IntegerType) {
            return KIND_INT;
        }
        if (t instanceof LongType) {
            return KIND_LONG;
        }
        if (t instanceof TimestampType) {
            return KIND_TIMESTAMP;
        }
        if (t instanceof TimestampNTZType) {
            return KIND_TIMESTAMP_NTZ;
        }
        return -1;
    }

    /** Columns for {@code schema} with room for {@code rows} rows, or null if a type is not covered. */
    static JvmColumns of(StructType schema, int rows) {
        StructField[] fields = schema.fields();
        String[] names = new String[fields.length];
        int[] kinds = new int[fields.length];
        boolean[] nullable = new boolean[fields.length];
        for (int c = 0; c < fields.length; c++) {
            kinds[c] = kind(fields[c].dataType());
            if (kinds[c] < 0) {
                return null;
            }
            names[c] = fields[c].name();
            nullable[c] = fields[c].nullable();
        }
        return new JvmColumns(names, kinds, nullable, rows);
    }

    int rows() {
        return rows;
    }

    long bytes() {
        return bytes;
    }

    boolean full() {
        return rows == capacity;
    }

    /** Appends {@code row} (the caller sends the batch when it is {@link #full}). */
    void add(InternalRow row) {
        int r = rows;
        UnsafeRow unsafe = row instanceof UnsafeRow ? (UnsafeRow) row : null;
        for (int c = 0; c < kinds.length; c++) {
            boolean isNull = row.isNullAt(c);
            if (isNull) {
                markNull(c, r);
            } else if (hasNull[c]) {
                valid[c][r] = 1;
            }
            switch (kinds[c]) {
                case KIND_STRING:
                case KIND_BINARY: {
                    int[] ends = offsets[c];
                    int at = ends[r];
                    if (!isNull) {
                        at = kinds[c] == KIND_STRING || unsafe != null
                                ? putUtf8(c, at, unsafe != null ? unsafe.getUTF8String(c) : row.getUTF8String(c))
                                : putBytes(c, at, row.getBinary(c));
                    }
                    ends[r + 1] = at;
                    break;
                }
                case KIND_INT:
                    ((int[]) values[c])[r] = isNull ? 0 : row.getInt(c);
                    break;
                default:
                    ((long[]) values[c])[r] = isNull ? 0L : row.getLong(c);
                    break;
            }
        }
        rows = r + 1;
    }

    private void markNull(int c, int r) {
        if (!hasNull[c]) {
            if (valid[c] == null) {
                valid[c] = new byte[capacity];
            }
            Arrays.fill(valid[c], 0, r, (byte) 1);
            hasNull[c] = true;
        }
        valid[c][r] = 0;
    }

    private byte[] room(int c, int at, int n) {
        byte[] b = (byte[]) values[c];
        if ((long) at + n > b.length) {
            long want = Math.max((long) at + n, 2L * b.length);
            if (want > Integer.MAX_VALUE - 8) {
                throw new IllegalStateException("rocketstore JVM writer: batch column over 2 GiB");
            }
            b = Arrays.copyOf(b, (int) want);
            values[c] = b;
        }
        return b;
    }

    /**
     * Copies a value's bytes; an {@link UnsafeRow}'s binary value is read as a
     * {@link UTF8String} view of the same bytes (its layout is the same, no copy).
     */
    private int putUtf8(int c, int at, UTF8String s) {
        int n = s.numBytes();
        byte[] b = room(c, at, n);
        s.writeToMemory(b, Platform.BYTE_ARRAY_OFFSET + at);
        bytes += n;
        return at + n;
    }

    private int putBytes(int c, int at, byte[] v) {
        byte[] b = room(c, at, v.length);
        System.arraycopy(v, 0, b, at, v.length);
        bytes += v.length;
        return at + v.length;
    }

    /** Hands the batch to the native writer and empties it. */
    void send(long handle) {
        byte[][] validity = new byte[kinds.length][];
        for (int c = 0; c < kinds.length; c++) {
            validity[c] = hasNull[c] ? valid[c] : null;
        }
        NativeWriter.putColumns(handle, rows, values, offsets, validity);
        rows = 0;
        bytes = 0;
        Arrays.fill(hasNull, false);
    }
}
