package rocketstore;

import rocketstore.spark.RocketStoreProvider;

/**
 * {@code format("rocketstore")} when the rocketstore jar is on the driver's classpath: Spark
 * resolves a format name {@code n} that no registered {@code DataSourceRegister} claims to the
 * class {@code n.DefaultSource}, before it looks for a Python data source of that name.
 *
 * <p>The jar registers no {@code DataSourceRegister} service on purpose: Spark instantiates every
 * registered one at each format lookup, so a jar built for another Spark version would break the
 * lookup of every format (parquet included). Found by its class name, this class is loaded only
 * when {@code rocketstore} is asked for.
 */
public class DefaultSource extends RocketStoreProvider {}
