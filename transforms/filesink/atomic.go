package filesink

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tempMarker separates a final name from the random part of its temporary names.
const tempMarker = ".tmp-"

// tempPattern is the os.CreateTemp pattern of the temporary files for final name name:
// hidden, in the same directory (so the rename is atomic), and recognisable by name.
func tempPattern(name string) string {
	return "." + name + tempMarker + "*"
}

// writeAtomic makes dir/name hold content, such that readers see the old file or the
// complete new one, never a partial one, and the result survives a crash once writeAtomic
// returns.
func writeAtomic(dir, name string, content []byte) (err error) {
	f, err := os.CreateTemp(dir, tempPattern(name))
	if err != nil {
		return fmt.Errorf("creating temporary file: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	// CreateTemp makes the file owner-only; staged files are read by a loader.
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("setting permissions of %s: %w", tmp, err)
	}
	if _, err := f.Write(content); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	final := filepath.Join(dir, name)
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", tmp, final, err)
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	return removeStaleTemps(dir, name)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening directory to sync it: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// removeStaleTemps removes temporary files left for final name name by attempts that died
// before their rename. An attempt still running concurrently then fails its rename and is
// retried, which is harmless: the file it would have written is already in place.
func removeStaleTemps(dir, name string) error {
	matches, err := filepath.Glob(filepath.Join(dir, globEscape(tempPattern(name))))
	if err != nil {
		return fmt.Errorf("listing temporary files of %s: %w", name, err)
	}
	for _, m := range matches {
		if err := os.Remove(m); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing stale temporary file: %w", err)
		}
	}
	return nil
}

// globEscape escapes glob metacharacters in pattern except its final '*'.
func globEscape(pattern string) string {
	base := strings.TrimSuffix(pattern, "*")
	r := strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`)
	return r.Replace(base) + "*"
}
