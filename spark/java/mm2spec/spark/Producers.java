package mm2spec.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BiFunction;
import java.util.function.Function;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.TopicPartition;
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
 * then fails and is discarded), so the next batch need not read it back from the group. Otherwise
 * the producer is created first, then the progress read back with requireStable: initTransactions
 * has ended whatever transaction an earlier holder of the id left, so the read waits only for its
 * markers.
 */
final class Producers {
    private static final Map<String, ConcurrentLinkedDeque<Producer<byte[], byte[]>>> POOLS = new ConcurrentHashMap<>();
    private static final Map<String, Producer<byte[], byte[]>> TRANSACTIONAL = new ConcurrentHashMap<>();
    private static final Map<String, OffsetAndMetadata> COMMITTED = new ConcurrentHashMap<>();
    private static final Map<String, Admin> ADMINS = new ConcurrentHashMap<>();
    /** Threads learning topic metadata at once ({@link #warm}). */
    static final int WARM_THREADS = 64;
    /** How long {@link #leadersAnswering} waits for the leaders' answers. */
    static final int LEADERS_TIMEOUT_MS = 5_000;
    /** Runs producer flushes a writer waits on in steps ({@link GuardedSends#flush}). */
    private static final ExecutorService FLUSHES = Executors.newCachedThreadPool(runnable -> {
        Thread thread = new Thread(runnable, "mm2spec-writer-flush");
        thread.setDaemon(true);
        return thread;
    });

    private Producers() {
    }

    static Producer<byte[], byte[]> borrow(WriterSettings settings) {
        Producer<byte[], byte[]> producer = pool(settings).pollFirst();
        return producer != null ? producer : create(settings.producerProperties());
    }

    /**
     * Makes the producer learn the metadata of {@code topics}, many per request. {@code send} waits
     * for an unknown topic's metadata, one round trip per new topic in turn: a first batch over
     * 10,000 topics spent 96 s of its write there (mirror_wide.py, 10,000 x 1 partitions). Concurrent
     * {@code partitionsFor} calls share each metadata request, so {@value #WARM_THREADS} threads
     * learn that many topics a round trip. A topic whose metadata cannot be had fails in send, as
     * before.
     */
    static void warm(Producer<byte[], byte[]> producer, List<String> topics) {
        if (topics.isEmpty()) {
            return;
        }
        ExecutorService threads = Executors.newFixedThreadPool(Math.min(WARM_THREADS, topics.size()), runnable -> {
            Thread thread = new Thread(runnable, "mm2spec-writer-metadata");
            thread.setDaemon(true);
            return thread;
        });
        try {
            List<Future<?>> pending = new ArrayList<>(topics.size());
            for (String topic : topics) {
                pending.add(threads.submit(() -> producer.partitionsFor(topic)));
            }
            for (Future<?> future : pending) {
                try {
                    future.get();
                } catch (ExecutionException e) {
                    // send() waits for this topic again and reports what is wrong
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new org.apache.kafka.common.errors.InterruptException(e);
        } finally {
            threads.shutdownNow();
        }
    }

    /** A producer whose every send succeeded goes back to the pool; any other is closed. */
    static void giveBack(WriterSettings settings, Producer<byte[], byte[]> producer, boolean healthy) {
        if (healthy) {
            pool(settings).addFirst(producer);
        } else {
            producer.close(java.time.Duration.ZERO);
        }
    }

    static Producer<byte[], byte[]> transactional(WriterSettings settings, String transactionalId) {
        String key = settings.key() + "\n" + transactionalId;
        return TRANSACTIONAL.computeIfAbsent(key, unused -> {
            Properties props = settings.producerProperties();
            props.put("transactional.id", transactionalId);
            Producer<byte[], byte[]> producer = create(props);
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
        Producer<byte[], byte[]> producer = TRANSACTIONAL.remove(settings.key() + "\n" + transactionalId);
        if (producer != null) {
            producer.close(java.time.Duration.ZERO);
        }
    }

    static Admin admin(WriterSettings settings) {
        return ADMINS.computeIfAbsent(settings.key(), unused -> Admin.create(settings.adminProperties()));
    }

    /** {@code producer.flush()} on a thread of its own: the caller waits in steps and looks for stalls. */
    static Future<?> flushing(Producer<byte[], byte[]> producer) {
        return FLUSHES.submit(producer::flush);
    }

    /**
     * Which of {@code partitions} have a leader on the target cluster that answers for them now: a
     * ListOffsets of each succeeds within {@value #LEADERS_TIMEOUT_MS} ms (the admin client retries a
     * moving leader on its own meanwhile). {@link GuardedSends} replaces a producer stalled on a
     * partition only then: while the cluster or the partition's leader is away, a fresh producer would
     * fare no better and the producer's own retries are the way through.
     */
    static Set<TopicPartition> leadersAnswering(WriterSettings settings, Set<TopicPartition> partitions) {
        Map<TopicPartition, OffsetSpec> request = new HashMap<>();
        for (TopicPartition partition : partitions) {
            request.put(partition, OffsetSpec.latest());
        }
        ListOffsetsResult result = admin(settings).listOffsets(request, new ListOffsetsOptions().timeoutMs(LEADERS_TIMEOUT_MS));
        Set<TopicPartition> answering = new HashSet<>();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(LEADERS_TIMEOUT_MS);
        for (TopicPartition partition : partitions) {
            try {
                result.partitionResult(partition).get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                answering.add(partition);
            } catch (ExecutionException | TimeoutException e) {
                // not answering now: asked again after another stall
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new org.apache.kafka.common.errors.InterruptException(e);
            }
        }
        return answering;
    }

    /** Asks the target which stalled partitions' leaders answer ({@link #leadersAnswering}); spark/java-tests
     *  replace it, as they do {@link #factory}. */
    static volatile BiFunction<WriterSettings, Set<TopicPartition>, Set<TopicPartition>> leaders = Producers::leadersAnswering;

    private static ConcurrentLinkedDeque<Producer<byte[], byte[]>> pool(WriterSettings settings) {
        return POOLS.computeIfAbsent(settings.key(), unused -> new ConcurrentLinkedDeque<>());
    }

    /** Makes every producer of the writer (the records', the transactional ones, the offset syncs'):
     *  Kafka's, except in spark/java-tests, which put MockProducers here. */
    static volatile Function<Properties, Producer<byte[], byte[]>> factory =
        props -> new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());

    static Producer<byte[], byte[]> create(Properties props) {
        return factory.apply(props);
    }
}
