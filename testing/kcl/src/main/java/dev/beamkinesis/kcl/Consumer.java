package dev.beamkinesis.kcl;

import java.io.BufferedWriter;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.http.Protocol;
import software.amazon.awssdk.http.nio.netty.NettyNioAsyncHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.cloudwatch.CloudWatchAsyncClient;
import software.amazon.awssdk.services.dynamodb.DynamoDbAsyncClient;
import software.amazon.awssdk.services.kinesis.KinesisAsyncClient;
import software.amazon.kinesis.common.ConfigsBuilder;
import software.amazon.kinesis.common.InitialPositionInStream;
import software.amazon.kinesis.common.InitialPositionInStreamExtended;
import software.amazon.kinesis.coordinator.CoordinatorConfig;
import software.amazon.kinesis.coordinator.Scheduler;
import software.amazon.kinesis.exceptions.KinesisClientLibException;
import software.amazon.kinesis.lifecycle.events.InitializationInput;
import software.amazon.kinesis.lifecycle.events.LeaseLostInput;
import software.amazon.kinesis.lifecycle.events.ProcessRecordsInput;
import software.amazon.kinesis.lifecycle.events.ShardEndedInput;
import software.amazon.kinesis.lifecycle.events.ShutdownRequestedInput;
import software.amazon.kinesis.metrics.MetricsLevel;
import software.amazon.kinesis.metrics.NullMetricsFactory;
import software.amazon.kinesis.processor.RecordProcessorCheckpointer;
import software.amazon.kinesis.processor.ShardRecordProcessor;
import software.amazon.kinesis.processor.ShardRecordProcessorFactory;
import software.amazon.kinesis.retrieval.KinesisClientRecord;
import software.amazon.kinesis.retrieval.polling.PollingConfig;

/**
 * A KCL 3.x application for the interop test (testing/kcl/interop_test.go): it consumes a stream
 * with polling retrieval, writes every user record it processed to an output file, one line each
 * (shard id, partition key, sequence number, sub-sequence number, base64 data, tab-separated),
 * checkpoints every {@code --checkpoint-every} records of a shard (0: at the end of each batch),
 * and stops gracefully after {@code --max-records} records, after {@code --max-seconds}, or on
 * SIGINT/SIGTERM. Records arriving after the stop are neither written nor checkpointed, so the
 * records written after a shard's last checkpoint are exactly the ones its successor reads again.
 *
 * <p>Metrics are off (level NONE, a null metrics factory) and so is KCL 3's worker-metrics
 * collection, which would call the EC2 metadata address. The lease timings are short, so one
 * worker takes the leases within seconds. The application name is the lease table's name.
 *
 * <p>It builds on KCL 3.1 and on KCL 3.5. {@code --single-table true} (KCL 3.5 only) sets
 * {@code migrateAllEntitiesToLeaseTable}: KCL keeps its worker metrics and coordinator state
 * in the lease table, as KCL 3.5 does anyway for an application without a CoordinatorState table.
 */
public final class Consumer {
  private final Map<String, String> args;
  private final BufferedWriter out;
  private final long maxRecords;
  private final int checkpointEvery;
  private final AtomicLong processed = new AtomicLong();
  private final AtomicLong checkpoints = new AtomicLong();
  private final AtomicLong written = new AtomicLong();
  private final AtomicBoolean stopping = new AtomicBoolean();
  private final AtomicBoolean halted = new AtomicBoolean();
  private final CountDownLatch stop = new CountDownLatch(1);

  private Consumer(Map<String, String> args) throws IOException {
    this.args = args;
    this.out = Files.newBufferedWriter(Path.of(need("out")), StandardCharsets.UTF_8);
    this.maxRecords = Long.parseLong(args.getOrDefault("max-records", "0"));
    this.checkpointEvery = Integer.parseInt(args.getOrDefault("checkpoint-every", "0"));
  }

  public static void main(String[] argv) throws Exception {
    Map<String, String> args = new HashMap<>();
    for (int i = 0; i + 1 < argv.length; i += 2) {
      if (!argv[i].startsWith("--")) {
        throw new IllegalArgumentException("want --flag value pairs, got " + argv[i]);
      }
      args.put(argv[i].substring(2), argv[i + 1]);
    }
    System.exit(new Consumer(args).run());
  }

  private String need(String flag) {
    String v = args.get(flag);
    if (v == null) {
      throw new IllegalArgumentException("--" + flag + " is required");
    }
    return v;
  }

  private long millis(String flag, long dflt) {
    return Long.parseLong(args.getOrDefault(flag, Long.toString(dflt)));
  }

  private int run() throws Exception {
    String stream = need("stream");
    String app = need("app");
    String worker = args.getOrDefault("worker", "kcl-worker");
    Region region = Region.of(args.getOrDefault("region", "us-east-1"));
    StaticCredentialsProvider creds =
        StaticCredentialsProvider.create(AwsBasicCredentials.create("test", "test"));
    // --protocol http1.1 (default) or h2 (cleartext HTTP/2 with prior knowledge, which the
    // server speaks too). CBOR stays on (the SDK's default).
    Protocol protocol = "h2".equals(args.getOrDefault("protocol", "http1.1")) ? Protocol.HTTP2 : Protocol.HTTP1_1;
    KinesisAsyncClient kinesis = KinesisAsyncClient.builder()
        .region(region).credentialsProvider(creds)
        .endpointOverride(URI.create(need("kinesis-endpoint")))
        .httpClientBuilder(NettyNioAsyncHttpClient.builder().protocol(protocol))
        .build();
    DynamoDbAsyncClient dynamo = DynamoDbAsyncClient.builder()
        .region(region).credentialsProvider(creds)
        .endpointOverride(URI.create(need("dynamodb-endpoint")))
        .build();
    // Built because ConfigsBuilder wants one; with metrics off it is never called.
    CloudWatchAsyncClient cloudWatch = CloudWatchAsyncClient.builder()
        .region(region).credentialsProvider(creds)
        .endpointOverride(URI.create(need("dynamodb-endpoint")))
        .build();

    ConfigsBuilder cfg = new ConfigsBuilder(stream, app, kinesis, dynamo, cloudWatch, worker, new Factory());
    long failover = millis("failover-ms", 3000);
    var leases = cfg.leaseManagementConfig()
        .failoverTimeMillis(failover)
        .leaseAssignmentIntervalMillis(failover)
        .shardSyncIntervalMillis(millis("shard-sync-ms", 1000))
        .leasesRecoveryAuditorExecutionFrequencyMillis(millis("shard-sync-ms", 1000))
        .leasesRecoveryAuditorInconsistencyConfidenceThreshold(1)
        .initialPositionInStream(InitialPositionInStreamExtended.newInitialPosition(InitialPositionInStream.TRIM_HORIZON));
    leases.workerUtilizationAwareAssignmentConfig().disableWorkerMetrics(true);
    CoordinatorConfig coordinator = cfg.coordinatorConfig()
        .parentShardPollIntervalMillis(200)
        .shardConsumerDispatchPollIntervalMillis(100);
    if (Boolean.parseBoolean(args.getOrDefault("single-table", "false"))) {
      migrateAllEntitiesToLeaseTable(coordinator);
    }
    var metrics = cfg.metricsConfig().metricsLevel(MetricsLevel.NONE).metricsFactory(new NullMetricsFactory());
    PollingConfig polling = new PollingConfig(stream, kinesis)
        .idleTimeBetweenReadsInMillis(millis("idle-ms", 200))
        .maxRecords((int) millis("max-records-per-fetch", 100));
    Scheduler scheduler = new Scheduler(
        cfg.checkpointConfig(), coordinator, leases, cfg.lifecycleConfig(), metrics,
        cfg.processorConfig(), cfg.retrievalConfig().retrievalSpecificConfig(polling));

    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      halted.set(true);
      if (!stopping.getAndSet(true)) {
        System.err.println("kcl: signal, shutting down gracefully");
        shutDown(scheduler);
      }
    }));
    Thread t = new Thread(scheduler, "kcl-scheduler");
    t.setDaemon(true);
    t.start();
    System.err.println("kcl: scheduler started as worker " + worker + " on table " + app);

    long maxSeconds = millis("max-seconds", 120);
    boolean done = stop.await(maxSeconds, TimeUnit.SECONDS);
    halted.set(true);
    if (!stopping.getAndSet(true)) {
      shutDown(scheduler);
    }
    synchronized (out) {
      out.flush();
      out.close();
    }
    System.err.printf("kcl: wrote %d records, %d checkpoints%n", written.get(), checkpoints.get());
    System.out.printf("KCL-DONE written=%d checkpoints=%d%n", written.get(), checkpoints.get());
    System.out.flush();
    return done ? 0 : 3;
  }

  /**
   * Sets KCL 3.5's {@code CoordinatorConfig.migrateAllEntitiesToLeaseTable(true)}, through
   * reflection so that the consumer still builds on KCL 3.1, which has no such setting.
   */
  private static void migrateAllEntitiesToLeaseTable(CoordinatorConfig coordinator) throws ReflectiveOperationException {
    try {
      coordinator.getClass().getMethod("migrateAllEntitiesToLeaseTable", boolean.class).invoke(coordinator, true);
    } catch (NoSuchMethodException e) {
      throw new IllegalArgumentException("--single-table needs KCL 3.5 or later: this KCL has no migrateAllEntitiesToLeaseTable", e);
    }
    System.err.println("kcl: migrateAllEntitiesToLeaseTable is on");
  }

  /**
   * Shuts the scheduler down gracefully, within {@code --shutdown-seconds} (default 5), then
   * at once. KCL 3.1.0's graceful shutdown can wait forever for a lease assigned to the worker
   * just as the shutdown started (its new record processor is never told to shut down); the
   * checkpoints are all written by then, so stopping at once loses nothing.
   */
  private void shutDown(Scheduler scheduler) {
    long seconds = millis("shutdown-seconds", 5);
    try {
      boolean ok = scheduler.startGracefulShutdown().get(seconds, TimeUnit.SECONDS);
      System.err.println("kcl: graceful shutdown " + (ok ? "completed" : "did not complete"));
    } catch (TimeoutException e) {
      System.err.printf("kcl: graceful shutdown did not complete in %ds; shutting down at once%n", seconds);
      scheduler.shutdown();
    } catch (Exception e) {
      System.err.println("kcl: graceful shutdown failed: " + e + "; shutting down at once");
      scheduler.shutdown();
    }
  }

  private final class Factory implements ShardRecordProcessorFactory {
    @Override
    public ShardRecordProcessor shardRecordProcessor() {
      return new Processor();
    }
  }

  /** The processor of one shard lease. */
  private final class Processor implements ShardRecordProcessor {
    private String shard;
    private KinesisClientRecord lastWritten;
    private int sinceCheckpoint;
    private boolean skipped;

    @Override
    public void initialize(InitializationInput in) {
      shard = in.shardId();
      System.err.printf("kcl: %s starts at %s%n", shard, in.extendedSequenceNumber());
    }

    @Override
    public void processRecords(ProcessRecordsInput in) {
      List<String> lines = new ArrayList<>();
      List<KinesisClientRecord> marks = new ArrayList<>();
      for (KinesisClientRecord r : in.records()) {
        if (halted.get()) {
          skipped = true;
          break;
        }
        long n = processed.incrementAndGet();
        if (maxRecords > 0 && n > maxRecords) {
          skipped = true;
          requestStop();
          break;
        }
        byte[] data = new byte[r.data().remaining()];
        r.data().duplicate().get(data);
        lines.add(String.join("\t", shard, r.partitionKey(), r.sequenceNumber(),
            Long.toString(r.subSequenceNumber()), Base64.getEncoder().encodeToString(data)));
        lastWritten = r;
        written.incrementAndGet();
        if (checkpointEvery > 0 && ++sinceCheckpoint >= checkpointEvery) {
          marks.add(r);
          sinceCheckpoint = 0;
        }
        if (maxRecords > 0 && n == maxRecords) {
          requestStop();
        }
      }
      // Lines first, then the checkpoints that cover them: what is checkpointed is written.
      write(lines);
      try {
        for (KinesisClientRecord m : marks) {
          checkpoint(in.checkpointer(), m);
        }
        if (checkpointEvery == 0 && lastWritten != null && !lines.isEmpty()) {
          checkpoint(in.checkpointer(), lastWritten);
        }
      } catch (KinesisClientLibException e) {
        System.err.printf("kcl: checkpoint of %s failed: %s%n", shard, e);
      }
    }

    private void checkpoint(RecordProcessorCheckpointer cp, KinesisClientRecord r) throws KinesisClientLibException {
      cp.checkpoint(r.sequenceNumber(), r.subSequenceNumber());
      checkpoints.incrementAndGet();
      System.err.printf("kcl: %s checkpointed %s/%d%n", shard, r.sequenceNumber(), r.subSequenceNumber());
    }

    @Override
    public void leaseLost(LeaseLostInput in) {
      System.err.printf("kcl: lost the lease of %s%n", shard);
    }

    @Override
    public void shardEnded(ShardEndedInput in) {
      if (skipped || halted.get()) {
        // Records of this shard were left unprocessed: SHARD_END would skip them.
        System.err.printf("kcl: %s ended while stopping; not checkpointing SHARD_END%n", shard);
        return;
      }
      try {
        in.checkpointer().checkpoint();
        checkpoints.incrementAndGet();
        System.err.printf("kcl: %s checkpointed SHARD_END%n", shard);
      } catch (KinesisClientLibException e) {
        System.err.printf("kcl: SHARD_END checkpoint of %s failed: %s%n", shard, e);
      }
    }

    @Override
    public void shutdownRequested(ShutdownRequestedInput in) {
      // Nothing more is checkpointed: the records after the last checkpoint are KCL's
      // uncommitted tail, which a successor reads again.
      System.err.printf("kcl: shutdown requested for %s%n", shard);
    }
  }

  private void write(List<String> lines) {
    if (lines.isEmpty()) {
      return;
    }
    synchronized (out) {
      try {
        for (String l : lines) {
          out.write(l);
          out.write('\n');
        }
        out.flush();
      } catch (IOException e) {
        throw new RuntimeException("writing the output file", e);
      }
    }
  }

  private void requestStop() {
    halted.set(true);
    stop.countDown();
  }
}
