package mm2spec.spark;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A writer's sends through one producer, each target partition's records kept until they are
 * acknowledged (in a transaction: until it commits), so that a partition the producer wedged on is
 * written again through a fresh producer instead of failing the batch after {@code delivery.timeout.ms}.
 *
 * <p>The wedge this is for (measured on 1,000 new partitions of the dev broker, Kafka 4.3 broker, 3.9
 * client): a broker names a new partition's leader in its metadata seconds before that leader takes
 * produce requests for it. A producer with several requests in flight to it meanwhile can have a later
 * batch appended first (a broker takes any first sequence number from a producer it has no state for),
 * and then every retry of the earlier batch is refused with OUT_OF_ORDER_SEQUENCE_NUMBER until
 * {@code delivery.timeout.ms} (KAFKA-15591, fixed in brokers 4.5): the batch failed after two minutes
 * and was replayed whole. The driver now waits for new partitions' leaders before writing
 * ({@code mm2spark.kafka.await_leaders}); this is the net under it (a partition someone else created a
 * moment before, and any other producer that stops acknowledging a partition whose leader answers).
 *
 * <p>The rule: a target partition holds unacknowledged records and none of its records was
 * acknowledged for {@code partition.stall.ms} (5 s; {@code delivery.timeout.ms} is 120 s), and its
 * leader answers a ListOffsets ({@link Producers#leaders}: while the cluster or the leader is away a
 * fresh producer would fare no better, and the producer's own retries are the way through). Then the
 * producer is replaced ({@link Renewal}) and every record it had not acknowledged is sent again: each
 * partition's from its first unacknowledged record on, acknowledged ones after it included (in the
 * wedge above a later batch was written first: sending it again puts the partition's records back in
 * order after the stuck ones; at-least-once allows the copies), and in a transaction the whole
 * transaction (the fresh holder of the transactional.id aborted it). The sends of the dropped producer
 * are ignored whatever they report. At most {@link #MAX_RENEWALS} times per writer; after that the
 * producer's own {@code delivery.timeout.ms} decides, as before.
 *
 * <p>Threads: the writer's thread sends, flushes and looks for stalls; a Real-time writer's timer also
 * looks when no record comes ({@link #checkQuietly}); the producer's I/O thread acknowledges. The
 * producer is only used or replaced under one lock; acknowledgements take only their partition's.
 */
final class GuardedSends {
    private static final Logger LOG = LoggerFactory.getLogger(GuardedSends.class);
    /** Default {@code partition.stall.ms}: a few round trips of a loaded broker, far below delivery.timeout.ms. */
    static final long STALL_MS = 5_000;
    /** Renewals per writer (a task's, a transaction's); a wedge a fresh producer does not cure is not the one above. */
    static final int MAX_RENEWALS = 3;
    /** An open transaction keeps its records for a resend; a writer commits it once they hold this many bytes. */
    static final long KEPT_BYTES_MAX = 16L << 20;
    private static final int CLOCK_EVERY = 64;

    /** How a stalled producer is replaced. */
    interface Renewal {
        /** Drops {@code stalled} (what it holds fails or is aborted) and returns the producer to send with now. */
        Producer<byte[], byte[]> renew(Producer<byte[], byte[]> stalled);
    }

    private final WriterSettings settings;
    private final boolean transactional;
    private final Renewal renewal;
    private final long stallNanos;
    private final long stepMillis;
    /** Held to use or replace {@link #producer}, and for the fields below. */
    private final Object sendLock = new Object();
    private final Map<PartitionWrite, Log> logs = new LinkedHashMap<>();
    private volatile Producer<byte[], byte[]> producer;
    /** Bumped at each renewal: acknowledgements of sends made before it are ignored. */
    private volatile int generation;
    private int renewals;
    private long nextCheck;
    private long nextProbe;
    private long keptBytes;
    /** Sends since the clock was last read: it is read once every {@link #CLOCK_EVERY} sends. */
    private int unclocked;
    /** The last partition sent to, and its log: rows come in runs of one partition. */
    private PartitionWrite lastWrite;
    private Log lastLog;
    private volatile RuntimeException timerFailure;

    private GuardedSends(WriterSettings settings, Producer<byte[], byte[]> producer, boolean transactional, Renewal renewal) {
        this.settings = settings;
        this.producer = producer;
        this.transactional = transactional;
        this.renewal = renewal;
        long stallMs = settings.partitionStallMs();
        this.stallNanos = TimeUnit.MILLISECONDS.toNanos(stallMs);
        this.stepMillis = Math.max(10, Math.min(250, stallMs / 4));
        this.nextProbe = System.nanoTime();
        this.nextCheck = nextProbe + TimeUnit.MILLISECONDS.toNanos(stepMillis);
    }

    /** An idempotent (at-least-once) writer's: a stalled producer is closed and a new one made with the same settings. */
    static GuardedSends atLeastOnce(WriterSettings settings, Producer<byte[], byte[]> producer) {
        return new GuardedSends(settings, producer, false, stalled -> {
            stalled.close(Duration.ZERO);
            return Producers.create(settings.producerProperties());
        });
    }

    /** A transactional writer's, between beginTransaction and the commit: the stalled producer is
     *  replaced by a new holder of {@code transactionalId} (its initTransactions fences the stalled one
     *  and aborts the open transaction, with the records already written in it) in a new transaction. */
    static GuardedSends transactional(WriterSettings settings, String transactionalId, Producer<byte[], byte[]> producer) {
        return new GuardedSends(settings, producer, true, stalled -> {
            Producers.discard(settings, transactionalId);
            Producer<byte[], byte[]> fresh = Producers.transactional(settings, transactionalId);
            fresh.beginTransaction();
            return fresh;
        });
    }

    /** The producer sending now (after a renewal: the fresh one). */
    Producer<byte[], byte[]> producer() {
        return producer;
    }

    int renewals() {
        synchronized (sendLock) {
            return renewals;
        }
    }

    /** Bytes of keys and values kept for a resend of the open transaction. */
    long keptBytes() {
        synchronized (sendLock) {
            return keptBytes;
        }
    }

    /** Sends one record to the source partition's target partition ({@code timestamp} in ms or null); its
     *  acknowledgement goes to {@code write} ({@link PartitionWrite#acknowledge}). */
    void send(PartitionWrite write, long upstream, Long timestamp, byte[] key, byte[] value, RecordHeaders headers) {
        ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(write.targetTopic, write.partition, timestamp, key, value,
                                                                     headers);
        int size = (key == null ? 0 : key.length) + (value == null ? 0 : value.length);
        long timestampMs = timestamp == null ? 0 : timestamp;
        synchronized (sendLock) {
            rethrowTimerFailure();
            if (++unclocked >= CLOCK_EVERY) {
                unclocked = 0;
                if (System.nanoTime() - nextCheck >= 0) {
                    check();
                }
            }
            write.counted(upstream, timestampMs, size);
            if (write != lastWrite) {
                lastLog = logs.computeIfAbsent(write, Log::new);
                lastWrite = write;
            }
            Log log = lastLog;
            Pending entry = new Pending(record, upstream, timestampMs);
            int sentBy = generation;
            synchronized (log) {
                log.add(entry, sentBy);
            }
            if (transactional) {
                keptBytes += size;
            }
            producer.send(record, acknowledgement(log, entry, sentBy));
        }
    }

    private Callback acknowledgement(Log log, Pending entry, int sentBy) {
        return (metadata, exception) -> {
            synchronized (log) {
                if (entry.generation != sentBy) {
                    return;  // sent by a producer dropped since: the record was sent again
                }
                long latency = log.write.acknowledge(entry.upstream, entry.timestampMs, metadata, exception);
                if (exception == null) {
                    log.acknowledged(entry, latency, !transactional);
                }
            }
        };
    }

    /**
     * Waits until the producer has acknowledged (or failed) every record sent, looking for stalled
     * partitions every few hundred ms meanwhile (a renewal sends their records again and the wait goes
     * on with the fresh producer). What failed is in each {@link PartitionWrite}, as after a flush.
     */
    void flush() {
        while (true) {
            rethrowTimerFailure();
            int flushed = generation;
            Future<?> flushing = Producers.flushing(producer);
            boolean renewed = false;
            while (!renewed) {
                try {
                    flushing.get(stepMillis, TimeUnit.MILLISECONDS);
                    break;
                } catch (TimeoutException e) {
                    renewed = check();
                } catch (ExecutionException e) {
                    if (flushed == generation && e.getCause() instanceof RuntimeException failure) {
                        throw failure;  // as flush() itself would (a fenced transactional producer)
                    }
                    break;
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new InterruptException(e);
                }
            }
            if (!renewed && flushed == generation) {
                return;
            }
        }
    }

    /** A transaction committed: its records need no resend any more. */
    void committed() {
        synchronized (sendLock) {
            for (Log log : logs.values()) {
                synchronized (log) {
                    log.clear();
                }
            }
            keptBytes = 0;
        }
    }

    /** {@link #check} from a timer: a failed renewal is thrown to the writer's thread at its next send or flush. */
    void checkQuietly() {
        try {
            check();
        } catch (RuntimeException e) {
            timerFailure = e;
        }
    }

    /** Looks for stalled partitions and renews the producer when one is (see the class comment); true if it did. */
    boolean check() {
        synchronized (sendLock) {
            long now = System.nanoTime();
            nextCheck = now + TimeUnit.MILLISECONDS.toNanos(stepMillis);
            if (renewals >= MAX_RENEWALS || now - nextProbe < 0) {
                return false;
            }
            Map<TopicPartition, Long> stalled = new LinkedHashMap<>();
            for (Log log : logs.values()) {
                synchronized (log) {
                    long since = log.withoutProgress(now);
                    if (since >= stallNanos) {
                        stalled.put(log.target, TimeUnit.NANOSECONDS.toMillis(since));
                    }
                }
            }
            if (stalled.isEmpty()) {
                return false;
            }
            nextProbe = now + stallNanos;  // a cluster that does not answer now is asked again a stall later
            Set<TopicPartition> answering = Producers.leaders.apply(settings, stalled.keySet());
            if (answering.isEmpty()) {
                LOG.info("mm2spec writer: {} target partition(s) had no acknowledgement for {} ms or more, but their leaders do "
                         + "not answer: the producer keeps retrying ({}...)", stalled.size(),
                         TimeUnit.NANOSECONDS.toMillis(stallNanos), stalled.keySet().iterator().next());
                return false;
            }
            renew(stalled, answering);
            return true;
        }
    }

    private void renew(Map<TopicPartition, Long> stalled, Set<TopicPartition> answering) {
        int resentBy = generation + 1;
        generation = resentBy;
        long now = System.nanoTime();
        List<Log> again = new ArrayList<>();
        long records = 0;
        for (Log log : logs.values()) {
            synchronized (log) {
                if (log.resend(resentBy, now)) {
                    again.add(log);
                    records += log.entries.size();
                }
            }
        }
        renewals++;
        TopicPartition first = answering.iterator().next();
        LOG.warn("mm2spec writer: target partition {} had no acknowledgement for {} ms while its leader answers ({} stalled, {} "
                 + "answering); replacing the {}producer and sending its {} unacknowledged record(s) of {} partition(s) again "
                 + "(renewal {} of at most {})", first, stalled.get(first), stalled.size(), answering.size(),
                 transactional ? "transactional " : "", records, again.size(), renewals, MAX_RENEWALS);
        producer = renewal.renew(producer);
        Set<String> topics = new LinkedHashSet<>();
        for (Log log : again) {
            topics.add(log.target.topic());
        }
        Producers.warm(producer, new ArrayList<>(topics));
        for (Log log : again) {
            List<Pending> entries;
            synchronized (log) {
                entries = new ArrayList<>(log.entries);
            }
            for (Pending entry : entries) {
                producer.send(entry.record, acknowledgement(log, entry, resentBy));
            }
        }
    }

    private void rethrowTimerFailure() {
        RuntimeException failure = timerFailure;
        if (failure != null) {
            throw failure;
        }
    }

    /** One record sent and not given up yet. */
    private static final class Pending {
        final ProducerRecord<byte[], byte[]> record;
        final long upstream;
        final long timestampMs;
        /** The {@link GuardedSends#generation} of the producer it was last sent by. */
        int generation;
        boolean acknowledged;
        long latencyMs;

        Pending(ProducerRecord<byte[], byte[]> record, long upstream, long timestampMs) {
            this.record = record;
            this.upstream = upstream;
            this.timestampMs = timestampMs;
        }
    }

    /** One target partition's records that may have to be sent again, in send (upstream) order. */
    private static final class Log {
        final PartitionWrite write;
        final TopicPartition target;
        final ArrayDeque<Pending> entries = new ArrayDeque<>();
        int unacknowledged;
        /** Acknowledgements so far. The clock is not read per record: {@link #withoutProgress} notes
         *  at each check whether any came or the partition was idle, within a check's step. */
        long acknowledgements;
        private long seenAcknowledgements;
        private boolean seenIdle = true;
        private long progressAt;

        Log(PartitionWrite write) {
            this.write = write;
            this.target = new TopicPartition(write.targetTopic, write.partition);
        }

        void add(Pending entry, int generation) {
            entry.generation = generation;
            unacknowledged++;
            entries.addLast(entry);
        }

        /** {@code trim}: at-least-once keeps only what follows the first unacknowledged record. */
        void acknowledged(Pending entry, long latencyMs, boolean trim) {
            entry.acknowledged = true;
            entry.latencyMs = latencyMs;
            unacknowledged--;
            acknowledgements++;
            while (trim && !entries.isEmpty() && entries.peekFirst().acknowledged) {
                entries.pollFirst();
            }
        }

        /** How long (nanos) it has held unacknowledged records with none acknowledged, 0 if it holds none;
         *  counted from the check that first saw it so. */
        long withoutProgress(long now) {
            if (seenIdle || acknowledgements != seenAcknowledgements) {
                progressAt = now;
                seenAcknowledgements = acknowledgements;
            }
            seenIdle = unacknowledged == 0;
            return seenIdle ? 0 : now - progressAt;
        }

        /** Marks every kept record to be sent again by generation {@code resentBy}; false if none is kept. */
        boolean resend(int resentBy, long now) {
            if (entries.isEmpty()) {
                return false;
            }
            long acknowledgedAgain = 0;
            long latencyAgain = 0;
            for (Pending entry : entries) {
                if (entry.acknowledged) {
                    acknowledgedAgain++;
                    latencyAgain += entry.latencyMs;
                    entry.acknowledged = false;
                }
                entry.generation = resentBy;
            }
            write.rewind(entries.peekFirst().upstream, acknowledgedAgain, latencyAgain);
            unacknowledged = entries.size();
            progressAt = now;
            seenAcknowledgements = acknowledgements;
            seenIdle = false;
            return true;
        }

        void clear() {
            entries.clear();
            unacknowledged = 0;
        }
    }
}
