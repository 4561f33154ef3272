package mm2spec.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.unsafe.types.UTF8String;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** A micro-batch task's write (Spark's internal rows in, MockProducers out): at-least-once, and
 *  exactly-once's transaction per source partition with its progress. */
class WriteTaskTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final FakeKafka kafka = new FakeKafka();

    @AfterEach
    void restore() {
        kafka.close();
    }

    private static InternalRow row(String topic, int partition, long offset) {
        GenericArrayData headers = new GenericArrayData(new Object[] {
            new GenericInternalRow(new Object[] {UTF8String.fromString("trace"), ("t" + offset).getBytes(StandardCharsets.UTF_8)}),
            new GenericInternalRow(new Object[] {UTF8String.fromString("empty"), null})});
        return new GenericInternalRow(new Object[] {UTF8String.fromString(topic), partition, offset,
            1_700_000_000_123_456L + offset, ("k" + offset).getBytes(StandardCharsets.UTF_8),
            ("v" + offset).getBytes(StandardCharsets.UTF_8), headers});
    }

    private static List<JsonNode> lines(Iterator<String> out) throws Exception {
        List<JsonNode> lines = new ArrayList<>();
        while (out.hasNext()) {
            lines.add(JSON.readTree(out.next()));
        }
        return lines;
    }

    @Test
    void atLeastOnceCopiesEachRowToItsTargetPartitionAndReportsTheRuns() throws Exception {
        Map<String, String> values = FakeKafka.settings("at-least-once");
        WriterSettings settings = new WriterSettings(values);
        // The mirror source hands a slice's partitions out per poll: orders-0 comes back after orders-1.
        List<InternalRow> rows = List.of(row("orders", 0, 10), row("orders", 0, 11), row("orders", 1, 5),
                                         row("orders", 0, 12), row("orders", 0, 20));
        List<JsonNode> lines = lines(new WriteTask(settings, List.of()).call(rows.iterator()));

        MockProducer<byte[], byte[]> producer = kafka.madeWith("bootstrap.servers", values.get("connection.bootstrap.servers"));
        List<ProducerRecord<byte[], byte[]>> sent = producer.history();
        assertEquals(5, sent.size());
        ProducerRecord<byte[], byte[]> first = sent.get(0);
        assertEquals("dr.orders", first.topic());
        assertEquals(0, first.partition());
        assertEquals(1_700_000_000_123L, first.timestamp(), "Spark's microseconds back to Kafka's milliseconds");
        assertArrayEquals("k10".getBytes(StandardCharsets.UTF_8), first.key());
        assertArrayEquals("v10".getBytes(StandardCharsets.UTF_8), first.value());
        Header[] headers = first.headers().toArray();
        assertEquals(2, headers.length);
        assertEquals("trace", headers[0].key());
        assertArrayEquals("t10".getBytes(StandardCharsets.UTF_8), headers[0].value());
        assertNull(headers[1].value());
        assertEquals(1, sent.get(2).partition());

        assertEquals(3, lines.size(), "one line per source partition, one for the task");
        assertEquals("orders", lines.get(0).get("topic").asText());
        assertEquals(4, lines.get(0).get("records").asLong());
        assertEquals("[[10,0,3],[20,3,1]]", lines.get(0).get("runs").toString(), "the upstream gap 13..19 starts a run");
        assertEquals("[[5,0,1]]", lines.get(1).get("runs").toString());
        assertEquals("task", lines.get(2).get("kind").asText());
        assertEquals(5, lines.get(2).get("records").asLong());

        assertSame(producer, Producers.borrow(settings), "a healthy producer goes back to the pool");
        assertFalse(producer.closed());
    }

    @Test
    void atLeastOnceClosesAProducerWhoseSendFailed() {
        Map<String, String> values = FakeKafka.settings("at-least-once");
        WriterSettings settings = new WriterSettings(values);
        Producer<byte[], byte[]> pooled = Producers.borrow(settings);
        MockProducer<byte[], byte[]> producer = kafka.madeWith("bootstrap.servers", values.get("connection.bootstrap.servers"));
        Producers.giveBack(settings, pooled, true);
        producer.sendException = new KafkaException("target unreachable");
        Iterator<InternalRow> rows = List.of(row("orders", 0, 1)).iterator();
        assertThrows(KafkaException.class, () -> new WriteTask(settings, List.of()).call(rows));
        assertTrue(producer.closed(), "its state is unknown: not pooled again");
        assertFalse(Producers.borrow(settings) == producer);
    }

    /** Producers for the source partitions as a running JVM holds them: created, with the progress
     *  each last committed ({@code progress[i]} for orders-i: next offset and downstream offset). */
    private static MockProducer<byte[], byte[]> warm(WriterSettings settings, int partition, long next, long downstream) {
        MockProducer<byte[], byte[]> producer =
            (MockProducer<byte[], byte[]>) Producers.transactional(settings, settings.transactionalId("orders", partition));
        Producers.committed(settings, settings.transactionalId("orders", partition),
                            new OffsetAndMetadata(next, Long.toString(downstream)));
        return producer;
    }

    @Test
    void exactlyOnceCommitsOneTransactionPerSourcePartitionWithItsProgress() throws Exception {
        WriterSettings settings = new WriterSettings(FakeKafka.settings("exactly-once"));
        MockProducer<byte[], byte[]> zero = warm(settings, 0, 0, -1);
        MockProducer<byte[], byte[]> one = warm(settings, 1, 0, -1);
        assertTrue(zero.transactionInitialized(), "initTransactions fences an earlier holder of the id");
        List<InternalRow> rows = List.of(row("orders", 0, 0), row("orders", 0, 1), row("orders", 1, 0));
        List<JsonNode> lines = lines(new WriteTask(settings, List.of()).call(rows.iterator()));

        assertEquals(1, zero.commitCount());
        assertEquals(1, one.commitCount());
        assertEquals(List.of(Map.of("mm2spec-mirror.job.a-to-b",
                                    Map.of(new TopicPartition("dr.orders", 0), new OffsetAndMetadata(2, "1")))),
                     zero.consumerGroupOffsetsHistory(), "next source offset, last downstream offset as metadata");
        assertEquals(2, FakeKafka.sentTo(zero, "dr.orders").size());
        assertEquals(1, FakeKafka.sentTo(one, "dr.orders").size());
        assertEquals(new OffsetAndMetadata(2, "1"),
                     Producers.committedHere(settings, settings.transactionalId("orders", 0)), "kept for the next batch");
        assertEquals("[[0,0,2]]", lines.get(0).get("runs").toString());
    }

    @Test
    void exactlyOnceSkipsRowsBelowTheCommittedProgress() throws Exception {
        WriterSettings settings = new WriterSettings(FakeKafka.settings("exactly-once"));
        MockProducer<byte[], byte[]> zero = warm(settings, 0, 12, 40);
        List<InternalRow> rows = List.of(row("orders", 0, 10), row("orders", 0, 11), row("orders", 0, 12), row("orders", 0, 13));
        List<JsonNode> lines = lines(new WriteTask(settings, List.of()).call(rows.iterator()));
        assertEquals(2, lines.get(0).get("skipped").asLong(), "10 and 11 were committed before the crash");
        assertEquals(2, lines.get(0).get("records").asLong());
        assertEquals(List.of(12L, 13L), List.of(offsetOf(zero, 0), offsetOf(zero, 1)));
        assertEquals(new OffsetAndMetadata(14, "1"), zero.consumerGroupOffsetsHistory().get(0)
            .get("mm2spec-mirror.job.a-to-b").get(new TopicPartition("dr.orders", 0)));
    }

    private static long offsetOf(MockProducer<byte[], byte[]> producer, int index) {
        String value = new String(producer.history().get(index).value(), StandardCharsets.UTF_8);
        return Long.parseLong(value.substring(1));
    }

    @Test
    void aReplayedBatchWritesNothingAndReportsWhereTheCommittedEndLanded() throws Exception {
        WriterSettings settings = new WriterSettings(FakeKafka.settings("exactly-once"));
        MockProducer<byte[], byte[]> zero = warm(settings, 0, 3, 57);
        List<JsonNode> lines = lines(new WriteTask(settings, List.of())
            .call(List.of(row("orders", 0, 0), row("orders", 0, 1), row("orders", 0, 2)).iterator()));
        assertEquals(0, zero.commitCount(), "no transaction begun");
        assertFalse(zero.transactionInFlight());
        assertEquals(0, zero.history().size());
        assertEquals(3, lines.get(0).get("skipped").asLong());
        assertEquals("[[2,57,1]]", lines.get(0).get("runs").toString(), "the offset sync a crash may have lost");
    }

    @Test
    void aFailureAbortsTheOpenTransactionAndDropsItsProducerButKeepsACommittedOne() {
        WriterSettings settings = new WriterSettings(FakeKafka.settings("exactly-once"));
        MockProducer<byte[], byte[]> zero = warm(settings, 0, 0, -1);
        MockProducer<byte[], byte[]> one = warm(settings, 1, 0, -1);
        one.commitTransactionException = new KafkaException("coordinator moved");
        List<InternalRow> rows = List.of(row("orders", 0, 0), row("orders", 1, 0));
        KafkaException error = assertThrows(KafkaException.class, () -> new WriteTask(settings, List.of()).call(rows.iterator()));
        assertEquals("coordinator moved", error.getMessage());
        assertEquals(1, zero.commitCount());
        assertFalse(zero.transactionAborted(), "orders-0 committed before the failure");
        assertFalse(zero.closed());
        assertTrue(one.transactionAborted());
        assertTrue(one.closed(), "dropped: the next batch's producer fences it");
        assertNull(Producers.committedHere(settings, settings.transactionalId("orders", 1)),
                   "the next batch reads its progress back from the group");
        Producer<byte[], byte[]> next = Producers.transactional(settings, settings.transactionalId("orders", 1));
        assertFalse(next == one);
        assertSame(next, kafka.transactional("mm2spec-mirror.job.a-to-b.orders.1").get(1));
    }

    @Test
    void aFailureAfterACommitLeavesTheCommittedTransactionAloneAndIsTheOneReported() {
        WriterSettings settings = new WriterSettings(FakeKafka.settings("exactly-once"));
        MockProducer<byte[], byte[]> zero = warm(settings, 0, 0, -1);
        kafka.unreachable = settings.transactionalId("orders", 1);  // a first batch for orders-1: no producer yet
        List<InternalRow> rows = List.of(row("orders", 0, 0), row("orders", 1, 0));
        KafkaException error = assertThrows(KafkaException.class, () -> new WriteTask(settings, List.of()).call(rows.iterator()));
        assertEquals("coordinator unreachable", error.getMessage());
        assertEquals(1, zero.commitCount());
        assertFalse(zero.transactionAborted());
        assertFalse(zero.closed(), "orders-0's producer and progress stay for the next batch");
        assertEquals(new OffsetAndMetadata(1, "0"), Producers.committedHere(settings, settings.transactionalId("orders", 0)));
    }
}
