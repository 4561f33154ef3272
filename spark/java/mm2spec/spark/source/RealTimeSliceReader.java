package mm2spec.spark.source;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead;
import org.apache.spark.unsafe.types.UTF8String;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads one slice in Real-time Mode: a long-running task that hands out each record as soon as its
 * consumer fetches it, until the batch's deadline (Spark's {@code nextWithTimeout}) or until the
 * driver ends the batch ({@link RealTime#endBatches}). Where it stopped, per partition, is
 * {@link #getOffset}: the next record it has not handed out, or the consumer's position when it has
 * handed out all it fetched (so transaction markers and compacted gaps move an idle partition on).
 * The slice's consumer and the records fetched but not handed out stay with the slice for the next
 * batch, which starts exactly there, as in micro-batch mode.
 */
final class RealTimeSliceReader implements SupportsRealTimeRead<InternalRow> {
    private static final Logger LOG = LoggerFactory.getLogger(RealTimeSliceReader.class);
    /** The longest single poll: how soon the reader sees that the driver ended the batch. */
    private static final long POLL_MS = 100;

    private final SliceInput input;
    /** The driver's end and cut signals where this JVM is not the driver's (a cluster). */
    private final BatchSignals.Watch signals;
    private final SliceConsumers.Slot slot;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final Map<TopicPartition, UTF8String> topicNames = new HashMap<>();
    /** Records fetched and not yet handed out, in fetch order (per partition in offset order). */
    private final ArrayDeque<ConsumerRecord<byte[], byte[]>> buffered = new ArrayDeque<>();
    private final Map<TopicPartition, Long> start = new HashMap<>();
    /** The next offset of each partition after the records handed out (absent: none handed out yet). */
    private final Map<TopicPartition, Long> handedOut = new HashMap<>();
    private InternalRow current;
    private SliceOffset offset;
    private boolean healthy = true;

    RealTimeSliceReader(SliceInput input) {
        this.input = input;
        this.signals = new BatchSignals.Watch(input.signalDir);
        this.slot = SliceConsumers.acquire(input);
        this.consumer = slot.consumer;
        try {
            prepare();
        } catch (RuntimeException e) {
            healthy = false;
            close();
            throw e;
        }
    }

    /** Assigns the whole slice; a partition continues where the slice's last task left it (no seek),
     *  or is sought to its start offset. */
    private void prepare() {
        Set<TopicPartition> slice = new HashSet<>();
        Set<String> topics = new LinkedHashSet<>();
        for (SliceInput.Range range : input.ranges) {
            TopicPartition tp = new TopicPartition(range.topic, range.partition);
            slice.add(tp);
            topics.add(range.topic);
            start.put(tp, range.from);
        }
        SliceTopics.set(new ArrayList<>(topics));
        slot.at.keySet().retainAll(slice);
        slot.pending.keySet().retainAll(slice);
        if (!consumer.assignment().equals(slice)) {
            consumer.assign(slice);
        }
        consumer.resume(slice);
        List<ConsumerRecord<byte[], byte[]>> kept = new ArrayList<>();
        for (Map.Entry<TopicPartition, Long> entry : start.entrySet()) {
            TopicPartition tp = entry.getKey();
            Long at = slot.at.remove(tp);
            ArrayDeque<ConsumerRecord<byte[], byte[]>> pending = slot.pending.remove(tp);
            if (at == null || at.longValue() != entry.getValue()) {
                consumer.seek(tp, entry.getValue());
            } else if (pending != null) {
                kept.addAll(pending);
            }
        }
        buffered.addAll(kept);
    }

    @Override
    public RecordStatus nextWithTimeout(Long startTimeMs, Long timeoutMs) {
        long deadline = startTimeMs + timeoutMs;
        try {
            // Ending is checked before the buffer: a batch that starts after a stop's endBatches must
            // hand out nothing, not even the records the last batch left buffered -- the stop kills it
            // uncommitted, so whatever it wrote would be written again at the next start.
            while (true) {
                if (RealTime.ending(input.realTimeKey) || signals.raised()) {
                    return RecordStatus.newStatusWithoutArrivalTime(false);
                }
                if (!buffered.isEmpty()) {
                    break;
                }
                long left = deadline - System.currentTimeMillis();
                if (left <= 0) {
                    return RecordStatus.newStatusWithoutArrivalTime(false);
                }
                poll(Math.min(left, POLL_MS));
            }
            ConsumerRecord<byte[], byte[]> record = buffered.pollFirst();
            handedOut.put(new TopicPartition(record.topic(), record.partition()), record.offset() + 1);
            current = SliceReader.row(record, topicNames);
            return RecordStatus.newStatusWithArrivalTimeMs(record.timestamp());
        } catch (RuntimeException e) {
            healthy = false;
            throw e;
        }
    }

    private void poll(long millis) {
        ConsumerRecords<byte[], byte[]> records;
        try {
            records = consumer.poll(Duration.ofMillis(millis));
        } catch (OffsetOutOfRangeException e) {
            for (TopicPartition tp : e.partitions()) {
                // As in micro-batch mode (SliceReader.poll): MM2 carries on past deleted records.
                LOG.warn("mm2spec-mirror source: {} has no offset {} any more (deleted by retention or the topic was "
                         + "recreated); records were lost, reading from the log's start", tp, e.offsetOutOfRangePartitions().get(tp));
                consumer.seekToBeginning(List.of(tp));
            }
            return;
        }
        for (ConsumerRecord<byte[], byte[]> record : records) {
            buffered.add(record);
        }
    }

    @Override
    public boolean next() {
        RecordStatus status = nextWithTimeout(System.currentTimeMillis(), Long.MAX_VALUE / 4);
        return status.hasRecord();
    }

    @Override
    public InternalRow get() {
        return current;
    }

    /** Per partition of the slice, the next offset not handed out: the first buffered record's, or the
     *  consumer's position (past every fetched record, all handed out), or the start when the
     *  consumer has no position yet. Called once, when the task ends. */
    @Override
    public PartitionOffset getOffset() {
        if (offset == null) {
            Map<TopicPartition, Long> next = new HashMap<>();
            for (ConsumerRecord<byte[], byte[]> record : buffered) {
                next.putIfAbsent(new TopicPartition(record.topic(), record.partition()), record.offset());
            }
            for (Map.Entry<TopicPartition, Long> entry : start.entrySet()) {
                TopicPartition tp = entry.getKey();
                if (!next.containsKey(tp)) {
                    next.put(tp, positionOf(tp, handedOut.getOrDefault(tp, entry.getValue())));
                }
            }
            offset = new SliceOffset(next);
        }
        return offset;
    }

    /** The consumer's position, never below what was handed out; {@code otherwise} when it has none. */
    private long positionOf(TopicPartition tp, long otherwise) {
        try {
            return Math.max(otherwise, consumer.position(tp, Duration.ofMillis(POLL_MS)));
        } catch (RuntimeException e) {
            healthy = false;  // the next task seeks afresh
            return otherwise;
        }
    }

    @Override
    public void close() {
        if (healthy && offset != null) {
            // The next batch starts at this task's offsets: it finds its records here, unsought.
            Map<TopicPartition, ArrayDeque<ConsumerRecord<byte[], byte[]>>> pending = new HashMap<>();
            for (ConsumerRecord<byte[], byte[]> record : buffered) {
                pending.computeIfAbsent(new TopicPartition(record.topic(), record.partition()), k -> new ArrayDeque<>()).add(record);
            }
            slot.at.putAll(offset.next);
            slot.pending.putAll(pending);
        } else {
            slot.at.clear();
            slot.pending.clear();
        }
        SliceConsumers.release(slot, healthy);
    }

}
