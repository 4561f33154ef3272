package mm2spec.spark.source;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.junit.jupiter.api.Test;

/** The source's options: Spark's Kafka source's names, MM2's tasks, and refusals that say what to fix. */
class SourceOptionsTest {
    static SourceOptions parse(String... pairs) {
        Map<String, String> options = new HashMap<>();
        options.put("subscribePattern", "^(orders|payments)$");
        options.put("kafka.bootstrap.servers", "source:9092");
        for (int i = 0; i + 1 < pairs.length; i += 2) {
            if (pairs[i + 1] == null) {
                options.remove(pairs[i]);
            } else {
                options.put(pairs[i], pairs[i + 1]);
            }
        }
        return SourceOptions.parse(new CaseInsensitiveStringMap(options));
    }

    private static String refusal(String... pairs) {
        return assertThrows(IllegalArgumentException.class, () -> parse(pairs)).getMessage();
    }

    @Test
    void defaultsAreSparksAndOneTask() {
        SourceOptions options = parse();
        assertEquals("earliest", options.startingOffsets);
        assertEquals(1, options.tasks);
        assertEquals(0, options.maxOffsetsPerTrigger);
        assertEquals(120_000, options.pollTimeoutMs);
        assertNull(options.realTimeKey);
        assertEquals(Map.of("bootstrap.servers", "source:9092"), options.kafka);
    }

    @Test
    void kafkaSettingsLoseTheirPrefixAndNumbersAreClamped() {
        SourceOptions options = parse("kafka.isolation.level", "read_committed", "tasks", " 6 ", "maxOffsetsPerTrigger", "-5",
                                      "kafkaConsumer.pollTimeoutMs", "10", "startingOffsets", "  latest ", "realTimeKey", "a-to-b");
        assertEquals("read_committed", options.kafka.get("isolation.level"));
        assertEquals(6, options.tasks);
        assertEquals(0, options.maxOffsetsPerTrigger);
        assertEquals(1_000, options.pollTimeoutMs, "at least a second");
        assertEquals("latest", options.startingOffsets);
        assertEquals("a-to-b", options.realTimeKey);
        assertEquals("orders", options.compiled().matcher("orders").results().findFirst().orElseThrow().group());
    }

    @Test
    void eachMissingOrWrongOptionIsNamed() {
        assertEquals("mm2spec-mirror source: option subscribePattern is required", refusal("subscribePattern", null));
        assertEquals("mm2spec-mirror source: option kafka.bootstrap.servers is required", refusal("kafka.bootstrap.servers", null));
        assertEquals("mm2spec-mirror source: option tasks must be between 1 and 100000, got 0", refusal("tasks", "0"));
        assertEquals("mm2spec-mirror source: option tasks must be between 1 and 100000, got 100001", refusal("tasks", "100001"));
        assertEquals("mm2spec-mirror source: option maxOffsetsPerTrigger must be a whole number, got 1e6",
                     refusal("maxOffsetsPerTrigger", "1e6"));
        String regex = refusal("subscribePattern", "orders-(");
        assertTrue(regex.startsWith("mm2spec-mirror source: subscribePattern is not a regex: "), regex);
    }

    @Test
    void theDescriptionInSparksPlansHoldsNoSettingValue() {
        String described = parse("kafka.sasl.jaas.config", "password=\"hunter2\"", "tasks", "4", "maxOffsetsPerTrigger", "1000").describe();
        assertEquals("subscribePattern=^(orders|payments)$, tasks=4, maxOffsetsPerTrigger=1000", described);
        assertFalse(described.contains("hunter2"));
    }
}
