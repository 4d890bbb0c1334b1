package runner

// StopCancelPush stops w's cancel watcher, as if every cancel pushed to w
// were lost: only heartbeats bring cancels from then on.
func StopCancelPush(w *Worker) {
	w.cw.stop()
	w.cw.wait()
}
