package ask

import (
	"encoding/json"
	"testing"
)

// TestLooksSecret: names that suggest credentials (what mcp and bot each
// matched before: the union) and ordinary names.
func TestLooksSecret(t *testing.T) {
	for _, s := range []string{"password", "Passwd", "passphrase", "passcode", "client_secret", "API key", "api-key", "private_key",
		"access key", "credentials", "PIN", "otp", "cvv", "cvc", "card number", "ssn", "IBAN", "token"} {
		if !LooksSecret(s) {
			t.Errorf("LooksSecret(%q) = false", s)
		}
	}
	for _, s := range []string{"name", "email", "city", "spinner", "count"} {
		if LooksSecret(s) {
			t.Errorf("LooksSecret(%q) = true", s)
		}
	}
}

func TestNumber(t *testing.T) {
	for _, c := range []struct {
		in   any
		want float64
		ok   bool
	}{
		{2.5, 2.5, true}, {float32(1.5), 1.5, true}, {3, 3, true}, {int64(-4), -4, true},
		{json.Number("7.25"), 7.25, true}, {json.Number("x"), 0, false}, {"3", 0, false}, {nil, 0, false},
	} {
		if got, ok := Number(c.in); got != c.want || ok != c.ok {
			t.Errorf("Number(%#v) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
