package mm2spec.spark.source;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.UUID;
import java.util.stream.Collectors;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeMode;
import org.apache.spark.storage.BlockManagerId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver side of {@link MirrorSource}: offsets per micro-batch and the plan of its input
 * partitions. Partitions are dealt to {@code tasks} slices in (topic, partition) order; a slice keeps
 * its partitions, its consumer and its executor while the topics stay the same (a new topic or
 * partition re-deals them, which costs the consumers a seek, nothing more).
 *
 * <p>In Spark's Real-time Mode ({@link SupportsRealTimeMode}) every slice is planned in every batch
 * with open ranges: its task reads until the batch's deadline, and the batch's end offsets are what
 * the tasks report ({@link #mergeOffsets}). Only the partitions the job's driver admitted are read
 * ({@link RealTime}): their target topics exist.
 */
final class MirrorStream implements MicroBatchStream, SupportsAdmissionControl, ReportsSourceMetrics, SupportsRealTimeMode {
    private static final Logger LOG = LoggerFactory.getLogger(MirrorStream.class);
    /** Spark's Kafka source writes the initial offsets in this version of its metadata log. */
    private static final String INITIAL_OFFSETS_VERSION = "v1";

    private final SourceOptions options;
    private final String initialOffsetsFile;
    private final String streamId = UUID.randomUUID().toString();
    private SourceMetadata metadata;
    private volatile Map<TopicPartition, Long> latest = Map.of();
    /** Where partitions first seen in the last latestOffset begin (reused by the plan of the batch). */
    private Map<TopicPartition, Long> newPartitionStarts = Map.of();
    /** Real-time Mode: set by Spark before the first batch. */
    private volatile boolean realTime;
    /** Real-time Mode: the start of every partition of the batch being run (the base of its end offsets). */
    private Map<TopicPartition, Long> realTimeStart = Map.of();

    MirrorStream(SourceOptions options, String checkpointLocation) {
        this.options = options;
        this.initialOffsetsFile = checkpointLocation + "/0";
    }

    private synchronized SourceMetadata metadata() {
        if (metadata == null) {
            metadata = new SourceMetadata(options);
        }
        return metadata;
    }

    // ------------------------------------------------------------------ offsets

    @Override
    public Offset initialOffset() {
        SourceOffset written = readInitialOffsets();
        if (written != null) {
            return written;
        }
        List<TopicPartition> partitions = partitions();
        Map<TopicPartition, Long> earliest = metadata().earliest(partitions);
        Map<TopicPartition, Long> start = SourceOffset.sorted();
        String starting = options.startingOffsets;
        if ("latest".equalsIgnoreCase(starting)) {
            start.putAll(metadata().latest(partitions));
        } else if ("earliest".equalsIgnoreCase(starting)) {
            start.putAll(earliest);
        } else {
            Map<TopicPartition, Long> given = SourceOffset.parse(starting).offsets;
            Map<TopicPartition, Long> ends = given.containsValue(SourceOffset.LATEST) ? metadata().latest(partitions) : Map.of();
            for (TopicPartition tp : partitions) {
                long offset = given.getOrDefault(tp, SourceOffset.EARLIEST);
                start.put(tp, offset == SourceOffset.EARLIEST ? earliest.get(tp)
                              : offset == SourceOffset.LATEST ? ends.get(tp) : offset);
            }
        }
        SourceOffset initial = new SourceOffset(start);
        writeInitialOffsets(initial);
        return initial;
    }

    /** The source's partitions the pattern matches (in Real-time Mode, those the driver admitted). */
    private List<TopicPartition> partitions() {
        List<TopicPartition> all = metadata().partitions();
        String key = options.realTimeKey;
        if (key == null || !RealTime.admits(key)) {
            return all;
        }
        return all.stream().filter(tp -> RealTime.admitted(key, tp)).collect(Collectors.toList());
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("latestOffset(Offset, ReadLimit) is the source's entry point");
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        return options.maxOffsetsPerTrigger > 0 ? ReadLimit.maxRows(options.maxOffsetsPerTrigger) : ReadLimit.allAvailable();
    }

    @Override
    public Offset latestOffset(Offset startOffset, ReadLimit limit) {
        if (realTime) {
            RealTime.uncut(options.realTimeKey);  // before reading what is admitted (see RealTime.cut)
            RealTime.planned(options.realTimeKey);
            if (RealTime.admits(options.realTimeKey)) {
                return realTimeLatest(((SourceOffset) startOffset).offsets);
            }
        }
        Map<TopicPartition, Long> from = ((SourceOffset) startOffset).offsets;
        List<TopicPartition> partitions = partitions();
        Map<TopicPartition, Long> ends = metadata().latest(partitions);
        latest = ends;
        List<TopicPartition> added = partitions.stream().filter(tp -> !from.containsKey(tp)).collect(Collectors.toList());
        Map<TopicPartition, Long> starts = new HashMap<>(from);
        newPartitionStarts = metadata().earliest(added);
        if (!added.isEmpty()) {
            LOG.info("mm2spec-mirror source: {} new partitions, read from their beginning", added.size());
        }
        starts.putAll(newPartitionStarts);
        Map<TopicPartition, Long> end = SourceOffset.sorted();
        end.putAll(ends);
        if (limit instanceof ReadMaxRows max) {
            capped(starts, end, max.maxRows());
        }
        return new SourceOffset(end);
    }

    /** Real-time Mode, between two batches (the flow's pause): the partitions are those the driver
     *  admitted (its topic scan listed them), so no admin call is made but the beginning of new
     *  partitions; a batch has no end offset, so the "latest" Spark reports is where it starts. */
    private Offset realTimeLatest(Map<TopicPartition, Long> from) {
        List<TopicPartition> partitions = RealTime.admittedPartitions(options.realTimeKey);
        List<TopicPartition> added = partitions.stream().filter(tp -> !from.containsKey(tp)).collect(Collectors.toList());
        newPartitionStarts = added.isEmpty() ? Map.of() : metadata().earliest(added);
        if (!added.isEmpty()) {
            LOG.info("mm2spec-mirror source: {} new partitions, read from their beginning", added.size());
        }
        Map<TopicPartition, Long> starts = SourceOffset.sorted();
        starts.putAll(from);  // a partition no longer admitted keeps its offset in the checkpoint
        for (TopicPartition tp : partitions) {
            Long start = from.containsKey(tp) ? from.get(tp) : newPartitionStarts.get(tp);
            if (start != null) {
                starts.put(tp, start);
            }
        }
        latest = starts;
        return new SourceOffset(starts);
    }

    /** Lowers {@code end} so the batch holds at most {@code maxRows} records, each partition's share
     *  prorated by its backlog (as Spark's Kafka source does). */
    static void capped(Map<TopicPartition, Long> starts, Map<TopicPartition, Long> end, long maxRows) {
        long total = 0;
        for (Map.Entry<TopicPartition, Long> entry : end.entrySet()) {
            total += Math.max(0, entry.getValue() - starts.getOrDefault(entry.getKey(), entry.getValue()));
        }
        if (total <= maxRows) {
            return;
        }
        for (Map.Entry<TopicPartition, Long> entry : end.entrySet()) {
            long begin = starts.getOrDefault(entry.getKey(), entry.getValue());
            long backlog = entry.getValue() - begin;
            if (backlog <= 0) {
                continue;
            }
            double share = (double) maxRows * backlog / total;
            long take = share < 1 ? (long) Math.ceil(share) : (long) Math.floor(share);
            entry.setValue(Math.min(entry.getValue(), begin + take));
        }
    }

    @Override
    public Offset reportLatestOffset() {
        return latest.isEmpty() ? null : new SourceOffset(latest);
    }

    @Override
    public Offset deserializeOffset(String json) {
        return SourceOffset.parse(json);
    }

    @Override
    public void commit(Offset end) {
        // Nothing to do: the checkpoint holds the progress; the consumers keep no group.
    }

    @Override
    public void stop() {
        synchronized (this) {
            if (metadata != null) {
                metadata.close();
                metadata = null;
            }
        }
        SliceConsumers.closeStream(streamId);
        // A Real-time key that was ending stays so (RealTime.forget): its killed tasks read nothing more.
    }

    // ------------------------------------------------------------------ the batch's plan

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
        Map<TopicPartition, Long> from = ((SourceOffset) start).offsets;
        Map<TopicPartition, Long> until = ((SourceOffset) end).offsets;
        List<TopicPartition> unknown = until.keySet().stream()
            .filter(tp -> !from.containsKey(tp) && !newPartitionStarts.containsKey(tp)).collect(Collectors.toList());
        Map<TopicPartition, Long> firstOffsets = new HashMap<>(newPartitionStarts);
        if (!unknown.isEmpty()) {
            firstOffsets.putAll(metadata().earliest(unknown));
        }
        List<List<SliceInput.Range>> slices = new ArrayList<>();
        for (int i = 0; i < options.tasks; i++) {
            slices.add(new ArrayList<>());
        }
        int index = 0;
        for (Map.Entry<TopicPartition, Long> entry : until.entrySet()) {
            TopicPartition tp = entry.getKey();
            long last = entry.getValue();
            long first = from.containsKey(tp) ? from.get(tp) : firstOffsets.getOrDefault(tp, last);
            if (first > last) {
                // The partition's log is shorter than where the mirror was (the topic was recreated):
                // like Spark's source with failOnDataLoss=false, carry on from its current end.
                LOG.warn("mm2spec-mirror source: {} was at offset {} but now ends at {}; records may be lost", tp, first, last);
                first = last;
            }
            slices.get(index++ % options.tasks).add(new SliceInput.Range(tp.topic(), tp.partition(), first, last));
        }
        List<String> executors = executors();
        List<InputPartition> planned = new ArrayList<>();
        for (int slot = 0; slot < slices.size(); slot++) {
            List<SliceInput.Range> ranges = slices.get(slot);
            if (ranges.stream().anyMatch(r -> r.until > r.from)) {
                String location = executors.isEmpty() ? null : executors.get(slot % executors.size());
                planned.add(new SliceInput(streamId, slot, ranges, options.kafka, options.pollTimeoutMs, location));
            }
        }
        return planned.toArray(new InputPartition[0]);
    }

    /** The executors as Spark names them for locality ({@code executor_<host>_<id>}), sorted, so
     *  slice N keeps landing on the same one; empty in local mode (one executor, the driver). */
    private static List<String> executors() {
        try {
            SparkEnv env = SparkEnv.get();
            if (env == null) {
                return List.of();
            }
            BlockManagerId self = env.blockManager().blockManagerId();
            scala.collection.Seq<BlockManagerId> peers = env.blockManager().master().getPeers(self);
            List<BlockManagerId> ids = new ArrayList<>(scala.jdk.javaapi.CollectionConverters.asJava(peers));
            ids.sort((a, b) -> a.host().equals(b.host()) ? a.executorId().compareTo(b.executorId()) : a.host().compareTo(b.host()));
            return ids.stream().map(id -> "executor_" + id.host() + "_" + id.executorId()).collect(Collectors.toList());
        } catch (RuntimeException e) {
            LOG.debug("mm2spec-mirror source: no executor list for locality", e);
            return List.of();
        }
    }

    // ------------------------------------------------------------------ Real-time Mode

    @Override
    public void prepareForRealTimeMode() {
        if (options.maxOffsetsPerTrigger > 0) {
            throw new IllegalArgumentException("mm2spec-mirror source: maxOffsetsPerTrigger cannot be used in Real-time Mode "
                                               + "(a batch reads until its deadline): unset spark.maxOffsetsPerTrigger");
        }
        realTime = true;
    }

    /** Every slice with open ranges from {@code start}; partitions new since the last batch from
     *  their beginning (as in micro-batch mode). */
    @Override
    public InputPartition[] planInputPartitions(Offset start) {
        Map<TopicPartition, Long> from = ((SourceOffset) start).offsets;
        List<TopicPartition> partitions = latest.isEmpty() ? partitions() : new ArrayList<>(latest.keySet());
        partitions.sort(SourceOffset.ORDER);
        List<TopicPartition> unknown = partitions.stream()
            .filter(tp -> !from.containsKey(tp) && !newPartitionStarts.containsKey(tp)).collect(Collectors.toList());
        Map<TopicPartition, Long> firstOffsets = new HashMap<>(newPartitionStarts);
        if (!unknown.isEmpty()) {
            firstOffsets.putAll(metadata().earliest(unknown));
        }
        Map<TopicPartition, Long> starts = SourceOffset.sorted();
        starts.putAll(from);  // a partition gone from the source keeps its offset in the checkpoint
        List<List<SliceInput.Range>> slices = new ArrayList<>();
        for (int i = 0; i < options.tasks; i++) {
            slices.add(new ArrayList<>());
        }
        int index = 0;
        for (TopicPartition tp : partitions) {
            long first = from.containsKey(tp) ? from.get(tp) : firstOffsets.getOrDefault(tp, 0L);
            starts.put(tp, first);
            slices.get(index++ % options.tasks).add(new SliceInput.Range(tp.topic(), tp.partition(), first, Long.MAX_VALUE));
        }
        realTimeStart = starts;
        List<String> executors = executors();
        List<InputPartition> planned = new ArrayList<>();
        for (int slot = 0; slot < slices.size(); slot++) {
            if (!slices.get(slot).isEmpty()) {
                String location = executors.isEmpty() ? null : executors.get(slot % executors.size());
                planned.add(new SliceInput(streamId, slot, slices.get(slot), options.kafka, options.pollTimeoutMs, location,
                                           true, options.realTimeKey, RealTime.signalDirOf(options.realTimeKey)));
            }
        }
        return planned.toArray(new InputPartition[0]);
    }

    /** The batch's end: its start, moved on by what each task read of its slice. */
    @Override
    public Offset mergeOffsets(PartitionOffset[] offsets) {
        Map<TopicPartition, Long> end = SourceOffset.sorted();
        end.putAll(realTimeStart);
        for (PartitionOffset offset : offsets) {
            end.putAll(((SliceOffset) offset).next);
        }
        return new SourceOffset(end);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new SliceReaderFactory();
    }

    // ------------------------------------------------------------------ metrics

    @Override
    public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
        if (realTime) {
            return Map.of();  // no end offsets are read between Real-time batches (the DR exporter has the RPO)
        }
        Map<TopicPartition, Long> ends = latest;
        if (latestConsumedOffset.isEmpty() || ends.isEmpty()) {
            return Map.of();
        }
        Map<TopicPartition, Long> consumed = ((SourceOffset) latestConsumedOffset.get()).offsets;
        long min = Long.MAX_VALUE;
        long max = 0;
        long sum = 0;
        for (Map.Entry<TopicPartition, Long> entry : ends.entrySet()) {
            long behind = Math.max(0, entry.getValue() - consumed.getOrDefault(entry.getKey(), entry.getValue()));
            min = Math.min(min, behind);
            max = Math.max(max, behind);
            sum += behind;
        }
        Map<String, String> out = new TreeMap<>();
        out.put("minOffsetsBehindLatest", Long.toString(min));
        out.put("maxOffsetsBehindLatest", Long.toString(max));
        out.put("avgOffsetsBehindLatest", Double.toString((double) sum / ends.size()));
        return out;
    }

    // ------------------------------------------------------------------ the initial offsets file

    private SourceOffset readInitialOffsets() {
        try {
            Path path = new Path(initialOffsetsFile);
            FileSystem fs = path.getFileSystem(hadoopConf());
            if (!fs.exists(path)) {
                return null;
            }
            try (FSDataInputStream in = fs.open(path);
                 BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
                String content = reader.lines().collect(Collectors.joining("\n"));
                int json = content.indexOf('{');
                return json < 0 ? null : SourceOffset.parse(content.substring(json));
            }
        } catch (IOException e) {
            throw new IllegalStateException("mm2spec-mirror source: cannot read " + initialOffsetsFile + ": " + e, e);
        }
    }

    private void writeInitialOffsets(SourceOffset offsets) {
        try {
            Path path = new Path(initialOffsetsFile);
            FileSystem fs = path.getFileSystem(hadoopConf());
            Path temporary = new Path(initialOffsetsFile + ".tmp");
            try (FSDataOutputStream out = fs.create(temporary, true);
                 Writer writer = new OutputStreamWriter(out, StandardCharsets.UTF_8)) {
                writer.write(INITIAL_OFFSETS_VERSION + "\n" + offsets.json());
            }
            if (!fs.rename(temporary, path)) {
                throw new IOException("rename of " + temporary + " failed");
            }
        } catch (IOException e) {
            throw new IllegalStateException("mm2spec-mirror source: cannot write " + initialOffsetsFile + ": " + e, e);
        }
    }

    private static Configuration hadoopConf() {
        return SparkSession.active().sparkContext().hadoopConfiguration();
    }
}
