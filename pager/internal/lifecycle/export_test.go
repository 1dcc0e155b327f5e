package lifecycle

// Wait waits for the work in flight without calling any of it off, as
// Close would: the external tests move a fake clock on between waits.
func (l *Lifecycle) Wait() { l.captures.Wait() }
