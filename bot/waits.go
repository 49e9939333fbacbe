package bot

import (
	"slices"
	"sync"
)

// personWaits counts the turns running in this process and what those
// waiting on a person wait for (an approval, an answer to a server's
// question). At shutdown, turns that only wait on people are withdrawn at
// once (their prompts say so; the turn resumes after the restart) instead
// of holding the process for half of SHUTDOWN_GRACE.
type personWaits struct {
	mu    sync.Mutex
	turns int
	next  int
	waits map[int]string
}

// turn records a running turn; the returned func ends it.
func (w *personWaits) turn() func() {
	w.mu.Lock()
	w.turns++
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		w.turns--
		w.mu.Unlock()
	}
}

// waiting records that a turn waits on a person for what; the returned
// func ends the wait.
func (w *personWaits) waiting(what string) func() {
	w.mu.Lock()
	if w.waits == nil {
		w.waits = map[int]string{}
	}
	w.next++
	id := w.next
	w.waits[id] = what
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.waits, id)
		w.mu.Unlock()
	}
}

// onlyWaiting reports whether every running turn waits on a person (and
// at least one does), with what they wait for.
func (w *personWaits) onlyWaiting() ([]string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.waits) == 0 || len(w.waits) < w.turns {
		return nil, false
	}
	out := make([]string, 0, len(w.waits))
	for _, s := range w.waits {
		out = append(out, s)
	}
	slices.Sort(out)
	return out, true
}
