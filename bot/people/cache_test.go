package people

import (
	"testing"
	"time"
)

func TestLRU(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newLRU[string](2, time.Minute, func() time.Time { return now })
	c.put("a", "1")
	c.put("b", "2")
	if v, ok := c.get("a"); !ok || v != "1" {
		t.Errorf("get(a) = %q, %v", v, ok)
	}
	c.put("c", "3") // evicts b, the least recently used
	if _, ok := c.get("b"); ok {
		t.Error("b survived eviction")
	}
	if c.len() != 2 {
		t.Errorf("len = %d, want 2", c.len())
	}
	now = now.Add(time.Minute)
	if _, ok := c.get("a"); ok {
		t.Error("a survived its TTL")
	}
	c.put("c", "4")
	if v, ok := c.get("c"); !ok || v != "4" {
		t.Errorf("get(c) after put = %q, %v", v, ok)
	}
}
