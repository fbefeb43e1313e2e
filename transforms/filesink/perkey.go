package filesink

import (
	"context"
	"fmt"
	"hash/fnv"
	"reflect"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	register.DoFn2x2[string, string, string, string](&partFn{})
	register.DoFn2x3[string, beam.T, string, string, error](&encodePartFn{})
	register.DoFn5x2[context.Context, beam.PaneInfo, beam.Window, string, func(*string) bool, string, error](&writePartFn{})
	register.DoFn5x2[context.Context, beam.PaneInfo, beam.Window, string, func(*string) bool, string, error](&parquetPartFn{})
}

// WritePerKey is Write for a PCollection<KV<string, string>> of keys and lines: the lines
// of each key are written to files of their own, named
//
//	<Prefix>-<window start>-<window end>-<key>-<shard>-of-<Shards>[-pane-<index>]<Suffix>
//
// so a file's content depends only on the lines of its key in its window and pane. That is
// what a source that restarts each key on its own needs for its files to come out exactly
// once: kinesis-to-files keys by Kinesis shard, and a restart from a checkpoint table that
// reads a shard's window again rewrites that shard's files with the same bytes, whatever the
// other shards had been committed to. Bytes of the key other than ASCII letters, digits, '_',
// '.' and '-' are written as %XX, so distinct keys give distinct names (e.g.
// part-20261130T140000.000Z-20261130T140100.000Z-shardId-000000000001-00000-of-00001.jsonl). Lines are
// spread over Shards files per key by a hash of their content, as for Write.
func WritePerKey(s beam.Scope, lines beam.PCollection, cfg Config) beam.PCollection {
	s = s.Scope("filesink.WritePerKey")
	cfg, err := cfg.withDefaults(".jsonl")
	if err != nil {
		panic(fmt.Sprintf("filesink.WritePerKey: %v", err))
	}
	parts := beam.ParDo(s, &partFn{Shards: cfg.Shards}, lines)
	return beam.ParDo(s, &writePartFn{files: cfg.files()}, beam.GroupByKey(s, parts))
}

// WriteParquetPerKey is WriteParquet for a PCollection<KV<string, T>> of keys and values of
// a registered struct type: each key's values go to Parquet files of their own, named as
// WritePerKey names them (with Suffix ".parquet"), with the key out of the rows.
func WriteParquetPerKey(s beam.Scope, values beam.PCollection, cfg ParquetConfig) beam.PCollection {
	s = s.Scope("filesink.WriteParquetPerKey")
	_, t := beam.ValidateKVType(values)
	if t.Type() == nil || t.Type().Kind() == reflect.Invalid {
		panic("filesink.WriteParquetPerKey: want a PCollection<KV<string, T>>")
	}
	fn, err := newParquetFn(t.Type(), cfg)
	if err != nil {
		panic(fmt.Sprintf("filesink.WriteParquetPerKey: %v", err))
	}
	parts := beam.ParDo(s, &encodePartFn{Shards: fn.Shards}, values)
	return beam.ParDo(s, &parquetPartFn{parquetFn: *fn}, beam.GroupByKey(s, parts))
}

// partName is the part of a file name after the window: the escaped key and the shard.
func partName(key string, shard, shards int) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	fmt.Fprintf(&b, "-%05d-of-%05d", shard, shards)
	return b.String()
}

// lineShard is the shard of line among shards.
func lineShard(line string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(line))
	return int(h.Sum32() % uint32(shards))
}

// partFn keys a line by the part of its file's name: its key and the shard of its content.
type partFn struct {
	Shards int
}

func (fn *partFn) ProcessElement(key, line string) (string, string) {
	return partName(key, lineShard(line, fn.Shards), fn.Shards), line
}

// encodePartFn encodes a value as its JSON line, keyed as partFn keys lines.
type encodePartFn struct {
	Shards int
}

func (fn *encodePartFn) ProcessElement(key string, v beam.T) (string, string, error) {
	line, err := encodeJSON(v)
	if err != nil {
		return "", "", err
	}
	return partName(key, lineShard(line, fn.Shards), fn.Shards), line, nil
}

// writePartFn writes the lines of one part of one window pane to its file.
type writePartFn struct {
	files
}

func (fn *writePartFn) ProcessElement(ctx context.Context, pane beam.PaneInfo, w beam.Window, part string, iter func(*string) bool) (string, error) {
	return fn.writeLines(ctx, pane, w, part, iter)
}

// parquetPartFn writes the values of one part of one window pane to its Parquet file.
type parquetPartFn struct {
	parquetFn
}

func (fn *parquetPartFn) ProcessElement(ctx context.Context, pane beam.PaneInfo, w beam.Window, part string, iter func(*string) bool) (string, error) {
	return fn.writeRows(ctx, pane, w, part, iter)
}
