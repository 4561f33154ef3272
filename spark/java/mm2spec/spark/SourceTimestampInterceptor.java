package mm2spec.spark;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;

import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * Gives a mirrored record its source timestamp.
 *
 * <p>Spark's Kafka sink builds each ProducerRecord without a timestamp, so the producer would stamp
 * the time of mirroring. The mirroring job appends the source timestamp (decimal milliseconds) as
 * the record's last header, named {@value #HEADER}; this interceptor removes that header and sets
 * the record's timestamp from it, so the target record equals the source record: same key, value,
 * headers (order kept), partition and timestamp. Records without the header pass unchanged.
 */
public class SourceTimestampInterceptor implements ProducerInterceptor<byte[], byte[]> {
    public static final String HEADER = "__mm2spec.source.timestamp";

    @Override
    public ProducerRecord<byte[], byte[]> onSend(ProducerRecord<byte[], byte[]> record) {
        Header[] headers = record.headers().toArray();
        if (headers.length == 0) {
            return record;
        }
        Header last = headers[headers.length - 1];
        if (!HEADER.equals(last.key()) || last.value() == null) {
            return record;
        }
        long timestamp = Long.parseLong(new String(last.value(), StandardCharsets.US_ASCII));
        RecordHeaders kept = new RecordHeaders(Arrays.copyOf(headers, headers.length - 1));
        return new ProducerRecord<>(record.topic(), record.partition(), timestamp, record.key(), record.value(), kept);
    }

    @Override
    public void onAcknowledgement(RecordMetadata metadata, Exception exception) {
    }

    @Override
    public void close() {
    }

    @Override
    public void configure(Map<String, ?> configs) {
    }
}
