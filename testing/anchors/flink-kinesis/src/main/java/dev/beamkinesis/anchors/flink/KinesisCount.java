package dev.beamkinesis.anchors.flink;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.Writer;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.RichSinkFunction;
import org.apache.flink.streaming.connectors.kinesis.FlinkKinesisConsumer;
import org.apache.flink.streaming.connectors.kinesis.serialization.KinesisDeserializationSchema;

/**
 * KinesisCount reads one stream of the kinesistest server with Flink's own FlinkKinesisConsumer
 * and reports, per sink subtask, how many records it got and when its first and last arrived,
 * in files of an output directory on the same machine the bench polls. The job never ends by
 * itself (the consumer is an unbounded source): the bench cancels it once the counts add up.
 *
 * <p>Arguments, as --key=value: endpoint (the server's URL), stream, parallelism, out (the
 * directory, shared with the bench), initpos (TRIM_HORIZON or LATEST), latency (true: also write
 * every record's index and arrival time, for put → arrival latency; the record's first 8 bytes
 * are its put time and the next 8 its index, as the bench's producer writes them), and any
 * number of connector properties as --prop.KEY=VALUE (e.g.
 * --prop.flink.shard.getrecords.intervalmillis=0).
 */
public final class KinesisCount {
  private KinesisCount() {}

  public static void main(String[] argv) throws Exception {
    Map<String, String> args = new HashMap<>();
    Properties props = new Properties();
    for (String a : argv) {
      if (!a.startsWith("--") || !a.contains("=")) {
        throw new IllegalArgumentException("argument " + a + " is not --key=value");
      }
      String k = a.substring(2, a.indexOf('=')), v = a.substring(a.indexOf('=') + 1);
      if (k.startsWith("prop.")) {
        props.setProperty(k.substring(5), v);
      } else {
        args.put(k, v);
      }
    }
    String stream = required(args, "stream");
    // The server accepts any credentials; the region only has to be valid for the SDK.
    props.putIfAbsent("aws.region", "us-east-1");
    props.putIfAbsent("aws.endpoint", required(args, "endpoint"));
    props.putIfAbsent("aws.credentials.provider", "BASIC");
    props.putIfAbsent("aws.credentials.provider.basic.accesskeyid", "test");
    props.putIfAbsent("aws.credentials.provider.basic.secretkey", "test");
    props.putIfAbsent("flink.stream.initpos", args.getOrDefault("initpos", "TRIM_HORIZON"));

    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setParallelism(Integer.parseInt(args.getOrDefault("parallelism", "1")));
    env.addSource(new FlinkKinesisConsumer<>(stream, new Stamp(), props))
        .name("FlinkKinesisConsumer")
        .addSink(new Tally(required(args, "out"), Boolean.parseBoolean(args.getOrDefault("latency", "false"))))
        .name("Tally");
    env.execute("flink-kinesis-anchor " + stream);
  }

  private static String required(Map<String, String> args, String key) {
    String v = args.get(key);
    if (v == null || v.isEmpty()) {
      throw new IllegalArgumentException("missing --" + key + "=...");
    }
    return v;
  }

  /** Stamp turns a record into (its first 8 bytes, its next 8 bytes) without copying it. */
  static final class Stamp implements KinesisDeserializationSchema<Tuple2<Long, Long>> {
    @Override
    public Tuple2<Long, Long> deserialize(byte[] data, String partitionKey, String seqNum,
        long arrival, String stream, String shardId) {
      ByteBuffer b = ByteBuffer.wrap(data);
      return Tuple2.of(data.length >= 8 ? b.getLong(0) : 0L, data.length >= 16 ? b.getLong(8) : 0L);
    }

    @Override
    public TypeInformation<Tuple2<Long, Long>> getProducedType() {
      return Types.TUPLE(Types.LONG, Types.LONG);
    }
  }

  /**
   * Tally counts records per subtask and every 100 ms replaces out/subtask-N.status with
   * "records first_unix_nanos last_unix_nanos"; with latency it also appends "index
   * arrival_unix_nanos" lines to out/subtask-N.arrivals.
   */
  static final class Tally extends RichSinkFunction<Tuple2<Long, Long>> {
    private final String out;
    private final boolean latency;
    private transient long records, first, last;
    private transient Writer arrivals;
    private transient ScheduledExecutorService flusher;
    private transient Path status, tmp;

    Tally(String out, boolean latency) {
      this.out = out;
      this.latency = latency;
    }

    @Override
    public void open(Configuration parameters) throws IOException {
      int n = getRuntimeContext().getIndexOfThisSubtask();
      status = Paths.get(out, "subtask-" + n + ".status");
      tmp = Paths.get(out, "subtask-" + n + ".status.tmp");
      if (latency) {
        arrivals = new BufferedWriter(Files.newBufferedWriter(Paths.get(out, "subtask-" + n + ".arrivals"), StandardCharsets.US_ASCII));
      }
      flusher = Executors.newSingleThreadScheduledExecutor();
      flusher.scheduleWithFixedDelay(this::flush, 100, 100, TimeUnit.MILLISECONDS);
    }

    private static long nowNanos() {
      Instant t = Instant.now();
      return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    @Override
    public void invoke(Tuple2<Long, Long> r, Context ctx) throws IOException {
      long now = nowNanos();
      synchronized (this) {
        if (records == 0) {
          first = now;
        }
        records++;
        last = now;
        if (latency) {
          arrivals.write(r.f1 + " " + now + "\n");
        }
      }
    }

    private void flush() {
      try {
        String line;
        synchronized (this) {
          if (arrivals != null) {
            arrivals.flush();
          }
          line = records + " " + first + " " + last + "\n";
        }
        Files.write(tmp, line.getBytes(StandardCharsets.US_ASCII));
        Files.move(tmp, status, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
      } catch (IOException e) {
        throw new RuntimeException("writing " + status, e);
      }
    }

    @Override
    public void close() throws IOException {
      if (flusher != null) {
        flusher.shutdownNow();
      }
      flush();
      if (arrivals != null) {
        arrivals.close();
      }
    }
  }
}
