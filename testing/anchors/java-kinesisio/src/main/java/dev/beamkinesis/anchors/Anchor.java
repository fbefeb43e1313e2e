package dev.beamkinesis.anchors;

import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.beam.sdk.io.aws2.common.ClientConfiguration;
import org.apache.beam.sdk.options.PipelineOptions;
import org.apache.beam.sdk.options.PipelineOptionsFactory;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.regions.Region;

/**
 * What the read and write programs share: arguments, the client configuration pointing at the
 * kinesistest server, the record checksum, the tally of what a pipeline saw and its JSON report.
 *
 * <p>The checksum of a record is the first 8 bytes, big-endian, of SHA-256(partition key, 0x00,
 * data); a set of records sums them modulo 2^64, so it does not depend on order. The Go side
 * (testing/bench/anchors.go) computes the same.
 */
final class Anchor {
  private Anchor() {}

  static final AtomicLong COUNT = new AtomicLong();
  static final AtomicLong SUM = new AtomicLong();
  /** Per shard: records, first and last nanoTime seen. */
  static final Map<String, long[]> SHARDS = new ConcurrentHashMap<>();

  /** Bundles that reached a counting step, and the largest. */
  static final AtomicLong BUNDLES = new AtomicLong();
  static final AtomicLong MAX_BUNDLE = new AtomicLong();

  static volatile long startNanos;
  static final AtomicLong FIRST = new AtomicLong();
  static final AtomicLong LAST = new AtomicLong();

  /** Parses --name=value arguments. */
  static Map<String, String> args(String[] argv) {
    Map<String, String> m = new HashMap<>();
    for (String a : argv) {
      if (!a.startsWith("--") || !a.contains("=")) {
        throw new IllegalArgumentException("argument " + a + " is not --name=value");
      }
      int eq = a.indexOf('=');
      m.put(a.substring(2, eq), a.substring(eq + 1));
    }
    return m;
  }

  static String need(Map<String, String> m, String name) {
    String v = m.get(name);
    if (v == null) {
      throw new IllegalArgumentException("missing --" + name);
    }
    return v;
  }

  /** Client configuration for the test server: static credentials, us-east-1, endpoint override. */
  static ClientConfiguration client(String endpoint) {
    return ClientConfiguration.builder()
        .credentialsProvider(
            StaticCredentialsProvider.create(AwsBasicCredentials.create("test", "test")))
        .region(Region.US_EAST_1)
        .endpoint(URI.create(endpoint))
        .build();
  }

  /**
   * DirectRunner options. The immutability and encodability checks are off: they are test aids
   * that cost throughput, and the anchor should get Beam Java's best. The program's
   * --experiments (a comma-separated list, e.g. use_sdf_read) and --target-parallelism (the
   * DirectRunner's worker threads, by default the larger of 3 and the processor count) are
   * passed on.
   */
  static PipelineOptions options(Map<String, String> a) {
    String experiments = a.getOrDefault("experiments", "");
    List<String> args =
        new ArrayList<>(
            List.of(
                "--runner=DirectRunner",
                "--enforceImmutability=false",
                "--enforceEncodability=false"));
    if (!experiments.isEmpty()) {
      args.add("--experiments=" + experiments);
    }
    if (a.containsKey("target-parallelism")) {
      args.add("--targetParallelism=" + a.get("target-parallelism"));
    }
    return PipelineOptionsFactory.fromArgs(args.toArray(new String[0])).create();
  }

  static long checksum(String partitionKey, byte[] data) {
    try {
      MessageDigest d = MessageDigest.getInstance("SHA-256");
      d.update(partitionKey.getBytes(StandardCharsets.UTF_8));
      d.update((byte) 0);
      byte[] h = d.digest(data);
      long v = 0;
      for (int i = 0; i < 8; i++) {
        v = (v << 8) | (h[i] & 0xff);
      }
      return v;
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Notes one record seen, from shard (or "" when not known). */
  static void tally(String shard, String partitionKey, byte[] data) {
    long now = System.nanoTime();
    if (COUNT.incrementAndGet() == 1) {
      FIRST.set(now);
    }
    LAST.accumulateAndGet(now, Math::max);
    SUM.addAndGet(checksum(partitionKey, data));
    long[] s = SHARDS.computeIfAbsent(shard, k -> new long[] {0, now, now});
    synchronized (s) {
      s[0]++;
      s[1] = Math.min(s[1], now);
      s[2] = Math.max(s[2], now);
    }
  }

  /** Notes a bundle of n records at a counting step. */
  static void bundle(long n) {
    BUNDLES.incrementAndGet();
    MAX_BUNDLE.accumulateAndGet(n, Math::max);
  }

  /** Prints the tally as one JSON line on stdout: the Go side parses the last such line. */
  static void report(String program, String stream, boolean complete) {
    long end = System.nanoTime();
    long n = COUNT.get();
    // A read's time ends at the last record counted: a read stopped after it is not charged
    // for the wait. A write's ends when its pipeline has finished.
    boolean toLast = program.equals("read") && n > 0 && complete;
    double total = ((toLast ? LAST.get() : end) - startNanos) / 1e9;
    double steady = n > 1 ? (LAST.get() - FIRST.get()) / 1e9 : 0;
    StringBuilder b = new StringBuilder();
    b.append("{\"program\":\"").append(program).append("\",\"stream\":\"").append(stream)
        .append("\",\"complete\":").append(complete)
        .append(",\"records\":").append(n)
        .append(",\"checksum\":\"").append(Long.toUnsignedString(SUM.get())).append('"')
        .append(",\"seconds\":").append(total)
        .append(",\"first_seconds\":").append(n > 0 ? (FIRST.get() - startNanos) / 1e9 : 0)
        .append(",\"steady_seconds\":").append(steady)
        .append(",\"records_per_second\":").append(total > 0 ? n / total : 0)
        .append(",\"bundles\":").append(BUNDLES.get())
        .append(",\"max_bundle\":").append(MAX_BUNDLE.get())
        .append(",\"shards\":{");
    String sep = "";
    for (Map.Entry<String, long[]> e : new TreeMap<>(SHARDS).entrySet()) {
      long[] s = e.getValue();
      b.append(sep).append('"').append(e.getKey()).append("\":{\"records\":").append(s[0])
          .append(",\"first_seconds\":").append((s[1] - startNanos) / 1e9)
          .append(",\"last_seconds\":").append((s[2] - startNanos) / 1e9).append('}');
      sep = ",";
    }
    b.append("}}");
    System.out.println(b);
    System.out.flush();
  }

  /** Runs body, printing the report when it ends or when the JVM is told to stop first. */
  static void run(String program, String stream, Runnable body) {
    Thread hook = new Thread(() -> report(program, stream, false));
    Runtime.getRuntime().addShutdownHook(hook);
    startNanos = System.nanoTime();
    body.run();
    Runtime.getRuntime().removeShutdownHook(hook);
    report(program, stream, true);
  }
}
