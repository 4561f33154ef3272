package mm2spec.spark.source;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

/** The slice's topics pass from a task's reader to its writer through the task's thread, and to no other. */
class SliceTopicsTest {
    @Test
    void theWriterOfTheReadersThreadLearnsTheSlicesTopics() {
        List<String> named = new ArrayList<>(List.of("orders", "payments"));
        SliceTopics.set(named);
        named.clear();  // the reader's own list may change after: what was named stays
        assertEquals(List.of("orders", "payments"), SliceTopics.current());
    }

    @Test
    void anotherThreadLearnsNothing() throws InterruptedException {
        SliceTopics.set(List.of("orders"));
        AtomicReference<List<String>> seen = new AtomicReference<>();
        Thread other = new Thread(() -> seen.set(SliceTopics.current()));
        other.start();
        other.join();
        assertEquals(List.of(), seen.get());
    }
}
