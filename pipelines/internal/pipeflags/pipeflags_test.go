package pipeflags

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/kinesisio/awsconf"
	"github.com/beamkinesis/beamkinesis/transforms/filesink"
)

func parse(t *testing.T, args ...string) (Kinesis, Source, error) {
	t.Helper()
	var k Kinesis
	var s Source
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	k.Register(fs)
	s.Register(fs, time.Minute)
	return k, s, fs.Parse(args)
}

func TestResolveDefaultsDependOnTheEmbeddedServer(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		embedded    bool
		wantBounded bool
		wantOpts    int // starting position (+ max read time) (+ startup timeout, when streaming)
	}{
		{nil, true, true, 1},
		{[]string{"--bounded=false"}, true, false, 3}, // EmbeddedMaxReadTime ends the demo
		{nil, false, false, 2},
		{[]string{"--bounded"}, false, true, 1},
		{[]string{"--max_read_time=1m"}, false, false, 3},
	} {
		_, s, err := parse(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		bounded, opts, err := s.Resolve(tc.embedded)
		if err != nil {
			t.Fatal(err)
		}
		if bounded != tc.wantBounded || len(opts) != tc.wantOpts {
			t.Errorf("%q embedded=%v: bounded=%v with %d options, want %v with %d", tc.args, tc.embedded, bounded, len(opts), tc.wantBounded, tc.wantOpts)
		}
	}
}

func TestBoundedTakesItsDefaultOnlyWhenNotGiven(t *testing.T) {
	for _, tc := range []struct {
		args            []string
		ifTrue, ifFalse bool
	}{
		{nil, true, false},
		{[]string{"--bounded"}, true, true},
		{[]string{"--bounded=true"}, true, true},
		{[]string{"--bounded=false"}, false, false},
	} {
		_, s, err := parse(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]bool{s.Bounded.Or(true), s.Bounded.Or(false)}; got != [2]bool{tc.ifTrue, tc.ifFalse} {
			t.Errorf("%q: Or(true), Or(false) = %v, want %v", tc.args, got, [2]bool{tc.ifTrue, tc.ifFalse})
		}
	}
	if _, _, err := parse(t, "--bounded=maybe"); err == nil {
		t.Error("--bounded=maybe was accepted")
	}
}

// TestFlagsBecomeValidOptions builds a read with every flag set: kinesisio panics at
// construction on an option it refuses.
func TestFlagsBecomeValidOptions(t *testing.T) {
	k, s, err := parse(t, "--aws_credentials_from_env", "--kinesis_region=eu-west-1", "--kinesis_endpoint=https://kinesis.example.com",
		"--aws_profile=dev", "--role_arn=arn:aws:iam::123456789012:role/reader", "--role_session_name=wc",
		"--starting_position=trim_horizon", "--max_read_time=30s", "--window=10s", "--startup_timeout=1m")
	if err != nil {
		t.Fatal(err)
	}
	bounded, read, err := s.Resolve(false)
	if err != nil {
		t.Fatal(err)
	}
	if bounded {
		t.Error("a real stream without --bounded resolved to a bounded read")
	}
	env := map[string]string{"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token"}
	client, err := k.OptionsFrom(func(name string) string { return env[name] })
	if err != nil {
		t.Fatal(err)
	}
	opts := ReadOptions(client, read...)
	if len(opts) != 9 {
		t.Errorf("got %d options, want 9 (keys, token, region, endpoint, profile, role, start, max read time, startup timeout)", len(opts))
	}
	s.Bounded.SetBool(true)
	_, boundedRead, err := s.Resolve(false)
	if err != nil {
		t.Fatal(err)
	}
	_, scope := beam.NewPipelineWithRoot()
	kinesisio.ReadBounded(scope, "orders", ReadOptions(client, boundedRead...)...)
	kinesisio.Read(scope, "orders", opts...)
	kinesisio.Write(scope, "orders", beam.Create(scope, kinesisio.Message{PartitionKey: "k"}), WriteOptions(client, kinesisio.WithoutAggregation())...)
	if s.Window != 10*time.Second {
		t.Errorf("window %v, want 10s", s.Window)
	}
}

func TestSettingsAreTheFlagsIdentity(t *testing.T) {
	k, _, err := parse(t, "--aws_credentials_from_env", "--kinesis_region=eu-west-1", "--kinesis_endpoint=http://127.0.0.1:4567",
		"--aws_profile=dev", "--role_arn=arn:aws:iam::123456789012:role/loader", "--role_session_name=load")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token"}
	got, err := k.Settings(func(name string) string { return env[name] })
	if err != nil {
		t.Fatal(err)
	}
	want := awsconf.Settings{Region: "eu-west-1", Endpoint: "http://127.0.0.1:4567", Profile: "dev",
		AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret", SessionToken: "token",
		RoleARN: "arn:aws:iam::123456789012:role/loader", RoleSessionName: "load"}
	if got != want {
		t.Errorf("Settings = %v, want %v", got, want)
	}
}

func TestCredentialsFromEnvNeedBothKeys(t *testing.T) {
	k, _, err := parse(t, "--aws_credentials_from_env")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE"}
	if _, err := k.OptionsFrom(func(name string) string { return env[name] }); err == nil {
		t.Error("a missing AWS_SECRET_ACCESS_KEY was accepted")
	}
}

func TestBadSourceFlagsAreRefused(t *testing.T) {
	_, s, err := parse(t, "--starting_position=yesterday")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Resolve(false); err == nil || !strings.HasPrefix(err.Error(), "--starting_position: ") {
		t.Errorf("Resolve: %v, want an error naming --starting_position", err)
	}
	for _, args := range [][]string{{"--window=0s"}, {"--max_read_time=-1s"}} {
		_, s, err := parse(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Resolve(true); err == nil {
			t.Errorf("%q was accepted", args)
		}
	}
}

func TestS3ConfigTakesTheKinesisCredentialsAndRegion(t *testing.T) {
	env := map[string]string{"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token"}
	k := Kinesis{Region: "eu-west-1", Profile: "p", RoleARN: "arn:aws:iam::1:role/r", RoleSessionName: "s", StaticFromEnv: true}
	got, err := S3{Endpoint: "http://127.0.0.1:5000"}.Config(k, func(key string) string { return env[key] })
	if err != nil {
		t.Fatal(err)
	}
	want := filesink.S3{Region: "eu-west-1", Endpoint: "http://127.0.0.1:5000", Profile: "p", AccessKeyID: "id", SecretAccessKey: "secret",
		SessionToken: "token", RoleARN: "arn:aws:iam::1:role/r", RoleSessionName: "s"}
	if got != want {
		t.Errorf("Config = %#v, want %#v", got, want)
	}
	if got, _ := (S3{Region: "us-west-2"}).Config(k, func(key string) string { return env[key] }); got.Region != "us-west-2" {
		t.Errorf("--s3_region=us-west-2 gave region %q", got.Region)
	}
	if _, err := (S3{}).Config(Kinesis{StaticFromEnv: true}, func(string) string { return "" }); err == nil {
		t.Error("--aws_credentials_from_env without keys in the environment was accepted")
	}
}

func TestCheckpointTableFlags(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantOpts int // starting position, startup timeout (a streaming read) + the table's options
		wantErr  string
	}{
		{nil, 2, ""},
		{[]string{"--checkpoint_table=positions"}, 3, ""},
		{[]string{"--checkpoint_table=positions", "--checkpoint_table_endpoint=http://127.0.0.1:8000", "--checkpoint_takeover", "--checkpoint_lease_duration=2s"}, 6, ""},
		{[]string{"--checkpoint_table_endpoint=http://127.0.0.1:8000"}, 0, "need --checkpoint_table"},
		{[]string{"--checkpoint_takeover"}, 0, "need --checkpoint_table"},
		{[]string{"--checkpoint_lease_duration=2s"}, 0, "need --checkpoint_table"},
		{[]string{"--checkpoint_table=positions", "--checkpoint_lease_duration=-1s"}, 0, "must not be negative"},
	} {
		_, s, err := parse(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		_, opts, err := s.Resolve(false)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || len(opts) != tc.wantOpts):
			t.Errorf("%q: %d options, %v; want %d", tc.args, len(opts), err, tc.wantOpts)
		}
	}
}
