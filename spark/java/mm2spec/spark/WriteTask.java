package mm2spec.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One Spark task of a micro-batch: writes its rows (one source partition, in offset order, as
 * Spark's Kafka source hands them out) to the target and returns one JSON line per source
 * partition ({@link PartitionWrite}) plus one for the task (its time and producer metrics).
 * Rows are Spark's internal rows, read field by field: nothing is converted for Python.
 */
final class WriteTask implements FlatMapFunction<Iterator<InternalRow>, String> {
    private static final long serialVersionUID = 1L;

    /** Column order of the rows, as {@link MirrorWriter#COLUMNS} selects them. */
    static final int TOPIC = 0, PARTITION = 1, OFFSET = 2, TIMESTAMP = 3, KEY = 4, VALUE = 5, HEADERS = 6;
    /** The producer metrics each task reports: the profile of the write (spark/README.md). */
    private static final String[] PRODUCER_METRICS = {"records-per-request-avg", "bufferpool-wait-ratio",
        "batch-size-avg", "request-latency-avg", "record-queue-time-avg", "io-wait-ratio", "outgoing-byte-rate"};

    private final WriterSettings settings;
    /** Target topics new to this job's writers since it started: learnt in bulk before the write. */
    private final ArrayList<String> newTopics;
    /** Producers this task replaced because they stalled on a target partition ({@link GuardedSends}). */
    private transient int renewals;

    WriteTask(WriterSettings settings, List<String> newTopics) {
        this.settings = settings;
        this.newTopics = new ArrayList<>(newTopics);
    }

    @Override
    public Iterator<String> call(Iterator<InternalRow> rows) {
        long began = System.nanoTime();
        List<PartitionWrite> writes = new ArrayList<>();
        Map<String, Double> producerMetrics = settings.exactlyOnce() ? exactlyOnce(rows, writes) : atLeastOnce(rows, writes);
        List<String> out = new ArrayList<>(writes.size() + 1);
        long records = 0;
        for (PartitionWrite write : writes) {
            out.add(write.toJson());
            records += write.records;
        }
        out.add("{\"kind\":\"task\",\"records\":" + records + ",\"writeMs\":" + (System.nanoTime() - began) / 1_000_000
                + ",\"producerRenewals\":" + renewals + ",\"producer\":" + Json.numbers(producerMetrics) + "}");
        return out.iterator();
    }

    // ------------------------------------------------------------------ at-least-once

    private Map<String, Double> atLeastOnce(Iterator<InternalRow> rows, List<PartitionWrite> writes) {
        GuardedSends sends = GuardedSends.atLeastOnce(settings, Producers.borrow(settings));
        boolean healthy = false;
        try {
            Producers.warm(sends.producer(), newTopics);
            Cursor cursor = new Cursor(settings.targetPrefix());
            while (rows.hasNext()) {
                InternalRow row = rows.next();
                PartitionWrite write = cursor.partitionOf(row, writes);
                send(sends, write, row);
                if (write.failure() != null) {
                    break;
                }
            }
            sends.flush();
            for (PartitionWrite write : writes) {
                check(write);
            }
            healthy = true;
            return metrics(sends.producer());
        } finally {
            renewals += sends.renewals();
            Producers.giveBack(settings, sends.producer(), healthy);
        }
    }

    // ------------------------------------------------------------------ exactly-once

    /**
     * mm2spark/eos.py's protocol, streamed: per source partition one transaction of its
     * transactional producer, holding the records at or past the partition's committed progress
     * and the new progress (next source offset, downstream offset of the last record as metadata)
     * committed to the progress group with sendOffsetsToTransaction.
     */
    private Map<String, Double> exactlyOnce(Iterator<InternalRow> rows, List<PartitionWrite> writes) {
        Cursor cursor = new Cursor(settings.targetPrefix());
        Transaction transaction = null;
        Map<String, Double> producerMetrics = new LinkedHashMap<>();
        try {
            while (rows.hasNext()) {
                InternalRow row = rows.next();
                PartitionWrite write = cursor.partitionOf(row, writes);
                if (transaction == null || transaction.write != write) {
                    if (transaction != null) {
                        transaction.commit();
                        renewals += transaction.renewals();
                        transaction = null;  // counted
                    }
                    transaction = new Transaction(write);
                }
                transaction.offer(row);
            }
            if (transaction != null) {
                transaction.commit();
                producerMetrics = transaction.producer() == null ? producerMetrics : metrics(transaction.producer());
            }
            return producerMetrics;
        } catch (RuntimeException failure) {
            if (transaction != null) {
                transaction.abandon();
            }
            throw failure;
        } finally {
            if (transaction != null) {
                renewals += transaction.renewals();
            }
        }
    }

    /** One source partition's transactions in this batch: one, unless its records outgrow what a
     *  transaction keeps for a resend ({@link GuardedSends#KEPT_BYTES_MAX}: then one per that many bytes). */
    private final class Transaction {
        final PartitionWrite write;
        final String transactionalId;
        final long next;
        final long committedDownstream;
        /** The producer before the first record; {@link #sends} holds the one sending since. */
        private Producer<byte[], byte[]> initial;
        GuardedSends sends;
        /** Begun and not yet committed: what {@link #abandon} aborts. */
        boolean open;
        boolean committedAny;

        Transaction(PartitionWrite write) {
            this.write = write;
            this.transactionalId = settings.transactionalId(write.topic, write.partition);
            OffsetAndMetadata progress = Producers.committedHere(settings, transactionalId);
            if (progress == null) {
                // The id first: its initTransactions fences an earlier holder (a killed driver's) and
                // ends the transaction it left, whose pending progress the read below (requireStable)
                // would otherwise wait on until the broker timed it out.
                initial = Producers.transactional(settings, transactionalId);
                progress = readProgress(new TopicPartition(write.targetTopic, write.partition));
            }
            this.next = progress == null ? -1 : progress.offset();
            this.committedDownstream = progress == null ? -1 : downstreamOf(progress);
        }

        Producer<byte[], byte[]> producer() {
            return sends != null ? sends.producer() : initial;
        }

        int renewals() {
            return sends != null ? sends.renewals() : 0;
        }

        void offer(InternalRow row) {
            if (row.getLong(OFFSET) < next) {
                write.skipped++;  // a replayed batch: committed before the crash
                return;
            }
            if (!open) {
                if (sends == null) {
                    Producer<byte[], byte[]> producer = initial != null ? initial : Producers.transactional(settings, transactionalId);
                    sends = GuardedSends.transactional(settings, transactionalId, producer);
                }
                sends.producer().beginTransaction();
                open = true;
            }
            send(sends, write, row);
            if (sends.keptBytes() >= GuardedSends.KEPT_BYTES_MAX) {
                commit();  // the next record begins the next transaction
            }
        }

        void commit() {
            if (!open) {
                if (!committedAny && write.skipped > 0 && committedDownstream >= 0) {
                    // The offset sync a crash may have lost is written now.
                    write.alreadyMirrored(next - 1, committedDownstream);
                }
                return;
            }
            sends.flush();
            check(write);
            Producer<byte[], byte[]> producer = sends.producer();
            TopicPartition target = new TopicPartition(write.targetTopic, write.partition);
            OffsetAndMetadata progress = new OffsetAndMetadata(write.lastUpstream + 1, Long.toString(write.lastDownstream()));
            producer.sendOffsetsToTransaction(Map.of(target, progress), new ConsumerGroupMetadata(settings.progressGroup()));
            producer.commitTransaction();
            open = false;
            committedAny = true;
            sends.committed();
            Producers.committed(settings, transactionalId, progress);
        }

        /** After a failure: abort if possible, and start the next batch with a fresh producer (its
         *  initTransactions aborts whatever this one left open). A transaction already committed is
         *  left alone (the failure came after it: abortTransaction would throw IllegalStateException
         *  from its READY state and hide the failure). */
        void abandon() {
            Producer<byte[], byte[]> producer = producer();
            if (producer == null || !open) {
                return;
            }
            try {
                producer.abortTransaction();
            } catch (KafkaException ignored) {
                // fenced or in an unknown state: the next initTransactions aborts it
            }
            Producers.discard(settings, transactionalId);
        }
    }

    private OffsetAndMetadata readProgress(TopicPartition target) {
        String group = settings.progressGroup();
        try {
            Map<TopicPartition, OffsetAndMetadata> committed = Producers.admin(settings)
                .listConsumerGroupOffsets(Map.of(group, new ListConsumerGroupOffsetsSpec().topicPartitions(List.of(target))),
                                          new ListConsumerGroupOffsetsOptions().requireStable(true))
                .partitionsToOffsetAndMetadata(group)
                .get(settings.progressTimeoutMs(), java.util.concurrent.TimeUnit.MILLISECONDS);
            return committed.get(target);
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
            throw new KafkaException("reading the progress of " + target + " from group " + group
                                     + " on the target cluster failed: " + e, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new KafkaException("interrupted while reading the progress of " + target, e);
        }
    }

    private static long downstreamOf(OffsetAndMetadata progress) {
        try {
            return Long.parseLong(progress.metadata());
        } catch (NumberFormatException | NullPointerException e) {
            return -1;
        }
    }

    // ------------------------------------------------------------------ both

    /** Tracks which source partition the rows belong to. They arrive in offset order per partition,
     *  grouped in runs: one run per partition from Spark's Kafka source, one per poll from the mirror
     *  source (a slice's partitions interleave), so a partition that comes back continues its write. */
    private static final class Cursor {
        private final String targetPrefix;
        private final Map<String, PartitionWrite> byPartition = new HashMap<>();
        private UTF8String topic;
        private int partition = -1;
        private PartitionWrite current;

        Cursor(String targetPrefix) {
            this.targetPrefix = targetPrefix;
        }

        PartitionWrite partitionOf(InternalRow row, List<PartitionWrite> writes) {
            UTF8String rowTopic = row.getUTF8String(TOPIC);
            int rowPartition = row.getInt(PARTITION);
            if (current == null || rowPartition != partition || !rowTopic.equals(topic)) {
                topic = rowTopic.clone();  // the row's bytes are reused for the next row
                partition = rowPartition;
                String name = topic.toString();
                current = byPartition.computeIfAbsent(name + "\u0000" + partition, k -> {
                    PartitionWrite write = new PartitionWrite(name, rowPartition, targetPrefix + name);
                    writes.add(write);
                    return write;
                });
            }
            return current;
        }
    }

    /** Sends one row to its source partition's target partition ({@link GuardedSends#send}). */
    private static void send(GuardedSends sends, PartitionWrite write, InternalRow row) {
        byte[] key = row.isNullAt(KEY) ? null : row.getBinary(KEY);
        byte[] value = row.isNullAt(VALUE) ? null : row.getBinary(VALUE);
        Long timestamp = row.isNullAt(TIMESTAMP) ? null : Math.floorDiv(row.getLong(TIMESTAMP), 1000L);
        sends.send(write, row.getLong(OFFSET), timestamp, key, value, headers(row));
    }

    private static RecordHeaders headers(InternalRow row) {
        if (row.isNullAt(HEADERS)) {
            return null;
        }
        ArrayData array = row.getArray(HEADERS);
        Header[] headers = new Header[array.numElements()];
        for (int i = 0; i < headers.length; i++) {
            InternalRow header = array.getStruct(i, 2);
            headers[i] = new RecordHeader(header.getUTF8String(0).toString(), header.isNullAt(1) ? null : header.getBinary(1));
        }
        return new RecordHeaders(headers);
    }

    static void check(PartitionWrite write) {
        if (!write.complete()) {
            Exception failure = write.failure();
            throw new KafkaException("mirroring " + write.topic + "-" + write.partition + " to " + write.targetTopic
                                     + " on the target cluster failed: "
                                     + (failure != null ? failure.toString() : "records not acknowledged"), failure);
        }
    }

    static Map<String, Double> metrics(Producer<byte[], byte[]> producer) {
        Map<String, Double> out = new LinkedHashMap<>();
        for (Map.Entry<MetricName, ? extends Metric> entry : producer.metrics().entrySet()) {
            MetricName name = entry.getKey();
            if ("producer-metrics".equals(name.group()) && List.of(PRODUCER_METRICS).contains(name.name())
                    && entry.getValue().metricValue() instanceof Number number) {
                out.put(name.name(), number.doubleValue());
            }
        }
        return out;
    }
}
