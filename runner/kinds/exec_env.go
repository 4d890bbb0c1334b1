package kinds

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batonrun/baton/jobpolicy"
)

// Defaults of what a {"$file": ...} env value may read.
const (
	// execSecretMax caps what a {"$file": ...} env value reads.
	execSecretMax = 64 << 10
	// execFileTimeout bounds reading one: a file on a hung network mount
	// must not hold the attempt.
	execFileTimeout = 5 * time.Second
)

// envValue is one value of an exec input's env: a literal string, or a
// reference that the worker resolves at the start of each attempt, so that
// a secret is never part of the run: {"$env": "NAME"} is the worker's own
// environment variable NAME, {"$file": "/path"} the content of a regular
// file on the worker (one trailing newline dropped). Each reads only what
// the operator allows (ExecOptions.EnvRefs, ExecOptions.FileDirs). The
// stored input, the events, the run view and the API hold the reference
// only, and the value is redacted from the attempt's result and error.
type envValue struct{ jobpolicy.EnvRef }

// refs is what the operator lets env references read: the rules a runner
// publishes (package jobpolicy, the same check a submit makes) and the
// bounds of a read.
type refs struct {
	rules    jobpolicy.Rules
	fileDirs []string // cleaned absolute directories
	fileMax  int64
	fileWait time.Duration
}

// check returns what is wrong with the reference before anything is read:
// a name or a path the operator does not allow. Its message names the
// setting, never a value.
func (v envValue) check(r *refs) string { return r.rules.CheckRef(v.EnvRef) }

// resolve returns the value the command gets for key. A reference the
// operator does not allow is Permanent; one that cannot be resolved on
// this worker is retryable: another worker may have the variable or the
// file. Errors name the reference, never a value.
func (v envValue) resolve(ctx context.Context, key string, r *refs) (string, error) {
	if msg := v.check(r); msg != "" {
		return "", permanentf("exec", "env", "%q: %s", key, msg)
	}
	switch {
	case v.Env != "":
		s, ok := os.LookupEnv(v.Env)
		if !ok {
			return "", fmt.Errorf("exec: input: env %q: $env %q is not set on this worker", key, v.Env)
		}
		return s, nil
	case v.File != "":
		b, err := r.readFile(ctx, v.File)
		if err != nil {
			return "", fmt.Errorf("exec: input: env %q: $file %s: %w", key, v.File, err)
		}
		s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if strings.ContainsRune(s, 0) {
			return "", fmt.Errorf("exec: input: env %q: $file %s: holds a NUL byte", key, v.File)
		}
		return s, nil
	}
	if strings.ContainsRune(v.Literal, 0) {
		return "", permanentf("exec", "env", "%q holds a NUL byte", key)
	}
	return v.Literal, nil
}

// readFile reads a regular file under an allowed directory, at most
// fileMax bytes, within fileWait. The open never blocks (O_NONBLOCK: a
// FIFO with no writer would wait forever otherwise), and what was opened
// is checked, not what the path named before: a FIFO, a device, a socket
// or a directory is refused, and so is a file that a link led outside the
// allowed directories.
func (r *refs) readFile(ctx context.Context, path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		f.Close()
		return nil, fmt.Errorf("not a regular file (%s): refused", fileType(st.Mode))
	}
	if real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err == nil && !jobpolicy.Under(real, r.realDirs()) {
		f.Close()
		return nil, fmt.Errorf("a link leads outside EXEC_FILE_DIRS: refused")
	}
	if st.Size > r.fileMax {
		f.Close()
		return nil, fmt.Errorf("%d bytes, over %d", st.Size, r.fileMax)
	}
	type read struct {
		b   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, r.fileMax+1))
		done <- read{b, err}
	}()
	timer := time.NewTimer(r.fileWait)
	defer timer.Stop()
	select {
	case got := <-done:
		if got.err == nil && int64(len(got.b)) > r.fileMax {
			got.err = fmt.Errorf("over %d bytes", r.fileMax)
		}
		return got.b, got.err
	case <-timer.C:
		return nil, fmt.Errorf("not read within %s", r.fileWait)
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// realDirs are the allowed directories with their links resolved, for
// comparing with the path of what was opened.
func (r *refs) realDirs() []string {
	out := make([]string, 0, len(r.fileDirs))
	for _, d := range r.fileDirs {
		if real, err := filepath.EvalSymlinks(d); err == nil {
			d = real
		}
		out = append(out, d)
	}
	return out
}

func fileType(m uint32) string {
	switch m & syscall.S_IFMT {
	case syscall.S_IFIFO:
		return "a FIFO"
	case syscall.S_IFCHR, syscall.S_IFBLK:
		return "a device"
	case syscall.S_IFSOCK:
		return "a socket"
	case syscall.S_IFDIR:
		return "a directory"
	}
	return "not a file"
}
