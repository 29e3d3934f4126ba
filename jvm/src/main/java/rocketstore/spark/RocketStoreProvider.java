package rocketstore.spark;

import java.util.Map;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The {@code rocketstore} data source when the rocketstore jar is on Spark's classpath.
 *
 * <p>Spark 4.3 resolves a format name through {@code DataSource.lookupDataSource}: a JVM
 * {@link DataSourceRegister} with that short name wins, and a Python data source registered
 * under the name is used only when no JVM class claims it (there is no conflict check). This
 * class therefore <em>is</em> the Python data source's table provider ({@link
 * PythonDataSourceV2}, the class Spark itself instantiates for a Python data source, looked up
 * by the same name {@code rocketstore}), so that writes, the streaming sink and the streaming
 * source run exactly as without the jar; it only replaces batch reads that the JVM reader
 * serves identically (see {@link JvmRead#unsupported}) with a DataSource V2 scan that prunes
 * columns and returns columnar batches built in Rust. Everything else goes to the Python
 * reader.
 */
public class RocketStoreProvider extends PythonDataSourceV2 implements DataSourceRegister {
    /** The format name. */
    public static final String NAME = "rocketstore";

    private boolean named;

    /**
     * Write task attempts the JVM batch writer started in this JVM (a diagnostic: in local mode,
     * how many of a session's write tasks ran in the JVM rather than in Python workers).
     */
    public static long jvmWriterTasks() {
        return JvmWrite.TASKS.get();
    }

    /**
     * Of {@link #jvmWriterTasks}, those that handed their rows over as plain column arrays
     * ({@link JvmColumns}: every column flat) rather than as Arrow IPC.
     */
    public static long jvmWriterColumnTasks() {
        return JvmWrite.COLUMN_TASKS.get();
    }

    @Override
    public String shortName() {
        return NAME;
    }

    /** The Python data source is always the one registered as {@value #NAME}. */
    @Override
    public synchronized void setShortName(String ignored) {
        if (!named) {
            named = true;
            super.setShortName(NAME);
        }
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        setShortName(NAME);
        if (JvmRead.unsupported(options, null) == null) {
            // The messages table: its schema is fixed (no Python worker is needed for it).
            return JvmRead.MESSAGE_SCHEMA;
        }
        if (Connector.remoteScheme(options) != null) {
            // Spark keeps the Python data source this creates for the reads of the table: it
            // gets the session's file system settings for its remote root here.
            options = new CaseInsensitiveStringMap(
                    Connector.withHadoopSettings(options.asCaseSensitiveMap()));
        }
        return super.inferSchema(options);
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        setShortName(NAME);
        return new RocketStoreTable(this, NAME, schema);
    }
}
