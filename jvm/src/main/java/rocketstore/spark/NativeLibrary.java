package rocketstore.spark;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * Loads {@code librocketstore_jni} (crates/rocketstore-jni) once per class loader, on first use
 * of {@link NativeReader} or {@link NativeWriter}, from the first of:
 *
 * <ol>
 *   <li>the file the system property {@code rocketstore.jni.library} names;
 *   <li>the file the environment variable {@code ROCKETSTORE_JNI_LIBRARY} names;
 *   <li>the copy inside this jar, {@code rocketstore/spark/native/linux-<arch>/librocketstore_jni.so}
 *       (the jar of the wheel and of {@code make jvm} carries the one for the platform it was
 *       built on), copied to a new file in {@code java.io.tmpdir} (or the directory the system
 *       property {@code rocketstore.jni.tmpdir} names), loaded, and deleted at once (the
 *       mapping stays): so every JVM that has the jar, the driver's and each executor's, finds
 *       the library with nothing but the jar Spark ships it;
 *   <li>{@code rocketstore_jni} on {@code java.library.path}.
 * </ol>
 *
 * {@link #error()} is null when it loaded; otherwise it says what was tried, and the JVM reader
 * and writer leave every job to the Python data source.
 */
final class NativeLibrary {
    private NativeLibrary() {}

    /** The library's file name. */
    static final String FILE = "librocketstore_jni.so";

    private static final Throwable ERROR = load();

    /** The resource path of the copy inside the jar for this JVM's platform. */
    static String resource() {
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        if (arch.equals("amd64") || arch.equals("x86_64")) {
            arch = "x86_64";
        } else if (arch.equals("aarch64") || arch.equals("arm64")) {
            arch = "aarch64";
        }
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT).replace(" ", "");
        return "rocketstore/spark/native/" + os + "-" + arch + "/" + FILE;
    }

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
            String resource = resource();
            try (InputStream in = NativeLibrary.class.getClassLoader().getResourceAsStream(resource)) {
                if (in != null) {
                    loadCopy(in);
                    return null;
                }
            }
            try {
                System.loadLibrary("rocketstore_jni");
                return null;
            } catch (UnsatisfiedLinkError e) {
                return new UnsatisfiedLinkError("no " + resource + " in the rocketstore jar (built for "
                        + "another platform?) and none on java.library.path: " + e.getMessage());
            }
        } catch (Throwable t) {
            return t;
        }
    }

    private static void loadCopy(InputStream in) throws IOException {
        String dir = System.getProperty("rocketstore.jni.tmpdir");
        Path parent = Paths.get(dir == null || dir.isEmpty() ? System.getProperty("java.io.tmpdir") : dir);
        Files.createDirectories(parent);
        Path copy = Files.createTempFile(parent, "librocketstore_jni-", ".so");
        try {
            Files.copy(in, copy, StandardCopyOption.REPLACE_EXISTING);
            System.load(copy.toAbsolutePath().toString());
        } catch (UnsatisfiedLinkError e) {
            UnsatisfiedLinkError err = new UnsatisfiedLinkError(
                    "cannot load the rocketstore JNI library copied to " + copy + " (is " + parent
                    + " mounted noexec? set -Drocketstore.jni.tmpdir): " + e.getMessage());
            err.initCause(e);
            throw err;
        } finally {
            Files.deleteIfExists(copy);
        }
    }

    /** True if the library is loaded. */
    static boolean available() {
        return ERROR == null;
    }

    /** Why the library did not load (null if it did). */
    static Throwable error() {
        return ERROR;
    }

    /** Throws the load error (as an {@link UnsatisfiedLinkError} naming it) if there is one. */
    static void require() {
        if (ERROR != null) {
            UnsatisfiedLinkError e = new UnsatisfiedLinkError(
                    "rocketstore: the JNI library did not load: " + ERROR);
            e.initCause(ERROR);
            throw e;
        }
    }
}
