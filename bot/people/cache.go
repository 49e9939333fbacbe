package people

import (
	"container/list"
	"sync"
	"time"
)

// lru is a bounded cache whose entries expire after ttl: past max entries
// the least recently used one goes.
type lru[V any] struct {
	mu  sync.Mutex
	ttl time.Duration
	max int
	now func() time.Time
	ll  *list.List // front: most recently used
	m   map[string]*list.Element
}

type lruEntry[V any] struct {
	key string
	v   V
	at  time.Time
}

func newLRU[V any](max int, ttl time.Duration, now func() time.Time) *lru[V] {
	return &lru[V]{ttl: ttl, max: max, now: now, ll: list.New(), m: map[string]*list.Element{}}
}

// get returns key's value unless it is missing or expired.
func (c *lru[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	el, ok := c.m[key]
	if !ok {
		return zero, false
	}
	e := el.Value.(*lruEntry[V])
	if c.now().Sub(e.at) >= c.ttl {
		c.ll.Remove(el)
		delete(c.m, key)
		return zero, false
	}
	c.ll.MoveToFront(el)
	return e.v, true
}

// put stores v under key, fresh from now.
func (c *lru[V]) put(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[key]; ok {
		e := el.Value.(*lruEntry[V])
		e.v, e.at = v, c.now()
		c.ll.MoveToFront(el)
		return
	}
	c.m[key] = c.ll.PushFront(&lruEntry[V]{key: key, v: v, at: c.now()})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.m, old.Value.(*lruEntry[V]).key)
	}
}

// len is the number of entries, expired ones included.
func (c *lru[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
