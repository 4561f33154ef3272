package mm2spec.spark.source;

import java.util.Collections;
import java.util.Comparator;
import java.util.Map;
import java.util.TreeMap;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.streaming.Offset;

/**
 * The next offset to read of every source partition, as JSON in Spark's Kafka source's format
 * ({@code {"orders":{"0":42,"1":7}}}, topics and partitions in order), so the job's checkpoint reader
 * and checkpoints written by Spark's own source work unchanged. -2 stands for a partition's
 * beginning and -1 for its end, in a {@code startingOffsets} value only.
 */
final class SourceOffset extends Offset {
    static final long EARLIEST = -2;
    static final long LATEST = -1;
    static final Comparator<TopicPartition> ORDER =
        Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);
    private static final ObjectMapper JSON = new ObjectMapper();

    final Map<TopicPartition, Long> offsets;

    SourceOffset(Map<TopicPartition, Long> offsets) {
        TreeMap<TopicPartition, Long> sorted = new TreeMap<>(ORDER);
        sorted.putAll(offsets);
        this.offsets = Collections.unmodifiableMap(sorted);
    }

    static TreeMap<TopicPartition, Long> sorted() {
        return new TreeMap<>(ORDER);
    }

    @Override
    public String json() {
        Map<String, Map<String, Long>> byTopic = new TreeMap<>();
        for (Map.Entry<TopicPartition, Long> entry : offsets.entrySet()) {
            byTopic.computeIfAbsent(entry.getKey().topic(), t -> new TreeMap<>(Comparator.comparingInt(Integer::parseInt)))
                   .put(Integer.toString(entry.getKey().partition()), entry.getValue());
        }
        try {
            return JSON.writeValueAsString(byTopic);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    static SourceOffset parse(String json) {
        Map<String, Map<String, Long>> byTopic;
        try {
            byTopic = JSON.readValue(json, new TypeReference<Map<String, Map<String, Long>>>() { });
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("expected offsets as {\"topic\":{\"0\":42}}, got " + json + ": "
                                               + e.getOriginalMessage(), e);
        }
        TreeMap<TopicPartition, Long> offsets = sorted();
        for (Map.Entry<String, Map<String, Long>> topic : byTopic.entrySet()) {
            for (Map.Entry<String, Long> partition : topic.getValue().entrySet()) {
                offsets.put(new TopicPartition(topic.getKey(), Integer.parseInt(partition.getKey())), partition.getValue());
            }
        }
        return new SourceOffset(offsets);
    }
}
