package runner

// StopCancelPush stops w's cancel watcher, as if every cancel pushed to w
// were lost: only heartbeats bring cancels from then on.
func StopCancelPush(w *Worker) {
	w.cw.stop()
	w.cw.wait()
}

// OpenQueues returns the queues w's last read found not paused: where a
// commit may continue a chain.
func OpenQueues(w *Worker) []string { return w.pause.openQueues() }
