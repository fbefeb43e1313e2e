package filesink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
)

func init() {
	register.DoFn5x2[context.Context, beam.PaneInfo, beam.Window, int, func(*string) bool, string, error](&parquetFn{})
}

var rowsWritten = beam.NewCounter("beamkinesis.filesink", "rows")

// parquetBatchRows is how many rows encode hands the Parquet writer at once.
const parquetBatchRows = 1024

// DefaultRowGroupRows is the default ParquetConfig.RowGroupRows.
const DefaultRowGroupRows = 1 << 20

// ParquetConfig configures WriteParquet.
type ParquetConfig struct {
	// Config says where the files go and how they are named, as for Write; Suffix defaults
	// to ".parquet".
	Config
	// Compression is the codec of the column chunks: "snappy" (default, what Spark writes),
	// "zstd", "gzip" or "none".
	Compression string
	// RowGroupRows is the most rows in one row group, default DefaultRowGroupRows. A window
	// of a streaming job usually fits in one row group, which is what readers scan best.
	RowGroupRows int
}

// codecs are the compression codecs ParquetConfig.Compression names.
var codecs = map[string]compress.Codec{
	"snappy": &parquet.Snappy,
	"zstd":   &parquet.Zstd,
	"gzip":   &parquet.Gzip,
	"none":   &parquet.Uncompressed,
}

// WriteParquet writes values, a PCollection of a registered struct type, to Parquet files
// in cfg.Dir, one per window, pane and shard that holds values, named as Write names them
// (with Suffix ".parquet"). It returns a PCollection<string> of the paths written.
//
// The Parquet schema is the struct's, as github.com/parquet-go/parquet-go derives it: the
// column names come from `parquet:"name"` tags (else the field names), a string is a
// BYTE_ARRAY with the STRING logical type, an int64 an INT64, and a pointer field (or the
// tag option "optional") is an optional column, null where the pointer is nil. A seed
// schema such as Spark's StructType{id string, ts long, v string nullable} is therefore
//
//	type Event struct {
//		ID string  `json:"id" parquet:"id"`
//		TS int64   `json:"ts" parquet:"ts"`
//		V  *string `json:"v" parquet:"v,optional"`
//	}
//
// On the way to the writers values travel as their encoding/json lines (strings, which
// every runner carries byte for byte), so the struct must survive an encoding/json round
// trip: no interface or channel fields, and no NaN floats. Within a file, rows are in the
// byte order of those lines, and a file's bytes depend only on its rows: a retried bundle
// writes the same file again. Files use data page version 1 (readable by every Parquet
// reader, Spark's included), the codec of cfg.Compression and row groups of at most
// cfg.RowGroupRows rows. Counters beamkinesis.filesink/files and /rows count what was
// written. WriteParquet panics at construction if cfg is invalid or the element type has
// no Parquet schema.
func WriteParquet(s beam.Scope, values beam.PCollection, cfg ParquetConfig) beam.PCollection {
	s = s.Scope("filesink.WriteParquet")
	t := values.Type().Type()
	fn, err := newParquetFn(t, cfg)
	if err != nil {
		panic(fmt.Sprintf("filesink.WriteParquet: %v", err))
	}
	keyed := beam.ParDo(s, &shardFn{Shards: fn.Shards}, EncodeJSON(s, values))
	return beam.ParDo(s, fn, beam.GroupByKey(s, keyed))
}

// newParquetFn validates cfg and the element type t and returns the writing DoFn.
func newParquetFn(t reflect.Type, cfg ParquetConfig) (*parquetFn, error) {
	c, err := cfg.Config.withDefaults(".parquet")
	if err != nil {
		return nil, err
	}
	if cfg.Compression == "" {
		cfg.Compression = "snappy"
	}
	if _, ok := codecs[cfg.Compression]; !ok {
		return nil, fmt.Errorf("ParquetConfig.Compression %q is not one of snappy, zstd, gzip, none", cfg.Compression)
	}
	if cfg.RowGroupRows == 0 {
		cfg.RowGroupRows = DefaultRowGroupRows
	}
	if cfg.RowGroupRows < 0 {
		return nil, fmt.Errorf("ParquetConfig.RowGroupRows is %d; want a positive number of rows", cfg.RowGroupRows)
	}
	if _, err := parquetSchema(t); err != nil {
		return nil, err
	}
	return &parquetFn{
		files:        c.files(),
		Type:         beam.EncodedType{T: t},
		Compression:  cfg.Compression,
		RowGroupRows: cfg.RowGroupRows,
	}, nil
}

// parquetSchema returns the Parquet schema of the registered struct type t, or why it has
// none.
func parquetSchema(t reflect.Type) (schema *parquet.Schema, err error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("element type %v is a %v, want a struct type (not a pointer)", t, t.Kind())
	}
	key, ok := runtime.TypeKey(t)
	if !ok {
		return nil, fmt.Errorf("element type %v must be a named struct type", t)
	}
	if _, ok := runtime.LookupType(key); !ok {
		return nil, fmt.Errorf("element type %v is not registered; call beam.RegisterType(reflect.TypeOf((*%s)(nil)).Elem()) in an init function", t, t.Name())
	}
	defer func() {
		// parquet-go panics on a type it cannot map.
		if r := recover(); r != nil {
			schema, err = nil, fmt.Errorf("element type %v has no Parquet schema: %v", t, r)
		}
	}()
	schema = parquet.SchemaOf(reflect.New(t).Interface())
	if len(schema.Fields()) == 0 {
		return nil, fmt.Errorf("element type %v has no exported fields to write as columns", t)
	}
	return schema, nil
}

// parquetFn writes one shard of one window pane of values, given as JSON lines, to its
// Parquet file and returns the file's path.
type parquetFn struct {
	files
	Type         beam.EncodedType
	Compression  string
	RowGroupRows int

	schema *parquet.Schema
}

func (fn *parquetFn) Setup(ctx context.Context) error {
	schema, err := parquetSchema(fn.Type.T)
	if err != nil {
		return fmt.Errorf("filesink: %w", err)
	}
	fn.schema = schema
	return fn.files.Setup(ctx)
}

func (fn *parquetFn) ProcessElement(ctx context.Context, pane beam.PaneInfo, w beam.Window, shard int, iter func(*string) bool) (string, error) {
	return fn.writeRows(ctx, pane, w, shardPart(shard, fn.Shards), iter)
}

// writeRows writes the values iter gives as JSON lines, in the order of their lines, as the
// Parquet file of part of one window pane.
func (fn *parquetFn) writeRows(ctx context.Context, pane beam.PaneInfo, w beam.Window, part string, iter func(*string) bool) (string, error) {
	if fn.schema == nil { // Setup is not called when a test drives ProcessElement directly.
		if err := fn.Setup(ctx); err != nil {
			return "", err
		}
	}
	var lines []string
	var line string
	for iter(&line) {
		lines = append(lines, line)
	}
	slices.Sort(lines)
	content, err := fn.encode(lines)
	if err != nil {
		return "", err
	}
	path, err := fn.store(ctx, pane, w, part, content)
	if err != nil {
		return "", err
	}
	rowsWritten.Inc(ctx, int64(len(lines)))
	return path, nil
}

// encode returns the Parquet file of the values lines encode, in their order.
func (fn *parquetFn) encode(lines []string) ([]byte, error) {
	var b bytes.Buffer
	w := parquet.NewWriter(&b, fn.schema,
		parquet.Compression(codecs[fn.Compression]),
		parquet.MaxRowsPerRowGroup(int64(fn.RowGroupRows)),
		parquet.DataPageVersion(1),
		// The default names the parquet-go build, which would change the bytes of a file
		// rewritten by a worker built from another version.
		parquet.CreatedBy("beamkinesis filesink", "1", "parquet-go"),
	)
	// Rows go to the writer in batches: one WriteRows call per row costs more than the
	// encoding itself. A row's values point into the decoded value's strings, so each row
	// decodes into a value of its own.
	batch := make([]parquet.Row, 0, parquetBatchRows)
	flush := func() error {
		if _, err := w.WriteRows(batch); err != nil {
			return fmt.Errorf("filesink: writing %v rows: %w", fn.Type.T, err)
		}
		batch = batch[:0]
		return nil
	}
	for _, l := range lines {
		v := reflect.New(fn.Type.T)
		if err := json.Unmarshal([]byte(l), v.Interface()); err != nil {
			return nil, fmt.Errorf("filesink: decoding a %v from its JSON line %.60q: %w", fn.Type.T, l, err)
		}
		batch = append(batch, fn.schema.Deconstruct(nil, v.Interface()))
		if len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("filesink: finishing the Parquet file: %w", err)
	}
	if b.Len() == 0 {
		return nil, errors.New("filesink: the Parquet writer produced an empty file")
	}
	return b.Bytes(), nil
}
