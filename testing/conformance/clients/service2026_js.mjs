// The 2026 service scenario (testing/conformance/service2026_test.go) driven by
// the JavaScript SDK v3, @aws-sdk/client-kinesis: service-managed record
// distribution, account settings, warm throughput, the consumer limits and a
// 10 MiB record. Same environment and output as service2026_boto3.py: ENDPOINT,
// STREAM (a name prefix), AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY; NODE_PATH
// points at the npm cache. Prints one JSON object with what the client saw.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.NODE_PATH, "noop.js"));
const k = require("@aws-sdk/client-kinesis");

const env = process.env;
const auto = `${env.STREAM}-auto`;
const prov = `${env.STREAM}-prov`;
const kc = new k.KinesisClient({
  endpoint: env.ENDPOINT,
  region: "us-east-1",
  maxAttempts: 1,
  credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY },
});
const send = (Cmd, input) => kc.send(new Cmd(input));
const ms = (d) => (d === undefined ? null : d.getTime());
const rec = (r) => ({ data: Buffer.from(r.Data).toString(), key: r.PartitionKey ?? null });
const warm = (w) => (w === undefined ? null : { target: w.TargetMiBps, current: w.CurrentMiBps });

async function errorCode(fn) {
  try {
    await fn();
  } catch (e) {
    return e.name;
  }
  return "";
}

async function summary(name) {
  return (await send(k.DescribeStreamSummaryCommand, { StreamName: name })).StreamDescriptionSummary;
}

async function waitActive(name) {
  while ((await summary(name)).StreamStatus !== "ACTIVE") await new Promise((r) => setTimeout(r, 50));
}

async function register(arn, from, to) {
  for (let i = from; i < to; i++) await send(k.RegisterStreamConsumerCommand, { StreamARN: arn, ConsumerName: `c${i}` });
}

const out = {};
out.commitmentBefore = (await send(k.DescribeAccountSettingsCommand, {})).MinimumThroughputBillingCommitment.Status;

// Service-managed distribution.
await send(k.CreateStreamCommand, { StreamName: auto, StreamModeDetails: { StreamMode: "ON_DEMAND" }, RecordDistributionStrategy: "AUTO" });
await send(k.CreateStreamCommand, { StreamName: prov, ShardCount: 1 });
await waitActive(auto);
await waitActive(prov);
out.createProvisionedAuto = await errorCode(() => send(k.CreateStreamCommand, { StreamName: `${env.STREAM}-bad`, ShardCount: 1, RecordDistributionStrategy: "AUTO" }));
const s = await summary(auto);
const autoARN = s.StreamARN;
out.autoSummary = { mode: s.StreamModeDetails.StreamMode, strategy: s.RecordDistributionStrategy, openShards: s.OpenShardCount, warm: warm(s.WarmThroughput) };
out.provStrategy = (await summary(prov)).RecordDistributionStrategy ?? "";

const batch = await send(k.PutRecordsCommand, {
  StreamName: auto,
  Records: Array.from({ length: 8 }, (_, i) => (i === 5 ? { Data: Buffer.from(`r${i}`), PartitionKey: "kept", ExplicitHashKey: "0" } : { Data: Buffer.from(`r${i}`) })),
});
const single = await send(k.PutRecordCommand, { StreamName: auto, Data: Buffer.from("r8") });
out.putShards = [...batch.Records.map((r) => r.ShardId), single.ShardId];
out.sequenceNumberForOrdering = await errorCode(() =>
  send(k.PutRecordCommand, { StreamName: auto, Data: Buffer.from("x"), SequenceNumberForOrdering: single.SequenceNumber }),
);
out.autoReads = {};
for (const sh of (await send(k.ListShardsCommand, { StreamName: auto })).Shards) {
  const it = await send(k.GetShardIteratorCommand, { StreamName: auto, ShardId: sh.ShardId, ShardIteratorType: "TRIM_HORIZON" });
  out.autoReads[sh.ShardId] = (await send(k.GetRecordsCommand, { ShardIterator: it.ShardIterator })).Records.map(rec);
}
const efo = (await send(k.RegisterStreamConsumerCommand, { StreamARN: autoARN, ConsumerName: "efo" })).Consumer.ConsumerARN;
// The subscription of an open shard lasts minutes; abort it once it has
// delivered, or its HTTP/2 stream keeps the process alive.
const ac = new AbortController();
const sub = await kc.send(
  new k.SubscribeToShardCommand({ ConsumerARN: efo, ShardId: "shardId-000000000001", StartingPosition: { Type: "TRIM_HORIZON" } }),
  { abortSignal: ac.signal },
);
for await (const ev of sub.EventStream) {
  const records = ev.SubscribeToShardEvent?.Records ?? [];
  if (records.length === 0) continue;
  out.subscribed = records.map(rec);
  break;
}
ac.abort();

await send(k.UpdateStreamRecordDistributionStrategyCommand, { StreamARN: autoARN, RecordDistributionStrategy: "USER_PARTITION_KEY" });
out.afterSwitch = {
  strategy: (await summary(auto)).RecordDistributionStrategy,
  keyless: await errorCode(() => send(k.PutRecordCommand, { StreamName: auto, Data: Buffer.from("x") })),
  keyedShard: (await send(k.PutRecordCommand, { StreamName: auto, Data: Buffer.from("x"), PartitionKey: "k", ExplicitHashKey: "0" })).ShardId,
};
const provARN = (await summary(prov)).StreamARN;
out.updateProvisioned = await errorCode(() => send(k.UpdateStreamRecordDistributionStrategyCommand, { StreamARN: provARN, RecordDistributionStrategy: "AUTO" }));

// Account settings, warm throughput, consumer limits.
out.warmWithoutCommitment = await errorCode(() => send(k.UpdateStreamWarmThroughputCommand, { StreamName: auto, WarmThroughputMiBps: 100 }));
await register(autoARN, 1, 20);
out.consumer21 = await errorCode(() => register(autoARN, 20, 21));
const c = (await send(k.UpdateAccountSettingsCommand, { MinimumThroughputBillingCommitment: { Status: "ENABLED" } })).MinimumThroughputBillingCommitment;
out.commitment = { status: c.Status, startedMs: ms(c.StartedAt), earliestEndMs: ms(c.EarliestAllowedEndAt), endedMs: ms(c.EndedAt) };
const w = await send(k.UpdateStreamWarmThroughputCommand, { StreamARN: autoARN, WarmThroughputMiBps: 100 });
out.warmUpdate = { stream: w.StreamName, warm: warm(w.WarmThroughput) };
out.warmSummary = warm((await summary(auto)).WarmThroughput);
await register(autoARN, 20, 50);
out.consumer51 = await errorCode(() => register(autoARN, 50, 51));
out.consumerCount = (await summary(auto)).ConsumerCount;
out.commitmentAfterDisable = (await send(k.UpdateAccountSettingsCommand, { MinimumThroughputBillingCommitment: { Status: "DISABLED" } })).MinimumThroughputBillingCommitment.Status;

// A 10 MiB record, and the pause after reading it.
await send(k.UpdateMaxRecordSizeCommand, { StreamARN: provARN, MaxRecordSizeInKiB: 10240 });
await send(k.PutRecordCommand, { StreamName: prov, PartitionKey: "k", Data: Buffer.alloc(10 * 1024 * 1024 - 1, 0x61) });
const it = await send(k.GetShardIteratorCommand, { StreamName: prov, ShardId: "shardId-000000000000", ShardIteratorType: "TRIM_HORIZON" });
const page = await send(k.GetRecordsCommand, { ShardIterator: it.ShardIterator });
out.largeRecordBytes = page.Records.map((r) => r.Data.length + r.PartitionKey.length);
out.afterLargePage = await errorCode(() => send(k.GetRecordsCommand, { ShardIterator: page.NextShardIterator }));

console.log(JSON.stringify(out));
kc.destroy();
