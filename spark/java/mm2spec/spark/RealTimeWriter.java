package mm2spec.spark;

import java.sql.Timestamp;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.ForeachWriter;
import org.apache.spark.sql.Row;

import mm2spec.spark.source.SliceTopics;

/**
 * The writer in Spark's Real-time Mode ({@code spark.mode: realtime}): Real-time Mode accepts a
 * {@link ForeachWriter} and not {@code foreachBatch}, so each long-running task writes its rows here
 * one by one as they arrive. At-least-once: with one idempotent producer (as {@link WriteTask} does
 * in a micro-batch: same records, same callbacks, same per-partition results). Exactly-once: through
 * the slice's transactions ({@link SliceTransactions}), committed every 100 ms. When the task ends (its
 * batch's deadline, or the driver ended the batch) it flushes, checks every record was acknowledged
 * and hands its result lines to the driver through {@link WriteResults}; a failed send fails the
 * task, and the job restarts the query from the last committed batch (duplicates, no loss).
 * Offset syncs cannot wait for the batch's end (30 s by default): the task writes them itself every
 * {@link #SYNC_INTERVAL_MS} from the records acknowledged so far ({@link SyncWriter}, MM2's rule).
 */
public final class RealTimeWriter extends ForeachWriter<Row> {
    private static final long serialVersionUID = 1L;
    /** How often a task writes the offset syncs of what was acknowledged since the last time. */
    static final long SYNC_INTERVAL_MS = 500;
    private static final Duration SYNC_FLUSH_TIMEOUT = Duration.ofSeconds(30);

    private final WriterSettings settings;
    private final WriteResults results;
    /** At-least-once: the task's producer, replaced if it stalls on a target partition. */
    private transient GuardedSends sends;
    private transient Map<String, PartitionWrite> byPartition;
    private transient List<PartitionWrite> writes;
    private transient long began;
    private transient SyncWriter syncs;
    private transient ScheduledExecutorService syncTimer;
    private transient SliceTransactions transactions;
    private transient boolean warmed;

    private RealTimeWriter(WriterSettings settings, WriteResults results) {
        this.settings = settings;
        this.results = results;
    }

    /** A writer for one flow's query; {@link #results} collects its tasks' lines on the driver. */
    public static RealTimeWriter create(SparkContext context, Map<String, String> settings, String name) {
        WriterSettings parsed = new WriterSettings(settings);
        WriteResults results = new WriteResults();
        context.register(results, name);
        return new RealTimeWriter(parsed, results);
    }

    public WriteResults results() {
        return results;
    }

    @Override
    public boolean open(long partitionId, long epochId) {
        began = System.nanoTime();
        byPartition = new HashMap<>();
        writes = new CopyOnWriteArrayList<>();
        syncs = new SyncWriter(settings);
        if (settings.exactlyOnce()) {
            transactions = new SliceTransactions(settings, partitionId, syncs);
        } else {
            sends = GuardedSends.atLeastOnce(settings, Producers.borrow(settings));
        }
        syncTimer = Executors.newSingleThreadScheduledExecutor(runnable -> {
            Thread thread = new Thread(runnable, "mm2spec-offset-syncs-" + partitionId);
            thread.setDaemon(true);
            return thread;
        });
        if (transactions != null) {
            long every = SliceTransactions.COMMIT_INTERVAL_MS / 2;
            syncTimer.scheduleWithFixedDelay(this::tick, every, every, TimeUnit.MILLISECONDS);
        } else {
            // The timer also looks for a partition the producer stalled on while no record comes to look.
            syncTimer.scheduleWithFixedDelay(() -> {
                syncs.harvest(writes);
                sends.checkQuietly();
            }, SYNC_INTERVAL_MS, SYNC_INTERVAL_MS, TimeUnit.MILLISECONDS);
        }
        return true;
    }

    @Override
    public void process(Row row) {
        if (!warmed) {
            warmed = true;
            warm();
        }
        String topic = row.getString(WriteTask.TOPIC);
        int partition = row.getInt(WriteTask.PARTITION);
        PartitionWrite write = byPartition.computeIfAbsent(topic + "\u0000" + partition, k -> {
            PartitionWrite created = new PartitionWrite(topic, partition, settings.targetPrefix() + topic);
            writes.add(created);
            return created;
        });
        if (write.failure() != null) {
            WriteTask.check(write);  // throws: the task fails and the query restarts from its last batch
        }
        if (transactions != null && transactions.failed()) {
            throw new KafkaException("mm2spec writer: a transaction failed to commit; the query restarts from its last batch");
        }
        Timestamp timestamp = row.isNullAt(WriteTask.TIMESTAMP) ? null : row.getTimestamp(WriteTask.TIMESTAMP);
        Long millis = timestamp == null ? null : timestamp.getTime();
        if (transactions != null) {
            transactions.offer(write, row.getLong(WriteTask.OFFSET), millis, (byte[]) row.get(WriteTask.KEY),
                               (byte[]) row.get(WriteTask.VALUE), headers(row));
        } else {
            sends.send(write, row.getLong(WriteTask.OFFSET), millis, (byte[]) row.get(WriteTask.KEY),
                       (byte[]) row.get(WriteTask.VALUE), headers(row));
        }
    }

    /** Before the task's first send: its producer learns the metadata of every target topic of the
     *  slice in bulk ({@link Producers#warm}), not one round trip per new topic inside {@code send}.
     *  Called at the first row, when the task's reader has named its slice (the row came from it). */
    private void warm() {
        List<String> targets = new ArrayList<>();
        for (String topic : SliceTopics.current()) {
            targets.add(settings.targetPrefix() + topic);
        }
        Producers.warm(sends != null ? sends.producer() : transactions.producer(), targets);
    }

    /** The timer's turn in exactly-once: a transaction open for the interval is committed even when
     *  no record comes to do it; a failure there fails the task at its next record or its end. */
    private void tick() {
        try {
            transactions.tick();
        } catch (RuntimeException e) {
            // transactions.failed() is set: process() and close() report it
        }
    }

    private void closeTransactions(Throwable error) {
        syncTimer.shutdown();
        awaitTimer();
        boolean healthy = false;
        try {
            if (error != null || transactions.failed()) {
                if (error == null) {
                    throw new KafkaException("mm2spec writer: a transaction of " + writes.size() + " partition(s) failed to commit");
                }
                return;
            }
            transactions.finish();
            syncs.flush(SYNC_FLUSH_TIMEOUT);
            addResults();
            healthy = true;
        } finally {
            if (!healthy) {
                transactions.abandon();
            }
            transactions = null;
        }
    }

    /** The task's result lines for the driver: one per source partition, one for the task. */
    private void addResults() {
        long records = 0;
        for (PartitionWrite write : writes) {
            records += write.records;
            results.add(write.toJson());
        }
        Exception syncFailure = syncs.lastFailure();
        results.add("{\"kind\":\"task\",\"records\":" + records + ",\"writeMs\":" + (System.nanoTime() - began) / 1_000_000
                    + ",\"offsetSyncs\":" + syncs.written.get() + ",\"offsetSyncErrors\":" + syncs.failed.get()
                    + ",\"offsetSyncError\":" + (syncFailure == null ? "null" : Json.quote(syncFailure.toString()))
                    + ",\"producerRenewals\":" + (sends != null ? sends.renewals() : transactions.renewals())
                    + ",\"producer\":" + (sends == null ? "{}" : Json.numbers(WriteTask.metrics(sends.producer()))) + "}");
    }

    private void awaitTimer() {
        try {
            syncTimer.awaitTermination(SYNC_FLUSH_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static RecordHeaders headers(Row row) {
        if (row.isNullAt(WriteTask.HEADERS)) {
            return null;
        }
        List<Row> list = row.getList(WriteTask.HEADERS);
        Header[] headers = new Header[list.size()];
        for (int i = 0; i < headers.length; i++) {
            Row header = list.get(i);
            headers[i] = new RecordHeader(header.getString(0), header.isNullAt(1) ? null : (byte[]) header.get(1));
        }
        return new RecordHeaders(headers);
    }

    @Override
    public void close(Throwable error) {
        if (transactions != null) {
            closeTransactions(error);
            return;
        }
        if (sends == null) {
            return;
        }
        boolean healthy = false;
        try {
            syncTimer.shutdown();
            if (error != null) {
                return;
            }
            sends.flush();
            for (PartitionWrite write : writes) {
                WriteTask.check(write);
            }
            awaitTimer();
            syncs.harvest(writes);  // the last acknowledged records' syncs, before the batch commits
            syncs.flush(SYNC_FLUSH_TIMEOUT);
            addResults();
            healthy = true;
        } finally {
            Producers.giveBack(settings, sends.producer(), healthy);
            sends = null;
        }
    }
}
