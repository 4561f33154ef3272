package mm2spec.spark;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;

/**
 * Called by the driver before a flow's exactly-once query starts. It fences every transaction that
 * an earlier run of the flow left open on the target. Kafka keeps an open transaction until its
 * {@code transaction.timeout.ms}, and {@code read_committed} consumers on DR read nothing past its
 * first record until then. The new run re-initialises only the transactional ids it writes with:
 * <ul>
 *   <li>Real-time Mode uses one id per slice, so the slices that a lower {@code tasksMax} no longer
 *       has would stay open.</li>
 *   <li>Micro-batch mode uses one id per source partition, so a partition with no new records would
 *       stay open.</li>
 *   <li>A change of mode leaves every id of the other mode.</li>
 * </ul>
 * No task of the flow runs at this point (its earlier query has stopped or its JVM is gone), so
 * every open transaction under the flow's prefix belongs to a run that is over. Fencing aborts it
 * at once. The records it held were never committed and their source offsets were not either, so
 * the new run writes them again.
 */
public final class Fencing {
    private Fencing() {
    }

    /** Fences the open transactions under the flow's {@code transactional.id.prefix}. Returns their ids, one
     *  per line (empty when there were none); an error of the Admin calls is thrown to the caller. */
    public static String fenceOpen(Map<String, String> settings, long timeoutMs) throws Exception {
        WriterSettings parsed = new WriterSettings(settings);
        String prefix = parsed.transactionalIdPrefix();
        try (Admin admin = Admin.create(parsed.adminProperties())) {
            Collection<TransactionListing> listed = admin.listTransactions().all().get(timeoutMs, TimeUnit.MILLISECONDS);
            List<String> open = open(listed, prefix);
            if (!open.isEmpty()) {
                admin.fenceProducers(open).all().get(timeoutMs, TimeUnit.MILLISECONDS);
            }
            return String.join("\n", open);
        }
    }

    /** The ids under {@code prefix} whose transaction is ongoing (a prepared one ends by itself), sorted. */
    static List<String> open(Collection<TransactionListing> listed, String prefix) {
        List<String> open = new ArrayList<>();
        for (TransactionListing listing : listed) {
            if (listing.transactionalId().startsWith(prefix) && listing.state() == TransactionState.ONGOING) {
                open.add(listing.transactionalId());
            }
        }
        Collections.sort(open);
        return open;
    }
}
