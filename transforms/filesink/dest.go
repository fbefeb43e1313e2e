package filesink

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
)

// destination stores complete files under a directory: local, S3 or another Beam
// filesystem.
type destination interface {
	// put makes the file name hold content, all of it or (on error) nothing new.
	put(ctx context.Context, name string, content []byte) error
	// path is the full path or URL of the file name.
	path(name string) string
	close() error
}

// scheme returns the URL scheme of dir ("s3", "gs", ...), or "" for a local path.
func scheme(dir string) string {
	i := strings.Index(dir, "://")
	if i <= 0 || strings.ContainsAny(dir[:i], `/\.`) {
		return ""
	}
	return strings.ToLower(dir[:i])
}

// checkDir reports a Dir that no destination can write to, at construction.
func checkDir(dir string) error {
	switch scheme(dir) {
	case "":
		return nil
	case "s3":
		_, _, err := parseS3URL(dir)
		return err
	default:
		// Other schemes are Beam filesystems the program registers by importing them
		// (e.g. _ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"); they are
		// looked up on the worker, where the import also runs.
		return nil
	}
}

// openDestination opens the destination of dir on a worker.
func openDestination(ctx context.Context, dir string, s3cfg S3) (destination, error) {
	switch scheme(dir) {
	case "":
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("creating staging directory: %w", err)
		}
		return localDir(dir), nil
	case "s3":
		return openS3(ctx, dir, s3cfg)
	default:
		fs, err := filesystem.New(ctx, dir)
		if err != nil {
			return nil, fmt.Errorf("opening the Beam filesystem of %s (import its package, e.g. beam/io/filesystem/gcs, in the program): %w", dir, err)
		}
		return beamDir{dir: strings.TrimSuffix(dir, "/"), fs: fs}, nil
	}
}

// localDir is a local directory: files are written to a hidden temporary file and renamed
// (see writeAtomic).
type localDir string

func (d localDir) put(_ context.Context, name string, content []byte) error {
	return writeAtomic(string(d), name, content)
}

func (d localDir) path(name string) string { return filepath.Join(string(d), name) }

func (d localDir) close() error { return nil }

// beamDir is a directory of a registered Beam filesystem. The file appears when its writer
// closes, as far as that filesystem makes it so (GCS objects do); content is complete in
// memory before the writer opens, so a failure never leaves a partial write of ours.
type beamDir struct {
	dir string
	fs  filesystem.Interface
}

func (d beamDir) put(ctx context.Context, name string, content []byte) error {
	w, err := d.fs.OpenWrite(ctx, d.path(name))
	if err != nil {
		return fmt.Errorf("opening for writing: %w", err)
	}
	if _, err := w.Write(content); err != nil {
		w.Close()
		return fmt.Errorf("writing: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("closing: %w", err)
	}
	return nil
}

func (d beamDir) path(name string) string { return d.dir + "/" + name }

func (d beamDir) close() error { return d.fs.Close() }
