package rocketstore.spark;

import java.io.File;
import java.io.IOException;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Which reads the JVM reader serves, and their planning: the same stores, partitions and store
 * configuration as the Python reader's {@code table=messages}, {@code partitioning=file} read
 * ({@code python/rocketstore/spark/_reader.py}, {@code python/rocketstore/_stores.py}).
 */
final class JvmRead {
    private JvmRead() {}

    static final Logger LOG = LoggerFactory.getLogger("rocketstore.spark");

    /** Spark conf that turns the JVM reader off ({@code false}): every read is the Python one. */
    static final String ENABLED_CONF = "spark.rocketstore.jvmReader";

    private static StructField f(String name, org.apache.spark.sql.types.DataType t) {
        return DataTypes.createStructField(name, t, true);
    }

    /** {@code rocketstore.spark.MESSAGE_SCHEMA}, field for field. */
    static final StructType MESSAGE_SCHEMA = DataTypes.createStructType(new StructField[] {
        f("topic", DataTypes.StringType),
        f("queue_id", DataTypes.IntegerType),
        f("queue_offset", DataTypes.LongType),
        f("commitlog_offset", DataTypes.LongType),
        f("store_size", DataTypes.IntegerType),
        f("body", DataTypes.BinaryType),
        f("body_crc", DataTypes.IntegerType),
        f("flag", DataTypes.IntegerType),
        f("sys_flag", DataTypes.IntegerType),
        f("tags", DataTypes.StringType),
        f("keys", DataTypes.StringType),
        f("properties", DataTypes.createMapType(DataTypes.StringType, DataTypes.StringType, true)),
        f("born_timestamp", DataTypes.TimestampType),
        f("born_host", DataTypes.StringType),
        f("store_timestamp", DataTypes.TimestampType),
        f("store_host", DataTypes.StringType),
        f("reconsume_times", DataTypes.IntegerType),
        f("prepared_transaction_offset", DataTypes.LongType),
        f("msg_id", DataTypes.StringType),
        f("uniq_key", DataTypes.StringType),
        f("store", DataTypes.StringType),
    });

    /** The lookup form of an option name, as the Python reader's {@code normalize}. */
    static String normalize(String name) {
        return name.toLowerCase(Locale.ROOT).replace("_", "").replace("-", "").replace(".", "");
    }

    /** {@code parse_bool}: null if {@code v} is not a boolean the Python reader accepts. */
    static Boolean parseBool(String v) {
        String s = v.trim().toLowerCase(Locale.ROOT);
        if (Arrays.asList("true", "1", "yes", "on").contains(s)) {
            return Boolean.TRUE;
        }
        if (Arrays.asList("false", "0", "no", "off").contains(s)) {
            return Boolean.FALSE;
        }
        return null;
    }

    /** {@code parse_int} with minimum 1 ({@code _} separators allowed); null if not one. */
    static Integer parsePositiveInt(String v) {
        try {
            long n = Long.parseLong(v.trim().replace("_", ""));
            return n >= 1 && n <= Integer.MAX_VALUE ? (int) n : null;
        } catch (NumberFormatException e) {
            return null;
        }
    }

    /**
     * Why the Python reader must serve a read with {@code options} and the table schema {@code
     * schema} (null: not checked), or null if the JVM reader serves it with the same rows: the
     * messages table read per commit log file, only the options {@code path}, {@code verifyCrc},
     * {@code maxMessagesPerBatch} (and {@code table=messages}, {@code partitioning=file}), valid
     * values, the columns' default types, and the native library loaded. Any other option (a
     * topic filter, offsets, store configuration, ...) or an invalid value goes to the Python
     * reader, which applies or rejects it as it always has.
     */
    static String unsupported(CaseInsensitiveStringMap options, StructType schema) {
        String env = Connector.environment(ENABLED_CONF);
        if (env != null) {
            return env;
        }
        for (Map.Entry<String, String> e : options.entrySet()) {
            String key = normalize(e.getKey());
            String value = e.getValue() == null ? "" : e.getValue();
            switch (key) {
                case "path":
                    break;
                case "table":
                    if (!normalize(value).equals("messages")) {
                        return "table=" + value;
                    }
                    break;
                case "partitioning":
                    if (!normalize(value).equals("file")) {
                        return "partitioning=" + value;
                    }
                    break;
                case "verifycrc":
                    if (parseBool(value) == null) {
                        return "verifyCrc=" + value;
                    }
                    break;
                case "maxmessagesperbatch":
                    if (parsePositiveInt(value) == null) {
                        return "maxMessagesPerBatch=" + value;
                    }
                    break;
                default:
                    return "option " + e.getKey();
            }
        }
        String path = options.get("path");
        if (path == null || path.isEmpty()) {
            return "no path";
        }
        String local = Connector.localRoot(path);
        if (local == null) {
            return "the root " + path + " is not a local path";
        }
        if (holdsStreamSink(new File(local))) {
            return "a stream sink's stores (read up to their last committed micro-batch)";
        }
        if (schema != null) {
            for (StructField field : schema.fields()) {
                StructField known = find(field.name());
                if (known == null || !known.dataType().equals(field.dataType())) {
                    return "column " + field.name() + " " + field.dataType().simpleString();
                }
            }
        }
        return null;
    }

    /**
     * True for a stream sink's root ({@code _rocketstore_sink.json}) or one of its stores (the
     * sink's topic {@code rmq_sys_rocketstore_sink}): the Python reader serves those, reading each
     * store only up to its last commit record and hiding the sink's topic.
     */
    static boolean isStreamSink(File path) {
        return new File(path, "_rocketstore_sink.json").isFile()
                || new File(new File(path, "consumequeue"), "rmq_sys_rocketstore_sink").isDirectory();
    }

    /**
     * True if {@code path} is a stream sink's root or store, or any store at or below it is a
     * sink's (a directory holding a sink root): the Python reader serves those reads, so no
     * reader ever returns a half-appended micro-batch or the sink's own records as rows.
     */
    static boolean holdsStreamSink(File path) {
        if (isStreamSink(path)) {
            return true;
        }
        if (!path.isDirectory()) {
            return false;
        }
        for (File store : findStores(path)) {
            if (isStreamSink(store) || isStreamSink(store.getParentFile())) {
                return true;
            }
        }
        return false;
    }

    private static StructField find(String name) {
        for (StructField f : MESSAGE_SCHEMA.fields()) {
            if (f.name().equals(name)) {
                return f;
            }
        }
        return null;
    }

    /** The parsed options of a read the JVM reader serves. */
    static final class Settings implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        final String root;
        final boolean verifyCrc;
        final int batchSize;

        Settings(CaseInsensitiveStringMap options) {
            this.root = Connector.localRoot(options.get("path"));
            String crc = options.getOrDefault("verifyCrc", "false");
            this.verifyCrc = Boolean.TRUE.equals(parseBool(crc));
            Integer n = parsePositiveInt(options.getOrDefault("maxMessagesPerBatch", "16384"));
            this.batchSize = n == null ? 16384 : n;
        }
    }

    private static boolean isStore(File dir) {
        return new File(dir, "commitlog").isDirectory();
    }

    /** {@code find_stores}: every store at or below {@code root}, sorted by path. */
    static List<File> findStores(File root) {
        List<File> found = new ArrayList<>();
        if (isStore(root)) {
            found.add(root);
            return found;
        }
        walk(root, found);
        found.sort((a, b) -> a.getPath().compareTo(b.getPath()));
        return found;
    }

    private static void walk(File dir, List<File> found) {
        String[] names = dir.list();
        if (names == null) {
            return;
        }
        Arrays.sort(names);
        for (String name : names) {
            if (name.startsWith("_") || name.startsWith(".")) {
                continue;
            }
            File child = new File(dir, name);
            if (!child.isDirectory()) {
                continue;
            }
            if (isStore(child)) {
                found.add(child);
            } else {
                walk(child, found);
            }
        }
    }

    /** The configuration the {@code _SUCCESS} manifest next to {@code store} records, or null. */
    static Map<String, String> manifestConfig(File store) {
        File manifest = new File(store.getParentFile(), "_SUCCESS");
        JsonNode data;
        try {
            data = new ObjectMapper().readTree(manifest);
        } catch (IOException | RuntimeException e) {
            return null;
        }
        if (data == null || !data.isObject() || !data.path("stores").isArray()) {
            return null;
        }
        for (JsonNode entry : data.get("stores")) {
            if (entry.isObject() && store.getName().equals(entry.path("path").asText(null))) {
                Map<String, String> config = new LinkedHashMap<>();
                JsonNode c = entry.get("config");
                if (c != null && c.isObject()) {
                    for (Map.Entry<String, JsonNode> kv : c.properties()) {
                        JsonNode v = kv.getValue();
                        if (v.isIntegralNumber() || v.isBoolean() || v.isTextual()) {
                            config.put(kv.getKey(), v.asText());
                        }
                    }
                }
                return config;
            }
        }
        return null;
    }

    /** The store configuration a read opens {@code store} with ({@code ReadSettings.open}). */
    static Map<String, String> openConfig(File store, boolean verifyCrc) {
        Map<String, String> recorded = manifestConfig(store);
        Map<String, String> config = new LinkedHashMap<>();
        if (recorded != null) {
            config.putAll(recorded);
            if (!verifyCrc
                    && !config.containsKey("check_crc_on_recover")
                    && !new File(store, "abort").exists()) {
                // A published store was flushed and closed: its open need not check CRCs.
                config.put("check_crc_on_recover", "false");
            }
        }
        return config;
    }

    /** One partition per non-empty commit log file of every store under the root. */
    static List<JvmScan.FilePartition> plan(Settings s) {
        File root = new File(s.root);
        if (!root.isDirectory()) {
            throw new RocketStoreException(
                    "[Errno 2] no such directory to read stores from: '" + s.root + "'");
        }
        List<File> stores = findStores(root);
        if (stores.isEmpty()) {
            throw new RocketStoreException(
                    "[Errno 2] no RocketMQ store (a directory with commitlog/) at or below: '"
                            + s.root + "'");
        }
        List<JvmScan.FilePartition> parts = new ArrayList<>();
        for (File store : stores) {
            Map<String, String> config = openConfig(store, s.verifyCrc);
            String[] keys = config.keySet().toArray(new String[0]);
            String[] values = config.values().toArray(new String[0]);
            List<long[]> files = new ArrayList<>();
            File[] entries = new File(store, "commitlog").listFiles();
            if (entries != null) {
                for (File f : entries) {
                    String name = f.getName();
                    if (name.length() == 20 && name.chars().allMatch(Character::isDigit) && f.isFile()) {
                        files.add(new long[] {Long.parseLong(name), f.length()});
                    }
                }
            }
            files.sort((a, b) -> Long.compare(a[0], b[0]));
            for (long[] file : files) {
                if (file[1] > 0) {
                    parts.add(new JvmScan.FilePartition(
                            store.getPath(), file[0], file[0] + file[1], keys, values));
                }
            }
        }
        return parts;
    }
}
