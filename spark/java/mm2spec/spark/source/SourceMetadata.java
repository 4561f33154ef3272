package mm2spec.spark.source;

import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.config.SslConfigs;

/**
 * The driver's view of the source cluster: which partitions the pattern matches and their offsets,
 * through one admin client. Every call waits interruptibly, so stopping the query while the source
 * does not answer returns at once instead of waiting out a Kafka timeout.
 */
final class SourceMetadata implements AutoCloseable {
    private final Pattern pattern;
    private final IsolationLevel isolation;
    private final long timeoutMs;
    private final Admin admin;

    SourceMetadata(SourceOptions options) {
        this.pattern = options.compiled();
        this.isolation = "read_committed".equalsIgnoreCase(options.kafka.get("isolation.level"))
            ? IsolationLevel.READ_COMMITTED : IsolationLevel.READ_UNCOMMITTED;
        this.timeoutMs = Long.parseLong(options.kafka.getOrDefault("default.api.timeout.ms", "60000"));
        Properties props = new Properties();
        Set<String> known = AdminClientConfig.configNames();
        for (Map.Entry<String, String> entry : options.kafka.entrySet()) {
            String key = entry.getKey();
            if (known.contains(key) || key.startsWith("sasl.") || key.startsWith("ssl.")
                    || SaslConfigs.SASL_JAAS_CONFIG.equals(key) || SslConfigs.SSL_PROTOCOL_CONFIG.equals(key)) {
                props.put(key, entry.getValue());
            }
        }
        props.putIfAbsent(AdminClientConfig.CLIENT_ID_CONFIG, "mm2spec-mirror-source-admin");
        this.admin = Admin.create(props);
    }

    /** The partitions of every topic the pattern matches (internal topics never match). */
    List<TopicPartition> partitions() {
        Set<String> topics = await(admin.listTopics(new ListTopicsOptions().listInternal(false)).names(), "listing topics")
            .stream().filter(name -> pattern.matcher(name).find()).collect(Collectors.toSet());
        if (topics.isEmpty()) {
            return List.of();
        }
        Map<String, TopicDescription> described = await(admin.describeTopics(topics).allTopicNames(), "describing topics");
        return described.values().stream()
            .flatMap(d -> d.partitions().stream().map(p -> new TopicPartition(d.name(), p.partition())))
            .sorted(SourceOffset.ORDER).collect(Collectors.toList());
    }

    /** Each partition's end (the last stable offset under read_committed, as consumers see it). */
    Map<TopicPartition, Long> latest(Collection<TopicPartition> partitions) {
        return offsets(partitions, OffsetSpec.latest());
    }

    /** Each partition's beginning (its log start offset). */
    Map<TopicPartition, Long> earliest(Collection<TopicPartition> partitions) {
        return offsets(partitions, OffsetSpec.earliest());
    }

    private Map<TopicPartition, Long> offsets(Collection<TopicPartition> partitions, OffsetSpec spec) {
        if (partitions.isEmpty()) {
            return Map.of();
        }
        Map<TopicPartition, OffsetSpec> request = new HashMap<>();
        partitions.forEach(tp -> request.put(tp, spec));
        Map<TopicPartition, Long> out = new HashMap<>();
        await(admin.listOffsets(request, new ListOffsetsOptions(isolation)).all(), "listing offsets")
            .forEach((tp, info) -> out.put(tp, info.offset()));
        return out;
    }

    private <T> T await(KafkaFuture<T> future, String what) {
        try {
            return future.get(timeoutMs, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new KafkaException("mm2spec-mirror source: interrupted while " + what, e);
        } catch (ExecutionException e) {
            throw new KafkaException("mm2spec-mirror source: " + what + " on the source cluster failed: " + e.getCause(),
                                     e.getCause());
        } catch (TimeoutException e) {
            throw new KafkaException("mm2spec-mirror source: " + what + " on the source cluster took more than "
                                     + timeoutMs + " ms", e);
        }
    }

    @Override
    public void close() {
        admin.close(java.time.Duration.ofSeconds(2));
    }
}
