package mm2spec.spark;

import java.util.concurrent.atomic.AtomicInteger;

import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerStageCompleted;

/**
 * Spark's own count of the tasks each stage ran, kept as the most any stage of the job has run: with
 * the mirror source a micro-batch runs the flow's {@code tasks.max} tasks, with Spark's Kafka source
 * one per partition with new data. The job puts it in its status ({@code mostTasksPerStage}).
 */
public final class StageTasks extends SparkListener {
    private static final AtomicInteger MOST = new AtomicInteger();

    @Override
    public void onStageCompleted(SparkListenerStageCompleted completed) {
        MOST.accumulateAndGet(completed.stageInfo().numTasks(), Math::max);
    }

    /** The most tasks a completed stage of this JVM has run (0 before the first). */
    public static int most() {
        return MOST.get();
    }
}
