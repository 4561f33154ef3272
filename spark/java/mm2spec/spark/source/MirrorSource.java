package mm2spec.spark.source;

import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A Kafka source made for mirroring (Spark's DataSource V2 API): each micro-batch runs a bounded
 * number of input partitions ({@code tasks}, the flow's {@code tasksMax}), each owning a stable
 * slice of the source's partitions and reading them with one long-lived consumer that stays on its
 * executor across batches. MirrorMaker 2 gives each of its {@code tasks.max} tasks many partitions on
 * one consumer in the same way; Spark's own Kafka source runs one task per topic-partition with new
 * data and takes a pooled consumer per partition, which at 1,000 partitions makes each batch 1,000
 * tasks that mostly wait (spark/README.md, Profile).
 *
 * <p>Rows have the columns of Spark's Kafka source ({@link #SCHEMA}, headers included) and the
 * offsets in the checkpoint are in its format ({@code {"topic":{"0":42}}}), so a checkpoint written by
 * either source is read by the other and the job's batch ranges, offset syncs and the failback
 * start-offsets file work unchanged. Options: see {@link SourceOptions}.
 */
public final class MirrorSource implements TableProvider, DataSourceRegister {
    /** Spark's Kafka source's columns with {@code includeHeaders}, in its order. */
    public static final StructType SCHEMA = new StructType(new StructField[] {
        DataTypes.createStructField("key", DataTypes.BinaryType, true),
        DataTypes.createStructField("value", DataTypes.BinaryType, true),
        DataTypes.createStructField("topic", DataTypes.StringType, true),
        DataTypes.createStructField("partition", DataTypes.IntegerType, true),
        DataTypes.createStructField("offset", DataTypes.LongType, true),
        DataTypes.createStructField("timestamp", DataTypes.TimestampType, true),
        DataTypes.createStructField("timestampType", DataTypes.IntegerType, true),
        DataTypes.createStructField("headers", new ArrayType(new StructType(new StructField[] {
            DataTypes.createStructField("key", DataTypes.StringType, true),
            DataTypes.createStructField("value", DataTypes.BinaryType, true)}), true), true),
    });

    @Override
    public String shortName() {
        return "mm2spec-mirror";
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return SCHEMA;
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new MirrorTable();
    }

    /** The source as a table Spark can read as a stream (micro-batches only). */
    private static final class MirrorTable implements Table, SupportsRead {
        @Override
        public String name() {
            return "mm2spec-mirror";
        }

        @Override
        public StructType schema() {
            return SCHEMA;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return Set.of(TableCapability.MICRO_BATCH_READ);
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            SourceOptions parsed = SourceOptions.parse(options);
            return () -> new Scan() {
                @Override
                public StructType readSchema() {
                    return SCHEMA;
                }

                @Override
                public String description() {
                    return "mm2spec-mirror[" + parsed.describe() + "]";
                }

                @Override
                public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
                    return new MirrorStream(parsed, checkpointLocation);
                }
            };
        }
    }
}
