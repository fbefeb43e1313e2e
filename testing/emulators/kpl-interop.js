#!/usr/bin/env node
// kpl-interop.js runs awslabs' KPL aggregation library (npm aws-kinesis-agg)
// for the Go interop tests. It reads one JSON request from stdin and writes one
// JSON answer to stdout. Binary data travels as base64.
//
//   {"op": "aggregate", "records": [{"pk": "...", "ehk": "...", "data": "<b64>"}, ...]}
//     -> {"records": [{"pk": "...", "ehk": "...", "data": "<b64>"}, ...]}
//   The user records are packed by RecordAggregator.aggregateRecords with a
//   final flush; each output element is one Kinesis record as the library
//   hands it to its caller (outer partition key and, when the library sets
//   one, the outer explicit hash key).
//
//   {"op": "deaggregate", "records": [{"pk": "...", "ehk": "...", "data": "<b64>"}, ...]}
//     -> {"results": [{"records": [{"pk", "ehk", "data"}, ...]} | {"error": "..."}, ...]}
//   Each Kinesis record is split by deaggregateSync with checksum checking
//   on; a failure is reported per Kinesis record.
'use strict';

const agg = require('aws-kinesis-agg');

function readStdin() {
  return require('fs').readFileSync(0, 'utf8');
}

function aggregate(records) {
  const out = [];
  let failure = null;
  const aggregator = new agg.RecordAggregator();
  const input = records.map((r) => {
    const rec = { partitionKey: r.pk, data: Buffer.from(r.data, 'base64') };
    if (r.ehk) rec.explicitHashKey = r.ehk;
    return rec;
  });
  aggregator.aggregateRecords(input, true, (err, encoded) => {
    if (err) {
      failure = failure || err;
      return;
    }
    const rec = { pk: encoded.partitionKey, data: encoded.data.toString('base64') };
    // The library names the outer explicit hash key "ExplicitHashKey".
    if (encoded.ExplicitHashKey !== undefined) rec.ehk = encoded.ExplicitHashKey;
    out.push(rec);
  });
  if (failure) throw failure;
  return { records: out };
}

function deaggregate(records) {
  const results = records.map((r, i) => {
    const kinesisRecord = {
      partitionKey: r.pk,
      explicitPartitionKey: r.ehk,
      sequenceNumber: String(i),
      data: r.data,
    };
    let result;
    agg.deaggregateSync(kinesisRecord, true, (err, userRecords) => {
      if (err) {
        result = { error: String(err && err.message ? err.message : err) };
        return;
      }
      result = {
        records: userRecords.map((u) => {
          const rec = { pk: u.partitionKey, data: u.data };
          if (u.explicitPartitionKey !== undefined && u.explicitPartitionKey !== null) {
            rec.ehk = String(u.explicitPartitionKey);
          }
          return rec;
        }),
      };
    });
    return result;
  });
  return { results };
}

function main() {
  const req = JSON.parse(readStdin());
  let res;
  switch (req.op) {
    case 'aggregate':
      res = aggregate(req.records);
      break;
    case 'deaggregate':
      res = deaggregate(req.records);
      break;
    default:
      throw new Error('unknown op ' + JSON.stringify(req.op));
  }
  process.stdout.write(JSON.stringify(res));
}

main();
