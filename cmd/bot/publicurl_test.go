package main

import (
	"strings"
	"testing"
)

func TestPublicURL(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"https://bobbin.example.com/", "https://bobbin.example.com", ""},
		{"https://bobbin.example.com/bot", "https://bobbin.example.com/bot", ""},
		{"bobbin.example.com", "", "PUBLIC_URL must be an http(s) base URL"},
		{"https://bobbin.example.com/?x=1", "", "PUBLIC_URL must be an http(s) base URL"},
	} {
		env := goodEnv()
		env["PUBLIC_URL"] = c.in
		cfg, err := loadConfig(envFunc(env))
		switch {
		case c.err == "" && (err != nil || cfg.PublicURL != c.want):
			t.Errorf("PUBLIC_URL=%q: %q, %v; want %q", c.in, cfg.PublicURL, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("PUBLIC_URL=%q: error %v, want %q", c.in, err, c.err)
		}
	}
}
