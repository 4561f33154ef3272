package mm2spec.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.Mm2OffsetSyncs;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Real-time Mode's exactly-once writer: one transactional producer per slice, transactions with the
 *  progress of every target partition written, offset syncs only for committed records. */
class SliceTransactionsTest {
    private static final String GROUP = "mm2spec-mirror.job.a-to-b";
    private final FakeKafka kafka = new FakeKafka();
    private final Map<String, String> values = FakeKafka.settings("exactly-once", "offset.lag.max", "0");
    private final WriterSettings settings = new WriterSettings(values);

    @AfterEach
    void restore() {
        kafka.close();
    }

    private static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    private MockProducer<byte[], byte[]> syncsProducer() {
        return kafka.madeWith("bootstrap.servers", values.get("syncs.connection.bootstrap.servers"));
    }

    /** The offset syncs written, as MM2 reads them: "topic-partition upstream->downstream". */
    private List<String> syncsWritten() {
        List<String> out = new ArrayList<>();
        for (ProducerRecord<byte[], byte[]> record : syncsProducer().history()) {
            assertEquals("mm2-offset-syncs.b.internal", record.topic());
            assertEquals(0, record.partition(), "MM2's offset-syncs topic has one partition");
            Object[] sync = Mm2OffsetSyncs.read(record.key(), record.value());
            out.add(sync[0] + "-" + sync[1] + " " + sync[2] + "->" + sync[3]);
        }
        return out;
    }

    @Test
    void aSliceHasOneTransactionalIdAndCommitsItsPartitionsProgressWithTheRecords() {
        SyncWriter syncs = new SyncWriter(settings);
        SliceTransactions slice = new SliceTransactions(settings, 3, syncs, Map.of());
        List<MockProducer<byte[], byte[]>> made = kafka.transactional("mm2spec-mirror.job.a-to-b.rt-3");
        assertEquals(1, made.size());
        MockProducer<byte[], byte[]> producer = made.get(0);
        assertTrue(producer.transactionInitialized());
        PartitionWrite orders = new PartitionWrite("orders", 0, "dr.orders");
        PartitionWrite payments = new PartitionWrite("payments", 2, "dr.payments");
        slice.offer(orders, 5, 1_000L, bytes("k"), bytes("v"), null);
        slice.offer(payments, 9, null, null, bytes("v"), null);
        slice.offer(orders, 6, 1_001L, bytes("k"), bytes("v"), null);
        assertTrue(producer.transactionInFlight());
        assertEquals(List.of(), syncsWritten(), "nothing is synced before it is committed");
        slice.finish();
        assertFalse(producer.transactionInFlight());
        assertEquals(1, producer.commitCount());
        assertEquals(List.of(Map.of(GROUP, Map.of(new TopicPartition("dr.orders", 0), new OffsetAndMetadata(7, "1"),
                                                  new TopicPartition("dr.payments", 2), new OffsetAndMetadata(10, "0")))),
                     producer.consumerGroupOffsetsHistory());
        assertEquals(3, producer.history().size());
        assertEquals(List.of("orders-0 5->0", "orders-0 6->1", "payments-2 9->0"), syncsWritten().stream().sorted().toList());
        assertFalse(slice.failed());
    }

    @Test
    void rowsBelowTheProgressReadBackOrCommittedHereAreSkipped() {
        SliceTransactions slice = new SliceTransactions(settings, 0, new SyncWriter(settings),
                                                        Map.of(new TopicPartition("dr.orders", 0), 100L));
        MockProducer<byte[], byte[]> producer = kafka.transactional("mm2spec-mirror.job.a-to-b.rt-0").get(0);
        PartitionWrite orders = new PartitionWrite("orders", 0, "dr.orders");
        slice.offer(orders, 98, 0L, null, bytes("a"), null);
        slice.offer(orders, 99, 0L, null, bytes("b"), null);
        assertFalse(producer.transactionInFlight(), "a replay opens no transaction");
        slice.offer(orders, 100, 0L, null, bytes("c"), null);
        slice.finish();
        slice.offer(orders, 100, 0L, null, bytes("c"), null);  // the same record again: committed now
        slice.finish();
        assertEquals(3, orders.skipped);
        assertEquals(1, orders.records);
        assertEquals(1, producer.commitCount());
        assertEquals(new OffsetAndMetadata(101, "0"), producer.consumerGroupOffsetsHistory().get(0).get(GROUP)
            .get(new TopicPartition("dr.orders", 0)));
    }

    @Test
    void theTimerCommitsATransactionOpenForTheInterval() throws InterruptedException {
        SliceTransactions slice = new SliceTransactions(settings, 1, new SyncWriter(settings), Map.of());
        MockProducer<byte[], byte[]> producer = kafka.transactional("mm2spec-mirror.job.a-to-b.rt-1").get(0);
        slice.offer(new PartitionWrite("orders", 1, "dr.orders"), 0, 0L, null, bytes("a"), null);
        Thread.sleep(SliceTransactions.COMMIT_INTERVAL_MS + 50);
        slice.tick();
        assertEquals(1, producer.commitCount(), "no record came to commit it: the timer did");
        slice.tick();
        assertEquals(1, producer.commitCount(), "nothing open");
    }

    @Test
    void aFailedCommitFailsTheSliceAndAbandonAbortsAndDropsTheProducer() {
        SliceTransactions slice = new SliceTransactions(settings, 2, new SyncWriter(settings), Map.of());
        MockProducer<byte[], byte[]> producer = kafka.transactional("mm2spec-mirror.job.a-to-b.rt-2").get(0);
        producer.commitTransactionException = new KafkaException("fenced by a newer attempt");
        slice.offer(new PartitionWrite("orders", 0, "dr.orders"), 0, 0L, null, bytes("a"), null);
        assertThrows(KafkaException.class, slice::finish);
        assertTrue(slice.failed());
        slice.tick();  // the timer does not retry a failed transaction
        assertEquals(List.of(), syncsWritten(), "no sync for records never committed");
        slice.abandon();
        assertTrue(producer.transactionAborted());
        assertTrue(producer.closed());
        new SliceTransactions(settings, 2, new SyncWriter(settings), Map.of());
        assertEquals(2, kafka.transactional("mm2spec-mirror.job.a-to-b.rt-2").size(), "the next attempt has a new producer");
    }

    @Test
    void abandonSurvivesAFencedProducer() {
        SliceTransactions slice = new SliceTransactions(settings, 4, new SyncWriter(settings), Map.of());
        MockProducer<byte[], byte[]> producer = kafka.transactional("mm2spec-mirror.job.a-to-b.rt-4").get(0);
        slice.offer(new PartitionWrite("orders", 0, "dr.orders"), 0, 0L, null, bytes("a"), null);
        producer.fenceProducer();
        slice.abandon();  // abortTransaction throws ProducerFencedException: swallowed
        assertTrue(producer.closed());
    }
}
