package rocketstore.spark;

import java.io.File;
import java.net.URISyntaxException;

/**
 * The native calls of the JVM reader (crates/rocketstore-jni). The library is loaded once per
 * JVM from, in order: the system property {@code rocketstore.jni.library}, the environment
 * variable {@code ROCKETSTORE_JNI_LIBRARY}, {@code librocketstore_jni.so} next to this class's
 * jar, then {@code java.library.path}. {@link #available()} is false when none loads; the
 * reader then leaves every read to the Python data source.
 */
final class NativeReader {
    private NativeReader() {}

    private static final Throwable LOAD_ERROR = load();

    private static Throwable load() {
        try {
            String explicit = System.getProperty("rocketstore.jni.library");
            if (explicit == null || explicit.isEmpty()) {
                explicit = System.getenv("ROCKETSTORE_JNI_LIBRARY");
            }
            if (explicit != null && !explicit.isEmpty()) {
                System.load(new File(explicit).getAbsolutePath());
                return null;
            }
            File beside = besideJar();
            if (beside != null && beside.isFile()) {
                System.load(beside.getAbsolutePath());
                return null;
            }
            System.loadLibrary("rocketstore_jni");
            return null;
        } catch (Throwable t) {
            return t;
        }
    }

    private static File besideJar() {
        try {
            java.security.CodeSource src = NativeReader.class.getProtectionDomain().getCodeSource();
            if (src == null || src.getLocation() == null) {
                return null;
            }
            File jar = new File(src.getLocation().toURI());
            return new File(jar.getParentFile(), "librocketstore_jni.so");
        } catch (URISyntaxException | IllegalArgumentException | SecurityException e) {
            return null;
        }
    }

    /** True if the native library is loaded. */
    static boolean available() {
        return LOAD_ERROR == null;
    }

    /** Why the native library did not load (null if it did). */
    static Throwable loadError() {
        return LOAD_ERROR;
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
