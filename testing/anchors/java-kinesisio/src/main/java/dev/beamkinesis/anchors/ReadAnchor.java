package dev.beamkinesis.anchors;

import java.util.Map;
import org.apache.beam.runners.direct.DirectOptions;
import org.apache.beam.sdk.Pipeline;
import org.apache.beam.sdk.PipelineResult;
import org.apache.beam.sdk.io.aws2.kinesis.KinesisIO;
import org.apache.beam.sdk.io.aws2.kinesis.KinesisRecord;
import org.apache.beam.sdk.options.PipelineOptions;
import org.apache.beam.sdk.transforms.DoFn;
import org.apache.beam.sdk.transforms.ParDo;
import software.amazon.kinesis.common.InitialPositionInStream;

/**
 * Reads --stream from TRIM_HORIZON with Beam Java's KinesisIO on the DirectRunner and reports
 * the count and checksum of the user records it emits.
 *
 * <p>Usage: ReadAnchor --endpoint=URL --stream=NAME --records=N [--bound=stop|max-records]
 * [--grace-ms=0] [--timeout-s=120]
 *
 * <p>--bound=max-records is the documented bounded read, {@code withMaxNumRecords(N)}. On the
 * DirectRunner it applies N to each split of the source, and each split's records are released
 * only when that split has read N, so a stream holding exactly N records over several splits
 * never completes. --bound=stop (the default) runs the read unbounded and stops the pipeline
 * once N records (plus --grace-ms, to catch duplicates) have reached the counting step.
 */
public final class ReadAnchor {
  private ReadAnchor() {}

  /** Tallies each user record the read emits. */
  static final class TallyFn extends DoFn<KinesisRecord, Void> {
    @ProcessElement
    public void process(@Element KinesisRecord r) {
      Anchor.tally(r.getShardId(), r.getPartitionKey(), r.getDataAsBytes());
    }
  }

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = Anchor.args(argv);
    String stream = Anchor.need(a, "stream");
    long n = Long.parseLong(Anchor.need(a, "records"));
    boolean maxRecords = "max-records".equals(a.getOrDefault("bound", "stop"));
    long graceNanos = Long.parseLong(a.getOrDefault("grace-ms", "0")) * 1_000_000L;
    long timeoutNanos = Long.parseLong(a.getOrDefault("timeout-s", "120")) * 1_000_000_000L;

    PipelineOptions options = Anchor.options();
    options.as(DirectOptions.class).setBlockOnRun(false);
    KinesisIO.Read read =
        KinesisIO.read()
            .withStreamName(stream)
            .withInitialPositionInStream(InitialPositionInStream.TRIM_HORIZON)
            .withClientConfiguration(Anchor.client(Anchor.need(a, "endpoint")));
    if (maxRecords) {
      read = read.withMaxNumRecords(n);
    }
    Pipeline p = Pipeline.create(options);
    p.apply("Read", read).apply("Tally", ParDo.of(new TallyFn()));

    Anchor.startNanos = System.nanoTime();
    PipelineResult result = p.run();
    boolean complete = false;
    long reached = 0;
    while (System.nanoTime() - Anchor.startNanos < timeoutNanos) {
      if (maxRecords && result.getState().isTerminal()) {
        complete = result.getState() == PipelineResult.State.DONE;
        break;
      }
      if (!maxRecords && Anchor.COUNT.get() >= n) {
        if (reached == 0) {
          reached = System.nanoTime();
        }
        if (System.nanoTime() - reached >= graceNanos) {
          complete = true;
          break;
        }
      }
      Thread.sleep(5);
    }
    Anchor.report("read", stream, complete);
    // The unbounded read never ends on its own; cancel() waits for the runner's threads,
    // which can take long, so the process exits once the report is out.
    Runtime.getRuntime().halt(0);
  }
}
