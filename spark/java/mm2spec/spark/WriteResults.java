package mm2spec.spark;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.util.AccumulatorV2;

/**
 * The writer's JSON lines ({@link PartitionWrite}, one per source partition, and one per task) from
 * Real-time tasks to the driver. A Real-time batch has no {@code foreachBatch} call whose result
 * could carry them: each task adds its lines when it ends, Spark merges a successful task's lines into
 * the driver's copy, and the job's driver takes them with {@link #drain} (offset syncs, figures).
 */
public final class WriteResults extends AccumulatorV2<String, List<String>> {
    private static final long serialVersionUID = 1L;

    private final ArrayList<String> lines = new ArrayList<>();

    @Override
    public synchronized boolean isZero() {
        return lines.isEmpty();
    }

    @Override
    public synchronized AccumulatorV2<String, List<String>> copy() {
        WriteResults copy = new WriteResults();
        copy.lines.addAll(lines);
        return copy;
    }

    @Override
    public synchronized void reset() {
        lines.clear();
    }

    @Override
    public synchronized void add(String line) {
        lines.add(line);
    }

    @Override
    public void merge(AccumulatorV2<String, List<String>> other) {
        List<String> added = other.value();
        synchronized (this) {
            lines.addAll(added);
        }
    }

    @Override
    public synchronized List<String> value() {
        return new ArrayList<>(lines);
    }

    /** Every line merged since the last drain, newline-separated (one gateway call for the driver). */
    public synchronized String drain() {
        String out = String.join("\n", lines);
        lines.clear();
        return out;
    }
}
