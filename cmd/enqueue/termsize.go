package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// termSize returns f's terminal size in rows and columns, or 0, 0 when f
// is not a terminal.
func termSize(f *os.File) (rows, cols int) {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0
	}
	return int(ws.Row), int(ws.Col)
}
