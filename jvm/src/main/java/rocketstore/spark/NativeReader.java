package rocketstore.spark;

/**
 * The native calls of the JVM reader (crates/rocketstore-jni), in the library {@link
 * NativeLibrary} loads when this class is initialized.
 */
final class NativeReader {
    private NativeReader() {}

    static {
        NativeLibrary.require();
    }

    /** Opens a store read-only with the configuration fields given; returns its handle. */
    static native long open(String path, String[] keys, String[] values);

    /** Closes a store handle. */
    static native void close(long handle);

    /**
     * Records of {@code [from, end)} of the commit log, at most {@code max} of them, as Arrow IPC
     * stream bytes holding one batch of {@code columns}; {@code next[0]} receives the offset to
     * continue from.
     */
    static native byte[] readLog(
            long handle, long from, long end, int max, boolean verifyCrc, String[] columns,
            String label, long[] next);
}
