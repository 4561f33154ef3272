package mm2spec.spark.source;

import java.io.IOException;
import java.io.UncheckedIOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkEnv;
import org.apache.spark.deploy.SparkHadoopUtil;

/**
 * How the driver's "end the running batch" reaches Real-time readers on a cluster, where they run in
 * other JVMs than {@link RealTime}'s flags. The signals are files in a folder of the flow's checkpoint
 * location, which Spark already requires every executor to reach (HDFS, S3, a shared disk): {@code end}
 * while the flow's batches are told to end ({@link RealTime#endBatches}), {@code cut} while the running
 * batch is cut short ({@link RealTime#cut}). The driver writes and deletes them; each reader looks at
 * most every {@link #POLL_MS} (and at once when it starts) through {@link Watch}, so a file system sees
 * a few requests a second per task. In local mode no folder is set and the flags alone are read.
 */
final class BatchSignals {
    /** How often a reader looks for the signal files: how late a cluster's readers end their batch. */
    static final long POLL_MS = 250;
    static final String END = "end";
    static final String CUT = "cut";

    private BatchSignals() {
    }

    /** Writes (true) or deletes (false) the signal file {@code name} in {@code dir}. */
    static void set(String dir, String name, boolean on) {
        Path path = new Path(dir, name);
        try {
            FileSystem fs = path.getFileSystem(configuration());
            if (on) {
                fs.create(path, true).close();
            } else {
                fs.delete(path, false);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("mm2spec-mirror source: cannot " + (on ? "write " : "delete ") + path + ": " + e, e);
        }
    }

    /** Whether {@code end} or {@code cut} is in {@code dir}. */
    static boolean raised(String dir) {
        try {
            Path end = new Path(dir, END);
            FileSystem fs = end.getFileSystem(configuration());
            return fs.exists(end) || fs.exists(new Path(dir, CUT));
        } catch (IOException e) {
            throw new UncheckedIOException("mm2spec-mirror source: cannot read the batch signals in " + dir + ": " + e, e);
        }
    }

    /** Spark's Hadoop configuration (its {@code spark.hadoop.*} settings), where Spark runs. */
    private static Configuration configuration() {
        SparkEnv env = SparkEnv.get();
        return env == null ? new Configuration() : SparkHadoopUtil.get().newConfiguration(env.conf());
    }

    /** One reader's view of its flow's signal folder: looked at when first asked, then at most every
     *  {@link #POLL_MS}; never raised without a folder (local mode). */
    static final class Watch {
        private final String dir;
        private long nextLook;
        private boolean raised;

        Watch(String dir) {
            this.dir = dir;
        }

        boolean raised() {
            if (dir == null) {
                return false;
            }
            long now = System.currentTimeMillis();
            if (now >= nextLook) {
                raised = BatchSignals.raised(dir);
                nextLook = now + POLL_MS;
            }
            return raised;
        }
    }
}
