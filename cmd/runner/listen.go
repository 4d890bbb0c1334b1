package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"syscall"

	"github.com/batonrun/baton/runner/admin"
)

// adminPortTries is how many ports after the default admin port a runner
// tries when that one is taken, so that several runners started on one
// host with the defaults all run (8080, 8081, ...).
const adminPortTries = 20

// listenAdmin listens on addr. When addr is the default (ADMIN_ADDR not
// set) and its port is taken, it takes the next free port of the
// following adminPortTries and says so; an address the user chose fails
// when taken, naming the setting.
//
// localhost and *.localhost are bound as 127.0.0.1, never looked up: a
// resolver (DNS above all) could answer with an address other hosts
// reach. Without a token, an address that is not loopback once bound is
// refused, whatever its name said.
func listenAdmin(addr string, isDefault, hasToken bool, log *slog.Logger) (net.Listener, error) {
	if host, port, err := net.SplitHostPort(addr); err == nil {
		addr = net.JoinHostPort(admin.ListenHost(host), port)
	}
	ln, err := listenTCP(addr, isDefault, log)
	if err != nil {
		return nil, err
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !hasToken && (!ok || !tcp.IP.IsLoopback()) {
		_ = ln.Close()
		return nil, fmt.Errorf("ADMIN_ADDR %s was bound to %s, which is not loopback, and API_TOKEN is empty: "+
			"set API_TOKEN, or listen on 127.0.0.1", addr, ln.Addr())
	}
	return ln, nil
}

func listenTCP(addr string, isDefault bool, log *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
		return ln, err
	}
	if !isDefault {
		return nil, fmt.Errorf("ADMIN_ADDR %s is in use (another runner?): choose a free port, or set ADMIN_ADDR= to run without the admin server: %w", addr, err)
	}
	return nextPort(addr, err, log)
}

// nextPort listens on the first free port of the adminPortTries after
// addr's, whose own port is taken (err).
func nextPort(addr string, err error, log *slog.Logger) (net.Listener, error) {
	host, portStr, perr := net.SplitHostPort(addr)
	port, aerr := strconv.Atoi(portStr)
	if perr != nil || aerr != nil {
		return nil, err
	}
	for p := port + 1; p <= port+adminPortTries && p < 65536; p++ {
		ln, lerr := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if lerr == nil {
			log.Warn("admin_port_taken", "wanted", addr, "addr", ln.Addr().String(),
				"note", "the default port is in use (another runner?); set ADMIN_ADDR to choose one")
			return ln, nil
		}
		if !errors.Is(lerr, syscall.EADDRINUSE) {
			return nil, lerr
		}
	}
	return nil, fmt.Errorf("%s and the next %d ports are in use: set ADMIN_ADDR to a free address, or ADMIN_ADDR= to run without the admin server: %w",
		addr, adminPortTries, err)
}

// listenURL is a URL a person can open for a listener's address: an
// unspecified host (0.0.0.0, [::]) becomes 127.0.0.1, which reaches it
// from the same machine.
func listenURL(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return "http://" + addr.String()
	}
	host := tcp.IP.String()
	if tcp.IP == nil || tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}
