package org.apache.kafka.connect.mirror;

import java.util.concurrent.Semaphore;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * MirrorMaker 2's own offset-sync rule and OffsetSync record layout (connect-mirror at
 * KAFKA_VERSION), reached from this package because MM2 keeps them package-private: what
 * mm2spec.spark.SyncEmitterTest compares the Spark writer's SyncEmitter with.
 */
public final class Mm2OffsetSyncs {
    private static final TopicPartition PARTITION = new TopicPartition("orders", 0);
    private final OffsetSyncWriter writer;

    public Mm2OffsetSyncs(long offsetLagMax) {
        // No producer: the syncs are taken from the writer's queue, never sent.
        writer = new OffsetSyncWriter(null, "mm2-offset-syncs.target.internal", new Semaphore(Integer.MAX_VALUE), offsetLagMax);
    }

    /** MirrorSourceTask.commitRecord for one record: the sync MM2 queues to send at once, or null
     *  (the record's sync is then only the delayed one). */
    public long[] record(long upstream, long downstream) {
        writer.maybeQueueOffsetSyncs(PARTITION, upstream, downstream);
        OffsetSync sync = writer.getPendingOffsetSyncs().remove(PARTITION);
        return sync == null ? null : new long[] {sync.upstreamOffset(), sync.downstreamOffset()};
    }

    public static byte[] key(String topic, int partition) {
        return new OffsetSync(new TopicPartition(topic, partition), 0, 0).recordKey();
    }

    public static byte[] value(long upstream, long downstream) {
        return new OffsetSync(PARTITION, upstream, downstream).recordValue();
    }

    /** MM2's reading of an offset-syncs record: {topic, partition, upstream, downstream}. */
    public static Object[] read(byte[] key, byte[] value) {
        OffsetSync sync = OffsetSync.deserializeRecord(new ConsumerRecord<>("mm2-offset-syncs.target.internal", 0, 0L, key, value));
        return new Object[] {sync.topicPartition().topic(), sync.topicPartition().partition(), sync.upstreamOffset(),
                             sync.downstreamOffset()};
    }
}
