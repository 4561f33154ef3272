package mm2spec.spark.source;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;

/** Makes a {@link SliceReader} for each input partition, on the executor ({@link RealTimeSliceReader}
 *  in Real-time Mode). */
final class SliceReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        SliceInput input = (SliceInput) partition;
        return input.realTime ? new RealTimeSliceReader(input) : new SliceReader(input);
    }
}
