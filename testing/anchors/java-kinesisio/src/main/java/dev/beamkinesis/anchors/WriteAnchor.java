package dev.beamkinesis.anchors;

import java.util.Map;
import org.apache.beam.sdk.Pipeline;
import org.apache.beam.sdk.io.GenerateSequence;
import org.apache.beam.sdk.io.aws2.kinesis.KinesisIO;
import org.apache.beam.sdk.io.aws2.kinesis.KinesisPartitioner;
import org.apache.beam.sdk.transforms.DoFn;
import org.apache.beam.sdk.transforms.ParDo;
import org.joda.time.Duration;

/**
 * Writes messages 0..--records-1 to --stream with Beam Java's KinesisIO on the DirectRunner,
 * with its default KPL aggregation (shard-aware) unless --aggregation=false, and reports the
 * count and checksum of the messages handed to the write and the bundles they came in.
 *
 * <p>Usage: WriteAnchor --endpoint=URL --stream=NAME --records=N [--aggregation=false]
 * [--max-buffered-ms=MS] [--experiments=a,b] [--target-parallelism=N]
 *
 * <p>KinesisIO's aggregation flushes every aggregate at the end of each bundle and otherwise
 * after a buffering time (RecordAggregation maxBufferedTime, 500 ms by default, with 70% jitter);
 * --max-buffered-ms sets that time.
 *
 * <p>Message i has partition key "k%07d" and 100 bytes of data: i in decimal, then the letters
 * 'a' + j % 26 for positions j after it, as the Go benchmark's benchKey and benchData.
 */
public final class WriteAnchor {
  private WriteAnchor() {}

  static String key(long i) {
    return String.format("k%07d", i);
  }

  static byte[] data(long i) {
    byte[] b = new byte[100];
    byte[] digits = Long.toString(i).getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    System.arraycopy(digits, 0, b, 0, digits.length);
    for (int j = digits.length; j < b.length; j++) {
      b[j] = (byte) ('a' + j % 26);
    }
    return b;
  }

  /** Partition key of message i; the data is generated again by the serializer. */
  static final class KeyPartitioner implements KinesisPartitioner<Long> {
    @Override
    public String getPartitionKey(Long i) {
      return key(i);
    }
  }

  /** Tallies each message on its way to the write, and the bundles the write is given. */
  static final class TallyFn extends DoFn<Long, Long> {
    private transient long inBundle;

    @StartBundle
    public void start() {
      inBundle = 0;
    }

    @ProcessElement
    public void process(@Element Long i, OutputReceiver<Long> out) {
      Anchor.tally("", key(i), data(i));
      inBundle++;
      out.output(i);
    }

    @FinishBundle
    public void finish() {
      if (inBundle > 0) {
        Anchor.bundle(inBundle);
      }
    }
  }

  public static void main(String[] argv) {
    Map<String, String> a = Anchor.args(argv);
    String stream = Anchor.need(a, "stream");
    long n = Long.parseLong(Anchor.need(a, "records"));
    KinesisIO.Write<Long> write =
        KinesisIO.<Long>write()
            .withStreamName(stream)
            .withPartitioner(new KeyPartitioner())
            .withSerializer(WriteAnchor::data)
            .withClientConfiguration(Anchor.client(Anchor.need(a, "endpoint")));
    if ("false".equals(a.get("aggregation"))) {
      write = write.withRecordAggregationDisabled();
    }
    if (a.containsKey("max-buffered-ms")) {
      Duration buffered = Duration.millis(Long.parseLong(a.get("max-buffered-ms")));
      write = write.withRecordAggregation(b -> b.maxBufferedTime(buffered));
    }
    Pipeline p = Pipeline.create(Anchor.options(a));
    p.apply("Messages", GenerateSequence.from(0).to(n))
        .apply("Tally", ParDo.of(new TallyFn()))
        .apply("Write", write);
    Anchor.run("write", stream, () -> p.run().waitUntilFinish());
  }
}
