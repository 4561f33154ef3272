package mm2spec.spark;

import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Kafka clients of one executor JVM, kept across micro-batches: creating a producer costs a
 * metadata round trip (and initTransactions a coordinator round trip), too much to pay on every
 * one-second batch.
 *
 * <p>At-least-once: a pool per configuration; a task borrows one producer for itself and gives it
 * back, so concurrent tasks never share a connection (Spark's own sink shares one producer between
 * all tasks with the same config) and at most one producer exists per concurrently running task.
 * Exactly-once: one transactional producer per transactional.id, created and initialised once,
 * with the progress it last committed: while this JVM's producer holds the id, no one else can have
 * committed progress for that partition (taking the id fences this producer, whose next transaction
 * then fails and is discarded), so the next batch need not read it back from the group. Reading it
 * back with requireStable waits until the previous transaction's markers are written.
 */
final class Producers {
    private static final Map<String, ConcurrentLinkedDeque<KafkaProducer<byte[], byte[]>>> POOLS = new ConcurrentHashMap<>();
    private static final Map<String, KafkaProducer<byte[], byte[]>> TRANSACTIONAL = new ConcurrentHashMap<>();
    private static final Map<String, OffsetAndMetadata> COMMITTED = new ConcurrentHashMap<>();
    private static final Map<String, Admin> ADMINS = new ConcurrentHashMap<>();

    private Producers() {
    }

    static KafkaProducer<byte[], byte[]> borrow(WriterSettings settings) {
        KafkaProducer<byte[], byte[]> producer = pool(settings).pollFirst();
        return producer != null ? producer : create(settings.producerProperties());
    }

    /** A producer whose every send succeeded goes back to the pool; any other is closed. */
    static void giveBack(WriterSettings settings, KafkaProducer<byte[], byte[]> producer, boolean healthy) {
        if (healthy) {
            pool(settings).addFirst(producer);
        } else {
            producer.close(java.time.Duration.ZERO);
        }
    }

    static KafkaProducer<byte[], byte[]> transactional(WriterSettings settings, String transactionalId) {
        String key = settings.key() + "\n" + transactionalId;
        return TRANSACTIONAL.computeIfAbsent(key, unused -> {
            Properties props = settings.producerProperties();
            props.put("transactional.id", transactionalId);
            KafkaProducer<byte[], byte[]> producer = create(props);
            // Fences an older producer with this id (a killed driver's, another executor's) and
            // aborts the transaction it left open.
            producer.initTransactions();
            return producer;
        });
    }

    /** The progress this JVM's producer for {@code transactionalId} last committed, or null. */
    static OffsetAndMetadata committedHere(WriterSettings settings, String transactionalId) {
        String key = settings.key() + "\n" + transactionalId;
        return TRANSACTIONAL.containsKey(key) ? COMMITTED.get(key) : null;
    }

    static void committed(WriterSettings settings, String transactionalId, OffsetAndMetadata progress) {
        COMMITTED.put(settings.key() + "\n" + transactionalId, progress);
    }

    /** Forgets a transactional producer that failed (fenced, or its transaction in an unknown state). */
    static void discard(WriterSettings settings, String transactionalId) {
        COMMITTED.remove(settings.key() + "\n" + transactionalId);
        KafkaProducer<byte[], byte[]> producer = TRANSACTIONAL.remove(settings.key() + "\n" + transactionalId);
        if (producer != null) {
            producer.close(java.time.Duration.ZERO);
        }
    }

    static Admin admin(WriterSettings settings) {
        return ADMINS.computeIfAbsent(settings.key(), unused -> Admin.create(settings.adminProperties()));
    }

    private static ConcurrentLinkedDeque<KafkaProducer<byte[], byte[]>> pool(WriterSettings settings) {
        return POOLS.computeIfAbsent(settings.key(), unused -> new ConcurrentLinkedDeque<>());
    }

    private static KafkaProducer<byte[], byte[]> create(Properties props) {
        return new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
    }
}
