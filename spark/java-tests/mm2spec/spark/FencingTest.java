package mm2spec.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.junit.jupiter.api.Test;

class FencingTest {
    @Test
    void fencesOnlyTheFlowsOngoingTransactions() {
        String prefix = "mm2spec-job-flow-";
        List<TransactionListing> listed = List.of(
            new TransactionListing(prefix + "rt-1", 7, TransactionState.ONGOING),
            new TransactionListing(prefix + "orders.3", 8, TransactionState.ONGOING),
            new TransactionListing(prefix + "rt-0", 9, TransactionState.COMPLETE_COMMIT),
            new TransactionListing(prefix + "rt-2", 10, TransactionState.PREPARE_COMMIT),
            new TransactionListing(prefix + "rt-3", 11, TransactionState.EMPTY),
            new TransactionListing("mm2spec-job-other-flow-rt-1", 12, TransactionState.ONGOING),
            new TransactionListing("an-application", 13, TransactionState.ONGOING));
        assertEquals(List.of(prefix + "orders.3", prefix + "rt-1"), Fencing.open(listed, prefix));
    }
}
