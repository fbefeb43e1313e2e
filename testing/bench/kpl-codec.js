// kpl-codec.js times awslabs' aws-kinesis-agg (node) on the vectors the Go codec row uses,
// for testing/bench row 4. argv[2] is the aws-kinesis-agg package directory. stdin is one
// JSON object {"groups": [[{"pk": "...", "data": "<base64>"}, ...], ...], "total": N}: each
// group is the user records of one aggregate the Go aggregator built, so both sides build
// aggregates of the same size. stdout is
// {"aggregate": {"records": n, "cpu_s": s}, "deaggregate": {"records": n, "cpu_s": s}}.
'use strict';

const agg = require(process.argv[2]);

const req = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const groups = req.groups.map((g) => g.map((r) => ({ partitionKey: r.pk, data: Buffer.from(r.data, 'base64') })));
const total = req.total;

function cpuSeconds(start) {
  const u = process.cpuUsage(start);
  return (u.user + u.system) / 1e6;
}

// Aggregate: each group with a final flush, round and round until total user records.
const aggregator = new agg.RecordAggregator();
const encoded = [];
let n = 0;
let start = process.cpuUsage();
while (n < total) {
  for (const g of groups) {
    aggregator.aggregateRecords(g, true, (err, rec) => {
      if (err) throw err;
      if (encoded.length < groups.length) encoded.push(rec);
    });
    n += g.length;
    if (n >= total) break;
  }
}
const aggregate = { records: n, cpu_s: cpuSeconds(start) };

// Deaggregate the library's own aggregates, checksums checked (as the KCL does), passing the
// data as a Buffer (no base64 decoding to pay for).
let m = 0;
start = process.cpuUsage();
while (m < total) {
  for (const rec of encoded) {
    agg.deaggregateSync({ partitionKey: rec.partitionKey, data: rec.data }, true, (err, users) => {
      if (err) throw err;
      m += users.length;
    });
    if (m >= total) break;
  }
}
const deaggregate = { records: m, cpu_s: cpuSeconds(start) };
process.stdout.write(JSON.stringify({ aggregate, deaggregate }));
