package ask

import "testing"

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
