package sloghook

// TimerArmed reports whether h has a timer waiting to log a summary.
func TimerArmed(h *Hook) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.timer != nil
}
