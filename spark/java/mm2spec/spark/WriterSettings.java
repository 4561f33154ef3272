package mm2spec.spark;

import java.io.Serializable;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

/**
 * What the driver (mm2spark/writer.py) tells the executors, as flat string keys:
 * {@code mode} (at-least-once or exactly-once), {@code target.prefix} (the replication policy's
 * prefix of target topic names, empty for the identity policy), {@code connection.*} (how to reach
 * the target cluster, secrets resolved), {@code producer.*} (producer settings), and for
 * exactly-once {@code transactional.id.prefix}, {@code progress.group} and
 * {@code progress.timeout.ms}; for the Real-time writer, which writes its own offset syncs,
 * {@code syncs.topic}, {@code syncs.connection.*} (the cluster holding it) and {@code offset.lag.max};
 * optionally {@code partition.stall.ms} ({@link GuardedSends}).
 * Never printed: the connection may hold a password.
 */
final class WriterSettings implements Serializable {
    private static final long serialVersionUID = 1L;

    private final TreeMap<String, String> values;

    WriterSettings(Map<String, String> values) {
        this.values = new TreeMap<>(values);
    }

    boolean exactlyOnce() {
        return "exactly-once".equals(require("mode"));
    }

    String targetPrefix() {
        return values.getOrDefault("target.prefix", "");
    }

    String transactionalIdPrefix() {
        return require("transactional.id.prefix");
    }

    String transactionalId(String topic, int partition) {
        return transactionalIdPrefix() + topic + "." + partition;
    }

    /** Real-time Mode's exactly-once writer: one transactional id per slice of the source. */
    String sliceTransactionalId(long slice) {
        return transactionalIdPrefix() + "rt-" + slice;
    }

    String progressGroup() {
        return require("progress.group");
    }

    long progressTimeoutMs() {
        return Long.parseLong(require("progress.timeout.ms"));
    }

    /** How long a target partition may hold unacknowledged records with none acknowledged before the
     *  writer looks into it ({@link GuardedSends}); the tests shorten it. */
    long partitionStallMs() {
        return Long.parseLong(values.getOrDefault("partition.stall.ms", Long.toString(GuardedSends.STALL_MS)));
    }

    /** Identifies the client configuration (the pools' key); kept in memory only. */
    String key() {
        return values.toString();
    }

    Properties producerProperties() {
        Properties props = prefixed("connection.");
        props.putAll(prefixed("producer."));
        return props;
    }

    String syncsTopic() {
        return require("syncs.topic");
    }

    long offsetLagMax() {
        return Long.parseLong(values.getOrDefault("offset.lag.max", "100"));
    }

    /** The offset-syncs producer's settings: its cluster's connection, acks=all, idempotent. */
    Properties syncsProducerProperties() {
        Properties props = prefixed("syncs.connection.");
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        props.put("linger.ms", "5");
        return props;
    }

    Properties adminProperties() {
        return prefixed("connection.");
    }

    private Properties prefixed(String prefix) {
        Properties props = new Properties();
        for (Map.Entry<String, String> entry : values.subMap(prefix, prefix + Character.MAX_VALUE).entrySet()) {
            props.put(entry.getKey().substring(prefix.length()), entry.getValue());
        }
        return props;
    }

    private String require(String key) {
        String value = values.get(key);
        if (value == null) {
            throw new IllegalArgumentException("mm2spec writer setting " + key + " is missing");
        }
        return value;
    }

    @Override
    public String toString() {
        return "WriterSettings(mode=" + values.get("mode") + ")";
    }
}
