package mm2spec.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.function.Function;

import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
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
    private final Function<Properties, Producer<byte[], byte[]>> previous;

    FakeKafka() {
        previous = Producers.factory;
        Producers.factory = props -> {
            MockProducer<byte[], byte[]> producer = new MockProducer<>(TARGET, true, new ByteArraySerializer(), new ByteArraySerializer());
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

    @Override
    public void close() {
        Producers.factory = previous;
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
