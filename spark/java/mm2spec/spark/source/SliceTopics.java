package mm2spec.spark.source;

import java.util.List;

import org.apache.spark.TaskContext;

/**
 * The source topics of the slice a Real-time task reads, for the same task's writer: Real-time Mode
 * hands rows to a {@code ForeachWriter}, which is told nothing of what its task will read, and a
 * producer's {@code send} waits for an unknown topic's metadata one round trip at a time, in turn
 * for every new topic of the slice. The reader and the writer of one task run in
 * one thread, so the reader leaves its slice's topics here and the writer learns their metadata in
 * bulk before its first send. Tagged with the task's attempt, so a pooled task thread never hands a
 * later task the topics of an earlier one.
 */
public final class SliceTopics {
    private record Entry(long attempt, List<String> topics) {
    }

    private static final ThreadLocal<Entry> CURRENT = new ThreadLocal<>();

    private SliceTopics() {
    }

    /** The reader's turn: the source topics of the slice this thread's task reads. */
    static void set(List<String> topics) {
        CURRENT.set(new Entry(attempt(), List.copyOf(topics)));
    }

    /** The writer's turn: the topics the reader of this thread's task left, or none (another task's,
     *  or no reader ran here). */
    public static List<String> current() {
        Entry entry = CURRENT.get();
        return entry != null && entry.attempt == attempt() ? entry.topics : List.of();
    }

    private static long attempt() {
        TaskContext task = TaskContext.get();
        return task == null ? -1 : task.taskAttemptId();
    }
}
