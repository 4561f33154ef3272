package mm2spec.spark.source;

import java.util.Map;

import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;

/** Where one Real-time task left its slice: the next offset to read of each of its partitions. */
final class SliceOffset implements PartitionOffset {
    private static final long serialVersionUID = 1L;

    final Map<TopicPartition, Long> next;

    SliceOffset(Map<TopicPartition, Long> next) {
        this.next = Map.copyOf(next);
    }
}
