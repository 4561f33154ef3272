package mm2spec.spark.source;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The executor's long-lived consumers, one per slice of a running stream: a slice's next batch
 * finds its consumer where the last one left it (assigned, positioned, with any records fetched
 * past the last batch's end kept), so a batch costs no consumer creation, no seek and no wasted
 * fetch. A consumer is used by one task at a time; a second task of the same slice (a retry
 * beside a lingering attempt, speculation) gets a consumer of its own for its run. A consumer whose
 * task failed is closed (its state is unknown); the driver's stream closes its stream's consumers
 * when the query stops (in local mode, where they share its JVM), and a consumer unused for
 * {@link #IDLE_MS} is closed on any executor.
 */
final class SliceConsumers {
    static final long IDLE_MS = 5 * 60_000L;
    private static final Map<String, Slot> SLOTS = new ConcurrentHashMap<>();

    private SliceConsumers() {
    }

    /** A slice's consumer with what it has read beyond the last batch. */
    static final class Slot {
        final String key;
        final KafkaConsumer<byte[], byte[]> consumer;
        /** Records fetched at or past the end of the last batch's range, per partition, in order. */
        final Map<TopicPartition, ArrayDeque<ConsumerRecord<byte[], byte[]>>> pending = new HashMap<>();
        /** Where the last batch left each partition: the consumer plus {@link #pending} continue from there. */
        final Map<TopicPartition, Long> at = new HashMap<>();
        final boolean cached;
        private final AtomicBoolean busy = new AtomicBoolean();
        private volatile long lastUsed = System.currentTimeMillis();

        Slot(String key, Map<String, String> kafka, boolean cached) {
            this.key = key;
            this.cached = cached;
            this.consumer = new KafkaConsumer<>(config(key, kafka), new ByteArrayDeserializer(), new ByteArrayDeserializer());
        }

        void close() {
            try {
                consumer.close(Duration.ofSeconds(1));
            } catch (KafkaException | IllegalStateException e) {
                // closing a consumer that failed: nothing more to release
            }
        }
    }

    private static Properties config(String key, Map<String, String> kafka) {
        Properties props = new Properties();
        props.putAll(kafka);
        props.remove(ConsumerConfig.GROUP_ID_CONFIG);  // assigned partitions; progress lives in Spark's checkpoint
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");  // a reset is the reader's decision (SliceReader)
        props.putIfAbsent(ConsumerConfig.CLIENT_ID_CONFIG, "mm2spec-mirror-" + key.substring(key.lastIndexOf('/') + 1));
        return props;
    }

    /** The slice's consumer, for this task alone until {@link #release}. */
    static Slot acquire(SliceInput input) {
        closeIdle();
        String key = input.consumerKey();
        Slot slot = SLOTS.computeIfAbsent(key, k -> new Slot(k, input.kafka, true));
        if (slot.busy.compareAndSet(false, true)) {
            return slot;
        }
        return new Slot(key, input.kafka, false);
    }

    /** Gives the consumer back; {@code healthy} false closes it (the next task starts afresh). */
    static void release(Slot slot, boolean healthy) {
        slot.lastUsed = System.currentTimeMillis();
        if (!slot.cached) {
            slot.close();
            return;
        }
        if (!healthy) {
            SLOTS.remove(slot.key, slot);
            slot.close();
        }
        slot.busy.set(false);
    }

    /** Closes the stream's idle consumers (the query stopped). */
    static void closeStream(String streamId) {
        closeWhere(slot -> slot.key.startsWith(streamId + "/"));
    }

    private static void closeIdle() {
        long now = System.currentTimeMillis();
        closeWhere(slot -> now - slot.lastUsed > IDLE_MS);
    }

    private static void closeWhere(java.util.function.Predicate<Slot> which) {
        for (Iterator<Slot> it = SLOTS.values().iterator(); it.hasNext(); ) {
            Slot slot = it.next();
            if (which.test(slot) && slot.busy.compareAndSet(false, true)) {
                it.remove();
                slot.close();
            }
        }
    }
}
