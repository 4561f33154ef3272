package mm2spec.spark.source;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the job's driver tells a flow's source in Real-time Mode ({@code spark.mode: realtime}), by
 * the flow's key (the source's {@code realTimeKey} option, the query's name):
 * <ul>
 * <li>which source partitions may be read: those whose target topic exists with enough partitions.
 *     In micro-batch mode the job creates target topics before each batch's write; a Real-time batch
 *     writes for many seconds with no such hook, so the driver's topic scan creates them first and
 *     then admits them here ({@link #admit}); the stream reads only admitted partitions.</li>
 * <li>that the running batch should end now ({@link #endBatches}): the readers return at once, so the
 *     batch commits its offsets before a stop instead of being replayed after it; the driver stops
 *     the query once the next batch is planned ({@link #drained}), which reads nothing; the flag stays
 *     until the next start ({@link #forget}). The flag is read by the readers in this JVM in local
 *     mode; on a cluster the driver also writes it as a file in the flow's checkpoint location
 *     ({@link #signalDir}, {@link BatchSignals}), which the executors' readers look at.</li>
 * <li>that the running batch should end early once ({@link #cut}): partitions were just admitted, and
 *     the next batch reads them instead of waiting for this one's deadline.</li>
 * </ul>
 */
public final class RealTime {
    private static final Logger LOG = LoggerFactory.getLogger(RealTime.class);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Map<String, Map<String, Integer>> ADMITTED = new ConcurrentHashMap<>();
    private static final Map<String, Boolean> ENDING = new ConcurrentHashMap<>();
    private static final Map<String, Boolean> CUT = new ConcurrentHashMap<>();
    /** The key's signal folder on a cluster ({@link BatchSignals}); absent in local mode. */
    private static final Map<String, String> SIGNAL_DIRS = new ConcurrentHashMap<>();
    /** Batches planned since the key's batches were told to end. */
    private static final Map<String, Integer> PLANNED_WHILE_ENDING = new ConcurrentHashMap<>();

    private RealTime() {
    }

    /** Admits the topics of {@code json} ({@code {"orders": 6}}: topic to partition count) for the key. */
    public static void admit(String key, String json) {
        Map<String, Integer> counts;
        try {
            counts = JSON.readValue(json, new TypeReference<Map<String, Integer>>() { });
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("expected {\"topic\": partitions}, got " + json, e);
        }
        ADMITTED.merge(key, Map.copyOf(counts), (old, added) -> {
            Map<String, Integer> merged = new ConcurrentHashMap<>(old);
            added.forEach((topic, n) -> merged.merge(topic, n, Math::max));
            return merged;
        });
    }

    /** Whether the partition may be read; every partition when nothing was ever admitted for the key. */
    static boolean admitted(String key, TopicPartition tp) {
        Map<String, Integer> counts = ADMITTED.get(key);
        return counts == null || tp.partition() < counts.getOrDefault(tp.topic(), 0);
    }

    /** Every admitted partition of the key, in (topic, partition) order. */
    static java.util.List<TopicPartition> admittedPartitions(String key) {
        java.util.List<TopicPartition> out = new java.util.ArrayList<>();
        ADMITTED.getOrDefault(key, Map.of()).forEach((topic, n) -> {
            for (int p = 0; p < n; p++) {
                out.add(new TopicPartition(topic, p));
            }
        });
        out.sort(SourceOffset.ORDER);
        return out;
    }

    /** Whether the driver admits partitions for the key (the job always does in Real-time Mode). */
    static boolean admits(String key) {
        return ADMITTED.containsKey(key);
    }

    /** On a cluster: the folder (in the flow's checkpoint location, which every executor reaches)
     *  where the key's end and cut signals are also written for readers in other JVMs. Set before
     *  {@link #forget}, which clears what an earlier run left there. */
    public static void signalDir(String key, String dir) {
        SIGNAL_DIRS.put(key, dir);
    }

    /** The key's signal folder, or null (local mode: the readers see the flags). */
    static String signalDirOf(String key) {
        return key == null ? null : SIGNAL_DIRS.get(key);
    }

    private static void signal(String key, String name, boolean on) {
        String dir = signalDirOf(key);
        if (dir != null) {
            BatchSignals.set(dir, name, on);
        }
    }

    /** Ends the running Real-time batches of the key (and every batch after, until cleared). */
    public static void endBatches(String key, boolean ending) {
        PLANNED_WHILE_ENDING.remove(key);
        if (ending) {
            ENDING.put(key, Boolean.TRUE);
        } else {
            ENDING.remove(key);
        }
        signal(key, BatchSignals.END, ending);
    }

    /** The source plans a batch of the key ({@code latestOffset}); counted while the key's batches end. */
    static void planned(String key) {
        if (key != null && ENDING.containsKey(key)) {
            int n = PLANNED_WHILE_ENDING.merge(key, 1, Integer::sum);
            LOG.info("mm2spec-mirror source: {} planned batch {} since the batches were told to end", key, n);
        }
    }

    /** Whether a batch was planned since {@link #endBatches}: Spark plans a batch once the one before
     *  has committed, and a batch planned while ending reads nothing, so a stop from here kills nothing
     *  written. */
    public static boolean drained(String key) {
        return PLANNED_WHILE_ENDING.getOrDefault(key, 0) >= 1;
    }

    /** Ends the running batch of the key early, once: the next batch's planning clears it ({@link #uncut}). */
    public static void cut(String key) {
        CUT.put(key, Boolean.TRUE);
        signal(key, BatchSignals.CUT, true);
    }

    static void uncut(String key) {
        if (key != null && CUT.remove(key) != null) {
            signal(key, BatchSignals.CUT, false);
        }
    }

    static boolean ending(String key) {
        return key != null && (ENDING.containsKey(key) || CUT.containsKey(key));
    }

    /** Forgets the key, before its query starts (and the signals an earlier run left in its folder). Not when it stops: the stopped query's tasks end
     *  asynchronously, and a reader that saw the key no longer ending would hand out the records it
     *  holds to a writer about to be killed (written now, and again at the next start). */
    public static void forget(String key) {
        ADMITTED.remove(key);
        ENDING.remove(key);
        CUT.remove(key);
        PLANNED_WHILE_ENDING.remove(key);
        signal(key, BatchSignals.END, false);
        signal(key, BatchSignals.CUT, false);
    }
}
