package mm2spec.spark.source;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.junit.jupiter.api.Test;

/** The driver's plan of a micro-batch: the source's partitions dealt to {@code tasks} slices, each
 *  with its ranges; the read limit; a Real-time batch's end offsets. No cluster: the plan of known
 *  partitions asks the source nothing. */
class MirrorStreamTest {
    private static TopicPartition tp(String topic, int partition) {
        return new TopicPartition(topic, partition);
    }

    private static MirrorStream stream(String... options) {
        return new MirrorStream(SourceOptionsTest.parse(options), "/nonexistent/checkpoint/sources/0");
    }

    /** Each planned slice as "slot: topic-partition[from,until) ...". */
    private static List<String> plan(InputPartition[] planned) {
        List<String> out = new ArrayList<>();
        for (InputPartition partition : planned) {
            SliceInput slice = (SliceInput) partition;
            StringBuilder line = new StringBuilder().append(slice.slot).append(':');
            for (SliceInput.Range range : slice.ranges) {
                line.append(' ').append(range.topic).append('-').append(range.partition)
                    .append('[').append(range.from).append(',').append(range.until).append(')');
            }
            out.add(line.toString());
        }
        return out;
    }

    @Test
    void partitionsAreDealtToTheSlicesInTopicThenPartitionOrder() {
        Map<TopicPartition, Long> from = new HashMap<>();
        Map<TopicPartition, Long> until = new HashMap<>();
        for (int p = 0; p < 4; p++) {
            from.put(tp("orders", p), 10L * p);
            until.put(tp("orders", p), 10L * p + 5);
        }
        for (int p = 0; p < 3; p++) {
            from.put(tp("payments", p), 0L);
            until.put(tp("payments", p), 1L);
        }
        MirrorStream stream = stream("tasks", "3", "kafka.client.id", "mirror-a");
        InputPartition[] planned = stream.planInputPartitions(new SourceOffset(from), new SourceOffset(until));
        assertEquals(List.of(
            "0: orders-0[0,5) orders-3[30,35) payments-2[0,1)",
            "1: orders-1[10,15) payments-0[0,1)",
            "2: orders-2[20,25) payments-1[0,1)"), plan(planned));
        SliceInput first = (SliceInput) planned[0];
        assertEquals("mirror-a", first.kafka.get("client.id"));
        assertEquals(120_000, first.pollTimeoutMs);
        assertEquals(0, first.preferredLocations().length, "no executors to prefer outside a cluster");
        assertTrue(first.consumerKey().endsWith("/0"));
        assertEquals(first.consumerKey().replace("/0", "/1"), ((SliceInput) planned[1]).consumerKey(), "one stream, one key per slot");
    }

    @Test
    void aSliceKeepsItsPartitionsFromBatchToBatchAndItsIdleRangesButAnIdleSliceIsNotPlanned() {
        Map<TopicPartition, Long> from = new TreeMap<>(SourceOffset.ORDER);
        for (int p = 0; p < 12; p++) {
            from.put(tp("orders", p), 100L);
        }
        Map<TopicPartition, Long> until = new HashMap<>(from);
        until.put(tp("orders", 10), 130L);  // only orders-10 has new records
        MirrorStream stream = stream("tasks", "5");
        List<String> planned = plan(stream.planInputPartitions(new SourceOffset(from), new SourceOffset(until)));
        assertEquals(List.of("0: orders-0[100,100) orders-5[100,100) orders-10[100,130)"), planned,
                     "partition 10 is the 11th in order (not after 1), so slot 0; the idle slots run no task");
        until.put(tp("orders", 3), 101L);
        List<String> next = plan(stream.planInputPartitions(new SourceOffset(from), new SourceOffset(until)));
        assertEquals(List.of("0: orders-0[100,100) orders-5[100,100) orders-10[100,130)",
                             "3: orders-3[100,101) orders-8[100,100)"), next);
    }

    @Test
    void moreTasksThanPartitionsPlansOneSlicePerPartition() {
        Map<TopicPartition, Long> from = Map.of(tp("orders", 0), 0L, tp("orders", 1), 0L);
        Map<TopicPartition, Long> until = Map.of(tp("orders", 0), 3L, tp("orders", 1), 4L);
        assertEquals(List.of("0: orders-0[0,3)", "1: orders-1[0,4)"),
                     plan(stream("tasks", "8").planInputPartitions(new SourceOffset(from), new SourceOffset(until))));
    }

    @Test
    void aLogShorterThanTheCheckpointIsReadFromItsEndNotBackwards() {
        Map<TopicPartition, Long> from = Map.of(tp("orders", 0), 500L, tp("orders", 1), 0L);
        Map<TopicPartition, Long> until = Map.of(tp("orders", 0), 20L, tp("orders", 1), 1L);  // orders recreated
        assertEquals(List.of("0: orders-0[20,20) orders-1[0,1)"),
                     plan(stream().planInputPartitions(new SourceOffset(from), new SourceOffset(until))));
    }

    @Test
    void maxOffsetsPerTriggerIsSharedByBacklog() {
        Map<TopicPartition, Long> starts = Map.of(tp("a", 0), 0L, tp("b", 0), 1_000L, tp("c", 0), 50L, tp("d", 0), 0L);
        Map<TopicPartition, Long> end = new TreeMap<>(SourceOffset.ORDER);
        end.putAll(Map.of(tp("a", 0), 100L, tp("b", 0), 1_300L, tp("c", 0), 50L, tp("d", 0), 1L));
        MirrorStream.capped(starts, end, 100);
        // Backlogs 100, 300, 0 and 1 (401 in all): shares 24.9, 74.8, none and 0.25, rounded down
        // but a share below one record rounds up (a small partition is never starved).
        assertEquals(Map.of(tp("a", 0), 24L, tp("b", 0), 1_074L, tp("c", 0), 50L, tp("d", 0), 1L), end);

        Map<TopicPartition, Long> small = new TreeMap<>(SourceOffset.ORDER);
        small.put(tp("a", 0), 60L);
        MirrorStream.capped(Map.of(tp("a", 0), 0L), small, 100);
        assertEquals(60L, small.get(tp("a", 0)), "under the limit: unchanged");
    }

    @Test
    void theReadLimitIsMaxOffsetsPerTriggerOrEverything() {
        assertInstanceOf(ReadAllAvailable.class, stream().getDefaultReadLimit());
        ReadMaxRows limit = assertInstanceOf(ReadMaxRows.class, stream("maxOffsetsPerTrigger", "5000").getDefaultReadLimit());
        assertEquals(5000, limit.maxRows());
        String refused = assertThrows(IllegalArgumentException.class,
                                      () -> stream("maxOffsetsPerTrigger", "5000").prepareForRealTimeMode()).getMessage();
        assertTrue(refused.endsWith("unset spark.maxOffsetsPerTrigger"), refused);
    }

    @Test
    void aRealTimeBatchEndsWhereEachSliceLeftItsPartitions() {
        MirrorStream stream = stream("tasks", "2");
        PartitionOffset[] slices = {new SliceOffset(Map.of(tp("orders", 0), 17L, tp("orders", 2), 3L)),
                                    new SliceOffset(Map.of(tp("orders", 1), 9L))};
        assertEquals("{\"orders\":{\"0\":17,\"1\":9,\"2\":3}}", stream.mergeOffsets(slices).json());
        assertEquals(new SourceOffset(Map.of(tp("orders", 1), 9L)),
                     stream.deserializeOffset("{\"orders\":{\"1\":9}}"));
    }
}
