package mm2spec.spark;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * MM2's offset-sync rule on the executors, for the Real-time writer (whose tasks run for a whole
 * batch, so the driver cannot wait for their results to write syncs, as it does in micro-batch mode
 * with mm2spark/offsets.py's OffsetSyncEmitter). The same rule, run by run: a sync for a partition's
 * first record, when the upstream offsets skip or the downstream one goes back, and when the
 * downstream offset moved offset.lag.max past the last sync; then a delayed sync for the latest
 * record ({@link #delayed}). Both implementations must answer alike:
 * tests/integration/test_sync_rule_parity.py runs this class ({@link #main}) and the Python one on
 * the same random runs and compares every sync; spark/java-tests' SyncEmitterTest compares it with
 * MM2's own OffsetSyncWriter.
 */
public final class SyncEmitter {
    private final long offsetLagMax;
    private long previousUpstream = -1;
    private long previousDownstream = -1;
    private long lastSyncUpstream = -1;
    private long lastSyncDownstream = -1;

    public SyncEmitter(long offsetLagMax) {
        this.offsetLagMax = Math.max(0, offsetLagMax);
    }

    /** The syncs due while writing a run (records upstream+i at downstream+i, i < count), each
     *  {upstream, downstream}, not counting the delayed one. */
    public synchronized List<long[]> onRun(long upstream, long downstream, long count) {
        List<long[]> syncs = new ArrayList<>();
        if (count <= 0) {
            return syncs;
        }
        boolean firstDue = lastSyncDownstream < 0
            || upstream - previousUpstream != 1
            || downstream < previousDownstream
            || downstream - (lastSyncDownstream + 1) >= offsetLagMax;
        if (firstDue) {
            syncs.add(sync(upstream, downstream));
        }
        long step = Math.max(1, offsetLagMax + 1);
        long index = lastSyncDownstream + step - downstream;
        while (index > 0 && index < count) {
            syncs.add(sync(upstream + index, downstream + index));
            index += step;
        }
        previousUpstream = upstream + count - 1;
        previousDownstream = downstream + count - 1;
        return syncs;
    }

    /** The sync for the latest record written, unless it was written already; null otherwise. */
    public synchronized long[] delayed() {
        if (previousUpstream < 0 || previousUpstream == lastSyncUpstream) {
            return null;
        }
        return sync(previousUpstream, previousDownstream);
    }

    private long[] sync(long upstream, long downstream) {
        lastSyncUpstream = upstream;
        lastSyncDownstream = downstream;
        return new long[] {upstream, downstream};
    }

    /** MM2's OffsetSync record key: topic STRING (int16 length, UTF-8), partition INT32. */
    static byte[] key(String topic, int partition) {
        byte[] name = topic.getBytes(StandardCharsets.UTF_8);
        return ByteBuffer.allocate(2 + name.length + 4).putShort((short) name.length).put(name).putInt(partition).array();
    }

    /** MM2's OffsetSync record value: upstreamOffset INT64, offset INT64. */
    static byte[] value(long upstream, long downstream) {
        return ByteBuffer.allocate(16).putLong(upstream).putLong(downstream).array();
    }

    /** Runs the rule on the lines of standard input ("lag N", "run U D C", "delayed"), one output line
     *  per sync ("U D"), then "end" per input line: the cross-check of tests/integration/test_sync_rule_parity.py. */
    public static void main(String[] args) throws java.io.IOException {
        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));
        SyncEmitter emitter = new SyncEmitter(0);
        StringBuilder out = new StringBuilder();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] words = line.trim().split("\\s+");
            if (words[0].equals("lag")) {
                emitter = new SyncEmitter(Long.parseLong(words[1]));
            } else if (words[0].equals("run")) {
                for (long[] sync : emitter.onRun(Long.parseLong(words[1]), Long.parseLong(words[2]), Long.parseLong(words[3]))) {
                    out.append(sync[0]).append(' ').append(sync[1]).append('\n');
                }
            } else if (words[0].equals("delayed")) {
                long[] sync = emitter.delayed();
                if (sync != null) {
                    out.append(sync[0]).append(' ').append(sync[1]).append('\n');
                }
            }
            out.append("end\n");
        }
        System.out.print(out);
    }
}
