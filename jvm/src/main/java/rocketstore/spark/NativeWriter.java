package rocketstore.spark;

/**
 * The native calls of the JVM batch writer (crates/rocketstore-jni, {@code writer.rs}), in the
 * library {@link NativeLibrary} loads when this class is initialized (in every JVM that runs a
 * write task: an executor's JVM loads it here, at its first task). One handle per Spark write
 * task.
 */
final class NativeWriter {
    private NativeWriter() {}

    static {
        NativeLibrary.require();
    }

    /**
     * A task writer for the store at {@code path} (created at the first row) with the store
     * configuration fields given; {@code liveMarker} (empty: none) must exist while it writes.
     */
    static native long open(
            String path, String liveMarker, String jobId, String[] keys, String[] values,
            String selector, int queueNums, long partition, long taskAttempt);

    /** Puts the batches of the Arrow IPC stream in {@code ipc[0..length]}. */
    static native void put(long handle, byte[] ipc, int length);

    /**
     * Declares the columns {@link #putColumns} hands over: their names, kinds
     * ({@link JvmColumns}' {@code KIND_*}: string, binary, int, long, timestamp with the time
     * zone {@code timeZone}, timestamp without one) and nullability, in the order of its arrays.
     */
    static native void columns(
            long handle, String[] names, int[] kinds, boolean[] nullable, String timeZone);

    /**
     * Puts one batch of {@code rows} rows of the declared columns: column {@code c} is
     * {@code values[c]} (a {@code byte[]} of concatenated values for string and binary
     * columns, with {@code offsets[c][0..rows]}; an {@code int[]} or {@code long[]} of
     * {@code rows} values otherwise) and {@code valid[c]} (1 per valid row; null: no nulls).
     */
    static native void putColumns(
            long handle, int rows, Object[] values, int[][] offsets, byte[][] valid);

    /** Flushes and closes the store; its statistics as JSON, or null if the task had no rows. */
    static native String finish(long handle);

    /** Closes the store and removes the task's directory. */
    static native void abort(long handle);

    /** Forgets the handle (aborting a writer that neither finished nor aborted). */
    static native void close(long handle);
}
