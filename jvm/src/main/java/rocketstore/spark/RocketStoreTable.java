package rocketstore.spark;

import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.execution.datasources.v2.python.PythonTable;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The Python data source's table, whose batch reads the JVM reader serves when it can ({@link
 * JvmRead#unsupported} is null); writes, streaming and every other read are the Python
 * table's.
 */
public class RocketStoreTable extends PythonTable {
    private final StructType tableSchema;

    public RocketStoreTable(PythonDataSourceV2 ds, String shortName, StructType schema) {
        super(ds, shortName, schema);
        this.tableSchema = schema;
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        String why = JvmRead.unsupported(options, tableSchema);
        if (why != null) {
            JvmRead.LOG.debug("rocketstore: the Python reader serves this read: {}", why);
            return super.newScanBuilder(options);
        }
        return new JvmScan.Builder(tableSchema, options, () -> super.newScanBuilder(options));
    }
}
