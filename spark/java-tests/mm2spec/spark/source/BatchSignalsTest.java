package mm2spec.spark.source;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The files through which a cluster's Real-time readers learn that the driver ended their batch. */
class BatchSignalsTest {
    @Test
    void theDriversEndAndCutReachAFolderReadersLookAt(@TempDir Path dir) throws Exception {
        String key = "mm2spark.job.flow-" + System.nanoTime();
        String signals = dir.resolve("realtime-signals").toString();
        RealTime.signalDir(key, signals);
        RealTime.forget(key);
        assertFalse(BatchSignals.raised(signals));

        RealTime.cut(key);
        assertTrue(Files.exists(Path.of(signals, BatchSignals.CUT)));
        assertTrue(BatchSignals.raised(signals));
        RealTime.uncut(key);  // the next batch's planning
        assertFalse(BatchSignals.raised(signals));

        RealTime.endBatches(key, true);
        assertTrue(BatchSignals.raised(signals));
        RealTime.uncut(key);  // planning while ending leaves the end signal
        assertTrue(BatchSignals.raised(signals));
        RealTime.forget(key);  // the next start clears what the last run left
        assertFalse(BatchSignals.raised(signals));
    }

    @Test
    void aReaderLooksAtOnceAndAgainAfterThePollInterval(@TempDir Path dir) throws Exception {
        String signals = dir.toString();
        BatchSignals.Watch watch = new BatchSignals.Watch(signals);
        assertFalse(watch.raised());
        BatchSignals.set(signals, BatchSignals.END, true);
        Thread.sleep(BatchSignals.POLL_MS + 50);
        assertTrue(watch.raised());
        // A reader that starts after the signal sees it at its first look.
        assertTrue(new BatchSignals.Watch(signals).raised());
        assertFalse(new BatchSignals.Watch(null).raised(), "local mode: no folder, only the flags");
    }
}
