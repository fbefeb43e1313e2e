package conformance

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/beamkinesis/beamkinesis/testing/components"
	"github.com/beamkinesis/beamkinesis/testing/emulators"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// The real-client scenario: the SDKs other languages use — boto3, the AWS
// CLI, the JavaScript SDK v3 and the Java SDK v2 — each run the same steps
// against our server with its signature checks on: create a stream, put ten
// records (one PutRecord, one PutRecords), list shards, read with every
// iterator type, split, register a consumer, subscribe to the split parent
// and read it to its end, and two errors (a missing stream, a wrong secret).
// Each client prints what it saw as one JSON object (scenarioResult); the
// test compares it with what the service must answer. The server runs on a
// manual clock so every arrival time is known to the millisecond.

// scenarioKey is the key the scenario's server accepts; wrongSecret is
// refused.
var scenarioKey = kinesistest.Credential{AccessKeyID: "AKIASCENARIO", SecretAccessKey: "scenario-secret"}

const wrongSecret = "not-the-scenario-secret"

// scenarioT0 is the server clock of the scenario: arrival times carry a
// millisecond fraction, which every protocol must keep.
var scenarioT0 = time.Date(2026, 3, 1, 12, 0, 0, 123e6, time.UTC)

// scenarioResult is what a client prints.
type scenarioResult struct {
	PutSeqs        []string            `json:"putSeqs"`
	ReadSeqs       []string            `json:"readSeqs"`
	ArrivalMs      []int64             `json:"arrivalMs"`
	Shards         []string            `json:"shards"`
	Reads          map[string][]string `json:"reads"`
	AfterSplit     []scenarioShard     `json:"afterSplit"`
	ConsumerStatus string              `json:"consumerStatus"`
	Subscribed     []string            `json:"subscribed"`
	ChildShards    []string            `json:"childShards"`
	Errors         map[string]string   `json:"errors"`
}

type scenarioShard struct {
	ID     string `json:"id"`
	Parent string `json:"parent"`
	Closed bool   `json:"closed"`
}

func recHex(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, hex.EncodeToString(fmt.Appendf(nil, "rec-%d\x00\xff", i)))
	}
	return out
}

// wantScenario is what every client must see.
func wantScenario(seqs []string) scenarioResult {
	late := hex.EncodeToString([]byte("late"))
	arrivals := make([]int64, 10)
	for i := range arrivals {
		arrivals[i] = scenarioT0.UnixMilli()
	}
	return scenarioResult{
		PutSeqs:   seqs,
		ReadSeqs:  seqs,
		ArrivalMs: arrivals,
		Shards:    []string{"shardId-000000000000", "shardId-000000000001"},
		Reads: map[string][]string{
			"TRIM_HORIZON":          recHex(0, 10),
			"AT_SEQUENCE_NUMBER":    recHex(3, 10),
			"AFTER_SEQUENCE_NUMBER": recHex(4, 10),
			"AT_TIMESTAMP":          recHex(0, 10),
			"LATEST":                {late},
		},
		AfterSplit: []scenarioShard{
			{ID: "shardId-000000000000", Closed: true},
			{ID: "shardId-000000000001"},
			{ID: "shardId-000000000002", Parent: "shardId-000000000000"},
			{ID: "shardId-000000000003", Parent: "shardId-000000000000"},
		},
		ConsumerStatus: "ACTIVE",
		Subscribed:     append(recHex(0, 10), late),
		ChildShards:    []string{"shardId-000000000002", "shardId-000000000003"},
		Errors:         map[string]string{"missingStream": "ResourceNotFoundException", "wrongSecret": "InvalidSignatureException"},
	}
}

// scenarioServer starts the server a client's scenario runs against.
func scenarioServer(t *testing.T) *kinesistest.Server {
	t.Helper()
	return kinesistest.StartT(t, kinesistest.WithClock(kinesistest.NewManualClock(scenarioT0)), kinesistest.WithTLS(""),
		kinesistest.WithCredentials(scenarioKey), kinesistest.WithResubscribeWindow(0))
}

// scenarioEnv is the environment a scenario script reads.
func scenarioEnv(endpoint, caBundle, stream string) []string {
	return append(os.Environ(), "ENDPOINT="+endpoint, "CA_BUNDLE="+caBundle, "STREAM="+stream,
		"AWS_ACCESS_KEY_ID="+scenarioKey.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+scenarioKey.SecretAccessKey,
		"WRONG_SECRET="+wrongSecret, "AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1")
}

// clientsDir is testing/conformance/clients.
func clientsDir(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the conformance sources")
	}
	return filepath.Join(filepath.Dir(file), "clients")
}

// runScript runs a scenario script and returns its standard output.
func runScript(t *testing.T, env []string, name string, args ...string) []byte {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, name, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n--- stderr ---\n%s\n--- stdout ---\n%s", name, strings.Join(args, " "), err, tail(stderr.String(), 6000), tail(stdout.String(), 2000))
	}
	t.Logf("%s ran in %v", filepath.Base(args[len(args)-1]), time.Since(start).Round(time.Millisecond))
	return stdout.Bytes()
}

// checkScenario compares a client's output with what it must see, taking
// the sequence numbers from the server.
func checkScenario(t *testing.T, srv *kinesistest.Server, stream string, out []byte) {
	t.Helper()
	var got scenarioResult
	clientResult(t, out, &got)
	recs, err := srv.ShardRecords(stream, "shardId-000000000000")
	if err != nil {
		t.Fatal(err)
	}
	var seqs []string
	for _, r := range recs[:min(10, len(recs))] {
		seqs = append(seqs, r.SequenceNumber)
	}
	compareResults(t, got, wantScenario(seqs))
}

// clientResult decodes a client's last line of output, its result as JSON, into result.
func clientResult(t *testing.T, out []byte, result any) {
	t.Helper()
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], result); err != nil {
		t.Fatalf("the client's last output line is not its result: %v\n%s", err, out)
	}
}

// compareResults fails t, showing both as JSON, when a client's result differs from want.
func compareResults(t *testing.T, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("the client saw\n%s\nwant\n%s", g, w)
	}
}

// TestClientBoto3 runs the scenario with boto3 over TLS (HTTP/1.1; botocore
// has no HTTP/2).
func TestClientBoto3(t *testing.T) {
	py := components.PythonT(t)
	srv := scenarioServer(t)
	out := runScript(t, scenarioEnv(srv.TLSURL(), srv.CertFile(), "boto3"), py, filepath.Join(clientsDir(t), "scenario_boto3.py"))
	checkScenario(t, srv, "boto3", out)
}

// TestClientJavaScriptV3 runs the scenario with the JavaScript SDK v3 against
// both ports: the TLS port (HTTP/2 through ALPN for SubscribeToShard) and the
// plain one (cleartext HTTP/2 with prior knowledge, which is what failed with
// ERR_HTTP2_ERROR before the server spoke h2c).
func TestClientJavaScriptV3(t *testing.T) {
	if _, err := emulators.PackageDir("@aws-sdk/client-kinesis"); err != nil {
		emulators.Unavailable(t, err)
	}
	node, err := emulators.Node()
	if err != nil {
		emulators.Unavailable(t, err)
	}
	for _, port := range []string{"tls", "plain"} {
		t.Run(port, func(t *testing.T) {
			srv := scenarioServer(t)
			url := srv.URL()
			if port == "tls" {
				url = srv.TLSURL()
			}
			env := append(scenarioEnv(url, srv.CertFile(), "js"), "NODE_PATH="+filepath.Join(emulators.Dir(), "node_modules"),
				"NODE_EXTRA_CA_CERTS="+srv.CertFile())
			out := runScript(t, env, node, filepath.Join(clientsDir(t), "scenario_js.mjs"))
			checkScenario(t, srv, "js", out)
			if n := srv.Protocols()["HTTP/2.0"]; n == 0 {
				t.Errorf("no request came over HTTP/2 (%v); the SDK subscribes over HTTP/2", srv.Protocols())
			}
		})
	}
}

// awsCLI runs one AWS CLI command against srv's plain port and returns its
// output, or its error output when it fails as wantFail says.
func awsCLI(t *testing.T, env []string, aws, url string, wantFail bool, args ...string) string {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, aws, append([]string{"--endpoint-url", url, "--output", "json"}, args...)...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if wantFail {
		if err == nil {
			t.Fatalf("aws %s succeeded, want a failure: %s", strings.Join(args, " "), stdout.String())
		}
		return stderr.String()
	}
	if err != nil {
		t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// TestClientAWSCLI runs the scenario's steps that matter for a shell user
// with the AWS CLI (v1, the one on PyPI): create, put, get, register a
// consumer, split, list, and the two errors. Each command is a Python start,
// so the steps are fewer than the SDKs'; CLI v1 has no subscribe-to-shard.
func TestClientAWSCLI(t *testing.T) {
	py := components.PythonT(t)
	aws := filepath.Join(filepath.Dir(py), "aws")
	if _, err := os.Stat(aws); err != nil {
		components.Unavailable(t, fmt.Errorf("%w: no aws command beside %s", components.ErrUnavailable, py))
	}
	srv := scenarioServer(t)
	url := srv.URL()
	env := append(scenarioEnv(url, "", "cli"), "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	start := time.Now()
	awsCLI(t, env, aws, url, false, "kinesis", "create-stream", "--stream-name", "cli", "--shard-count", "2")
	var put struct{ ShardId, SequenceNumber string }
	if err := json.Unmarshal([]byte(awsCLI(t, env, aws, url, false, "kinesis", "put-record", "--stream-name", "cli",
		"--partition-key", "pk", "--explicit-hash-key", "0", "--data", "rec-0")), &put); err != nil || put.ShardId != "shardId-000000000000" {
		t.Fatalf("put-record: %v %+v", err, put)
	}
	var it struct{ ShardIterator string }
	json.Unmarshal([]byte(awsCLI(t, env, aws, url, false, "kinesis", "get-shard-iterator", "--stream-name", "cli", //nolint:errcheck // checked below
		"--shard-id", put.ShardId, "--shard-iterator-type", "AT_SEQUENCE_NUMBER", "--starting-sequence-number", put.SequenceNumber)), &it)
	var recs struct {
		Records []struct {
			Data, SequenceNumber        string
			ApproximateArrivalTimestamp float64
		}
	}
	if err := json.Unmarshal([]byte(awsCLI(t, env, aws, url, false, "kinesis", "get-records", "--shard-iterator", it.ShardIterator)), &recs); err != nil {
		t.Fatalf("get-records: %v", err)
	}
	// CLI v1 sends a blob argument's text as it is, and prints blobs
	// base64-encoded and timestamps as epoch seconds.
	if len(recs.Records) != 1 || recs.Records[0].Data != "cmVjLTA=" || recs.Records[0].SequenceNumber != put.SequenceNumber ||
		int64(recs.Records[0].ApproximateArrivalTimestamp*1000+0.5) != scenarioT0.UnixMilli() {
		t.Errorf("get-records: %+v", recs)
	}
	arn := fmt.Sprintf("arn:aws:kinesis:us-east-1:%s:stream/cli", kinesistest.AccountID)
	var reg struct{ Consumer struct{ ConsumerARN string } }
	json.Unmarshal([]byte(awsCLI(t, env, aws, url, false, "kinesis", "register-stream-consumer", "--stream-arn", arn, "--consumer-name", "cli")), &reg) //nolint:errcheck // checked below
	awsCLI(t, env, aws, url, false, "kinesis", "split-shard", "--stream-name", "cli", "--shard-to-split", put.ShardId,
		"--new-starting-hash-key", "85070591730234615865843651857942052864")
	// CLI v1 has no subscribe-to-shard (it leaves out event-stream
	// operations); the consumer and the split's children are checked instead.
	shards := awsCLI(t, env, aws, url, false, "kinesis", "list-shards", "--stream-name", "cli")
	for _, want := range []string{`"ShardId": "shardId-000000000003"`, `"ParentShardId": "shardId-000000000000"`} {
		if !strings.Contains(shards, want) {
			t.Errorf("list-shards output after the split lacks %s:\n%s", want, shards)
		}
	}
	if c := awsCLI(t, env, aws, url, false, "kinesis", "describe-stream-consumer", "--consumer-arn", reg.Consumer.ConsumerARN); !strings.Contains(c, `"ConsumerStatus": "ACTIVE"`) {
		t.Errorf("describe-stream-consumer: %s", c)
	}
	if e := awsCLI(t, env, aws, url, true, "kinesis", "describe-stream-summary", "--stream-name", "no-such-stream"); !strings.Contains(e, "(ResourceNotFoundException)") {
		t.Errorf("describe-stream-summary of a missing stream: %s", e)
	}
	wrong := append(slices.Clone(env), "AWS_SECRET_ACCESS_KEY="+wrongSecret)
	if e := awsCLI(t, wrong, aws, url, true, "kinesis", "list-streams"); !strings.Contains(e, "(InvalidSignatureException)") {
		t.Errorf("list-streams with a wrong secret: %s", e)
	}
	t.Logf("%d CLI commands ran in %v", 10, time.Since(start).Round(time.Millisecond))
}

// TestClientJavaSDKv2 runs the scenario with the AWS SDK for Java v2 as KCL,
// Flink's connector and Beam Java KinesisIO use it: the async client on
// Netty, HTTP/2 over TLS, and CBOR, the SDK's default (aws.cborEnabled is
// not touched).
func TestClientJavaSDKv2(t *testing.T) {
	java, cp := components.JavaClientT(t)
	srv := scenarioServer(t)
	// A short-lived JVM starts faster with the C1 compiler only.
	out := runScript(t, scenarioEnv(srv.TLSURL(), srv.CertFile(), "java"), java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-cp", cp, "dev.beamkinesis.conformance.Scenario")
	checkScenario(t, srv, "java", out)
	// The SDK sends every call in CBOR but SubscribeToShard, which it sends in
	// JSON (its event-stream operations use the JSON protocol).
	media, protos := srv.MediaTypes(), srv.Protocols()
	if media["application/x-amz-cbor-1.1"] < 20 || media["application/x-amz-json-1.1"] != srv.CallCount("SubscribeToShard") {
		t.Errorf("requests per body protocol %v (%d SubscribeToShard), want CBOR for all but SubscribeToShard", media, srv.CallCount("SubscribeToShard"))
	}
	if protos["HTTP/2.0"] == 0 || protos["HTTP/1.1"] != 0 {
		t.Errorf("requests per HTTP version %v, want HTTP/2 only", protos)
	}
}
