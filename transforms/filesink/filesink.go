// Package filesink writes each window of a PCollection as files in a staging directory,
// JSON lines (Write) or Parquet (WriteParquet), so that a batch loader can pick up finished
// files while the pipeline runs.
//
// A file appears complete or not at all, and a retried bundle never leaves a duplicate:
// every (window, pane, shard) group has one deterministic final name, and its content is
// sorted (so a retry writes identical bytes whatever order the runner delivers them in) and
// built in memory before it is stored. A retry therefore replaces the file with identical
// content.
//
// The staging directory is a local path, an s3://bucket/prefix URL, or the URL of another
// Beam filesystem the program registers (e.g. gs:// by importing beam/io/filesystem/gcs):
//
//   - Local: the file is written to a hidden temporary file in the same directory (name
//     starting with '.'), fsynced and renamed over the final name, and the directory is
//     fsynced. Temporary files of attempts that crashed before their rename are removed by
//     the next successful attempt for the same final name; until then they are hidden
//     (loaders should ignore names starting with '.'). On a multi-worker runner a local
//     directory must be a shared mount that supports atomic rename, or each worker stages
//     its own files.
//   - S3: one PutObject of the complete file under its final key (see S3 for the endpoint
//     and credentials), so no reader ever sees a partial object.
//   - Other Beam filesystems: the filesystem's writer, opened once the content is complete.
package filesink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	register.DoFn1x2[string, int, string](&shardFn{})
	register.DoFn5x2[context.Context, beam.PaneInfo, beam.Window, int, func(*string) bool, string, error](&writeFn{})
	register.Iter1[string]()
}

var (
	filesWritten = beam.NewCounter("beamkinesis.filesink", "files")
	linesWritten = beam.NewCounter("beamkinesis.filesink", "lines")
)

// Config configures Write. Only exported fields: it travels to workers inside the DoFns.
type Config struct {
	// Dir is the staging directory: a local path (created on the worker if missing), an
	// s3://bucket/prefix URL, or the URL of another registered Beam filesystem. Required.
	Dir string
	// Prefix starts every file name; default "part". It may not contain a path separator
	// or start with '.', which marks temporary files.
	Prefix string
	// Suffix ends every file name; default ".jsonl" (Write) or ".parquet" (WriteParquet).
	Suffix string
	// Shards is the number of files per window and pane, default 1. Lines are assigned to
	// shards by a hash of their content, so a window's lines are spread over at most
	// Shards files, each written by one worker and held in its memory while written.
	Shards int
	// S3 is how to reach S3 when Dir is an s3:// URL; the zero value takes the region and
	// credentials of the AWS SDK's default chain on the worker.
	S3 S3
}

// Write writes lines, a PCollection<string> of JSON-encoded values (one element per line,
// without the trailing newline), to files in cfg.Dir, one file per window, pane and shard
// that holds lines, named
//
//	<Prefix>-<window start>-<window end>-<shard>-of-<Shards>[-pane-<index>]<Suffix>
//
// for example part-20261130T140000.000Z-20261130T140100.000Z-00000-of-00001.jsonl, with
// times in UTC. The global window's name is "global" in place of start and end. The pane
// part appears only for panes after the first (late firings under allowed lateness, or
// triggers); with the default trigger each window has exactly one pane. Each file holds
// its lines sorted bytewise, each followed by '\n'.
//
// A window is written once the runner fires it, i.e. when the watermark passes its end
// with the default trigger; on an unbounded input, window lines first (fixed windows), since
// the global window never ends. Counters beamkinesis.filesink/files and /lines count what
// was written (retried attempts included). Write returns a PCollection<string> of the
// paths of the files written (cfg.Dir joined with the name: a local path, or a URL such as
// s3://bucket/prefix/part-...jsonl), in the windows of their lines. A line holding
// '\n' or '\r' fails the bundle: it would split into two JSON lines. Write panics at
// construction if cfg is invalid.
func Write(s beam.Scope, lines beam.PCollection, cfg Config) beam.PCollection {
	s = s.Scope("filesink.Write")
	cfg, err := cfg.withDefaults(".jsonl")
	if err != nil {
		panic(fmt.Sprintf("filesink.Write: %v", err))
	}
	keyed := beam.ParDo(s, &shardFn{Shards: cfg.Shards}, lines)
	grouped := beam.GroupByKey(s, keyed)
	return beam.ParDo(s, &writeFn{files: cfg.files()}, grouped)
}

// files is the writing set-up of cfg, which has its defaults.
func (cfg Config) files() files {
	return files{Dir: cfg.Dir, Prefix: cfg.Prefix, Suffix: cfg.Suffix, Shards: cfg.Shards, S3: cfg.S3}
}

// withDefaults returns cfg with defaults applied, or why it is invalid.
func (cfg Config) withDefaults(suffix string) (Config, error) {
	if cfg.Dir == "" {
		return cfg, errors.New("Config.Dir is empty; set the staging directory")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "part"
	}
	if cfg.Suffix == "" {
		cfg.Suffix = suffix
	}
	if cfg.Shards == 0 {
		cfg.Shards = 1
	}
	if cfg.Shards < 0 {
		return cfg, fmt.Errorf("Config.Shards is %d; want a positive number of files per window", cfg.Shards)
	}
	if strings.ContainsAny(cfg.Prefix+cfg.Suffix, `/\`) {
		return cfg, fmt.Errorf("Config.Prefix %q and Suffix %q may not contain a path separator; put directories in Dir", cfg.Prefix, cfg.Suffix)
	}
	if strings.HasPrefix(cfg.Prefix, ".") {
		return cfg, fmt.Errorf("Config.Prefix %q starts with '.', which marks temporary files", cfg.Prefix)
	}
	if err := checkDir(cfg.Dir); err != nil {
		return cfg, fmt.Errorf("Config.Dir: %w", err)
	}
	if err := cfg.S3.validate(); err != nil {
		return cfg, fmt.Errorf("Config.S3: %w", err)
	}
	return cfg, nil
}

// shardFn keys a line by the shard of the file it goes to. The shard depends only on the
// line, so a retried upstream bundle sends each line to the same file.
type shardFn struct {
	Shards int
}

func (fn *shardFn) ProcessElement(line string) (int, string) {
	if fn.Shards <= 1 {
		return 0, line
	}
	h := fnv.New32a()
	h.Write([]byte(line))
	return int(h.Sum32() % uint32(fn.Shards)), line
}

// files is where a writing DoFn stores its files, and how it names them.
type files struct {
	Dir    string
	Prefix string
	Suffix string
	Shards int
	S3     S3

	dest destination
}

func (f *files) Setup(ctx context.Context) error {
	d, err := openDestination(ctx, f.Dir, f.S3)
	if err != nil {
		return fmt.Errorf("filesink: opening %s: %w", f.Dir, err)
	}
	f.dest = d
	return nil
}

func (f *files) Teardown() error {
	if f.dest == nil {
		return nil
	}
	return f.dest.close()
}

// store stores content as the file of one shard of one window pane and returns its path.
func (f *files) store(ctx context.Context, pane beam.PaneInfo, w beam.Window, part string, content []byte) (string, error) {
	if f.dest == nil { // Setup is not called when a test drives ProcessElement directly.
		if err := f.Setup(ctx); err != nil {
			return "", err
		}
	}
	name := fileName(f.Prefix, f.Suffix, w, pane, part)
	if err := f.dest.put(ctx, name, content); err != nil {
		return "", fmt.Errorf("filesink: writing %s: %w", f.dest.path(name), err)
	}
	filesWritten.Inc(ctx, 1)
	return f.dest.path(name), nil
}

// writeFn writes one shard of one window pane of lines to its file and returns the file's
// path.
type writeFn struct {
	files
}

func (fn *writeFn) ProcessElement(ctx context.Context, pane beam.PaneInfo, w beam.Window, shard int, iter func(*string) bool) (string, error) {
	return fn.writeLines(ctx, pane, w, shardPart(shard, fn.Shards), iter)
}

// writeLines writes the lines iter gives, sorted, as the file of part of one window pane.
func (f *files) writeLines(ctx context.Context, pane beam.PaneInfo, w beam.Window, part string, iter func(*string) bool) (string, error) {
	var lines []string
	var line string
	size := 0
	for iter(&line) {
		if i := strings.IndexAny(line, "\r\n"); i >= 0 {
			return "", fmt.Errorf("filesink: line %.40q has a line break at byte %d; encode values so each is one line", line, i)
		}
		lines = append(lines, line)
		size += len(line) + 1
	}
	slices.Sort(lines)
	var b bytes.Buffer
	b.Grow(size)
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	path, err := f.store(ctx, pane, w, part, b.Bytes())
	if err != nil {
		return "", err
	}
	linesWritten.Inc(ctx, int64(len(lines)))
	return path, nil
}

// timeLayout is a file-name-safe UTC time with milliseconds, which sorts as time sorts.
const timeLayout = "20060102T150405.000Z"

// shardPart is the part of a file name after the window for shard of shards.
func shardPart(shard, shards int) string {
	return fmt.Sprintf("%05d-of-%05d", shard, shards)
}

// fileName is the deterministic final name of one part (a shard, see shardPart and
// partName) of one window pane.
func fileName(prefix, suffix string, w typex.Window, pane typex.PaneInfo, part string) string {
	var span string
	switch w := w.(type) {
	case window.IntervalWindow:
		span = w.Start.ToTime().UTC().Format(timeLayout) + "-" + w.End.ToTime().UTC().Format(timeLayout)
	case window.GlobalWindow:
		span = "global"
	default:
		// Custom window types: their string form is deterministic for a given window.
		span = strings.NewReplacer("/", "_", `\`, "_", " ", "_").Replace(fmt.Sprint(w))
	}
	name := prefix + "-" + span + "-" + part
	if pane.Index > 0 {
		name += fmt.Sprintf("-pane-%d", pane.Index)
	}
	return name + suffix
}
