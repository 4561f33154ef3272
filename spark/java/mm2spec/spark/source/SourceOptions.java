package mm2spec.spark.source;

import java.io.Serializable;
import java.util.Collections;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The source's options, named as Spark's Kafka source names them where it has the same one:
 * <ul>
 * <li>{@code subscribePattern} (required): the topics, a regex matched with {@code find} as Spark's
 *     source does (the job anchors it);</li>
 * <li>{@code startingOffsets}: {@code earliest} (default), {@code latest} or JSON
 *     {@code {"topic":{"0":42}}} with -2 for the beginning and -1 for the end; partitions it does not
 *     name start at the beginning;</li>
 * <li>{@code kafka.*}: the consumer's and the admin client's settings;</li>
 * <li>{@code maxOffsetsPerTrigger}: most records per micro-batch, spread over the partitions by backlog;</li>
 * <li>{@code tasks}: input partitions per micro-batch (default 1), each a stable slice of the source's
 *     partitions with one consumer;</li>
 * <li>{@code kafkaConsumer.pollTimeoutMs}: how long a task waits without any record for its range
 *     before it checks whether the records still exist and otherwise fails (default 120000, Spark's).</li>
 * <li>{@code realTimeKey}: the flow's key for the job's driver in Real-time Mode ({@link RealTime}:
 *     admitted partitions, ending batches); unset in micro-batch mode.</li>
 * </ul>
 */
final class SourceOptions implements Serializable {
    private static final long serialVersionUID = 1L;

    final String pattern;
    final String startingOffsets;
    final Map<String, String> kafka;
    final long maxOffsetsPerTrigger;
    final int tasks;
    final long pollTimeoutMs;
    final String realTimeKey;

    private SourceOptions(String pattern, String startingOffsets, Map<String, String> kafka, long maxOffsetsPerTrigger,
                          int tasks, long pollTimeoutMs, String realTimeKey) {
        this.pattern = pattern;
        this.startingOffsets = startingOffsets;
        this.kafka = kafka;
        this.maxOffsetsPerTrigger = maxOffsetsPerTrigger;
        this.tasks = tasks;
        this.pollTimeoutMs = pollTimeoutMs;
        this.realTimeKey = realTimeKey;
    }

    static SourceOptions parse(CaseInsensitiveStringMap options) {
        String pattern = options.get("subscribePattern");
        if (pattern == null || pattern.isEmpty()) {
            throw new IllegalArgumentException("mm2spec-mirror source: option subscribePattern is required");
        }
        try {
            Pattern.compile(pattern);
        } catch (PatternSyntaxException e) {
            throw new IllegalArgumentException("mm2spec-mirror source: subscribePattern is not a regex: " + e.getMessage(), e);
        }
        Map<String, String> kafka = new TreeMap<>();
        for (Map.Entry<String, String> entry : options.entrySet()) {
            if (entry.getKey().startsWith("kafka.")) {
                kafka.put(entry.getKey().substring("kafka.".length()), entry.getValue());
            }
        }
        if (!kafka.containsKey("bootstrap.servers")) {
            throw new IllegalArgumentException("mm2spec-mirror source: option kafka.bootstrap.servers is required");
        }
        long maxOffsets = number(options, "maxOffsetsPerTrigger", 0);
        long tasks = number(options, "tasks", 1);
        if (tasks < 1 || tasks > 100_000) {
            throw new IllegalArgumentException("mm2spec-mirror source: option tasks must be between 1 and 100000, got " + tasks);
        }
        long pollTimeout = number(options, "kafkaConsumer.pollTimeoutMs", 120_000);
        return new SourceOptions(pattern, options.getOrDefault("startingOffsets", "earliest").trim(),
                                 Collections.unmodifiableMap(kafka), Math.max(0, maxOffsets), (int) tasks,
                                 Math.max(1_000, pollTimeout), options.get("realTimeKey"));
    }

    private static long number(CaseInsensitiveStringMap options, String key, long otherwise) {
        String value = options.get(key);
        if (value == null || value.isBlank()) {
            return otherwise;
        }
        try {
            return Long.parseLong(value.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("mm2spec-mirror source: option " + key + " must be a whole number, got " + value, e);
        }
    }

    Pattern compiled() {
        return Pattern.compile(pattern);
    }

    /** A one-line description for Spark's plans (no setting values: they may hold credentials). */
    String describe() {
        return "subscribePattern=" + pattern + ", tasks=" + tasks
               + (maxOffsetsPerTrigger > 0 ? ", maxOffsetsPerTrigger=" + maxOffsetsPerTrigger : "");
    }
}
