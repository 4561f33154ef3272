import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.connect.mirror.Checkpoint;
import org.apache.kafka.connect.mirror.OffsetSync;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;
import org.apache.kafka.connect.mirror.ReplicationPolicy;

/**
 * Reads what the Spark mirroring job wrote with MirrorMaker 2's own classes, for the integration
 * tests (compiled at test time against the Kafka jars). One command per run, one result per line:
 *
 *   syncs BOOTSTRAP TOPIC               -> "sync TOPIC PARTITION UPSTREAM DOWNSTREAM" per record (OffsetSync.deserializeRecord)
 *   checkpoints BOOTSTRAP TOPIC         -> "checkpoint GROUP TOPIC PARTITION UPSTREAM DOWNSTREAM" (Checkpoint.deserializeRecord)
 *   translate BOOTSTRAP ALIAS GROUP POLICY -> "offset TOPIC PARTITION OFFSET" (RemoteClusterUtils.translateOffsets)
 *   names POLICY SOURCE TARGET TOPIC... -> the policy's internal topic names, remote names, internal flags
 */
public class Mm2Check {
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "syncs":
                for (ConsumerRecord<byte[], byte[]> r : readAll(args[1], args[2])) {
                    OffsetSync s = OffsetSync.deserializeRecord(r);
                    System.out.println("sync " + s.topicPartition().topic() + " " + s.topicPartition().partition()
                        + " " + s.upstreamOffset() + " " + s.downstreamOffset());
                }
                break;
            case "checkpoints":
                for (ConsumerRecord<byte[], byte[]> r : readAll(args[1], args[2])) {
                    Checkpoint c = Checkpoint.deserializeRecord(r);
                    System.out.println("checkpoint " + c.consumerGroupId() + " " + c.topicPartition().topic() + " "
                        + c.topicPartition().partition() + " " + c.upstreamOffset() + " " + c.downstreamOffset());
                }
                break;
            case "translate": {
                Map<String, Object> props = new HashMap<>();
                props.put("bootstrap.servers", args[1]);
                props.put("replication.policy.class", args[4]);
                Map<TopicPartition, OffsetAndMetadata> offsets =
                    RemoteClusterUtils.translateOffsets(props, args[2], args[3], Duration.ofSeconds(60));
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                    System.out.println("offset " + e.getKey().topic() + " " + e.getKey().partition() + " " + e.getValue().offset());
                }
                break;
            }
            case "names": {
                ReplicationPolicy policy = (ReplicationPolicy) Class.forName(args[1]).getDeclaredConstructor().newInstance();
                System.out.println("offsetSyncsTopic " + policy.offsetSyncsTopic(args[2]));
                System.out.println("checkpointsTopic " + policy.checkpointsTopic(args[2]));
                for (int i = 4; i < args.length; i++) {
                    System.out.println("remote " + args[i] + " " + policy.formatRemoteTopic(args[2], args[i]));
                    System.out.println("internal " + args[i] + " " + policy.isInternalTopic(args[i]));
                }
                break;
            }
            default:
                throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    static List<ConsumerRecord<byte[], byte[]>> readAll(String bootstrap, String topic) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("enable.auto.commit", "false");
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(Collections.singletonList(tp));
            consumer.seekToBeginning(Collections.singletonList(tp));
            long end = consumer.endOffsets(Collections.singletonList(tp)).get(tp);
            long deadline = System.currentTimeMillis() + 60_000;
            while (consumer.position(tp) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    out.add(r);
                }
            }
        }
        return out;
    }
}
