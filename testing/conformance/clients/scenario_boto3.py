"""The conformance scenario (testing/conformance/clients_test.go) driven by boto3.

Environment: ENDPOINT (http:// or https://), CA_BUNDLE (for https), STREAM,
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (accepted by the server) and
WRONG_SECRET (a secret the server must refuse). Prints one JSON object with
what the client saw; the Go test compares it with what must be seen.
"""
import json
import os
import sys
import time

import boto3
import botocore.config
import botocore.exceptions

endpoint = os.environ["ENDPOINT"]
verify = os.environ.get("CA_BUNDLE") or None
stream = os.environ["STREAM"]
cfg = botocore.config.Config(retries={"max_attempts": 1}, region_name="us-east-1")


def client(secret=None):
    return boto3.client(
        "kinesis", endpoint_url=endpoint, verify=verify, config=cfg,
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=secret or os.environ["AWS_SECRET_ACCESS_KEY"])


kc = client()


def wait_active():
    while kc.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamStatus"] != "ACTIVE":
        time.sleep(0.05)


def data(i):
    return b"rec-%d\x00\xff" % i


def read(shard, **kw):
    it = kc.get_shard_iterator(StreamName=stream, ShardId=shard, **kw)["ShardIterator"]
    return kc.get_records(ShardIterator=it, Limit=100)["Records"]


def error_code(fn):
    try:
        fn()
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
    return ""


out = {}
kc.create_stream(StreamName=stream, ShardCount=2)
wait_active()
first = kc.put_record(StreamName=stream, Data=data(0), PartitionKey="pk-0", ExplicitHashKey="0")
seqs = [first["SequenceNumber"]]
batch = kc.put_records(StreamName=stream, Records=[
    {"Data": data(i), "PartitionKey": "pk-%d" % i, "ExplicitHashKey": "0"} for i in range(1, 10)])
if batch["FailedRecordCount"]:
    sys.exit("PutRecords failed %d records" % batch["FailedRecordCount"])
seqs += [r["SequenceNumber"] for r in batch["Records"]]
out["putSeqs"] = seqs
shard0 = first["ShardId"]
out["shards"] = [s["ShardId"] for s in kc.list_shards(StreamName=stream)["Shards"]]

recs = read(shard0, ShardIteratorType="TRIM_HORIZON")
out["readSeqs"] = [r["SequenceNumber"] for r in recs]
out["arrivalMs"] = [round(r["ApproximateArrivalTimestamp"].timestamp() * 1000) for r in recs]
reads = {"TRIM_HORIZON": [r["Data"].hex() for r in recs]}
reads["AT_SEQUENCE_NUMBER"] = [r["Data"].hex() for r in read(shard0, ShardIteratorType="AT_SEQUENCE_NUMBER", StartingSequenceNumber=seqs[3])]
reads["AFTER_SEQUENCE_NUMBER"] = [r["Data"].hex() for r in read(shard0, ShardIteratorType="AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=seqs[3])]
reads["AT_TIMESTAMP"] = [r["Data"].hex() for r in read(shard0, ShardIteratorType="AT_TIMESTAMP", Timestamp=recs[0]["ApproximateArrivalTimestamp"])]
latest = kc.get_shard_iterator(StreamName=stream, ShardId=shard0, ShardIteratorType="LATEST")["ShardIterator"]
kc.put_record(StreamName=stream, Data=b"late", PartitionKey="late", ExplicitHashKey="0")
reads["LATEST"] = [r["Data"].hex() for r in kc.get_records(ShardIterator=latest)["Records"]]
out["reads"] = reads

kc.split_shard(StreamName=stream, ShardToSplit=shard0, NewStartingHashKey=str(1 << 126))
wait_active()
out["afterSplit"] = [{"id": s["ShardId"], "parent": s.get("ParentShardId", ""),
                      "closed": "EndingSequenceNumber" in s["SequenceNumberRange"]}
                     for s in kc.list_shards(StreamName=stream)["Shards"]]

arn = kc.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamARN"]
consumer = kc.register_stream_consumer(StreamARN=arn, ConsumerName="conformance")["Consumer"]["ConsumerARN"]
out["consumerStatus"] = kc.describe_stream_consumer(ConsumerARN=consumer)["ConsumerDescription"]["ConsumerStatus"]
sub = kc.subscribe_to_shard(ConsumerARN=consumer, ShardId=shard0, StartingPosition={"Type": "TRIM_HORIZON"})
got, children = [], []
for ev in sub["EventStream"]:
    e = ev["SubscribeToShardEvent"]
    got += [r["Data"].hex() for r in e["Records"]]
    children += [c["ShardId"] for c in e.get("ChildShards", [])]
    if "ContinuationSequenceNumber" not in e:
        break
out["subscribed"] = got
out["childShards"] = sorted(children)

out["errors"] = {
    "missingStream": error_code(lambda: kc.describe_stream_summary(StreamName="no-such-stream")),
    "wrongSecret": error_code(lambda: client(os.environ["WRONG_SECRET"]).list_streams()),
}
print(json.dumps(out))
