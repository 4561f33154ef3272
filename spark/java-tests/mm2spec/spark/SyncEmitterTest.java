package mm2spec.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import org.apache.kafka.connect.mirror.Mm2OffsetSyncs;
import org.junit.jupiter.api.Test;

/** The Real-time writer's offset-sync rule against MirrorMaker 2's own (OffsetSyncWriter at
 *  KAFKA_VERSION) and its record layout against MM2's OffsetSync. */
class SyncEmitterTest {
    private static final long[] LAGS = {0, 1, 3, 10, 100};

    private static List<String> syncs(List<long[]> list) {
        List<String> out = new ArrayList<>();
        list.forEach(s -> out.add(s[0] + "->" + s[1]));
        return out;
    }

    @Test
    void everySyncIsTheOneMm2WouldWriteForTheSameRecords() {
        Random random = new Random(24);
        long total = 0;
        for (int trial = 0; trial < 300; trial++) {
            long lag = LAGS[random.nextInt(LAGS.length)];
            SyncEmitter emitter = new SyncEmitter(lag);
            Mm2OffsetSyncs mm2 = new Mm2OffsetSyncs(lag);
            long upstream = random.nextInt(50);
            long downstream = random.nextInt(50);
            List<String> ours = new ArrayList<>();
            List<String> theirs = new ArrayList<>();
            for (int step = 0; step < 1 + random.nextInt(30); step++) {
                double kind = random.nextDouble();
                if (kind < 0.15) {
                    upstream += 2 + random.nextInt(18);  // compaction or transaction markers upstream
                } else if (kind < 0.2) {
                    downstream = Math.max(0, downstream - 1 - random.nextInt(40));  // the target went back
                } else if (kind < 0.25) {
                    downstream += 1 + random.nextInt(5);  // markers on the target
                }
                long count = 1 + random.nextInt(400);
                ours.addAll(syncs(emitter.onRun(upstream, downstream, count)));
                for (long i = 0; i < count; i++) {
                    long[] sync = mm2.record(upstream + i, downstream + i);
                    if (sync != null) {
                        theirs.add(sync[0] + "->" + sync[1]);
                    }
                }
                upstream += count;
                downstream += count;
            }
            int same = 0;
            while (same < Math.min(ours.size(), theirs.size()) && ours.get(same).equals(theirs.get(same))) {
                same++;
            }
            String where = "offset.lag.max " + lag + ", trial " + trial + ", sync " + same + ": ";
            assertEquals(same < theirs.size() ? theirs.get(same) : "no more", same < ours.size() ? ours.get(same) : "no more", where);
            total += ours.size();
        }
        assertTrue(total > 1000, "the runs emit many syncs: " + total);
    }

    @Test
    void aRunIsSyncedAtItsFirstRecordThenEveryLagPlusOneRecords() {
        SyncEmitter emitter = new SyncEmitter(100);
        assertEquals(List.of("0->0", "101->101", "202->202"), syncs(emitter.onRun(0, 0, 250)));
        // The next run continues both offsets: only staleness counts, from the last sync (202).
        assertEquals(List.of("303->303"), syncs(emitter.onRun(250, 250, 100)));
    }

    @Test
    void aSkipUpstreamOrAStepBackDownstreamIsSyncedAtOnce() {
        SyncEmitter emitter = new SyncEmitter(100);
        emitter.onRun(0, 100, 10);
        assertEquals(List.of("15->110"), syncs(emitter.onRun(15, 110, 5)), "upstream skipped 10..14");
        assertEquals(List.of("20->50"), syncs(emitter.onRun(20, 50, 5)), "the target went back");
        assertEquals(List.of(), syncs(emitter.onRun(25, 55, 5)), "continues: no sync");
    }

    @Test
    void lagZeroSyncsEveryRecordAndANegativeLagCountsAsZero() {
        assertEquals(List.of("7->3", "8->4", "9->5"), syncs(new SyncEmitter(0).onRun(7, 3, 3)));
        assertEquals(List.of("7->3", "8->4", "9->5"), syncs(new SyncEmitter(-5).onRun(7, 3, 3)));
    }

    @Test
    void anEmptyRunChangesNothing() {
        SyncEmitter emitter = new SyncEmitter(10);
        assertEquals(List.of(), emitter.onRun(5, 5, 0));
        assertNull(emitter.delayed());
        assertEquals(List.of("5->5"), syncs(emitter.onRun(5, 5, 1)), "still the partition's first record");
    }

    @Test
    void theDelayedSyncIsTheLatestRecordOnceAndNeverOneAlreadyWritten() {
        SyncEmitter emitter = new SyncEmitter(100);
        assertNull(emitter.delayed(), "nothing written yet");
        emitter.onRun(0, 0, 10);
        assertArrayEquals(new long[] {9, 9}, emitter.delayed());
        assertNull(emitter.delayed(), "already written");
        SyncEmitter everyRecord = new SyncEmitter(0);
        everyRecord.onRun(0, 0, 3);
        assertNull(everyRecord.delayed(), "the latest record had its sync");
    }

    /** What a sync is for: every record written translates to within offset.lag.max of where it is,
     *  delayed syncs or not. */
    @Test
    void everyRecordIsWithinLagOfTheLastSyncBeforeIt() {
        Random random = new Random(7);
        for (int trial = 0; trial < 200; trial++) {
            long lag = LAGS[random.nextInt(LAGS.length)];
            SyncEmitter emitter = new SyncEmitter(lag);
            long upstream = 0;
            long downstream = 0;
            long lastSync = Long.MIN_VALUE;
            for (int step = 0; step < 20; step++) {
                if (random.nextDouble() < 0.2) {
                    long[] delayed = emitter.delayed();
                    lastSync = delayed == null ? lastSync : delayed[1];
                    continue;
                }
                upstream += random.nextDouble() < 0.2 ? 1 + random.nextInt(9) : 0;
                long count = 1 + random.nextInt(300);
                List<long[]> syncs = emitter.onRun(upstream, downstream, count);
                int next = 0;
                for (long d = downstream; d < downstream + count; d++) {
                    if (next < syncs.size() && syncs.get(next)[1] == d) {
                        assertEquals(upstream + (d - downstream), syncs.get(next)[0], "a sync pairs one record's offsets");
                        lastSync = d;
                        next++;
                    }
                    assertTrue(d - lastSync <= lag, "record at " + d + ", last sync at " + lastSync + ", lag " + lag);
                }
                assertEquals(syncs.size(), next, "syncs in order, inside the run");
                upstream += count;
                downstream += count;
            }
        }
    }

    @Test
    void recordsHaveMm2sOffsetSyncLayout() {
        String topic = "zahlungen-\u00fc.eu";
        assertArrayEquals(Mm2OffsetSyncs.key(topic, 7), SyncEmitter.key(topic, 7));
        assertArrayEquals(Mm2OffsetSyncs.value(1L << 40, 12345), SyncEmitter.value(1L << 40, 12345));
        Object[] read = Mm2OffsetSyncs.read(SyncEmitter.key(topic, 7), SyncEmitter.value(1L << 40, 12345));
        assertArrayEquals(new Object[] {topic, 7, 1L << 40, 12345L}, read);
    }
}
