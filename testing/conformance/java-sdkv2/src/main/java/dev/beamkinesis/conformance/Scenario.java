package dev.beamkinesis.conformance;

import java.io.FileInputStream;
import java.io.InputStream;
import java.math.BigInteger;
import java.net.URI;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionException;
import java.util.function.Supplier;
import javax.net.ssl.TrustManagerFactory;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.SdkBytes;
import software.amazon.awssdk.http.Protocol;
import software.amazon.awssdk.http.async.SdkAsyncHttpClient;
import software.amazon.awssdk.http.nio.netty.NettyNioAsyncHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.kinesis.KinesisAsyncClient;
import software.amazon.awssdk.services.kinesis.model.ChildShard;
import software.amazon.awssdk.services.kinesis.model.KinesisException;
import software.amazon.awssdk.services.kinesis.model.PutRecordResponse;
import software.amazon.awssdk.services.kinesis.model.PutRecordsRequestEntry;
import software.amazon.awssdk.services.kinesis.model.PutRecordsResponse;
import software.amazon.awssdk.services.kinesis.model.PutRecordsResultEntry;
import software.amazon.awssdk.services.kinesis.model.Record;
import software.amazon.awssdk.services.kinesis.model.Shard;
import software.amazon.awssdk.services.kinesis.model.ShardIteratorType;
import software.amazon.awssdk.services.kinesis.model.StreamStatus;
import software.amazon.awssdk.services.kinesis.model.SubscribeToShardEvent;
import software.amazon.awssdk.services.kinesis.model.SubscribeToShardResponseHandler;

/**
 * The conformance scenario (testing/conformance/clients_test.go) on the AWS SDK for Java v2:
 * the async client on Netty with HTTP/2 over TLS, and the SDK's default CBOR protocol. Same
 * environment and output as scenario_boto3.py: ENDPOINT (https://), CA_BUNDLE (the server's
 * PEM certificate), STREAM, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and WRONG_SECRET.
 */
public final class Scenario {
  private static final HexFormat HEX = HexFormat.of();

  private final String stream = System.getenv("STREAM");
  private final SdkAsyncHttpClient http;
  private final KinesisAsyncClient kc;

  private Scenario() throws Exception {
    http = NettyNioAsyncHttpClient.builder()
        .protocol(Protocol.HTTP2)
        .tlsTrustManagersProvider(Scenario::trustManagers)
        .build();
    kc = client(System.getenv("AWS_SECRET_ACCESS_KEY"));
  }

  /** The trust managers of a key store holding only the server's certificate. */
  private static javax.net.ssl.TrustManager[] trustManagers() {
    try (InputStream in = new FileInputStream(System.getenv("CA_BUNDLE"))) {
      Certificate cert = CertificateFactory.getInstance("X.509").generateCertificate(in);
      KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
      ks.load(null, null);
      ks.setCertificateEntry("kinesistest", cert);
      TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      tmf.init(ks);
      return tmf.getTrustManagers();
    } catch (Exception e) {
      throw new IllegalStateException("loading the server certificate from CA_BUNDLE", e);
    }
  }

  private KinesisAsyncClient client(String secret) {
    return KinesisAsyncClient.builder()
        .endpointOverride(URI.create(System.getenv("ENDPOINT")))
        .region(Region.US_EAST_1)
        .credentialsProvider(StaticCredentialsProvider.create(
            AwsBasicCredentials.create(System.getenv("AWS_ACCESS_KEY_ID"), secret)))
        .httpClient(http)
        .overrideConfiguration(o -> o.apiCallTimeout(Duration.ofSeconds(30)).retryStrategy(b -> b.maxAttempts(1)))
        .build();
  }

  private static SdkBytes data(int i) {
    byte[] text = ("rec-" + i).getBytes();
    byte[] b = new byte[text.length + 2];
    System.arraycopy(text, 0, b, 0, text.length);
    b[text.length] = 0x00;
    b[text.length + 1] = (byte) 0xff;
    return SdkBytes.fromByteArray(b);
  }

  private void waitActive() throws InterruptedException {
    while (kc.describeStreamSummary(r -> r.streamName(stream)).join().streamDescriptionSummary().streamStatus()
        != StreamStatus.ACTIVE) {
      Thread.sleep(50);
    }
  }

  private List<Record> read(String shard, ShardIteratorType type, java.util.function.Consumer<
      software.amazon.awssdk.services.kinesis.model.GetShardIteratorRequest.Builder> more) {
    String it = kc.getShardIterator(r -> {
      r.streamName(stream).shardId(shard).shardIteratorType(type);
      more.accept(r);
    }).join().shardIterator();
    return kc.getRecords(r -> r.shardIterator(it).limit(100)).join().records();
  }

  private static List<String> hexes(List<Record> rs) {
    List<String> out = new ArrayList<>();
    for (Record r : rs) {
      out.add(HEX.formatHex(r.data().asByteArray()));
    }
    return out;
  }

  private static String errorCode(Supplier<?> call) {
    try {
      call.get();
    } catch (CompletionException e) {
      if (e.getCause() instanceof KinesisException ke) {
        return ke.awsErrorDetails().errorCode();
      }
      throw e;
    }
    return "";
  }

  private Map<String, Object> run() throws Exception {
    Map<String, Object> out = new LinkedHashMap<>();
    kc.createStream(r -> r.streamName(stream).shardCount(2)).join();
    waitActive();
    PutRecordResponse first = kc.putRecord(r -> r.streamName(stream).data(data(0)).partitionKey("pk-0")
        .explicitHashKey("0")).join();
    List<PutRecordsRequestEntry> entries = new ArrayList<>();
    for (int i = 1; i < 10; i++) {
      entries.add(PutRecordsRequestEntry.builder().data(data(i)).partitionKey("pk-" + i).explicitHashKey("0").build());
    }
    PutRecordsResponse batch = kc.putRecords(r -> r.streamName(stream).records(entries)).join();
    if (batch.failedRecordCount() != null && batch.failedRecordCount() > 0) {
      throw new IllegalStateException("PutRecords failed " + batch.failedRecordCount() + " records");
    }
    List<String> seqs = new ArrayList<>(List.of(first.sequenceNumber()));
    for (PutRecordsResultEntry e : batch.records()) {
      seqs.add(e.sequenceNumber());
    }
    out.put("putSeqs", seqs);
    String shard0 = first.shardId();
    List<String> shards = new ArrayList<>();
    for (Shard s : kc.listShards(r -> r.streamName(stream)).join().shards()) {
      shards.add(s.shardId());
    }
    out.put("shards", shards);

    List<Record> recs = read(shard0, ShardIteratorType.TRIM_HORIZON, r -> { });
    List<String> readSeqs = new ArrayList<>();
    List<Long> arrivals = new ArrayList<>();
    for (Record r : recs) {
      readSeqs.add(r.sequenceNumber());
      arrivals.add(r.approximateArrivalTimestamp().toEpochMilli());
    }
    out.put("readSeqs", readSeqs);
    out.put("arrivalMs", arrivals);
    Map<String, Object> reads = new LinkedHashMap<>();
    reads.put("TRIM_HORIZON", hexes(recs));
    reads.put("AT_SEQUENCE_NUMBER", hexes(read(shard0, ShardIteratorType.AT_SEQUENCE_NUMBER,
        r -> r.startingSequenceNumber(seqs.get(3)))));
    reads.put("AFTER_SEQUENCE_NUMBER", hexes(read(shard0, ShardIteratorType.AFTER_SEQUENCE_NUMBER,
        r -> r.startingSequenceNumber(seqs.get(3)))));
    reads.put("AT_TIMESTAMP", hexes(read(shard0, ShardIteratorType.AT_TIMESTAMP,
        r -> r.timestamp(recs.get(0).approximateArrivalTimestamp()))));
    String latest = kc.getShardIterator(r -> r.streamName(stream).shardId(shard0)
        .shardIteratorType(ShardIteratorType.LATEST)).join().shardIterator();
    kc.putRecord(r -> r.streamName(stream).data(SdkBytes.fromUtf8String("late")).partitionKey("late")
        .explicitHashKey("0")).join();
    reads.put("LATEST", hexes(kc.getRecords(r -> r.shardIterator(latest)).join().records()));
    out.put("reads", reads);

    kc.splitShard(r -> r.streamName(stream).shardToSplit(shard0)
        .newStartingHashKey(BigInteger.ONE.shiftLeft(126).toString())).join();
    waitActive();
    List<Object> after = new ArrayList<>();
    for (Shard s : kc.listShards(r -> r.streamName(stream)).join().shards()) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("id", s.shardId());
      m.put("parent", s.parentShardId() == null ? "" : s.parentShardId());
      m.put("closed", s.sequenceNumberRange().endingSequenceNumber() != null);
      after.add(m);
    }
    out.put("afterSplit", after);

    String arn = kc.describeStreamSummary(r -> r.streamName(stream)).join().streamDescriptionSummary().streamARN();
    String consumer = kc.registerStreamConsumer(r -> r.streamARN(arn).consumerName("conformance")).join()
        .consumer().consumerARN();
    out.put("consumerStatus", kc.describeStreamConsumer(r -> r.consumerARN(consumer)).join()
        .consumerDescription().consumerStatusAsString());
    List<String> got = new ArrayList<>();
    List<String> children = new ArrayList<>();
    SubscribeToShardResponseHandler handler = SubscribeToShardResponseHandler.builder()
        .subscriber(SubscribeToShardResponseHandler.Visitor.builder().onSubscribeToShardEvent((SubscribeToShardEvent e) -> {
          got.addAll(hexes(e.records()));
          for (ChildShard c : e.childShards()) {
            children.add(c.shardId());
          }
        }).build())
        .build();
    kc.subscribeToShard(r -> r.consumerARN(consumer).shardId(shard0)
        .startingPosition(p -> p.type(ShardIteratorType.TRIM_HORIZON)), handler).join();
    out.put("subscribed", got);
    children.sort(null);
    out.put("childShards", children);

    Map<String, Object> errors = new LinkedHashMap<>();
    errors.put("missingStream", errorCode(() -> kc.describeStreamSummary(r -> r.streamName("no-such-stream")).join()));
    try (KinesisAsyncClient wrong = client(System.getenv("WRONG_SECRET"))) {
      errors.put("wrongSecret", errorCode(() -> wrong.listStreams(r -> { }).join()));
    }
    out.put("errors", errors);
    return out;
  }

  /** Writes v as JSON: maps, lists, strings, numbers and booleans only. */
  private static void json(StringBuilder b, Object v) {
    if (v instanceof Map<?, ?> m) {
      b.append('{');
      boolean firstKey = true;
      for (Map.Entry<?, ?> e : m.entrySet()) {
        if (!firstKey) {
          b.append(',');
        }
        firstKey = false;
        json(b, e.getKey().toString());
        b.append(':');
        json(b, e.getValue());
      }
      b.append('}');
    } else if (v instanceof List<?> l) {
      b.append('[');
      for (int i = 0; i < l.size(); i++) {
        if (i > 0) {
          b.append(',');
        }
        json(b, l.get(i));
      }
      b.append(']');
    } else if (v instanceof String s) {
      b.append('"');
      for (char c : s.toCharArray()) {
        if (c == '"' || c == '\\') {
          b.append('\\').append(c);
        } else if (c < 0x20) {
          b.append(String.format("\\u%04x", (int) c));
        } else {
          b.append(c);
        }
      }
      b.append('"');
    } else {
      b.append(v);
    }
  }

  public static void main(String[] args) throws Exception {
    Scenario s = new Scenario();
    StringBuilder b = new StringBuilder();
    json(b, s.run());
    System.out.println(b);
    System.out.flush();
    // Closing the clients would wait out Netty's two-second quiet period; the
    // process ends here anyway.
    System.exit(0);
  }
}
