package mm2spec.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/** The writer's small parts: its settings and ids, the result lines and how runs are built from
 *  acknowledgements. */
class WriterPartsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static RecordMetadata at(long offset) {
        return new RecordMetadata(new TopicPartition("dr.orders", 0), offset, 0, -1, 0, 0);
    }

    @Test
    void transactionalIdsAreThePrefixThenTheSourcePartitionOrTheSlice() {
        WriterSettings settings = new WriterSettings(FakeKafka.settings("exactly-once"));
        // mm2spec/mm2/spark_eos.py: the prefix is "<progress group>." and compile grants PREFIXED ACLs on it.
        assertEquals("mm2spec-mirror.job.a-to-b.orders.3", settings.transactionalId("orders", 3));
        assertEquals("mm2spec-mirror.job.a-to-b.rt-2", settings.sliceTransactionalId(2));
        assertEquals("mm2spec-mirror.job.a-to-b", settings.progressGroup());
        assertTrue(settings.exactlyOnce());
        assertFalse(new WriterSettings(FakeKafka.settings("at-least-once")).exactlyOnce());
    }

    @Test
    void aMissingSettingIsNamed() {
        Map<String, String> values = FakeKafka.settings("exactly-once");
        values.remove("transactional.id.prefix");
        IllegalArgumentException error = assertThrows(IllegalArgumentException.class,
                                                      () -> new WriterSettings(values).sliceTransactionalId(0));
        assertEquals("mm2spec writer setting transactional.id.prefix is missing", error.getMessage());
    }

    @Test
    void clientPropertiesComeFromTheirPrefixesAndSyncsAreAlwaysIdempotent() {
        WriterSettings settings = new WriterSettings(FakeKafka.settings("at-least-once",
            "connection.sasl.jaas.config", "secret-jaas", "producer.linger.ms", "20", "producer.bootstrap.servers", "other:1",
            "syncs.connection.acks", "1", "offset.lag.max", "7"));
        Properties producer = settings.producerProperties();
        assertEquals("20", producer.getProperty("linger.ms"));
        assertEquals("secret-jaas", producer.getProperty("sasl.jaas.config"));
        assertEquals("other:1", producer.getProperty("bootstrap.servers"), "producer.* wins over connection.*");
        assertFalse(producer.containsKey("syncs.connection.acks"));
        Properties syncs = settings.syncsProducerProperties();
        assertEquals("all", syncs.getProperty("acks"), "a sync must not be lost on a leader change");
        assertEquals("true", syncs.getProperty("enable.idempotence"));
        assertTrue(syncs.getProperty("bootstrap.servers").startsWith("source-"));
        assertEquals(7, settings.offsetLagMax());
        assertEquals(100, new WriterSettings(FakeKafka.settings("at-least-once")).offsetLagMax(), "MM2's default");
        assertFalse(settings.toString().contains("secret"), settings.toString());
    }

    @Test
    void consecutiveAcknowledgementsExtendARunAndAGapStartsOne() throws Exception {
        PartitionWrite write = new PartitionWrite("orders", 0, "dr.orders");
        Callback a = write.sent(10, 1_000, 3);
        Callback b = write.sent(11, 1_001, 3);
        Callback c = write.sent(13, 999, 4);  // a compacted gap upstream
        a.onCompletion(at(100), null);
        b.onCompletion(at(101), null);
        assertFalse(write.complete(), "one record not acknowledged");
        c.onCompletion(at(102), null);
        assertTrue(write.complete());
        assertEquals(102, write.lastDownstream());
        assertEquals(13, write.lastUpstream);
        JsonNode line = JSON.readTree(write.toJson());
        assertEquals("partition", line.get("kind").asText());
        assertEquals("dr.orders", line.get("targetTopic").asText());
        assertEquals(3, line.get("records").asLong());
        assertEquals(10, line.get("bytes").asLong());
        assertEquals(999, line.get("timestampMin").asLong());
        assertEquals(3_000, line.get("timestampSum").asLong());
        assertEquals("[[10,100,2],[13,102,1]]", line.get("runs").toString());
        assertEquals(2, write.takeRuns().size());
        assertEquals("[]", JSON.readTree(write.toJson()).get("runs").toString(), "taken runs are not reported twice");
    }

    @Test
    void aFailedSendFailsThePartitionsCheckWithTheFirstError() {
        PartitionWrite write = new PartitionWrite("orders", 2, "dr.orders");
        write.sent(0, 0, 1).onCompletion(null, new KafkaException("first"));
        write.sent(1, 0, 1).onCompletion(null, new KafkaException("second"));
        assertFalse(write.complete());
        KafkaException error = assertThrows(KafkaException.class, () -> WriteTask.check(write));
        assertTrue(error.getMessage().startsWith("mirroring orders-2 to dr.orders on the target cluster failed: "), error.getMessage());
        assertEquals("first", error.getCause().getMessage());
    }

    @Test
    void anEmptyWriteReportsNullsNotSentinels() throws Exception {
        JsonNode line = JSON.readTree(new PartitionWrite("a\"b\\c\n", 0, "dr.x").toJson());
        assertEquals("a\"b\\c\n", line.get("topic").asText());
        assertTrue(line.get("timestampMin").isNull());
        assertTrue(line.get("latencyMaxMs").isNull());
        assertEquals(-1, new PartitionWrite("t", 0, "t").lastDownstream());
    }

    @Test
    void jsonQuotesEveryControlCharacterAndNumbersHaveNoNaN() throws Exception {
        String text = "tab\t \"q\" back\\slash \u0001 \u00e9";
        assertEquals(text, JSON.readTree(Json.quote(text)).asText());
        Map<String, Double> values = new LinkedHashMap<>();
        values.put("rate", 1.5);
        values.put("empty", Double.NaN);
        values.put("inf", Double.POSITIVE_INFINITY);
        assertEquals("{\"rate\":1.5,\"empty\":null,\"inf\":null}", Json.numbers(values));
        assertEquals("{}", Json.numbers(Map.of()));
    }

    @Test
    void resultsMergeFromTasksAndDrainOnce() {
        WriteResults driver = new WriteResults();
        WriteResults task = (WriteResults) driver.copy();
        assertTrue(task.isZero());
        task.add("{\"kind\":\"partition\"}");
        task.add("{\"kind\":\"task\"}");
        driver.merge(task);
        driver.merge(task.copy());
        assertEquals(4, driver.value().size());
        assertEquals(String.join("\n", List.of("{\"kind\":\"partition\"}", "{\"kind\":\"task\"}",
                                                "{\"kind\":\"partition\"}", "{\"kind\":\"task\"}")), driver.drain());
        assertTrue(driver.isZero());
        assertEquals("", driver.drain());
        task.reset();
        assertTrue(task.isZero());
    }
}
