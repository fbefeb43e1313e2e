"""The 2026 service scenario (testing/conformance/service2026_test.go) driven by boto3.

Service-managed record distribution, account settings, warm throughput, the
consumer limits and a 10 MiB record. Environment: ENDPOINT, STREAM (a name
prefix), AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY. Prints one JSON object with
what the client saw, as service2026_js.mjs does.
"""
import json
import os
import time

import boto3
import botocore.config
import botocore.exceptions

auto = os.environ["STREAM"] + "-auto"
prov = os.environ["STREAM"] + "-prov"
kc = boto3.client(
    "kinesis", endpoint_url=os.environ["ENDPOINT"],
    # One attempt: in the legacy retry mode "max_attempts" counts retries, and
    # throttling errors (LimitExceededException, ...) would be retried after a sleep.
    config=botocore.config.Config(retries={"total_max_attempts": 1}, region_name="us-east-1"),
    aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
    aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])


def error_code(fn):
    try:
        fn()
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
    return ""


def summary(name):
    return kc.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]


def wait_active(name):
    while summary(name)["StreamStatus"] != "ACTIVE":
        time.sleep(0.05)


def ms(t):
    return None if t is None else round(t.timestamp() * 1000)


def rec(r):
    return {"data": r["Data"].decode(), "key": r.get("PartitionKey")}


def warm(w):
    return None if w is None else {"target": w["TargetMiBps"], "current": w["CurrentMiBps"]}


def register(arn, start, stop):
    for i in range(start, stop):
        kc.register_stream_consumer(StreamARN=arn, ConsumerName="c%d" % i)


out = {"commitmentBefore": kc.describe_account_settings()["MinimumThroughputBillingCommitment"]["Status"]}

# Service-managed distribution.
kc.create_stream(StreamName=auto, StreamModeDetails={"StreamMode": "ON_DEMAND"}, RecordDistributionStrategy="AUTO")
kc.create_stream(StreamName=prov, ShardCount=1)
wait_active(auto)
wait_active(prov)
out["createProvisionedAuto"] = error_code(lambda: kc.create_stream(
    StreamName=os.environ["STREAM"] + "-bad", ShardCount=1, RecordDistributionStrategy="AUTO"))
s = summary(auto)
auto_arn = s["StreamARN"]
out["autoSummary"] = {"mode": s["StreamModeDetails"]["StreamMode"], "strategy": s["RecordDistributionStrategy"],
                      "openShards": s["OpenShardCount"], "warm": warm(s.get("WarmThroughput"))}
out["provStrategy"] = summary(prov).get("RecordDistributionStrategy", "")

batch = kc.put_records(StreamName=auto, Records=[
    {"Data": b"r5", "PartitionKey": "kept", "ExplicitHashKey": "0"} if i == 5 else {"Data": b"r%d" % i}
    for i in range(8)])
single = kc.put_record(StreamName=auto, Data=b"r8")
out["putShards"] = [r["ShardId"] for r in batch["Records"]] + [single["ShardId"]]
out["sequenceNumberForOrdering"] = error_code(lambda: kc.put_record(
    StreamName=auto, Data=b"x", SequenceNumberForOrdering=single["SequenceNumber"]))
out["autoReads"] = {}
for sh in kc.list_shards(StreamName=auto)["Shards"]:
    it = kc.get_shard_iterator(StreamName=auto, ShardId=sh["ShardId"], ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    out["autoReads"][sh["ShardId"]] = [rec(r) for r in kc.get_records(ShardIterator=it)["Records"]]
efo = kc.register_stream_consumer(StreamARN=auto_arn, ConsumerName="efo")["Consumer"]["ConsumerARN"]
sub = kc.subscribe_to_shard(ConsumerARN=efo, ShardId="shardId-000000000001", StartingPosition={"Type": "TRIM_HORIZON"})
for ev in sub["EventStream"]:
    records = ev["SubscribeToShardEvent"]["Records"]
    if records:
        out["subscribed"] = [rec(r) for r in records]
        break
sub["EventStream"].close()

kc.update_stream_record_distribution_strategy(StreamARN=auto_arn, RecordDistributionStrategy="USER_PARTITION_KEY")
out["afterSwitch"] = {
    "strategy": summary(auto)["RecordDistributionStrategy"],
    "keyless": error_code(lambda: kc.put_record(StreamName=auto, Data=b"x")),
    "keyedShard": kc.put_record(StreamName=auto, Data=b"x", PartitionKey="k", ExplicitHashKey="0")["ShardId"],
}
prov_arn = summary(prov)["StreamARN"]
out["updateProvisioned"] = error_code(lambda: kc.update_stream_record_distribution_strategy(
    StreamARN=prov_arn, RecordDistributionStrategy="AUTO"))

# Account settings, warm throughput, consumer limits.
out["warmWithoutCommitment"] = error_code(lambda: kc.update_stream_warm_throughput(StreamName=auto, WarmThroughputMiBps=100))
register(auto_arn, 1, 20)
out["consumer21"] = error_code(lambda: register(auto_arn, 20, 21))
c = kc.update_account_settings(MinimumThroughputBillingCommitment={"Status": "ENABLED"})["MinimumThroughputBillingCommitment"]
out["commitment"] = {"status": c["Status"], "startedMs": ms(c.get("StartedAt")),
                     "earliestEndMs": ms(c.get("EarliestAllowedEndAt")), "endedMs": ms(c.get("EndedAt"))}
w = kc.update_stream_warm_throughput(StreamARN=auto_arn, WarmThroughputMiBps=100)
out["warmUpdate"] = {"stream": w["StreamName"], "warm": warm(w.get("WarmThroughput"))}
out["warmSummary"] = warm(summary(auto).get("WarmThroughput"))
register(auto_arn, 20, 50)
out["consumer51"] = error_code(lambda: register(auto_arn, 50, 51))
out["consumerCount"] = summary(auto)["ConsumerCount"]
out["commitmentAfterDisable"] = kc.update_account_settings(
    MinimumThroughputBillingCommitment={"Status": "DISABLED"})["MinimumThroughputBillingCommitment"]["Status"]

# A 10 MiB record, and the pause after reading it.
kc.update_max_record_size(StreamARN=prov_arn, MaxRecordSizeInKiB=10240)
kc.put_record(StreamName=prov, PartitionKey="k", Data=b"a" * (10 * 1024 * 1024 - 1))
it = kc.get_shard_iterator(StreamName=prov, ShardId="shardId-000000000000", ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
page = kc.get_records(ShardIterator=it)
out["largeRecordBytes"] = [len(r["Data"]) + len(r["PartitionKey"]) for r in page["Records"]]
out["afterLargePage"] = error_code(lambda: kc.get_records(ShardIterator=page["NextShardIterator"]))

print(json.dumps(out))
