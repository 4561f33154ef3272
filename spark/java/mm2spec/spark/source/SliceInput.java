package mm2spec.spark.source;

import java.io.Serializable;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.connector.read.InputPartition;

/** One input partition of a micro-batch: a slice of the source's partitions, each with the range
 *  of offsets [from, until) to read (empty ranges included, so the slice's consumer keeps its
 *  assignment from batch to batch). */
final class SliceInput implements InputPartition {
    private static final long serialVersionUID = 1L;

    /** Offsets [from, until) of one source partition. */
    static final class Range implements Serializable {
        private static final long serialVersionUID = 1L;
        final String topic;
        final int partition;
        final long from;
        final long until;

        Range(String topic, int partition, long from, long until) {
            this.topic = topic;
            this.partition = partition;
            this.from = from;
            this.until = until;
        }
    }

    final String streamId;
    final int slot;
    final List<Range> ranges;
    final Map<String, String> kafka;
    final long pollTimeoutMs;
    /** Real-time Mode: the ranges are open ({@code until} is Long.MAX_VALUE) and the task reads until
     *  its batch ends; {@code realTimeKey} names the flow for {@link RealTime}. */
    final boolean realTime;
    final String realTimeKey;
    /** Real-time Mode on a cluster: the flow's signal folder ({@link BatchSignals}); null in local mode. */
    final String signalDir;
    private final String location;

    SliceInput(String streamId, int slot, List<Range> ranges, Map<String, String> kafka, long pollTimeoutMs, String location) {
        this(streamId, slot, ranges, kafka, pollTimeoutMs, location, false, null, null);
    }

    SliceInput(String streamId, int slot, List<Range> ranges, Map<String, String> kafka, long pollTimeoutMs, String location,
               boolean realTime, String realTimeKey, String signalDir) {
        this.streamId = streamId;
        this.slot = slot;
        this.ranges = List.copyOf(ranges);
        this.kafka = kafka;
        this.pollTimeoutMs = pollTimeoutMs;
        this.location = location;
        this.realTime = realTime;
        this.realTimeKey = realTimeKey;
        this.signalDir = signalDir;
    }

    /** The key of the slice's consumer in its executor's {@link SliceConsumers}. */
    String consumerKey() {
        return streamId + "/" + slot;
    }

    @Override
    public String[] preferredLocations() {
        return location == null ? new String[0] : new String[] {location};
    }
}
