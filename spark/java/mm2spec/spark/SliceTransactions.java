package mm2spec.spark;

import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * Exactly-once in Real-time Mode: a Real-time task runs for a whole batch (60 s by default), so one
 * transaction per source partition per batch, as in micro-batch mode, would hide its records from
 * {@code read_committed} consumers for that long. Instead the task's slice has one transactional
 * producer ({@code <prefix>rt-<slice>}) and commits a transaction every {@link #COMMIT_INTERVAL_MS}
 * (from the task's thread while records come, from its timer when they stop), holding its records
 * and, for each target partition written, the progress the micro-batch writer keeps too: the next
 * source offset, with the last downstream offset as metadata, in the flow's progress group, committed
 * with the records ({@code sendOffsetsToTransaction}). At the task's start the progress of every
 * partition is read back (requireStable, after initTransactions has fenced and aborted whatever an
 * earlier attempt with this id left open) and rows below it are skipped: a replayed batch is read, not
 * written twice. Offset syncs are written after each commit, for committed records only. A producer
 * that stalls on a target partition is replaced by a new holder of the id and the transaction sent
 * again ({@link GuardedSends}).
 */
final class SliceTransactions {
    /** How long a record may wait in an open transaction (read_committed consumers see it after). */
    static final long COMMIT_INTERVAL_MS = 100;

    private final WriterSettings settings;
    private final String transactionalId;
    /** The slice's transactional producer, replaced by a new holder of the id if it stalls on a partition. */
    private final GuardedSends sends;
    private final SyncWriter syncs;
    private final Map<TopicPartition, Long> progress = new HashMap<>();
    private final Set<PartitionWrite> touched = new LinkedHashSet<>();
    private boolean open;
    private long openedAt;
    private boolean failed;

    SliceTransactions(WriterSettings settings, long slice, SyncWriter syncs) {
        this(settings, slice, syncs, null);
    }

    /** {@code committed}: the progress group's offsets as read back, or null to read them now (after
     *  the producer's initTransactions); spark/java-tests give them instead of a cluster. */
    SliceTransactions(WriterSettings settings, long slice, SyncWriter syncs, Map<TopicPartition, Long> committed) {
        this.settings = settings;
        this.transactionalId = settings.sliceTransactionalId(slice);
        this.syncs = syncs;
        this.sends = GuardedSends.transactional(settings, transactionalId, Producers.transactional(settings, transactionalId));
        if (committed == null) {
            readProgress();
        } else {
            progress.putAll(committed);
        }
    }

    private void readProgress() {
        String group = settings.progressGroup();
        try {
            Map<TopicPartition, OffsetAndMetadata> committed = Producers.admin(settings)
                .listConsumerGroupOffsets(group, new ListConsumerGroupOffsetsOptions().requireStable(true))
                .partitionsToOffsetAndMetadata()
                .get(settings.progressTimeoutMs(), TimeUnit.MILLISECONDS);
            committed.forEach((tp, offset) -> {
                if (offset != null) {
                    progress.put(tp, offset.offset());
                }
            });
        } catch (ExecutionException | TimeoutException e) {
            throw new KafkaException("reading the progress of group " + group + " on the target cluster failed: " + e, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new KafkaException("interrupted while reading the progress of group " + group, e);
        }
    }

    /** The slice's current transactional producer. */
    synchronized Producer<byte[], byte[]> producer() {
        return sends.producer();
    }

    /** Writes a row unless it is below its partition's committed progress (a replay). */
    synchronized void offer(PartitionWrite write, long offset, Long timestamp, byte[] key, byte[] value, RecordHeaders headers) {
        Long next = progress.get(new TopicPartition(write.targetTopic, write.partition));
        if (next != null && offset < next) {
            write.skipped++;
            return;
        }
        if (!open) {
            sends.producer().beginTransaction();
            open = true;
            openedAt = System.currentTimeMillis();
        }
        sends.send(write, offset, timestamp, key, value, headers);
        touched.add(write);
        if (System.currentTimeMillis() - openedAt >= COMMIT_INTERVAL_MS || sends.keptBytes() >= GuardedSends.KEPT_BYTES_MAX) {
            commit();
        }
    }

    /** The timer's turn: commits a transaction that has been open for the interval. */
    synchronized void tick() {
        if (open && !failed && System.currentTimeMillis() - openedAt >= COMMIT_INTERVAL_MS) {
            commit();
        }
    }

    /** Commits the open transaction, if any (the task's end). */
    synchronized void finish() {
        if (open) {
            commit();
        }
    }

    private void commit() {
        try {
            sends.flush();
            Producer<byte[], byte[]> producer = sends.producer();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (PartitionWrite write : touched) {
                WriteTask.check(write);
                offsets.put(new TopicPartition(write.targetTopic, write.partition),
                            new OffsetAndMetadata(write.lastUpstream + 1, Long.toString(write.lastDownstream())));
            }
            producer.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(settings.progressGroup()));
            producer.commitTransaction();
            open = false;
            sends.committed();
            offsets.forEach((tp, offset) -> progress.put(tp, offset.offset()));
            syncs.harvest(touched);  // committed records only
            touched.clear();
        } catch (RuntimeException e) {
            failed = true;
            throw e;
        }
    }

    /** After a failure: aborts if it can, and drops the producer (the next initTransactions fences it). */
    synchronized void abandon() {
        try {
            if (open) {
                sends.producer().abortTransaction();
            }
        } catch (KafkaException ignored) {
            // fenced or in an unknown state: the next initTransactions aborts it
        }
        Producers.discard(settings, transactionalId);
    }

    boolean failed() {
        return failed;
    }

    /** Producers replaced because they stalled on a target partition ({@link GuardedSends}). */
    int renewals() {
        return sends.renewals();
    }
}
