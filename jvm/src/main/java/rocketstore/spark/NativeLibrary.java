package rocketstore.spark;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Enumeration;
import java.util.List;
import java.util.Locale;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;

/**
 * Loads {@code librocketstore_jni} (crates/rocketstore-jni) once per class loader, on first use
 * of {@link NativeReader} or {@link NativeWriter}, from the first of:
 *
 * <ol>
 *   <li>the file the system property {@code rocketstore.jni.library} names;
 *   <li>the file the environment variable {@code ROCKETSTORE_JNI_LIBRARY} names;
 *   <li>the copy inside this jar for the platform of this JVM ({@link #platform()}: {@code
 *       linux-<arch>} on glibc, {@code linux-<arch>-musl} on musl, so that a JVM never loads a
 *       library linked against the other C library), {@code
 *       rocketstore/spark/native/<platform>/librocketstore_jni.so} (the jar of each wheel and of
 *       {@code make jvm} carries the one for the platform it was built for), copied to a new file in {@code java.io.tmpdir} (or the directory the system
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

    /** Where the jar keeps its native libraries, one directory per platform below it. */
    static final String PREFIX = "rocketstore/spark/native/";

    /**
     * This JVM's platform as the jar names it: {@code <os>-<arch>}, with {@code -musl} appended
     * when the JVM runs on musl (Alpine): {@code linux-x86_64}, {@code linux-aarch64-musl}.
     */
    static String platform() {
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        if (arch.equals("amd64") || arch.equals("x86_64")) {
            arch = "x86_64";
        } else if (arch.equals("aarch64") || arch.equals("arm64")) {
            arch = "aarch64";
        }
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT).replace(" ", "");
        String platform = os + "-" + arch;
        return os.equals("linux") && musl(arch) ? platform + "-musl" : platform;
    }

    /**
     * Whether this process runs on musl: its own mappings ({@code /proc/self/maps}) name musl's
     * C library before any of glibc's, or (no {@code /proc}) {@code
     * /lib/ld-musl-<arch>.so.1} exists. A glibc JVM on a system that also has musl installed
     * (Debian's {@code musl} package) maps glibc, so it is not taken for a musl one.
     */
    static boolean musl(String arch) {
        try (BufferedReader maps = Files.newBufferedReader(Paths.get("/proc/self/maps"))) {
            String line;
            while ((line = maps.readLine()) != null) {
                // Alpine maps /lib/ld-musl-<arch>.so.1; Debian's musl, <arch>-linux-musl/libc.so.
                if (line.contains("/ld-musl-") || line.contains("/libc.musl-")
                        || line.contains("-linux-musl/libc.so")) {
                    return true;
                }
                if (line.contains("/libc.so.6") || line.contains("/ld-linux")) {
                    return false;
                }
            }
        } catch (IOException | SecurityException e) {
            // No /proc: decide by the loader's file.
        }
        return new File("/lib/ld-musl-" + arch + ".so.1").exists();
    }

    /** The resource path of the copy inside the jar for this JVM's platform. */
    static String resource() {
        return PREFIX + platform() + "/" + FILE;
    }

    /** The platforms this class's jar carries a library for (empty if unknown). */
    static List<String> carried() {
        List<String> found = new ArrayList<>();
        File jar = Connector.jar();
        if (jar == null) {
            return found;
        }
        try (JarFile jf = new JarFile(jar)) {
            Enumeration<JarEntry> entries = jf.entries();
            while (entries.hasMoreElements()) {
                String name = entries.nextElement().getName();
                if (name.startsWith(PREFIX) && name.endsWith("/" + FILE)) {
                    found.add(name.substring(PREFIX.length(), name.length() - FILE.length() - 1));
                }
            }
        } catch (IOException | SecurityException e) {
            // Unknown: the error says less.
        }
        Collections.sort(found);
        return found;
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
                List<String> carried = carried();
                return new UnsatisfiedLinkError("the rocketstore jar has no native library for "
                        + platform() + " (no " + resource + "; it carries "
                        + (carried.isEmpty() ? "none" : String.join(", ", carried))
                        + ": use the jar of the rocketstore wheel for " + platform()
                        + ", or set -Drocketstore.jni.library) and there is none on"
                        + " java.library.path: " + e.getMessage());
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
