package mm2spec.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotSame;
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
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.unsafe.types.UTF8String;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A producer that stops acknowledging a target partition whose leader answers (KAFKA-15591: a later
 * batch appended first, the first one refused until delivery.timeout.ms) is replaced within
 * {@code partition.stall.ms} and the partition's records sent again, in order, by the micro-batch
 * writer (at-least-once and exactly-once) and the Real-time slice transactions; a stall while the
 * leader does not answer is left to the producer, and renewals stop after {@link GuardedSends#MAX_RENEWALS}.
 */
class GuardedSendsTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String GROUP = "mm2spec-mirror.job.a-to-b";
    private final FakeKafka kafka = new FakeKafka();

    @AfterEach
    void restore() {
        kafka.close();
    }

    private static InternalRow row(String topic, int partition, long offset) {
        return row(topic, partition, offset, ("v" + offset).getBytes(StandardCharsets.UTF_8));
    }

    private static InternalRow row(String topic, int partition, long offset, byte[] value) {
        return new GenericInternalRow(new Object[] {UTF8String.fromString(topic), partition, offset,
            1_700_000_000_000_000L + offset, ("k" + offset).getBytes(StandardCharsets.UTF_8), value, new GenericArrayData(new Object[0])});
    }

    private static List<JsonNode> lines(Iterator<String> out) throws Exception {
        List<JsonNode> lines = new ArrayList<>();
        while (out.hasNext()) {
            lines.add(JSON.readTree(out.next()));
        }
        return lines;
    }

    private static List<String> values(List<ProducerRecord<byte[], byte[]>> records) {
        return records.stream().map(r -> new String(r.value(), StandardCharsets.UTF_8)).toList();
    }

    private static WriterSettings settings(String mode) {
        return new WriterSettings(FakeKafka.settings(mode, "partition.stall.ms", "200"));
    }

    @Test
    void atLeastOnceSendsAStalledPartitionAgainThroughAFreshProducer() throws Exception {
        WriterSettings settings = settings("at-least-once");
        kafka.wedge(FakeKafka.records("dr.orders", 0), 1, 60_000);
        List<InternalRow> rows = List.of(row("orders", 0, 10), row("orders", 1, 5), row("orders", 0, 11));
        long began = System.nanoTime();
        List<JsonNode> lines = lines(new WriteTask(settings, List.of()).call(rows.iterator()));
        long tookMs = (System.nanoTime() - began) / 1_000_000;

        assertEquals(2, kafka.producers.size(), "the stalled producer and the fresh one");
        FakeKafka.WedgedProducer stalled = (FakeKafka.WedgedProducer) kafka.producers.get(0);
        MockProducer<byte[], byte[]> fresh = kafka.producers.get(1);
        assertTrue(stalled.closed(), "dropped, not pooled");
        assertEquals(List.of("v10", "v11"), values(stalled.held()));
        assertEquals(List.of("v10", "v11"), values(FakeKafka.sentTo(fresh, "dr.orders")), "only what was not acknowledged");
        assertTrue(tookMs < 30_000, "well before delivery.timeout.ms: " + tookMs + " ms");
        assertEquals(1, kafka.leaderProbes.get());

        assertEquals(2, lines.get(0).get("records").asLong(), "counted once");
        assertEquals("[[10,0,2]]", lines.get(0).get("runs").toString(), "where the fresh producer wrote them");
        assertEquals("[[5,0,1]]", lines.get(1).get("runs").toString(), "acknowledged by the first producer");
        assertEquals(1, lines.get(2).get("producerRenewals").asInt());
        assertSame(fresh, Producers.borrow(settings), "the fresh producer goes back to the pool");
    }

    @Test
    void aLaterRecordWrittenBeforeTheStuckOneIsWrittenAgainAfterIt() throws Exception {
        // KAFKA-15591's order: the broker appended 11 and 12 while it refused 10 for good.
        WriterSettings settings = settings("at-least-once");
        kafka.wedge(FakeKafka.records("dr.orders", 0, "v10"), 1, 60_000);
        List<InternalRow> rows = List.of(row("orders", 0, 10), row("orders", 0, 11), row("orders", 0, 12));
        List<JsonNode> lines = lines(new WriteTask(settings, List.of()).call(rows.iterator()));

        MockProducer<byte[], byte[]> stalled = kafka.producers.get(0);
        MockProducer<byte[], byte[]> fresh = kafka.producers.get(1);
        assertEquals(List.of("v11", "v12"), values(FakeKafka.sentTo(stalled, "dr.orders")), "written before 10");
        assertEquals(List.of("v10", "v11", "v12"), values(FakeKafka.sentTo(fresh, "dr.orders")), "back in order after 10");
        assertEquals(3, lines.get(0).get("records").asLong());
        assertEquals("[[10,0,3]]", lines.get(0).get("runs").toString(),
                     "the first copies' run is forgotten: offset syncs point at the ordered copies");
    }

    @Test
    void aStallWhileTheLeaderDoesNotAnswerIsLeftToTheProducersOwnTimeout() {
        WriterSettings settings = settings("at-least-once");
        kafka.leadersAnswer = false;  // the cluster or the partition's leader is away: a fresh producer fares no better
        kafka.wedge(FakeKafka.records("dr.orders", 0), 1, 1_000);
        Iterator<InternalRow> rows = List.of(row("orders", 0, 10)).iterator();
        KafkaException error = assertThrows(KafkaException.class, () -> new WriteTask(settings, List.of()).call(rows));
        assertInstanceOf(TimeoutException.class, error.getCause(), "the producer's delivery timeout, as before");
        assertEquals(1, kafka.producers.size(), "not replaced");
        assertTrue(kafka.leaderProbes.get() >= 1);
        assertTrue(kafka.producers.get(0).closed(), "its state is unknown: not pooled again");
    }

    @Test
    void renewalsStopAfterTheCapAndTheProducersTimeoutDecides() {
        WriterSettings settings = settings("at-least-once");
        kafka.wedge(FakeKafka.records("dr.orders", 0), 100, 1_500);  // every producer wedges: not the wedge a renewal cures
        Iterator<InternalRow> rows = List.of(row("orders", 0, 10)).iterator();
        KafkaException error = assertThrows(KafkaException.class, () -> new WriteTask(settings, List.of()).call(rows));
        assertInstanceOf(TimeoutException.class, error.getCause());
        assertEquals(1 + GuardedSends.MAX_RENEWALS, kafka.producers.size());
    }

    /** Exactly-once: the producer of orders-0's transactional.id, with no progress committed yet. */
    private static MockProducer<byte[], byte[]> transactional(WriterSettings settings) {
        String id = settings.transactionalId("orders", 0);
        MockProducer<byte[], byte[]> producer = (MockProducer<byte[], byte[]>) Producers.transactional(settings, id);
        Producers.committed(settings, id, new OffsetAndMetadata(0, "-1"));
        return producer;
    }

    @Test
    void exactlyOnceSendsAStalledTransactionAgainUnderTheSameTransactionalId() throws Exception {
        WriterSettings settings = settings("exactly-once");
        kafka.wedge(FakeKafka.records("dr.orders", 0, "v1"), 1, 60_000);
        MockProducer<byte[], byte[]> stalled = transactional(settings);
        List<InternalRow> rows = List.of(row("orders", 0, 0), row("orders", 0, 1), row("orders", 0, 2));
        List<JsonNode> lines = lines(new WriteTask(settings, List.of()).call(rows.iterator()));

        List<MockProducer<byte[], byte[]>> holders = kafka.transactional("mm2spec-mirror.job.a-to-b.orders.0");
        assertEquals(2, holders.size());
        MockProducer<byte[], byte[]> fresh = holders.get(1);
        assertTrue(stalled.closed());
        assertEquals(0, stalled.commitCount(), "its transaction is aborted by the fresh holder's initTransactions");
        assertTrue(fresh.transactionInitialized(), "initTransactions fenced the stalled producer");
        assertEquals(1, fresh.commitCount());
        assertEquals(List.of("v0", "v1", "v2"), values(fresh.history()), "the whole transaction again, in order");
        assertEquals(List.of(Map.of(GROUP, Map.of(new TopicPartition("dr.orders", 0), new OffsetAndMetadata(3, "2")))),
                     fresh.consumerGroupOffsetsHistory());
        assertEquals(new OffsetAndMetadata(3, "2"), Producers.committedHere(settings, settings.transactionalId("orders", 0)));
        assertEquals("[[0,0,3]]", lines.get(0).get("runs").toString());
        assertEquals(1, lines.get(1).get("producerRenewals").asInt());
    }

    @Test
    void aTransactionCommitsEarlyOnceItKeepsTooMuchForAResend() throws Exception {
        WriterSettings settings = new WriterSettings(FakeKafka.settings("exactly-once"));
        MockProducer<byte[], byte[]> producer = transactional(settings);
        byte[] mib = new byte[1 << 20];
        int rows = (int) (GuardedSends.KEPT_BYTES_MAX / mib.length) + 2;
        List<InternalRow> batch = new ArrayList<>();
        for (int i = 0; i < rows; i++) {
            batch.add(row("orders", 0, i, mib));
        }
        List<JsonNode> lines = lines(new WriteTask(settings, List.of()).call(batch.iterator()));
        assertEquals(2, producer.commitCount(), "one transaction per KEPT_BYTES_MAX, each with its progress");
        int first = (int) (GuardedSends.KEPT_BYTES_MAX / mib.length);
        List<OffsetAndMetadata> progress = producer.consumerGroupOffsetsHistory().stream()
            .map(m -> m.get(GROUP).get(new TopicPartition("dr.orders", 0))).toList();
        assertEquals(List.of(new OffsetAndMetadata(first, Long.toString(first - 1)), new OffsetAndMetadata(rows, Long.toString(rows - 1))),
                     progress);
        assertEquals("[[0,0," + rows + "]]", lines.get(0).get("runs").toString());
    }

    @Test
    void aStalledSliceTransactionIsSentAgainAndOnlyItsCommittedRecordsAreSynced() {
        Map<String, String> values = FakeKafka.settings("exactly-once", "offset.lag.max", "0", "partition.stall.ms", "200");
        WriterSettings settings = new WriterSettings(values);
        SyncWriter syncs = new SyncWriter(settings);  // its producer first: only the slice's wedges
        kafka.wedge(FakeKafka.records("dr.payments", 2), 1, 60_000);
        SliceTransactions slice = new SliceTransactions(settings, 3, syncs, Map.of());
        PartitionWrite orders = new PartitionWrite("orders", 0, "dr.orders");
        PartitionWrite payments = new PartitionWrite("payments", 2, "dr.payments");
        slice.offer(orders, 5, 1_000L, null, "o5".getBytes(StandardCharsets.UTF_8), null);
        slice.offer(payments, 9, 1_000L, null, "p9".getBytes(StandardCharsets.UTF_8), null);
        slice.offer(orders, 6, 1_001L, null, "o6".getBytes(StandardCharsets.UTF_8), null);
        slice.finish();

        List<MockProducer<byte[], byte[]>> holders = kafka.transactional("mm2spec-mirror.job.a-to-b.rt-3");
        assertEquals(2, holders.size());
        assertEquals(0, holders.get(0).commitCount());
        assertTrue(holders.get(0).closed());
        MockProducer<byte[], byte[]> fresh = holders.get(1);
        assertEquals(1, fresh.commitCount());
        assertEquals(List.of("o5", "o6"), values(FakeKafka.sentTo(fresh, "dr.orders")), "the whole transaction again");
        assertEquals(List.of("p9"), values(FakeKafka.sentTo(fresh, "dr.payments")));
        assertEquals(List.of(Map.of(GROUP, Map.of(new TopicPartition("dr.orders", 0), new OffsetAndMetadata(7, "1"),
                                                  new TopicPartition("dr.payments", 2), new OffsetAndMetadata(10, "0")))),
                     fresh.consumerGroupOffsetsHistory());
        assertFalse(slice.failed());
        assertEquals(1, slice.renewals());
        syncs.flush(java.time.Duration.ofSeconds(5));
        MockProducer<byte[], byte[]> syncsProducer = kafka.madeWith("bootstrap.servers", values.get("syncs.connection.bootstrap.servers"));
        assertEquals(3, syncsProducer.history().size(), "one sync per committed record (offset.lag.max 0), none for the aborted copies");
    }

    @Test
    void aRealTimeTimerFindsAStallWhenNoRecordComes() throws Exception {
        WriterSettings settings = settings("at-least-once");
        kafka.wedge(FakeKafka.records("dr.orders", 0), 1, 60_000);
        GuardedSends sends = GuardedSends.atLeastOnce(settings, Producers.borrow(settings));
        PartitionWrite orders = new PartitionWrite("orders", 0, "dr.orders");
        sends.send(orders, 10, 1_000L, null, "v10".getBytes(StandardCharsets.UTF_8), null);
        sends.checkQuietly();
        assertEquals(1, kafka.producers.size(), "not stalled yet");
        Thread.sleep(300);
        sends.checkQuietly();
        assertEquals(2, kafka.producers.size());
        assertNotSame(kafka.producers.get(0), sends.producer());
        assertTrue(orders.complete(), "acknowledged by the fresh producer");
        assertEquals(List.of("10,0,1"), runs(orders.takeRuns()));
    }

    @Test
    void aRewindForgetsWhereTheRecordsSentAgainHadLanded() {
        PartitionWrite write = new PartitionWrite("orders", 0, "dr.orders");
        for (long upstream = 10; upstream < 15; upstream++) {
            write.counted(upstream, 0, 1);
        }
        for (long upstream : new long[] {10, 11, 13, 14}) {
            write.acknowledge(upstream, 0, metadata(upstream - 10), null);
        }
        assertFalse(write.complete(), "12 is missing");
        write.rewind(12, 2, 0);  // 12 was stuck; 13 and 14 are sent again after it
        assertEquals(List.of("10,0,2"), runs(write.takeRuns()));
        for (long upstream = 12; upstream < 15; upstream++) {
            write.acknowledge(upstream, 0, metadata(upstream - 12 + 4), null);
        }
        assertEquals(List.of("12,4,3"), runs(write.takeRuns()));
        assertTrue(write.complete(), "each record acknowledged once after the rewind");
    }

    private static List<String> runs(List<long[]> runs) {
        return runs.stream().map(r -> r[0] + "," + r[1] + "," + r[2]).toList();
    }

    private static RecordMetadata metadata(long offset) {
        return new RecordMetadata(new TopicPartition("dr.orders", 0), offset, 0, 0L, 0, 0);
    }
}
