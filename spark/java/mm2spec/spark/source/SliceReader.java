package mm2spec.spark.source;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.unsafe.types.UTF8String;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads one slice's ranges with the slice's long-lived consumer. Rows come out in offset order per
 * source partition, a partition's rows grouped for each poll (the writer keeps one write per
 * partition however often a partition comes back). A partition is done when the consumer's position
 * reaches the range's end, so transaction markers and compacted gaps end a range too; records fetched
 * past the end stay with the consumer for the next batch, and a finished partition is paused so the
 * consumer fetches only what the batch still needs.
 */
final class SliceReader implements PartitionReader<InternalRow> {
    private static final Logger LOG = LoggerFactory.getLogger(SliceReader.class);
    /** One poll's wait; the task's overall wait for a silent partition is the input's pollTimeoutMs. */
    private static final Duration POLL = Duration.ofMillis(200);

    private final SliceInput input;
    private final SliceConsumers.Slot slot;
    private final KafkaConsumer<byte[], byte[]> consumer;
    /** The partitions still to read and the end of their range. */
    private final Map<TopicPartition, Long> todo = new HashMap<>();
    private final Map<TopicPartition, Long> from = new HashMap<>();
    private final Map<TopicPartition, UTF8String> topicNames = new HashMap<>();
    private Iterator<ConsumerRecord<byte[], byte[]>> chunk = Collections.emptyIterator();
    private InternalRow current;
    private boolean healthy = true;
    private long lastProgress = System.currentTimeMillis();

    SliceReader(SliceInput input) {
        this.input = input;
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

    /** Assigns the slice, positions each partition with work at its range's start (no seek where the
     *  last batch ended there) and takes the records already fetched for this range. */
    private void prepare() {
        Set<TopicPartition> slice = new HashSet<>();
        List<ConsumerRecord<byte[], byte[]>> first = new ArrayList<>();
        for (SliceInput.Range range : input.ranges) {
            TopicPartition tp = new TopicPartition(range.topic, range.partition);
            slice.add(tp);
            if (range.until > range.from) {
                todo.put(tp, range.until);
                from.put(tp, range.from);
            }
        }
        slot.at.keySet().retainAll(slice);
        slot.pending.keySet().retainAll(slice);
        // A partition without a position must not be assigned unless it is read now: the consumer
        // would try to reset it (auto.offset.reset=none fails). Positioned ones stay assigned.
        Set<TopicPartition> assignment = new HashSet<>(todo.keySet());
        assignment.addAll(slot.at.keySet());
        if (!consumer.assignment().equals(assignment)) {
            consumer.assign(assignment);
        }
        List<TopicPartition> idle = new ArrayList<>(assignment);
        idle.removeAll(todo.keySet());
        consumer.pause(idle);
        consumer.resume(todo.keySet());
        for (Map.Entry<TopicPartition, Long> entry : todo.entrySet()) {
            TopicPartition tp = entry.getKey();
            long start = from.get(tp);
            Long at = slot.at.remove(tp);
            ArrayDeque<ConsumerRecord<byte[], byte[]>> kept = slot.pending.get(tp);
            if (at == null || at != start) {
                slot.pending.remove(tp);
                consumer.seek(tp, start);
            } else if (kept != null) {
                while (!kept.isEmpty() && kept.peekFirst().offset() < entry.getValue()) {
                    first.add(kept.pollFirst());
                }
            }
        }
        chunk = first.iterator();
        settle();
    }

    @Override
    public boolean next() {
        try {
            while (!chunk.hasNext()) {
                if (todo.isEmpty()) {
                    return false;
                }
                poll();
            }
            current = row(chunk.next(), topicNames);
            return true;
        } catch (RuntimeException e) {
            healthy = false;
            throw e;
        }
    }

    @Override
    public InternalRow get() {
        return current;
    }

    /** One poll: records in a range go to the chunk (grouped per partition), records past it wait for
     *  the next batch; then finished partitions are paused. */
    private void poll() {
        ConsumerRecords<byte[], byte[]> records;
        try {
            records = consumer.poll(POLL);
        } catch (OffsetOutOfRangeException e) {
            for (TopicPartition tp : e.partitions()) {
                // MM2 carries on past records the source deleted before they were mirrored (as Spark's
                // source does with failOnDataLoss=false): read from the log's start.
                LOG.warn("mm2spec-mirror source: {} has no offset {} any more (deleted by retention or the topic was "
                         + "recreated); records were lost, reading from the log's start", tp, e.offsetOutOfRangePartitions().get(tp));
                consumer.seekToBeginning(List.of(tp));
            }
            return;
        }
        List<ConsumerRecord<byte[], byte[]>> batch = new ArrayList<>(records.count());
        for (TopicPartition tp : records.partitions()) {
            Long until = todo.get(tp);
            for (ConsumerRecord<byte[], byte[]> record : records.records(tp)) {
                if (until != null && record.offset() < until) {
                    batch.add(record);
                } else {
                    slot.pending.computeIfAbsent(tp, k -> new ArrayDeque<>()).add(record);
                }
            }
        }
        chunk = batch.iterator();
        if (!batch.isEmpty()) {
            lastProgress = System.currentTimeMillis();
        }
        settle();
        if (!todo.isEmpty() && System.currentTimeMillis() - lastProgress > input.pollTimeoutMs) {
            stalled();
        }
    }

    /** Marks the partitions whose range is read (position at its end, or records past it kept). */
    private void settle() {
        List<TopicPartition> finished = new ArrayList<>();
        for (Map.Entry<TopicPartition, Long> entry : todo.entrySet()) {
            TopicPartition tp = entry.getKey();
            ArrayDeque<ConsumerRecord<byte[], byte[]>> kept = slot.pending.get(tp);
            if ((kept != null && !kept.isEmpty()) || consumer.position(tp) >= entry.getValue()) {
                finished.add(tp);
            }
        }
        for (TopicPartition tp : finished) {
            slot.at.put(tp, todo.remove(tp));
        }
        if (!finished.isEmpty()) {
            consumer.pause(finished);
            lastProgress = System.currentTimeMillis();
        }
    }

    /** No record for pollTimeoutMs: partitions whose log now ends below the range (recreated,
     *  truncated) are done with a warning, as Spark's source does with failOnDataLoss=false; if none
     *  is, the source does not answer and the task fails (the job restarts the query). */
    private void stalled() {
        Map<TopicPartition, Long> ends = consumer.endOffsets(todo.keySet(), Duration.ofMillis(input.pollTimeoutMs));
        List<TopicPartition> gone = new ArrayList<>();
        for (Map.Entry<TopicPartition, Long> entry : todo.entrySet()) {
            Long end = ends.get(entry.getKey());
            if (end != null && end <= consumer.position(entry.getKey())) {
                gone.add(entry.getKey());
            }
        }
        if (gone.isEmpty()) {
            throw new KafkaException("mm2spec-mirror source: no records within " + input.pollTimeoutMs + " ms from "
                                     + todo.keySet() + " although the source's end offsets are past the consumer's position");
        }
        for (TopicPartition tp : gone) {
            LOG.warn("mm2spec-mirror source: {} ends at {} now, below the batch's end {}; records may be lost",
                     tp, ends.get(tp), todo.get(tp));
            slot.at.put(tp, todo.remove(tp));
        }
        consumer.pause(gone);
        lastProgress = System.currentTimeMillis();
    }

    /** The record as a row of {@link MirrorSource#SCHEMA} ({@code topicNames}: the reader's cache). */
    static InternalRow row(ConsumerRecord<byte[], byte[]> record, Map<TopicPartition, UTF8String> topicNames) {
        TopicPartition tp = new TopicPartition(record.topic(), record.partition());
        UTF8String topic = topicNames.computeIfAbsent(tp, t -> UTF8String.fromString(t.topic()));
        GenericArrayData headers = null;
        Header[] array = record.headers().toArray();
        if (array.length > 0) {
            Object[] values = new Object[array.length];
            for (int i = 0; i < array.length; i++) {
                values[i] = new GenericInternalRow(new Object[] {UTF8String.fromString(array[i].key()), array[i].value()});
            }
            headers = new GenericArrayData(values);
        }
        return new GenericInternalRow(new Object[] {
            record.key(), record.value(), topic, record.partition(), record.offset(),
            record.timestamp() * 1000L, record.timestampType().id, headers});
    }

    @Override
    public void close() {
        if (!healthy) {
            // The consumer's state is unknown (an error, an interrupt): the slice's next task starts afresh.
            slot.at.clear();
            slot.pending.clear();
        }
        SliceConsumers.release(slot, healthy);
    }
}
