package mm2spec.spark.source;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.UUID;

import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/** What the job's driver tells a flow's source in Real-time Mode: admitted partitions, ending batches. */
class RealTimeTest {
    private final String key = "flow-" + UUID.randomUUID();

    @Test
    void onlyAdmittedPartitionsAreReadOnceTheDriverAdmitsAny() {
        assertFalse(RealTime.admits(key));
        assertTrue(RealTime.admitted(key, new TopicPartition("anything", 99)), "micro-batch mode: every partition");
        RealTime.admit(key, "{\"orders\": 2}");
        RealTime.admit(key, "{\"orders\": 1, \"payments\": 2}");  // a later scan never shrinks a topic
        assertTrue(RealTime.admits(key));
        assertTrue(RealTime.admitted(key, new TopicPartition("orders", 1)));
        assertFalse(RealTime.admitted(key, new TopicPartition("orders", 2)), "its target partition does not exist yet");
        assertFalse(RealTime.admitted(key, new TopicPartition("refunds", 0)));
        assertEquals(List.of(new TopicPartition("orders", 0), new TopicPartition("orders", 1),
                             new TopicPartition("payments", 0), new TopicPartition("payments", 1)),
                     RealTime.admittedPartitions(key));
        RealTime.forget(key);
        assertFalse(RealTime.admits(key));
        assertThrows(IllegalArgumentException.class, () -> RealTime.admit(key, "[\"orders\"]"));
    }

    @Test
    void endingBatchesIsDrainedOnlyOnceABatchIsPlannedAfterIt() {
        RealTime.planned(key);
        RealTime.endBatches(key, true);
        assertTrue(RealTime.ending(key));
        assertFalse(RealTime.drained(key), "the batch planned before the end does not count");
        RealTime.planned(key);
        assertTrue(RealTime.drained(key));
        RealTime.endBatches(key, false);
        assertFalse(RealTime.ending(key));
        assertFalse(RealTime.drained(key));
    }

    @Test
    void aCutEndsTheRunningBatchOnlyUntilTheNextIsPlanned() {
        RealTime.cut(key);
        assertTrue(RealTime.ending(key));
        RealTime.uncut(key);
        assertFalse(RealTime.ending(key));
        assertFalse(RealTime.ending(null));
    }
}
