package dev.beamkinesis.anchors;

import java.util.Map;
import org.apache.beam.runners.direct.DirectOptions;
import org.apache.beam.sdk.Pipeline;
import org.apache.beam.sdk.PipelineResult;
import org.apache.beam.sdk.io.aws2.kinesis.KinesisIO;
import org.apache.beam.sdk.io.aws2.kinesis.KinesisRecord;
import org.apache.beam.sdk.io.aws2.kinesis.RateLimitPolicyFactory;
import org.apache.beam.sdk.options.PipelineOptions;
import org.apache.beam.sdk.transforms.DoFn;
import org.apache.beam.sdk.transforms.ParDo;
import org.joda.time.Duration;
import software.amazon.kinesis.common.InitialPositionInStream;

/**
 * Reads --stream from TRIM_HORIZON with Beam Java's KinesisIO on the DirectRunner and reports
 * the count and checksum of the user records it emits.
 *
 * <p>Usage: ReadAnchor --endpoint=URL --stream=NAME --records=N [--bound=stop|max-records]
 * [--grace-ms=0] [--timeout-s=120] [--experiments=a,b] [--request-records-limit=N]
 * [--max-capacity-per-shard=N] [--rate-limit=default|none|fixed:MS] [--target-parallelism=N]
 * [--consumer-arn=ARN]
 *
 * <p>--consumer-arn reads through enhanced fan-out ({@code withConsumerArn}): SubscribeToShard
 * over HTTP/2 with the registered consumer, instead of GetRecords.
 *
 * <p>--bound=max-records is the documented bounded read, {@code withMaxNumRecords(N)}: Beam's
 * BoundedReadFromUnboundedSource splits the source (one shard per split here), gives each split
 * an equal share of N and retries each split until it has read its share, so a stream holding
 * exactly N records never completes unless every shard holds at least its share. --bound=stop
 * (the default) runs the read unbounded and stops the pipeline once N records (plus --grace-ms,
 * to catch duplicates) have reached the counting step.
 *
 * <p>The other options are the knobs a user would turn: --experiments for the pipeline (on the
 * DirectRunner, {@code use_sdf_read} reads through the splittable-DoFn wrapper instead of the
 * primitive read), and KinesisIO's {@code withRequestRecordsLimit}, {@code
 * withMaxCapacityPerShard} and rate-limit policy (KinesisIO's default backs off 100 ms to 1 s
 * after an empty GetRecords; none polls without pause; fixed:MS sleeps MS after every call).
 */
public final class ReadAnchor {
  private ReadAnchor() {}

  /** Tallies each user record the read emits, and the bundles they come in. */
  static final class TallyFn extends DoFn<KinesisRecord, Void> {
    private transient long inBundle;

    @StartBundle
    public void start() {
      inBundle = 0;
    }

    @ProcessElement
    public void process(@Element KinesisRecord r) {
      Anchor.tally(r.getShardId(), r.getPartitionKey(), r.getDataAsBytes());
      inBundle++;
    }

    @FinishBundle
    public void finish() {
      if (inBundle > 0) {
        Anchor.bundle(inBundle);
      }
    }
  }

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = Anchor.args(argv);
    String stream = Anchor.need(a, "stream");
    long n = Long.parseLong(Anchor.need(a, "records"));
    boolean maxRecords = "max-records".equals(a.getOrDefault("bound", "stop"));
    long graceNanos = Long.parseLong(a.getOrDefault("grace-ms", "0")) * 1_000_000L;
    long timeoutNanos = Long.parseLong(a.getOrDefault("timeout-s", "120")) * 1_000_000_000L;

    PipelineOptions options = Anchor.options(a);
    options.as(DirectOptions.class).setBlockOnRun(false);
    KinesisIO.Read read =
        KinesisIO.read()
            .withStreamName(stream)
            .withInitialPositionInStream(InitialPositionInStream.TRIM_HORIZON)
            .withClientConfiguration(Anchor.client(Anchor.need(a, "endpoint")));
    if (a.containsKey("request-records-limit")) {
      read = read.withRequestRecordsLimit(Integer.parseInt(a.get("request-records-limit")));
    }
    if (a.containsKey("consumer-arn")) {
      read = read.withConsumerArn(a.get("consumer-arn"));
    }
    if (a.containsKey("max-capacity-per-shard")) {
      read = read.withMaxCapacityPerShard(Integer.parseInt(a.get("max-capacity-per-shard")));
    }
    String rateLimit = a.getOrDefault("rate-limit", "default");
    if (rateLimit.equals("none")) {
      read = read.withCustomRateLimitPolicy(RateLimitPolicyFactory.withoutLimiter());
    } else if (rateLimit.startsWith("fixed:")) {
      read =
          read.withFixedDelayRateLimitPolicy(
              Duration.millis(Long.parseLong(rateLimit.substring("fixed:".length()))));
    } else if (!rateLimit.equals("default")) {
      throw new IllegalArgumentException("--rate-limit=" + rateLimit);
    }
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
