package flinkrunner

import (
	"flag"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// parse returns the options that args set on top of Defaults.
func parse(t *testing.T, args ...string) Options {
	t.Helper()
	o := Defaults
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing %v: %v", args, err)
	}
	return o
}

func TestDefaultsTurnCheckpointingOnWithFinishedBundles(t *testing.T) {
	got := parse(t).Fields()
	want := map[string]*structpb.Value{
		"beam:option:checkpointing_interval:v1":             structpb.NewNumberValue(10000),
		"beam:option:finish_bundle_before_checkpointing:v1": structpb.NewBoolValue(true),
		"beam:option:max_bundle_time_mills:v1":              structpb.NewNumberValue(100),
	}
	checkFields(t, got, want)
}

func TestAnExplicitBundleTimeWinsOverTheDefault(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want *structpb.Value // nil: not sent
	}{
		{[]string{"--max_bundle_time_mills=1000"}, structpb.NewNumberValue(1000)},
		{[]string{"--flink_option=max_bundle_time_mills=1000"}, structpb.NewNumberValue(1000)},
		{[]string{"--flink_option=max_bundle_time_mills=20", "--max_bundle_time_mills=300"}, structpb.NewNumberValue(20)},
		{[]string{"--max_bundle_time_mills=-1"}, nil},
	} {
		got, ok := parse(t, tc.args...).Fields()[URN("max_bundle_time_mills")]
		switch {
		case tc.want == nil && ok:
			t.Errorf("%v sent max_bundle_time_mills %v, want it left to Beam's default", tc.args, got)
		case tc.want != nil && (!ok || !proto.Equal(got, tc.want)):
			t.Errorf("%v sent max_bundle_time_mills %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestEveryFlagBecomesItsTopLevelOption(t *testing.T) {
	got := parse(t,
		"--checkpointing_interval=1000", "--finish_bundle_before_checkpointing=false",
		"--checkpoint_timeout_millis=60000", "--min_pause_between_checkpoints=500",
		"--shutdown_sources_after_idle_ms=9223372036854775807",
		"--savepoint_path=file:///tmp/savepoints/savepoint-1", "--allow_non_restored_state",
		"--max_parallelism=128", "--externalized_checkpoints_enabled", "--max_bundle_time_mills=250",
		"--flink_option=max_bundle_size=500", "--flink_option=object_reuse=true",
		"--flink_option=checkpointing_mode=AT_LEAST_ONCE",
	).Fields()
	want := map[string]*structpb.Value{
		"beam:option:checkpointing_interval:v1":                          structpb.NewNumberValue(1000),
		"beam:option:finish_bundle_before_checkpointing:v1":              structpb.NewBoolValue(false),
		"beam:option:checkpoint_timeout_millis:v1":                       structpb.NewNumberValue(60000),
		"beam:option:min_pause_between_checkpoints:v1":                   structpb.NewNumberValue(500),
		"beam:option:shutdown_sources_after_idle_ms:v1":                  structpb.NewNumberValue(9223372036854775807),
		"beam:option:savepoint_path:v1":                                  structpb.NewStringValue("file:///tmp/savepoints/savepoint-1"),
		"beam:option:allow_non_restored_state:v1":                        structpb.NewBoolValue(true),
		"beam:option:max_parallelism:v1":                                 structpb.NewNumberValue(128),
		"beam:option:externalized_checkpoints_enabled:v1":                structpb.NewBoolValue(true),
		"beam:option:retain_externalized_checkpoints_on_cancellation:v1": structpb.NewBoolValue(true),
		"beam:option:max_bundle_time_mills:v1":                           structpb.NewNumberValue(250),
		"beam:option:max_bundle_size:v1":                                 structpb.NewNumberValue(500),
		"beam:option:object_reuse:v1":                                    structpb.NewBoolValue(true),
		"beam:option:checkpointing_mode:v1":                              structpb.NewStringValue("AT_LEAST_ONCE"),
	}
	checkFields(t, got, want)
}

func TestCheckpointingOffIsSentAsMinusOne(t *testing.T) {
	// -1 is Beam's own "off" for checkpointing_interval, so it is the one -1 worth leaving
	// out: Beam then keeps checkpointing off.
	got := parse(t, "--checkpointing_interval=-1").Fields()
	if _, ok := got[URN("checkpointing_interval")]; ok {
		t.Errorf("--checkpointing_interval=-1 sent %v, want the option left to Beam's default (off)", got[URN("checkpointing_interval")])
	}
}

func TestFlinkOptionRejectsWhatIsNoOptionName(t *testing.T) {
	for _, arg := range []string{"maxBundleTimeMills=100", "max_bundle_time_mills", "=1", "beam:option:x:v1=1"} {
		o := Defaults
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(discard{})
		o.Register(fs)
		if err := fs.Parse([]string{"--flink_option=" + arg}); err == nil {
			t.Errorf("--flink_option=%s was accepted as %v, want an error naming the snake_case_name=value form", arg, o.Extra)
		}
	}
}

func TestApplyKeepsTheGoOptionsAndReplacesTopLevelKeys(t *testing.T) {
	goOptions, err := structpb.NewValue(map[string]any{"options": map[string]any{"checkpointing_interval": "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	opts := &structpb.Struct{Fields: map[string]*structpb.Value{
		"beam:option:go_options:v1":             goOptions,
		"beam:option:parallelism:v1":            structpb.NewNumberValue(2),
		"beam:option:checkpointing_interval:v1": structpb.NewNumberValue(5),
	}}
	o := parse(t, "--checkpointing_interval=1000")
	o.Apply(opts)
	want := &structpb.Struct{Fields: map[string]*structpb.Value{
		"beam:option:go_options:v1":                         goOptions,
		"beam:option:parallelism:v1":                        structpb.NewNumberValue(2),
		"beam:option:checkpointing_interval:v1":             structpb.NewNumberValue(1000),
		"beam:option:finish_bundle_before_checkpointing:v1": structpb.NewBoolValue(true),
		"beam:option:max_bundle_time_mills:v1":              structpb.NewNumberValue(100),
	}}
	checkFields(t, opts.Fields, want.Fields)
}

func TestIsFlink(t *testing.T) {
	for runner, want := range map[string]bool{"flink": true, "FlinkRunner": true, "prism": false, "": false, "universal": false} {
		if got := IsFlink(runner); got != want {
			t.Errorf("IsFlink(%q) = %v, want %v", runner, got, want)
		}
	}
}

// checkFields fails t unless got and want hold the same options.
func checkFields(t *testing.T, got, want map[string]*structpb.Value) {
	t.Helper()
	g, w := &structpb.Struct{Fields: got}, &structpb.Struct{Fields: want}
	if !proto.Equal(g, w) {
		t.Errorf("options\n%s\nwant\n%s", protojson.Format(g), protojson.Format(w))
	}
}

// discard is an io.Writer that drops what the flag set prints about a bad flag.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
