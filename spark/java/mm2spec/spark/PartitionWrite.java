package mm2spec.spark;

import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.RecordMetadata;

/**
 * What one task wrote of one source partition: counts, the source timestamps (for the replication
 * latency figure) and the exact upstream to downstream offset runs that the offset syncs need.
 *
 * <p>Runs are built from delivery callbacks, so they are exact without asking the target for its
 * end offsets: with idempotence the producer acknowledges one partition's records in send order,
 * and each acknowledgement either extends the current run (both offsets advanced by one) or starts
 * a new one. Callbacks run on the producer's I/O thread, hence the synchronisation.
 */
final class PartitionWrite {
    final String topic;
    final int partition;
    final String targetTopic;
    long records;
    long bytes;
    long skipped;
    long timestampMin = Long.MAX_VALUE;
    long timestampSum;
    /** The last upstream offset sent: the exactly-once progress committed with the transaction. */
    long lastUpstream = -1;

    private final List<long[]> runs = new ArrayList<>();
    private long acknowledged;
    /** Replication latency of the acknowledged records: acknowledgement time minus record timestamp
     *  (MM2's replication-latency-ms), summed and its maximum. */
    private long latencySumMs;
    private long latencyMaxMs = -1;
    private Exception failure;

    PartitionWrite(String topic, int partition, String targetTopic) {
        this.topic = topic;
        this.partition = partition;
        this.targetTopic = targetTopic;
    }

    /** Counts a record about to be sent and returns the callback that records where it landed. */
    Callback sent(long upstreamOffset, long timestampMs, int size) {
        counted(upstreamOffset, timestampMs, size);
        return (RecordMetadata metadata, Exception exception) -> acknowledge(upstreamOffset, timestampMs, metadata, exception);
    }

    /** Counts a record about to be sent for the first time (a resend is not counted again). */
    void counted(long upstreamOffset, long timestampMs, int size) {
        records++;
        bytes += size;
        timestampSum += timestampMs;
        timestampMin = Math.min(timestampMin, timestampMs);
        lastUpstream = upstreamOffset;
    }

    /** Records where a record landed (or why not); returns the replication latency it counted, or -1. */
    synchronized long acknowledge(long upstream, long timestampMs, RecordMetadata metadata, Exception exception) {
        if (exception != null) {
            if (failure == null) {
                failure = exception;
            }
            return -1;
        }
        acknowledged++;
        long latency = Math.max(0, System.currentTimeMillis() - timestampMs);
        latencySumMs += latency;
        latencyMaxMs = Math.max(latencyMaxMs, latency);
        long downstream = metadata.offset();
        long[] last = runs.isEmpty() ? null : runs.get(runs.size() - 1);
        if (last != null && last[0] + last[2] == upstream && last[1] + last[2] == downstream) {
            last[2]++;
        } else {
            runs.add(new long[] {upstream, downstream, 1});
        }
        return latency;
    }

    /**
     * The records from {@code fromUpstream} on are sent again ({@link GuardedSends}): forgets where the
     * {@code acknowledgedAgain} of them that were acknowledged landed (their runs, counts and latencies):
     * the copies written now are the ones offset syncs and progress point at. Runs already taken for
     * offset syncs stay written; a later sync that goes back upstream makes MM2 drop them.
     */
    synchronized void rewind(long fromUpstream, long acknowledgedAgain, long latencyMsAgain) {
        acknowledged -= acknowledgedAgain;
        latencySumMs -= latencyMsAgain;
        for (int i = runs.size() - 1; i >= 0; i--) {
            long[] run = runs.get(i);
            if (run[0] >= fromUpstream) {
                runs.remove(i);
            } else if (run[0] + run[2] > fromUpstream) {
                run[2] = fromUpstream - run[0];
            }
        }
    }

    /** The runs acknowledged since the last call, in order (Real-time Mode: its offset syncs are
     *  written as it goes, {@link SyncWriter}); the JSON line then holds only later runs. */
    synchronized List<long[]> takeRuns() {
        List<long[]> taken = new ArrayList<>(runs);
        runs.clear();
        return taken;
    }

    /** A replayed exactly-once batch wrote nothing: report where the committed end landed. */
    synchronized void alreadyMirrored(long upstream, long downstream) {
        runs.add(new long[] {upstream, downstream, 1});
    }

    synchronized Exception failure() {
        return failure;
    }

    /** Every record sent was acknowledged (call after flush). */
    synchronized boolean complete() {
        return failure == null && acknowledged == records;
    }

    /** The downstream offset of the last acknowledged record, or -1. */
    synchronized long lastDownstream() {
        long[] last = runs.isEmpty() ? null : runs.get(runs.size() - 1);
        return last == null ? -1 : last[1] + last[2] - 1;
    }

    synchronized String toJson() {
        StringBuilder out = new StringBuilder(128 + runs.size() * 24);
        out.append("{\"kind\":\"partition\",\"topic\":").append(Json.quote(topic))
           .append(",\"partition\":").append(partition)
           .append(",\"targetTopic\":").append(Json.quote(targetTopic))
           .append(",\"records\":").append(records)
           .append(",\"bytes\":").append(bytes)
           .append(",\"skipped\":").append(skipped)
           .append(",\"timestampMin\":").append(records > 0 ? Long.toString(timestampMin) : "null")
           .append(",\"timestampSum\":").append(timestampSum)
           .append(",\"latencySumMs\":").append(latencySumMs)
           .append(",\"latencyMaxMs\":").append(latencyMaxMs >= 0 ? Long.toString(latencyMaxMs) : "null")
           .append(",\"runs\":[");
        for (int i = 0; i < runs.size(); i++) {
            long[] run = runs.get(i);
            out.append(i == 0 ? "" : ",").append('[').append(run[0]).append(',').append(run[1]).append(',')
               .append(run[2]).append(']');
        }
        return out.append("]}").toString();
    }
}
