package rocketstore.spark;

import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.execution.datasources.v2.python.PythonTable;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The Python data source's table, whose batch reads the JVM reader serves when it can ({@link
 * JvmRead#unsupported} is null) and whose batch writes run their tasks in the JVM writer when
 * it can ({@link JvmWrite#unsupported} is null; the driver side of the write stays the Python
 * writer's); streaming and every other read or write are the Python table's.
 */
public class RocketStoreTable extends PythonTable {
    private final StructType tableSchema;

    public RocketStoreTable(PythonDataSourceV2 ds, String shortName, StructType schema) {
        super(ds, shortName, schema);
        this.tableSchema = schema;
    }

    private static String remoteReason(String scheme) {
        return "the root is a " + scheme + ":// URI (the Python data source copies stores"
                + " between remote roots and the executors' local disks)";
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        String scheme = Connector.remoteScheme(options);
        if (scheme != null) {
            Connector.fallback("reads", remoteReason(scheme));
            return super.newScanBuilder(new CaseInsensitiveStringMap(
                    Connector.withHadoopSettings(options.asCaseSensitiveMap())));
        }
        String env = Connector.environment(JvmRead.ENABLED_CONF);
        if (env != null) {
            Connector.fallback("reads", env);
            return super.newScanBuilder(options);
        }
        String why = JvmRead.unsupported(options, tableSchema);
        if (why != null) {
            JvmRead.LOG.debug("rocketstore: the Python reader serves this read: {}", why);
            return super.newScanBuilder(options);
        }
        Connector.shipToExecutors();
        return new JvmScan.Builder(tableSchema, options, () -> super.newScanBuilder(options));
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        String scheme = Connector.remoteScheme(info.options());
        if (scheme != null) {
            Connector.fallback("writes", remoteReason(scheme));
            return super.newWriteBuilder(new JvmWrite.WithOptions(info, new CaseInsensitiveStringMap(
                    Connector.withHadoopSettings(info.options().asCaseSensitiveMap()))));
        }
        String env = Connector.environment(JvmWrite.ENABLED_CONF);
        if (env != null) {
            Connector.fallback("writes", env);
            return super.newWriteBuilder(info);
        }
        String why = JvmWrite.unsupported(info);
        if (why != null) {
            JvmRead.LOG.debug("rocketstore: the Python writer serves this write: {}", why);
            return super.newWriteBuilder(info);
        }
        Connector.shipToExecutors();
        return new JvmWrite.Builder(info, i -> super.newWriteBuilder(i));
    }
}
