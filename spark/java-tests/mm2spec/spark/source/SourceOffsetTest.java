package mm2spec.spark.source;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.kafka010.JsonUtils;
import org.junit.jupiter.api.Test;

/** The checkpoint's offsets: Spark's Kafka source's JSON, both ways. */
class SourceOffsetTest {
    private static Map<TopicPartition, Long> offsets() {
        Map<TopicPartition, Long> offsets = new HashMap<>();
        for (int p = 0; p < 12; p++) {
            offsets.put(new TopicPartition("orders", p), 1_000L * p);
        }
        offsets.put(new TopicPartition("audit.log", 0), 7L);
        offsets.put(new TopicPartition("Zeta", 3), Long.MAX_VALUE);
        return offsets;
    }

    @Test
    void jsonHasTopicsAndPartitionsInOrderWhateverTheMapsOrder() {
        SourceOffset offset = new SourceOffset(Map.of(new TopicPartition("orders", 10), 5L, new TopicPartition("orders", 2), 6L,
                                                      new TopicPartition("audit", 0), 7L));
        assertEquals("{\"audit\":{\"0\":7},\"orders\":{\"2\":6,\"10\":5}}", offset.json(), "partition 10 after 2, as numbers");
    }

    @Test
    void parsingTheJsonGivesTheSameOffsets() {
        SourceOffset offset = new SourceOffset(offsets());
        SourceOffset back = SourceOffset.parse(offset.json());
        assertEquals(offsets(), back.offsets);
        assertEquals(offset, back, "Spark compares offsets by their JSON");
        assertEquals(offset.json(), back.json());
    }

    @Test
    void sparksOwnKafkaSourceReadsOurOffsetsAndWeReadItsOffsets() {
        Map<TopicPartition, Long> offsets = offsets();
        Map<TopicPartition, Object> sparkRead = scala.jdk.javaapi.CollectionConverters.asJava(
            JsonUtils.partitionOffsets(new SourceOffset(offsets).json()));
        assertEquals(new HashMap<TopicPartition, Object>(offsets), new HashMap<>(sparkRead));

        @SuppressWarnings({"unchecked", "rawtypes"})
        scala.collection.immutable.Map<TopicPartition, Object> scalaMap =
            (scala.collection.immutable.Map) scala.collection.immutable.Map$.MODULE$.from(scala.jdk.javaapi.CollectionConverters.asScala(offsets));
        assertEquals(offsets, SourceOffset.parse(JsonUtils.partitionOffsets(scalaMap)).offsets);
    }

    @Test
    void startingOffsetsMayNameTheBeginningAndTheEnd() {
        SourceOffset given = SourceOffset.parse("{\"orders\":{\"0\":-2,\"1\":-1,\"2\":42}}");
        assertEquals(SourceOffset.EARLIEST, given.offsets.get(new TopicPartition("orders", 0)));
        assertEquals(SourceOffset.LATEST, given.offsets.get(new TopicPartition("orders", 1)));
        assertEquals(42L, given.offsets.get(new TopicPartition("orders", 2)));
    }

    @Test
    void anythingElseIsRefusedWithTheExpectedShape() {
        IllegalArgumentException error = assertThrows(IllegalArgumentException.class, () -> SourceOffset.parse("{\"orders\":[1,2]}"));
        assertTrue(error.getMessage().startsWith("expected offsets as {\"topic\":{\"0\":42}}, got {\"orders\":[1,2]}: "),
                   error.getMessage());
        assertThrows(IllegalArgumentException.class, () -> SourceOffset.parse("earliest"));
    }
}
