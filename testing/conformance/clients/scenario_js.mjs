// The conformance scenario (testing/conformance/clients_test.go) driven by the
// JavaScript SDK v3, @aws-sdk/client-kinesis. Same environment and output as
// scenario_boto3.py. The SDK sends SubscribeToShard over HTTP/2 (its
// NodeHttp2Handler): through ALPN on https:// endpoints, with prior knowledge
// (h2c) on http:// ones. NODE_PATH points at the npm cache; NODE_EXTRA_CA_CERTS
// makes Node trust the server's certificate.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.NODE_PATH, "noop.js"));
const k = require("@aws-sdk/client-kinesis");

const env = process.env;
const stream = env.STREAM;

function client(secret) {
  return new k.KinesisClient({
    endpoint: env.ENDPOINT,
    region: "us-east-1",
    maxAttempts: 1,
    credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: secret ?? env.AWS_SECRET_ACCESS_KEY },
  });
}

const kc = client();
const send = (Cmd, input) => kc.send(new Cmd(input));
const hex = (u8) => Buffer.from(u8).toString("hex");
const data = (i) => Buffer.concat([Buffer.from(`rec-${i}`), Buffer.from([0x00, 0xff])]);

async function waitActive() {
  for (;;) {
    const s = await send(k.DescribeStreamSummaryCommand, { StreamName: stream });
    if (s.StreamDescriptionSummary.StreamStatus === "ACTIVE") return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function read(shard, input) {
  const it = await send(k.GetShardIteratorCommand, { StreamName: stream, ShardId: shard, ...input });
  return (await send(k.GetRecordsCommand, { ShardIterator: it.ShardIterator, Limit: 100 })).Records;
}

async function errorCode(fn) {
  try {
    await fn();
  } catch (e) {
    return e.name;
  }
  return "";
}

const out = {};
await send(k.CreateStreamCommand, { StreamName: stream, ShardCount: 2 });
await waitActive();
const first = await send(k.PutRecordCommand, { StreamName: stream, Data: data(0), PartitionKey: "pk-0", ExplicitHashKey: "0" });
const batch = await send(k.PutRecordsCommand, {
  StreamName: stream,
  Records: Array.from({ length: 9 }, (_, j) => ({ Data: data(j + 1), PartitionKey: `pk-${j + 1}`, ExplicitHashKey: "0" })),
});
if (batch.FailedRecordCount) throw new Error(`PutRecords failed ${batch.FailedRecordCount} records`);
const seqs = [first.SequenceNumber, ...batch.Records.map((r) => r.SequenceNumber)];
out.putSeqs = seqs;
const shard0 = first.ShardId;
out.shards = (await send(k.ListShardsCommand, { StreamName: stream })).Shards.map((s) => s.ShardId);

const recs = await read(shard0, { ShardIteratorType: "TRIM_HORIZON" });
out.readSeqs = recs.map((r) => r.SequenceNumber);
out.arrivalMs = recs.map((r) => r.ApproximateArrivalTimestamp.getTime());
const reads = { TRIM_HORIZON: recs.map((r) => hex(r.Data)) };
reads.AT_SEQUENCE_NUMBER = (await read(shard0, { ShardIteratorType: "AT_SEQUENCE_NUMBER", StartingSequenceNumber: seqs[3] })).map((r) => hex(r.Data));
reads.AFTER_SEQUENCE_NUMBER = (await read(shard0, { ShardIteratorType: "AFTER_SEQUENCE_NUMBER", StartingSequenceNumber: seqs[3] })).map((r) => hex(r.Data));
reads.AT_TIMESTAMP = (await read(shard0, { ShardIteratorType: "AT_TIMESTAMP", Timestamp: recs[0].ApproximateArrivalTimestamp })).map((r) => hex(r.Data));
const latest = await send(k.GetShardIteratorCommand, { StreamName: stream, ShardId: shard0, ShardIteratorType: "LATEST" });
await send(k.PutRecordCommand, { StreamName: stream, Data: Buffer.from("late"), PartitionKey: "late", ExplicitHashKey: "0" });
reads.LATEST = (await send(k.GetRecordsCommand, { ShardIterator: latest.ShardIterator })).Records.map((r) => hex(r.Data));
out.reads = reads;

await send(k.SplitShardCommand, { StreamName: stream, ShardToSplit: shard0, NewStartingHashKey: (1n << 126n).toString() });
await waitActive();
out.afterSplit = (await send(k.ListShardsCommand, { StreamName: stream })).Shards.map((s) => ({
  id: s.ShardId,
  parent: s.ParentShardId ?? "",
  closed: s.SequenceNumberRange.EndingSequenceNumber !== undefined,
}));

const arn = (await send(k.DescribeStreamSummaryCommand, { StreamName: stream })).StreamDescriptionSummary.StreamARN;
const consumer = (await send(k.RegisterStreamConsumerCommand, { StreamARN: arn, ConsumerName: "conformance" })).Consumer.ConsumerARN;
out.consumerStatus = (await send(k.DescribeStreamConsumerCommand, { ConsumerARN: consumer })).ConsumerDescription.ConsumerStatus;
const sub = await send(k.SubscribeToShardCommand, { ConsumerARN: consumer, ShardId: shard0, StartingPosition: { Type: "TRIM_HORIZON" } });
const got = [];
const children = [];
for await (const ev of sub.EventStream) {
  const e = ev.SubscribeToShardEvent;
  if (!e) throw new Error(`unexpected event ${JSON.stringify(ev)}`);
  got.push(...e.Records.map((r) => hex(r.Data)));
  children.push(...(e.ChildShards ?? []).map((c) => c.ShardId));
  if (e.ContinuationSequenceNumber === undefined) break;
}
out.subscribed = got;
out.childShards = children.sort();

out.errors = {
  missingStream: await errorCode(() => send(k.DescribeStreamSummaryCommand, { StreamName: "no-such-stream" })),
  wrongSecret: await errorCode(() => client(env.WRONG_SECRET).send(new k.ListStreamsCommand({}))),
};
console.log(JSON.stringify(out));
kc.destroy();
