// Package flinkrunner runs Go pipelines on Beam's Flink job server with the Flink options a
// streaming job needs: checkpointing, finishing bundles before a checkpoint, keeping the
// sources alive, restoring from a savepoint.
//
// The Go SDK's own flink runner (beam/runners/flink) nests every Go flag under the one
// pipeline option beam:option:go_options:v1, which Beam Java's FlinkPipelineOptions never
// reads: only --parallelism reaches Flink, so a Go streaming job runs without checkpoints
// (no fault tolerance) and, with Beam's defaults, its sources shut down at once. Execute
// submits like the SDK's runner and also sends the flags of this package as top-level
// options (beam:option:checkpointing_interval:v1, ...), which Beam's stock Flink job server
// applies. Nothing on the job server needs patching.
//
// A pipeline uses it in place of beamx.Run or beamx.RunWithMetrics:
//
//	res, err := flinkrunner.Run(ctx, p) // --runner=flink goes through Execute
//
// Flags (the names and units of Beam Java's FlinkPipelineOptions), with the defaults that
// make a streaming read live and fault tolerant:
//
//	--checkpointing_interval=10000           ms between checkpoints; -1 turns checkpointing off
//	--finish_bundle_before_checkpointing=true finish the open bundles before a checkpoint
//	--checkpoint_timeout_millis=-1           ms before a checkpoint is abandoned (-1: Flink's 10 min)
//	--min_pause_between_checkpoints=-1       ms from the end of one checkpoint to the next start
//	--shutdown_sources_after_idle_ms=-1      ms an idle source stays up (-1: forever with
//	                                         checkpointing on, at once without)
//	--savepoint_path=                        start from this savepoint or retained checkpoint
//	--allow_non_restored_state=false         start from a savepoint that holds state no
//	                                         operator of this job claims
//	--max_parallelism=-1                     key groups of the job; a job restored from a
//	                                         savepoint needs the same value
//	--externalized_checkpoints_enabled=false keep checkpoints when the job is cancelled
//	--max_bundle_time_mills=100              ms before a streaming operator closes its bundle
//	                                         (-1: Beam's default, 1000)
//	--flink_option=name=value                any other FlinkPipelineOptions property, e.g.
//	                                         --flink_option=max_bundle_size=500; it wins
//	                                         over the flags above for the same property
//
// The bundle time is 100 ms because a Go streaming job's output leaves an operator only
// when its bundle closes. A kinesis-to-kinesis job at 200 messages/s on the standalone
// cluster (parallelism 2, a checkpoint a second, chaos off; testing/soak --runner=flink, one
// sitting, two rounds) measured put→output p99 1,005 ms with Beam's 1,000 ms, 328–341 ms
// with 100 ms and 337 ms with 50 ms, so a shorter bundle buys nothing more.
//
// Bounded pipelines run in Flink's batch mode, where the checkpoint flags do nothing.
package flinkrunner

import (
	"flag"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
)

// Options are the Flink options Execute sends. A numeric field at -1 and an empty string
// are not sent, leaving Beam's and Flink's own defaults.
type Options struct {
	// CheckpointingInterval is the time between checkpoints in milliseconds; -1 turns
	// checkpointing off.
	CheckpointingInterval int64
	// FinishBundleBeforeCheckpointing makes each operator finish its open bundle before it
	// takes part in a checkpoint. A Go streaming read needs it: without it the output of
	// the long-running bundle of the read stays buffered and no checkpoint completes.
	FinishBundleBeforeCheckpointing bool
	// CheckpointTimeoutMillis is how long a checkpoint may take before Flink abandons it.
	CheckpointTimeoutMillis int64
	// MinPauseBetweenCheckpoints is the least time from the end of one checkpoint to the
	// start of the next, in milliseconds.
	MinPauseBetweenCheckpoints int64
	// ShutdownSourcesAfterIdleMs is how long a source that has finished stays up. Beam
	// keeps it up forever when checkpointing is on (a finished source cannot checkpoint)
	// and shuts it down at once when it is off, which ends a Go streaming read's work
	// before it starts.
	ShutdownSourcesAfterIdleMs int64
	// SavepointPath starts the job from this savepoint (or retained checkpoint) directory.
	SavepointPath string
	// AllowNonRestoredState lets the job start from a savepoint that holds state of an
	// operator the job no longer has.
	AllowNonRestoredState bool
	// MaxParallelism is the number of key groups; a job restored from a savepoint must keep
	// the value the savepoint was taken with.
	MaxParallelism int64
	// ExternalizedCheckpointsEnabled keeps the job's checkpoints when it is cancelled, so
	// that it can be started again from the last one.
	ExternalizedCheckpointsEnabled bool
	// MaxBundleTimeMills is how long a streaming operator keeps a bundle open before it
	// closes it and its output moves on, in milliseconds.
	MaxBundleTimeMills int64
	// Extra holds any other FlinkPipelineOptions properties by their snake_case names, e.g.
	// "max_bundle_size": "500"; an entry wins over the fields above for the same property.
	// Values that parse as a number or a bool are sent as one, anything else as a string.
	Extra map[string]string
}

// Defaults are the options of a job on --runner=flink when no flag changes them:
// checkpoints every 10 s, finished bundles before each, bundles closed after 100 ms, and
// Beam's defaults otherwise.
var Defaults = Options{
	CheckpointingInterval:           10_000,
	FinishBundleBeforeCheckpointing: true,
	CheckpointTimeoutMillis:         -1,
	MinPauseBetweenCheckpoints:      -1,
	ShutdownSourcesAfterIdleMs:      -1,
	MaxParallelism:                  -1,
	MaxBundleTimeMills:              100,
}

// Flags are the options set by this package's command-line flags on flag.CommandLine.
var Flags = Defaults

func init() {
	Flags.Register(flag.CommandLine)
}

// Register defines the flags of o on fs, with o's current values as their defaults.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.Int64Var(&o.CheckpointingInterval, "checkpointing_interval", o.CheckpointingInterval, "Flink: milliseconds between checkpoints; -1 turns checkpointing off (then a streaming read stops at once unless --shutdown_sources_after_idle_ms keeps it up, and nothing survives a failure)")
	fs.BoolVar(&o.FinishBundleBeforeCheckpointing, "finish_bundle_before_checkpointing", o.FinishBundleBeforeCheckpointing, "Flink: finish the open bundles before taking part in a checkpoint (a Go streaming read needs it for its output to flow and its checkpoints to complete)")
	fs.Int64Var(&o.CheckpointTimeoutMillis, "checkpoint_timeout_millis", o.CheckpointTimeoutMillis, "Flink: milliseconds before a checkpoint is abandoned (-1: Flink's default, 10 minutes)")
	fs.Int64Var(&o.MinPauseBetweenCheckpoints, "min_pause_between_checkpoints", o.MinPauseBetweenCheckpoints, "Flink: least milliseconds from the end of one checkpoint to the start of the next (-1: none)")
	fs.Int64Var(&o.ShutdownSourcesAfterIdleMs, "shutdown_sources_after_idle_ms", o.ShutdownSourcesAfterIdleMs, "Flink: milliseconds a finished source stays up (-1: forever with checkpointing on, none without)")
	fs.StringVar(&o.SavepointPath, "savepoint_path", o.SavepointPath, "Flink: start the job from this savepoint or retained checkpoint, e.g. file:///flink/savepoints/savepoint-1a2b3c-0123456789ab")
	fs.BoolVar(&o.AllowNonRestoredState, "allow_non_restored_state", o.AllowNonRestoredState, "Flink: start from a savepoint even if it holds state that no operator of the job claims")
	fs.Int64Var(&o.MaxParallelism, "max_parallelism", o.MaxParallelism, "Flink: the job's maximum parallelism (key groups); keep it when restoring from a savepoint (-1: Flink derives it from --parallelism)")
	fs.BoolVar(&o.ExternalizedCheckpointsEnabled, "externalized_checkpoints_enabled", o.ExternalizedCheckpointsEnabled, "Flink: keep the job's checkpoints when it is cancelled, to start again from the last one with --savepoint_path")
	fs.Int64Var(&o.MaxBundleTimeMills, "max_bundle_time_mills", o.MaxBundleTimeMills, "Flink: milliseconds before a streaming operator closes its bundle and its output moves on (-1: Beam's default, 1000)")
	fs.Func("flink_option", "Flink: any other FlinkPipelineOptions property as snake_case_name=value, e.g. max_bundle_size=500 (repeatable; wins over the flags above for the same property)", func(s string) error {
		name, value, ok := strings.Cut(s, "=")
		if !ok || !optionName.MatchString(name) {
			return fmt.Errorf("want snake_case_name=value, e.g. max_bundle_time_mills=100; got %q", s)
		}
		if o.Extra == nil {
			o.Extra = map[string]string{}
		}
		o.Extra[name] = value
		return nil
	})
}

// optionName is the form of a pipeline option's snake_case name.
var optionName = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// URN returns the key of the top-level pipeline option name (snake_case) in the options
// proto, the form Beam Java's PipelineOptionsTranslation reads.
func URN(name string) string {
	return "beam:option:" + name + ":v1"
}

// Fields returns the top-level pipeline options o stands for, keyed by URN. Options
// left at -1 or empty are absent.
func (o Options) Fields() map[string]*structpb.Value {
	out := map[string]*structpb.Value{}
	num := func(name string, v int64) {
		if v != -1 {
			out[URN(name)] = structpb.NewNumberValue(float64(v))
		}
	}
	num("checkpointing_interval", o.CheckpointingInterval)
	num("checkpoint_timeout_millis", o.CheckpointTimeoutMillis)
	num("min_pause_between_checkpoints", o.MinPauseBetweenCheckpoints)
	num("shutdown_sources_after_idle_ms", o.ShutdownSourcesAfterIdleMs)
	num("max_parallelism", o.MaxParallelism)
	num("max_bundle_time_mills", o.MaxBundleTimeMills)
	out[URN("finish_bundle_before_checkpointing")] = structpb.NewBoolValue(o.FinishBundleBeforeCheckpointing)
	if o.SavepointPath != "" {
		out[URN("savepoint_path")] = structpb.NewStringValue(o.SavepointPath)
	}
	if o.AllowNonRestoredState {
		out[URN("allow_non_restored_state")] = structpb.NewBoolValue(true)
	}
	if o.ExternalizedCheckpointsEnabled {
		out[URN("externalized_checkpoints_enabled")] = structpb.NewBoolValue(true)
		out[URN("retain_externalized_checkpoints_on_cancellation")] = structpb.NewBoolValue(true)
	}
	names := make([]string, 0, len(o.Extra))
	for name := range o.Extra {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		out[URN(name)] = parseValue(o.Extra[name])
	}
	return out
}

// parseValue turns a --flink_option value into a number, a bool or a string.
func parseValue(s string) *structpb.Value {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return structpb.NewNumberValue(float64(n))
	}
	if b, err := strconv.ParseBool(s); err == nil {
		return structpb.NewBoolValue(b)
	}
	return structpb.NewStringValue(s)
}

// Apply adds the fields of o to the pipeline options proto opts, replacing fields of the
// same keys.
func (o Options) Apply(opts *structpb.Struct) {
	if opts.Fields == nil {
		opts.Fields = map[string]*structpb.Value{}
	}
	for k, v := range o.Fields() {
		opts.Fields[k] = v
	}
}
