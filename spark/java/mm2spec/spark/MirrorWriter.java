package mm2spec.spark;

import java.io.IOException;
import java.io.InputStream;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * The mirroring job's data path: {@code foreachBatch} hands each micro-batch's DataFrame to
 * {@link #write} through the JVM gateway. Its rows are written by the executors as Spark's internal
 * rows, never converted to Python objects; only one short JSON line per source partition (what was
 * written, where it landed) comes back to the Python driver, which writes MM2's offset syncs.
 */
public final class MirrorWriter {
    /** The columns of Spark's Kafka source the writer reads, in {@link WriteTask}'s order. */
    static final String[] COLUMNS = {"topic", "partition", "offset", "timestamp", "key", "value", "headers"};
    /** Written into the jar by scripts/install-spark.sh: the Spark version it was compiled against. */
    private static final String BUILD_INFO = "/mm2spec-spark-writer.properties";

    private MirrorWriter() {
    }

    /** The Spark version this jar was compiled against (the job refuses to run with another). */
    public static String builtFor() throws IOException {
        try (InputStream in = MirrorWriter.class.getResourceAsStream(BUILD_INFO)) {
            if (in == null) {
                return "unknown";
            }
            Properties props = new Properties();
            props.load(in);
            return props.getProperty("spark.version", "unknown");
        }
    }

    /** Writes the batch (see {@link WriterSettings} for {@code settings}); the tasks' JSON lines (see
     *  {@link WriteTask}) as one newline-separated string: the driver reads it in one gateway call,
     *  where a list costs a call per line (a line per source partition: 1,000s at width).
     *  {@code newTopics}: the target topics this job's writers have not written yet, one per line;
     *  each task's producer learns their metadata in bulk first ({@link Producers#warm}). */
    public static String write(Dataset<Row> batch, Map<String, String> settings, String newTopics) {
        WriterSettings parsed = new WriterSettings(settings);
        List<String> topics = newTopics.isEmpty() ? List.of() : java.util.Arrays.asList(newTopics.split("\n"));
        Dataset<Row> rows = batch.select(COLUMNS[0], java.util.Arrays.copyOfRange(COLUMNS, 1, COLUMNS.length));
        List<String> lines = rows.queryExecution().toRdd().toJavaRDD().mapPartitions(new WriteTask(parsed, topics)).collect();
        return String.join("\n", lines);
    }
}
