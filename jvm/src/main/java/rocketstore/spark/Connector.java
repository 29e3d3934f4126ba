package rocketstore.spark;

import java.io.File;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Paths;
import java.security.CodeSource;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;

/**
 * The connector's session-wide decisions: whether the JVM path may serve a job (the switches and
 * the native library), the one-line notice when the Python data source serves a job instead, and
 * shipping this jar to the executors of a cluster.
 */
final class Connector {
    private Connector() {}

    /**
     * Spark conf that turns the whole JVM path off ({@code false}): every read and write of
     * {@code format("rocketstore")} is then the Python data source's.
     */
    static final String ENABLED_CONF = "spark.rocketstore.jvm";

    private static final Set<String> SAID = ConcurrentHashMap.newKeySet();
    private static final Set<SparkContext> SHIPPED =
            java.util.Collections.newSetFromMap(new java.util.WeakHashMap<>());

    /**
     * Why the JVM path cannot serve a job in this session, or null if it can: {@value
     * #ENABLED_CONF} or {@code specific} (the reader's or the writer's own switch) is {@code
     * false}, or the native library did not load.
     */
    static String environment(String specific) {
        try {
            SparkSession active = SparkSession.active();
            for (String conf : new String[] {ENABLED_CONF, specific}) {
                String on = active.conf().get(conf, "true");
                if (Boolean.FALSE.equals(JvmRead.parseBool(on))) {
                    return conf + "=" + on;
                }
            }
        } catch (IllegalStateException e) {
            // No active session (not under Spark): nothing turns the JVM path off.
        }
        if (!NativeLibrary.available()) {
            return "the native library did not load: " + NativeLibrary.error();
        }
        return null;
    }

    /**
     * Says once per JVM, in one line (a WARN of the logger {@code rocketstore.spark}), that the
     * Python data source serves {@code what} ("reads", "writes") and why.
     */
    static void fallback(String what, String why) {
        if (SAID.add(what + "\0" + why)) {
            JvmRead.LOG.warn("rocketstore: the Python data source serves {} (not the JVM connector): {}",
                    what, why);
        }
    }

    private static final Pattern SCHEME = Pattern.compile("^([A-Za-z][A-Za-z0-9+.\\-]*):(.*)$");

    /**
     * The URI scheme of a root ({@code s3a} of {@code s3a://bucket/x}, lower case), or null for a
     * local path: as the Python data source decides ({@code rocketstore._remote}), a colon makes
     * a scheme when {@code //} follows it or the scheme is one rocketstore knows.
     */
    static String scheme(String path) {
        Matcher m = SCHEME.matcher(path);
        if (!m.matches()) {
            return null;
        }
        String scheme = m.group(1).toLowerCase(Locale.ROOT);
        boolean known = scheme.matches("file|s3|s3a|gs|abfs|abfss|hdfs");
        return m.group(2).startsWith("//") || known ? scheme : null;
    }

    /**
     * The absolute local path of a root that is a local path or a {@code file:} URI, or null
     * for any other URI (a remote root, or a scheme the Python data source refuses).
     */
    static String localRoot(String path) {
        String scheme = scheme(path);
        if (scheme == null) {
            return Paths.get(path).toAbsolutePath().normalize().toString();
        }
        if (!scheme.equals("file")) {
            return null;
        }
        try {
            URI uri = new URI(path);
            if (uri.getAuthority() != null && !uri.getAuthority().equals("localhost")) {
                return null;
            }
            return Paths.get(uri.getPath()).toAbsolutePath().normalize().toString();
        } catch (URISyntaxException | IllegalArgumentException e) {
            return null; // the Python data source says what is wrong with it
        }
    }

    /** The scheme of a remote root the Python data source serves, or null. */
    static String remoteScheme(org.apache.spark.sql.util.CaseInsensitiveStringMap options) {
        String path = options.get("path");
        if (path == null || path.isEmpty() || localRoot(path) != null) {
            return null;
        }
        String scheme = scheme(path);
        // Other schemes: the Python data source refuses them with the schemes it serves.
        return scheme != null && scheme.matches("s3|s3a|gs|abfs|abfss|hdfs") ? scheme : null;
    }

    /**
     * {@code options} plus the session's file system settings (the {@code spark.hadoop.fs.*}
     * entries of its conf, named without {@code spark.hadoop.}) that the options do not set:
     * the Python data source reads a remote root with the settings the user gave Spark.
     */
    static Map<String, String> withHadoopSettings(Map<String, String> options) {
        Map<String, String> out = new HashMap<>(options);
        Set<String> given = new java.util.HashSet<>();
        for (String k : options.keySet()) {
            given.add(k.toLowerCase(Locale.ROOT));
        }
        try {
            scala.collection.Iterator<scala.Tuple2<String, String>> it =
                    SparkSession.active().conf().getAll().iterator();
            while (it.hasNext()) {
                scala.Tuple2<String, String> e = it.next();
                if (e._1().startsWith("spark.hadoop.fs.")) {
                    String name = e._1().substring("spark.hadoop.".length());
                    if (!given.contains(name.toLowerCase(Locale.ROOT))) {
                        out.put(name, e._2());
                    }
                }
            }
        } catch (IllegalStateException e) {
            // No active session: the options alone.
        }
        return out;
    }

    /** This class's jar, or null when the classes do not come from a jar file. */
    static File jar() {
        try {
            CodeSource src = Connector.class.getProtectionDomain().getCodeSource();
            if (src == null || src.getLocation() == null) {
                return null;
            }
            File f = new File(src.getLocation().toURI());
            return f.isFile() ? f : null;
        } catch (URISyntaxException | IllegalArgumentException | SecurityException e) {
            return null;
        }
    }

    /**
     * On a cluster (not a {@code local} master, whose tasks run in this JVM), adds this jar to
     * the session's jars unless a jar of the same name is there already (from {@code --jars},
     * {@code spark.jars} or {@code ADD JAR}): the executors then get the classes and, inside the
     * jar, the native library, with nothing installed on them.
     */
    static void shipToExecutors() {
        SparkContext sc;
        try {
            sc = SparkSession.active().sparkContext();
        } catch (IllegalStateException e) {
            return;
        }
        if (sc.isLocal()) {
            return;
        }
        synchronized (SHIPPED) {
            if (!SHIPPED.add(sc)) {
                return;
            }
            File jar = jar();
            if (jar == null) {
                return;
            }
            scala.collection.Iterator<String> it = sc.listJars().iterator();
            while (it.hasNext()) {
                String listed = it.next();
                if (listed.endsWith("/" + jar.getName())) {
                    return;
                }
            }
            JvmRead.LOG.info("rocketstore: adding {} to the session's jars for the executors", jar);
            sc.addJar(jar.getAbsolutePath());
        }
    }
}
