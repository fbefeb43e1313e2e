package components

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
)

// Table is the result of a query: column names, their SQL types as the engine names them
// (e.g. VARCHAR, BIGINT) and the rows, with values as encoding/json decodes them (numbers
// as json.Number, SQL NULL as nil).
type Table struct {
	Columns []string
	Types   []string
	Rows    [][]any
}

// duckDBScript runs the query in argv[1] with DuckDB (PyPI duckdb) and prints the result
// as one JSON object.
const duckDBScript = `
import json, sys, duckdb
con = duckdb.connect()
rel = con.sql(sys.argv[1])
rows = [[v if v is None or isinstance(v, (str, int, float, bool)) else str(v) for v in r] for r in rel.fetchall()]
json.dump({"Columns": rel.columns, "Types": [str(t) for t in rel.types], "Rows": rows}, sys.stdout)
`

// DuckDBT runs query with DuckDB from the virtualenv, as an independent reader of files the
// code under test wrote (e.g. "SELECT * FROM read_parquet('dir/*.parquet')"). DuckDB's
// extensions are not used: httpfs would need a download. Without the virtualenv it skips or
// fails t (see Unavailable).
func DuckDBT(t testing.TB, query string) Table {
	t.Helper()
	var out Table
	runPythonJSON(t, duckDBScript, &out, query)
	return out
}

// s3DownloadScript downloads every object under a prefix of a bucket into a directory with
// boto3 and prints the keys as a JSON list.
const s3DownloadScript = `
import json, os, sys, boto3
endpoint, bucket, prefix, dest = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test")
keys = []
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
    for o in page.get("Contents", []):
        keys.append(o["Key"])
        path = os.path.join(dest, o["Key"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        s3.download_file(bucket, o["Key"], path)
json.dump(sorted(keys), sys.stdout)
`

// DownloadS3T downloads every object of bucket under prefix from the S3 server at endpoint
// into dir (keeping the keys as relative paths) with boto3, another S3 client than the
// code under test's, and returns the keys in order.
func DownloadS3T(t testing.TB, endpoint, bucket, prefix, dir string) []string {
	t.Helper()
	var keys []string
	runPythonJSON(t, s3DownloadScript, &keys, endpoint, bucket, prefix, dir)
	return keys
}

// runPythonJSON runs script with args in the virtualenv's python and decodes its standard
// output, JSON, into out.
func runPythonJSON(t testing.TB, script string, out any, args ...string) {
	t.Helper()
	python := PythonT(t)
	cmd := exec.Command(python, append([]string{"-c", script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python %v: %v\n%s", args, err, stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		t.Fatalf("decoding the output of python %v: %v\n%s", args, err, stdout.String())
	}
}

// pyarrowS3Script reads the Parquet dataset under argv[2] (bucket/prefix) straight from
// the S3 server at argv[1] with pyarrow's own S3 filesystem and prints it as one JSON
// object; a column's type is its Arrow type, with " not null" for a required column.
const pyarrowS3Script = `
import json, sys
import pyarrow.fs as fs, pyarrow.parquet as pq
s3 = fs.S3FileSystem(endpoint_override=sys.argv[1], access_key="test", secret_key="test", region="us-east-1")
t = pq.read_table(sys.argv[2], filesystem=s3)
types = [str(f.type) + ("" if f.nullable else " not null") for f in t.schema]
json.dump({"Columns": t.column_names, "Types": types, "Rows": [list(r.values()) for r in t.to_pylist()]}, sys.stdout)
`

// PyArrowS3T reads the Parquet files under bucketPrefix ("bucket/prefix", a directory of
// files) from the S3 server at endpoint with pyarrow (PyPI pyarrow) and its own S3 client,
// an independent reader of both the objects and their Parquet content.
func PyArrowS3T(t testing.TB, endpoint, bucketPrefix string) Table {
	t.Helper()
	var out Table
	runPythonJSON(t, pyarrowS3Script, &out, endpoint, bucketPrefix)
	return out
}
