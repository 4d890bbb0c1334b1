package main

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// proxy stands between one runner and Redis, so that a network fault hits
// that runner alone. It forwards bytes unchanged until told to misbehave:
//
//   - reset: every open connection is closed with a TCP RST;
//   - lost replies: a request that calls a baton script (EVALSHA on a
//     "baton:{" key) is forwarded, its reply dropped and the connection
//     closed: the script ran, the caller never heard;
//   - stall: nothing moves in either direction until the stall ends, then
//     everything held is delivered (late, as TCP would);
//   - blackhole: connections are accepted but what they carry is swallowed;
//     when the blackhole ends they are closed.
type proxy struct {
	ln       net.Listener
	upstream string

	mu        sync.Mutex
	conns     map[*pconn]struct{}
	stallEnd  time.Time
	holeEnd   time.Time
	lostEnd   time.Time
	stallDone chan struct{} // closed when the current stall ends
	wg        sync.WaitGroup
}

// pconn is one client connection and its upstream.
type pconn struct {
	client    net.Conn
	dropReply atomic.Bool // the next reply is lost
	swallowed atomic.Bool // it carried bytes into a blackhole
	once      sync.Once

	mu     sync.Mutex // server and closed: a Reset may close pc while serve dials
	server net.Conn
	closed bool
}

// setServer attaches the upstream connection, or closes it and says so
// when pc was closed while it was being dialled.
func (c *pconn) setServer(s net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = s.Close()
		return false
	}
	c.server = s
	return true
}

func (c *pconn) close() {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		server := c.server
		c.mu.Unlock()
		for _, n := range []net.Conn{c.client, server} {
			if n == nil {
				continue
			}
			if t, ok := n.(*net.TCPConn); ok {
				_ = t.SetLinger(0) // RST, as a broken network would
			}
			_ = n.Close()
		}
	})
}

func newProxy(upstream string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, upstream: upstream, conns: map[*pconn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is where the runner connects.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		pc := &pconn{client: c}
		p.mu.Lock()
		p.conns[pc] = struct{}{}
		holed := time.Now().Before(p.holeEnd)
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(pc, holed)
	}
}

func (p *proxy) serve(pc *pconn, holed bool) {
	defer p.wg.Done()
	defer func() {
		pc.close()
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
	}()
	if holed {
		// Accepted into a blackhole: swallow until it ends and closes us.
		pc.swallowed.Store(true)
		buf := make([]byte, 4096)
		for {
			if _, err := pc.client.Read(buf); err != nil {
				return
			}
		}
	}
	s, err := net.DialTimeout("tcp", p.upstream, time.Second)
	if err != nil {
		return // Redis is down: the client sees its connection die
	}
	if !pc.setServer(s) {
		return
	}
	done := make(chan struct{}, 2)
	go func() { p.pump(pc, pc.client, s, true); done <- struct{}{} }()
	go func() { p.pump(pc, s, pc.client, false); done <- struct{}{} }()
	<-done
	pc.close()
	<-done
}

// pump copies one direction, applying the proxy's current faults to each
// chunk read.
func (p *proxy) pump(pc *pconn, src, dst net.Conn, up bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		chunk := buf[:n]
		p.waitStall()
		p.mu.Lock()
		now := time.Now()
		holed, lost := now.Before(p.holeEnd), now.Before(p.lostEnd)
		p.mu.Unlock()
		if holed {
			pc.swallowed.Store(true)
			continue
		}
		if up && lost && callsBatonScript(chunk) {
			pc.dropReply.Store(true)
		}
		if !up && pc.dropReply.Load() {
			return // the reply is lost, the connection with it
		}
		if _, err := dst.Write(chunk); err != nil {
			return
		}
	}
}

var (
	evalsha  = []byte("evalsha")
	batonKey = []byte("baton:{")
)

// callsBatonScript: the chunk runs a baton script (claim, heartbeat, commit,
// fail, release...), so losing its reply tests the scripts' retry handling.
func callsBatonScript(b []byte) bool {
	return bytes.Contains(b, batonKey) && bytes.Contains(bytes.ToLower(b), evalsha)
}

// waitStall blocks while the proxy is stalled.
func (p *proxy) waitStall() {
	for {
		p.mu.Lock()
		end, ch := p.stallEnd, p.stallDone
		p.mu.Unlock()
		if ch == nil || !time.Now().Before(end) {
			return
		}
		<-ch
	}
}

// Reset closes every open connection with an RST.
func (p *proxy) Reset() {
	p.mu.Lock()
	conns := make([]*pconn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// LoseReplies drops the replies of baton script calls for d.
func (p *proxy) LoseReplies(d time.Duration) {
	p.mu.Lock()
	p.lostEnd = time.Now().Add(d)
	p.mu.Unlock()
}

// Stall holds all traffic for d, then delivers it. It returns when the
// stall ends. Whoever takes a stall's channel out of the proxy closes it.
func (p *proxy) Stall(d time.Duration) {
	ch := make(chan struct{})
	p.mu.Lock()
	old := p.stallDone
	p.stallEnd, p.stallDone = time.Now().Add(d), ch
	p.mu.Unlock()
	if old != nil {
		close(old) // its waiters look again and find this stall
	}
	time.Sleep(d)
	p.mu.Lock()
	mine := p.stallDone == ch
	if mine {
		p.stallDone = nil
	}
	p.mu.Unlock()
	if mine {
		close(ch)
	}
}

// Blackhole swallows all traffic for d, then closes the connections that
// lost bytes into it. It returns when the blackhole ends.
func (p *proxy) Blackhole(d time.Duration) {
	p.mu.Lock()
	p.holeEnd = time.Now().Add(d)
	p.mu.Unlock()
	time.Sleep(d)
	p.mu.Lock()
	var broken []*pconn
	for c := range p.conns {
		if c.swallowed.Load() {
			broken = append(broken, c)
		}
	}
	p.mu.Unlock()
	for _, c := range broken {
		c.close()
	}
}

// Heal ends every fault at once.
func (p *proxy) Heal() {
	p.mu.Lock()
	p.holeEnd, p.lostEnd = time.Time{}, time.Time{}
	ch := p.stallDone
	p.stallEnd, p.stallDone = time.Time{}, nil
	p.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// Close stops listening and closes every connection.
func (p *proxy) Close() {
	_ = p.ln.Close()
	p.Heal()
	p.Reset()
	p.wg.Wait()
}
