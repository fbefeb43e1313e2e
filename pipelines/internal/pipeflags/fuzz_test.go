package pipeflags

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beamkinesis/beamkinesis/kinesisio"
	"github.com/beamkinesis/beamkinesis/pipelines/flinkrunner"
)

// FuzzPipelineFlags gives the pipelines' shared flags (Kinesis, source, S3 and the Flink
// options) arbitrary command lines and environments. A command line is either refused
// with an error that names what is wrong, or becomes options that kinesisio accepts or
// refuses with a panic naming the transform and the option, Beam's construction-time
// error; no other panic, and no empty error, is acceptable.
func FuzzPipelineFlags(f *testing.F) {
	for _, args := range []string{
		"--kinesis_region=eu-west-1\n--kinesis_endpoint=http://127.0.0.1:4567",
		"--starting_position=AT_TIMESTAMP 2026-12-01T00:00:00Z\n--bounded",
		`--starting_position={"shardId-000000000000":{"type":"AFTER_SEQUENCE_NUMBER","sequenceNumber":"49"}}`,
		"--aws_credentials_from_env\n--role_arn=arn:aws:iam::123456789012:role/r",
		"--flink_option=max_bundle_time_mills=100\n--checkpointing_interval=-1\n--savepoint_path=file:///tmp/s",
		"--window=0s", "--max_read_time=-1s\n--bounded=false", "--s3_endpoint=http://127.0.0.1:5000\n--s3_region=x",
		"--kinesis_endpoint=::::", "--aws_profile=dev\n--kinesis_region=us-east-1",
	} {
		f.Add(args, "AKIDEXAMPLE", "secret", false)
		f.Add(args, "", "", true)
	}
	f.Fuzz(func(t *testing.T, commandLine, keyID, secret string, embedded bool) {
		var k Kinesis
		var src Source
		var s3 S3
		flink := flinkrunner.Defaults
		fs := flag.NewFlagSet("fuzz", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		k.Register(fs)
		src.Register(fs, time.Minute)
		s3.Register(fs)
		flink.Register(fs)
		if err := fs.Parse(strings.Split(commandLine, "\n")); err != nil {
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatalf("%q: an empty error", commandLine)
			}
			return
		}
		env := map[string]string{"AWS_ACCESS_KEY_ID": keyID, "AWS_SECRET_ACCESS_KEY": secret}
		getenv := func(name string) string { return env[name] }
		kopts, kerr := k.OptionsFrom(getenv)
		_, s3err := s3.Config(k, getenv)
		bounded, sopts, serr := src.Resolve(embedded)
		for _, err := range []error{kerr, s3err, serr} {
			if err != nil && !strings.HasPrefix(err.Error(), "--") {
				t.Errorf("%q: error %q does not start with the flag it is about", commandLine, err)
			}
		}
		for name, v := range flink.Fields() {
			if v == nil || !strings.HasPrefix(name, "beam:option:") {
				t.Errorf("%q: Flink option %q = %v", commandLine, name, v)
			}
		}
		if kerr != nil || serr != nil {
			return
		}
		build(t, commandLine, secret, bounded, ReadOptions(kopts, sopts...))
	})
}

// build constructs the read the pipelines construct from opts and checks that a refusal
// is kinesisio's construction error, which never quotes the secret key.
func build(t *testing.T, commandLine, secret string, bounded bool, opts []kinesisio.ReadOption) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			msg, _ := r.(string)
			if !strings.HasPrefix(msg, "kinesisio.Read") {
				t.Errorf("%q: the read's construction panicked with %v (%T), want kinesisio's error naming the option", commandLine, r, r)
			}
			if len(secret) >= 8 && strings.Contains(msg, secret) {
				t.Errorf("%q: the construction error quotes the secret key: %s", commandLine, msg)
			}
		}
	}()
	p, s := beam.NewPipelineWithRoot()
	if bounded {
		kinesisio.ReadBounded(s, "orders", opts...)
	} else {
		kinesisio.Read(s, "orders", opts...)
	}
	_ = p
}
