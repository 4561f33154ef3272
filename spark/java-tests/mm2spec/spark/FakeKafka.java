package mm2spec.spark;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import java.util.function.Function;
import java.util.function.Predicate;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's MockProducer in place of every producer the writer makes ({@link Producers#factory}), each
 * kept with the settings it was made with. The target has {@link #TARGET_TOPICS} with 4 partitions
 * each, so records keep the partition the writer gives them and the mock hands out offsets per
 * partition from 0 as a broker would. Close it to give the writer Kafka's producers back.
 */
final class FakeKafka implements AutoCloseable {
    static final List<String> TARGET_TOPICS = List.of("orders", "payments", "dr.orders", "dr.payments");
    private static final Cluster TARGET;

    static {
        Node node = new Node(0, "target", 9092);
        List<PartitionInfo> partitions = new ArrayList<>();
        for (String topic : TARGET_TOPICS) {
            for (int p = 0; p < 4; p++) {
                partitions.add(new PartitionInfo(topic, p, node, new Node[] {node}, new Node[] {node}));
            }
        }
        TARGET = new Cluster("target", List.of(node), partitions, Set.of(), Set.of());
    }

    final List<Properties> made = new ArrayList<>();
    /** A transactional id whose producer's initTransactions fails (the coordinator is unreachable). */
    volatile String unreachable;
    final List<MockProducer<byte[], byte[]>> producers = new ArrayList<>();
    /** Whether the stalled partitions' leaders answer ({@link Producers#leaders}), and how often it was asked. */
    volatile boolean leadersAnswer = true;
    final AtomicInteger leaderProbes = new AtomicInteger();
    private Predicate<ProducerRecord<byte[], byte[]>> wedge;
    private int wedging;
    private long expireMs;
    private final Function<Properties, Producer<byte[], byte[]>> previous;
    private final BiFunction<WriterSettings, Set<TopicPartition>, Set<TopicPartition>> previousLeaders;

    FakeKafka() {
        previous = Producers.factory;
        previousLeaders = Producers.leaders;
        Producers.leaders = (settings, partitions) -> {
            leaderProbes.incrementAndGet();
            return leadersAnswer ? partitions : Set.of();
        };
        Producers.factory = props -> {
            MockProducer<byte[], byte[]> producer;
            synchronized (this) {
                if (wedging > 0) {
                    wedging--;
                    producer = new WedgedProducer(wedge, expireMs);
                } else {
                    producer = new MockProducer<>(TARGET, true, new ByteArraySerializer(), new ByteArraySerializer());
                }
            }
            if (props.getProperty("transactional.id", "").equals(unreachable)) {
                producer.initTransactionException = new org.apache.kafka.common.errors.TimeoutException("coordinator unreachable");
            }
            synchronized (this) {
                made.add(props);
                producers.add(producer);
            }
            return producer;
        };
    }

    /** The producers made with {@code transactional.id} = {@code id}, oldest first. */
    synchronized List<MockProducer<byte[], byte[]>> transactional(String id) {
        List<MockProducer<byte[], byte[]>> out = new ArrayList<>();
        for (int i = 0; i < made.size(); i++) {
            if (id.equals(made.get(i).getProperty("transactional.id"))) {
                out.add(producers.get(i));
            }
        }
        return out;
    }

    /** The one producer made with settings key {@code key} = {@code value}. */
    synchronized MockProducer<byte[], byte[]> madeWith(String key, String value) {
        List<MockProducer<byte[], byte[]>> out = new ArrayList<>();
        for (int i = 0; i < made.size(); i++) {
            if (value.equals(made.get(i).getProperty(key))) {
                out.add(producers.get(i));
            }
        }
        if (out.size() != 1) {
            throw new AssertionError(out.size() + " producers made with " + key + "=" + value);
        }
        return out.get(0);
    }

    /** The next {@code producers} producers made never acknowledge the records {@code wedge} picks (KAFKA-15591's
     *  refused batch) until they are closed, or until a flush has waited {@code expireMs} for them (their
     *  delivery.timeout.ms): then they fail as Kafka's expire. */
    synchronized void wedge(Predicate<ProducerRecord<byte[], byte[]>> wedge, int producers, long expireMs) {
        this.wedge = wedge;
        this.wedging = producers;
        this.expireMs = expireMs;
    }

    /** Picks the records of one target partition (and with {@code values}, only those values). */
    static Predicate<ProducerRecord<byte[], byte[]>> records(String topic, int partition, String... values) {
        Set<String> picked = Set.of(values);
        return record -> record.topic().equals(topic) && record.partition() == partition
            && (picked.isEmpty() || picked.contains(new String(record.value(), java.nio.charset.StandardCharsets.UTF_8)));
    }

    @Override
    public void close() {
        Producers.factory = previous;
        Producers.leaders = previousLeaders;
    }

    /** A MockProducer that holds the records {@code wedge} picks unacknowledged, as a producer stuck
     *  on a partition does: a flush waits for them, a close fails them. */
    static final class WedgedProducer extends MockProducer<byte[], byte[]> {
        private final Predicate<ProducerRecord<byte[], byte[]>> wedge;
        private final long expireMs;
        private final List<ProducerRecord<byte[], byte[]>> held = new ArrayList<>();
        private final List<Callback> callbacks = new ArrayList<>();
        private boolean shut;

        WedgedProducer(Predicate<ProducerRecord<byte[], byte[]>> wedge, long expireMs) {
            super(TARGET, true, new ByteArraySerializer(), new ByteArraySerializer());
            this.wedge = wedge;
            this.expireMs = expireMs;
        }

        @Override
        public synchronized Future<RecordMetadata> send(ProducerRecord<byte[], byte[]> record, Callback callback) {
            if (!wedge.test(record)) {
                return super.send(record, callback);
            }
            if (shut) {
                throw new IllegalStateException("MockProducer is already closed.");
            }
            held.add(record);
            callbacks.add(callback);
            return new CompletableFuture<>();
        }

        /** The records sent and never acknowledged, in order. */
        synchronized List<ProducerRecord<byte[], byte[]>> held() {
            return new ArrayList<>(held);
        }

        @Override
        public void flush() {
            super.flush();
            List<Callback> expired = new ArrayList<>();
            synchronized (this) {
                long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(expireMs);
                while (!callbacks.isEmpty() && !shut) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        expired.addAll(callbacks);
                        callbacks.clear();
                        break;
                    }
                    try {
                        TimeUnit.NANOSECONDS.timedWait(this, left);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        return;
                    }
                }
            }
            for (Callback callback : expired) {
                callback.onCompletion(null, new TimeoutException("Expiring 1 record(s): " + expireMs + " ms has passed since batch creation"));
            }
        }

        @Override
        public void close(Duration timeout) {
            List<Callback> failed;
            synchronized (this) {
                shut = true;
                failed = new ArrayList<>(callbacks);
                callbacks.clear();
                notifyAll();
            }
            for (Callback callback : failed) {
                callback.onCompletion(null, new KafkaException("Producer is closed forcefully."));
            }
            super.close(timeout);
        }
    }

    /** Writer settings of their own (the pools, emitters and transactional producers are per settings),
     *  targets prefixed "dr.". */
    static Map<String, String> settings(String mode, String... more) {
        Map<String, String> values = new HashMap<>();
        values.put("mode", mode);
        values.put("target.prefix", "dr.");
        values.put("connection.bootstrap.servers", "target-" + UUID.randomUUID() + ":9092");
        values.put("transactional.id.prefix", "mm2spec-mirror.job.a-to-b.");
        values.put("progress.group", "mm2spec-mirror.job.a-to-b");
        values.put("progress.timeout.ms", "1000");
        values.put("syncs.topic", "mm2-offset-syncs.b.internal");
        values.put("syncs.connection.bootstrap.servers", "source-" + UUID.randomUUID() + ":9092");
        for (int i = 0; i + 1 < more.length; i += 2) {
            values.put(more[i], more[i + 1]);
        }
        return values;
    }

    /** The records sent to {@code topic}, in order. */
    static List<ProducerRecord<byte[], byte[]>> sentTo(MockProducer<byte[], byte[]> producer, String topic) {
        List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
        for (ProducerRecord<byte[], byte[]> record : producer.history()) {
            if (record.topic().equals(topic)) {
                out.add(record);
            }
        }
        return out;
    }
}
