package langgraph

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/batonrun/baton/runner/kinds"
)

// message is one line of the protocol, either way (docs/graph-workers.md).
// Data, Result and Request are kept as the worker wrote them.
type message struct {
	Type      string          `json:"type"`
	ID        string          `json:"id,omitempty"`
	Event     string          `json:"event,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Request   json.RawMessage `json:"request,omitempty"`
	Error     string          `json:"error,omitempty"`
	Traceback string          `json:"traceback,omitempty"`
	Permanent bool            `json:"permanent,omitempty"`
	Code      string          `json:"code,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	PID       int             `json:"pid,omitempty"`
	Graphs    []string        `json:"graphs,omitempty"`
}

// initMsg is the first line the worker reads: what to load and where the
// store is.
type initMsg struct {
	Type     string            `json:"type"`
	Graphs   map[string]string `json:"graphs"`
	RedisURL string            `json:"redis_url"`
	Prefix   string            `json:"prefix"`
}

// maxLine bounds one line from the worker: a chunk, a result.
const maxLine = 64 << 20

// stderrTail is how much of the worker's stderr an error quotes.
const stderrTail = 4 << 10

// process is one running graph worker. Its reader routes each line to the
// attempt it names; exited is closed when the process has ended, after err
// is set.
type process struct {
	cmd   *exec.Cmd
	pid   int
	log   *slog.Logger
	wmu   sync.Mutex
	stdin io.WriteCloser

	mu       sync.Mutex
	attempts map[string]chan message
	tail     []byte

	exited chan struct{}
	err    error
}

// startProcess starts a worker and waits, at most timeout, until it has
// imported every graph. A graph that fails to import is an error with the
// worker's own error and traceback.
func startProcess(p *Project, o Options, lang string, log *slog.Logger) (*process, error) {
	cmd := workerCommand(p, o, lang)
	cmd.Dir = p.Dir
	// The worker runs the project's code, which gets what an exec
	// command gets (kinds.PassEnv) and the project's own env, never the
	// runner's token or credentials; its store is handed to it on stdin.
	cmd.Env = append(kinds.PassEnv(o.Env), "PYTHONUNBUFFERED=1")
	for k, v := range p.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// Its own process group: a terminal's ^C reaches the runner, which
	// drains, not the worker under it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("langgraph: start the %s graph worker (%s): %w", lang, cmd.Path, err)
	}
	pr := &process{cmd: cmd, pid: cmd.Process.Pid, stdin: stdin, attempts: map[string]chan message{},
		exited: make(chan struct{})}
	pr.log = log.With("component", "graph_worker", "lang", lang, "pid", pr.pid)
	stderrDone := make(chan struct{})
	go pr.readStderr(stderr, stderrDone)

	graphs := map[string]string{}
	for id, g := range p.Graphs {
		if g.Lang == lang {
			graphs[id] = g.Ref()
		}
	}
	lines := bufio.NewReaderSize(stdout, 64<<10)
	first := make(chan message, 1)
	go func() {
		m, err := readMessage(lines)
		if err != nil {
			m = message{Type: "eof", Error: err.Error()}
		}
		first <- m
	}()
	abort := func() {
		pr.kill()
		<-stderrDone
		_ = cmd.Wait()
	}
	if err := pr.send(initMsg{Type: "init", Graphs: graphs, RedisURL: o.RedisURL, Prefix: o.Prefix}); err != nil {
		abort()
		return nil, fmt.Errorf("langgraph: graph worker: %w", err)
	}
	timer := time.NewTimer(o.StartTimeout)
	defer timer.Stop()
	var m message
	select {
	case m = <-first:
	case <-timer.C:
		abort()
		return nil, fmt.Errorf("langgraph: the graph worker did not load the graphs within %s", o.StartTimeout)
	}
	switch m.Type {
	case "ready":
		pr.log.Info("graph_worker_ready", "graphs", m.Graphs)
		go pr.read(lines, stderrDone)
		return pr, nil
	case "fatal":
		abort()
		return nil, fmt.Errorf("langgraph: a graph failed to load: %s\n%s", m.Error, strings.TrimSpace(m.Traceback))
	default:
		abort()
		return nil, fmt.Errorf("langgraph: the %s graph worker (%s) ended before loading the graphs: %s",
			lang, strings.Join(cmd.Args, " "), pr.stderrTail())
	}
}

// workerCommand is the command of a language's worker: LANGGRAPH_PYTHON
// -m baton_langgraph.worker, or node with the JS worker's script (through
// tsx when the project has TypeScript graphs).
func workerCommand(p *Project, o Options, lang string) *exec.Cmd {
	if lang != "js" {
		return exec.Command(o.Python, "-m", "baton_langgraph.worker")
	}
	var args []string
	for _, g := range p.Graphs {
		if g.Lang == "js" && strings.Contains(".ts.mts.cts", filepath.Ext(g.File)) {
			args = []string{"--import", "tsx"}
			break
		}
	}
	return exec.Command(o.Node, append(args, o.JSWorker)...)
}

func readMessage(r *bufio.Reader) (message, error) {
	var buf []byte
	for {
		line, err := r.ReadSlice('\n')
		buf = append(buf, line...)
		if len(buf) > maxLine {
			return message{}, fmt.Errorf("a line of over %d bytes", maxLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return message{}, err
		}
		var m message
		if err := json.Unmarshal(buf, &m); err != nil {
			return message{}, fmt.Errorf("a line that is not a message: %w", err)
		}
		return m, nil
	}
}

// read routes the worker's lines to their attempts until it ends, then
// records how it ended.
func (pr *process) read(r *bufio.Reader, stderrDone <-chan struct{}) {
	var rerr error
	for {
		m, err := readMessage(r)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				rerr = err
				pr.log.Error("graph_worker_protocol", "err", err)
				_ = pr.cmd.Process.Kill()
			}
			break
		}
		pr.mu.Lock()
		ch := pr.attempts[m.ID]
		pr.mu.Unlock()
		if ch == nil {
			continue // an attempt that gave up waiting
		}
		ch <- m
	}
	werr := pr.cmd.Wait()
	<-stderrDone
	pr.err = cmpErr(rerr, werr)
	if pr.err == nil {
		pr.err = errors.New("exit status 0")
	}
	pr.log.Warn("graph_worker_exited", "err", pr.err)
	close(pr.exited)
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (pr *process) readStderr(r io.Reader, done chan<- struct{}) {
	defer close(done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		pr.log.Info("graph_worker_stderr", "line", line)
		pr.mu.Lock()
		pr.tail = append(pr.tail, line...)
		pr.tail = append(pr.tail, '\n')
		if len(pr.tail) > stderrTail {
			pr.tail = pr.tail[len(pr.tail)-stderrTail:]
		}
		pr.mu.Unlock()
	}
}

func (pr *process) stderrTail() string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return strings.TrimSpace(string(pr.tail))
}

func (pr *process) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	pr.wmu.Lock()
	defer pr.wmu.Unlock()
	_, err = pr.stdin.Write(append(b, '\n'))
	return err
}

// register returns the channel an attempt's lines arrive on.
func (pr *process) register(id string) chan message {
	ch := make(chan message, 256)
	pr.mu.Lock()
	pr.attempts[id] = ch
	pr.mu.Unlock()
	return ch
}

func (pr *process) unregister(id string) {
	pr.mu.Lock()
	delete(pr.attempts, id)
	pr.mu.Unlock()
}

func (pr *process) dead() bool {
	select {
	case <-pr.exited:
		return true
	default:
		return false
	}
}

// stop closes the worker's stdin (it cancels what it runs and exits) and
// kills its process group after grace.
func (pr *process) stop(grace time.Duration) {
	_ = pr.stdin.Close()
	select {
	case <-pr.exited:
	case <-time.After(grace):
		pr.kill()
		<-pr.exited
	}
}

func (pr *process) kill() {
	_ = syscall.Kill(-pr.pid, syscall.SIGKILL)
}
