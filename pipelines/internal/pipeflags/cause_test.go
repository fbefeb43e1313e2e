package pipeflags

import (
	"errors"
	"testing"
)

func TestCauseIsTheFailedDoFnsError(t *testing.T) {
	for _, c := range []struct{ name, err, want string }{
		{"prism", "running the pipeline: job job-001 failed:\nbundle inst002 stage-002 failed:process bundle failed for instruction inst002 using plan stage-002 : while executing Process for Plan[stage-002]:\n" +
			"1: DataSource[S[stage-002_source@localhost:44421], i0] Out:8 Coder:W;cwv_ne2_splitnsized<KV;ce2kv_ele_rest_size<KV;bytes>>!GWC \n8: SDF.ProcessSizedElementsAndRestrictions[kinesisio.discoverFn] UID:8 Out:[7]\n" +
			"\tcaused by:\nsource failed processing data\n\tcaused by:\nDoFn[UID:8, PID:ee2_processandsplit, Name: github.com/beamkinesis/beamkinesis/kinesisio.discoverFn] failed:\n" +
			"kinesisio: listing the shards of stream orders: ResourceNotFoundException: Stream orders under account 123456789012 not found.",
			"the job failed: kinesisio: listing the shards of stream orders: ResourceNotFoundException: Stream orders under account 123456789012 not found."},
		{"in a Java stack trace", "job failed: java.lang.RuntimeException: Error received from SDK harness for instruction 5: DoFn[UID:3, PID:x, Name: main.fn] failed:\nkinesisio: the read failed\n\tat org.apache.beam.runners.fnexecution.control.FnApiControlClient$ResponseStreamObserver.onNext(FnApiControlClient.java:180)\n",
			"the job failed: kinesisio: the read failed"},
		{"one line", "--window=-1s: the window size must be positive", "--window=-1s: the window size must be positive"},
		{"a chain", "submitting the job:\n\tcaused by:\nconnection refused", "connection refused"},
	} {
		if got := Cause(errors.New(c.err)); got != c.want {
			t.Errorf("%s: Cause = %q, want %q", c.name, got, c.want)
		}
	}
}
