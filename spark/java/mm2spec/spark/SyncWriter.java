package mm2spec.spark;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * Writes a Real-time task's offset syncs as it goes, as MM2's tasks do: the runs its records landed
 * in ({@link PartitionWrite#takeRuns}) go through each partition's {@link SyncEmitter}, kept in the
 * executor's JVM for the life of the job (a restart begins with a sync, as MM2 after its restart),
 * and the syncs go to the offset-syncs topic with one producer per JVM and cluster. A sync is only
 * ever an acknowledged record's pair of offsets, so one written before a crash stays true.
 */
final class SyncWriter {
    private static final Map<String, SyncEmitter> EMITTERS = new ConcurrentHashMap<>();
    private static final Map<String, Producer<byte[], byte[]>> PRODUCERS = new ConcurrentHashMap<>();

    private final WriterSettings settings;
    private final Producer<byte[], byte[]> producer;
    private final String topic;
    final AtomicLong written = new AtomicLong();
    final AtomicLong failed = new AtomicLong();
    private volatile Exception lastFailure;

    SyncWriter(WriterSettings settings) {
        this.settings = settings;
        this.topic = settings.syncsTopic();
        this.producer = PRODUCERS.computeIfAbsent(settings.key(), k -> Producers.create(settings.syncsProducerProperties()));
    }

    /** Emits the syncs of the runs acknowledged since the last call, then each touched partition's
     *  delayed sync (so an idle partition translates exactly within one call's interval). */
    void harvest(Iterable<PartitionWrite> writes) {
        for (PartitionWrite write : writes) {
            List<long[]> runs = write.takeRuns();
            if (runs.isEmpty()) {
                continue;
            }
            SyncEmitter emitter = EMITTERS.computeIfAbsent(settings.key() + "\u0000" + write.topic + "\u0000" + write.partition,
                                                           k -> new SyncEmitter(settings.offsetLagMax()));
            for (long[] run : runs) {
                for (long[] sync : emitter.onRun(run[0], run[1], run[2])) {
                    send(write, sync);
                }
            }
            long[] delayed = emitter.delayed();
            if (delayed != null) {
                send(write, delayed);
            }
        }
    }

    private void send(PartitionWrite write, long[] sync) {
        producer.send(new ProducerRecord<>(topic, 0, SyncEmitter.key(write.topic, write.partition),
                                           SyncEmitter.value(sync[0], sync[1])), (metadata, exception) -> {
            if (exception != null) {
                failed.incrementAndGet();
                lastFailure = exception;
            } else {
                written.incrementAndGet();
            }
        });
    }

    /** Waits (bounded) until the syncs sent are acknowledged. */
    void flush(Duration timeout) {
        Thread flusher = new Thread(producer::flush, "mm2spec-syncs-flush");
        flusher.setDaemon(true);
        flusher.start();
        try {
            flusher.join(timeout.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    Exception lastFailure() {
        return lastFailure;
    }
}
