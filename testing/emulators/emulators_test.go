package emulators_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/beamkinesis/beamkinesis/testing/emulators"
)

// TestStartStop starts each emulator, checks that it answers, and stops it.
func TestStartStop(t *testing.T) {
	for _, kind := range []emulators.Kind{emulators.KinesisLocal, emulators.Kinesalite} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			e := emulators.StartT(t, kind)
			out, err := e.Client().ListStreams(context.Background(), &kinesis.ListStreamsInput{})
			if err != nil {
				t.Fatalf("ListStreams: %v\n%s", err, e.Output())
			}
			if len(out.StreamNames) != 0 {
				t.Errorf("fresh %s lists streams %q, want none", kind, out.StreamNames)
			}
			if err := e.Stop(); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Client(func(o *kinesis.Options) { o.RetryMaxAttempts = 1 }).ListStreams(context.Background(), &kinesis.ListStreamsInput{}); err == nil {
				t.Errorf("%s still answers after Stop", kind)
			}
		})
	}
}
