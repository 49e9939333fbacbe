package session

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Secrets at rest: each secret value gets its own random data key (DEK).
// The DEK is sealed with the key-encryption key (KEK, SECRET_KEY) under
// AAD "dek|v1|TEAM"; the value is sealed with the DEK under AAD
// "mcp-secret|v1|TEAM|SERVER|FIELD". A ciphertext copied to another
// workspace, server or field fails to open. Records carry the KEK's id, so
// after a rotation records sealed with an old key still open (OldSecretKeys)
// and are resealed with the current key on their next write.

// DecodeSecretKey decodes SECRET_KEY (standard or URL-safe base64, padded
// or not) and checks it is 32 bytes.
func DecodeSecretKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != 32 {
				return nil, fmt.Errorf("session: secret key is %d bytes, want 32", len(b))
			}
			return b, nil
		}
	}
	return nil, errors.New("session: secret key is not valid base64")
}

// KeyID derives a stable, non-secret id for a key (the default
// SecretKeyID), so rotation needs no naming scheme.
func KeyID(key []byte) string {
	h := sha256.Sum256(append([]byte("bobbin-kek-id|"), key...))
	return "k" + hex.EncodeToString(h[:6])
}

// sealed is one encrypted secret as stored.
type sealed struct {
	V          int    `json:"v"`
	KeyID      string `json:"kek_id"`
	WrappedDEK []byte `json:"wrapped_dek"` // nonce || AES-GCM(KEK, DEK)
	Nonce      []byte `json:"nonce"`
	CT         []byte `json:"ct"`
}

type keyring struct {
	current string
	aeads   map[string]cipher.AEAD
}

func newKeyring(key []byte, id string, old map[string][]byte) (*keyring, error) {
	kr := &keyring{aeads: map[string]cipher.AEAD{}}
	add := func(id string, k []byte) error {
		if len(k) != 32 {
			return fmt.Errorf("session: secret key %q is %d bytes, want 32", id, len(k))
		}
		a, err := newGCM(k)
		if err != nil {
			return err
		}
		kr.aeads[id] = a
		return nil
	}
	for oid, k := range old {
		if err := add(oid, k); err != nil {
			return nil, err
		}
	}
	if key != nil {
		if id == "" {
			id = KeyID(key)
		}
		if err := add(id, key); err != nil {
			return nil, err
		}
		kr.current = id
	}
	return kr, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("session: cipher: %w", err)
	}
	return cipher.NewGCM(b)
}

func dekAAD(team string) []byte { return []byte("dek|v1|" + team) }
func secretAAD(team, server, field string) []byte {
	return []byte("mcp-secret|v1|" + team + "|" + server + "|" + field)
}

func (kr *keyring) seal(team, server, field, plaintext string) (sealed, error) {
	kek := kr.aeads[kr.current]
	if kr.current == "" || kek == nil {
		return sealed{}, ErrNoSecretKey
	}
	dek := make([]byte, 32)
	nonce := make([]byte, 12)
	dekNonce := make([]byte, kek.NonceSize())
	for _, b := range [][]byte{dek, nonce, dekNonce} {
		if _, err := rand.Read(b); err != nil {
			return sealed{}, err
		}
	}
	d, err := newGCM(dek)
	if err != nil {
		return sealed{}, err
	}
	return sealed{
		V:          1,
		KeyID:      kr.current,
		WrappedDEK: kek.Seal(dekNonce, dekNonce, dek, dekAAD(team)),
		Nonce:      nonce,
		CT:         d.Seal(nil, nonce, []byte(plaintext), secretAAD(team, server, field)),
	}, nil
}

func (kr *keyring) open(team, server, field string, s sealed) (string, error) {
	if s.V != 1 {
		return "", fmt.Errorf("unknown sealed-secret version %d", s.V)
	}
	kek := kr.aeads[s.KeyID]
	if kek == nil {
		return "", fmt.Errorf("%w (sealed with key id %q)", ErrNoSecretKey, s.KeyID)
	}
	ns := kek.NonceSize()
	if len(s.WrappedDEK) < ns {
		return "", errors.New("wrapped data key too short")
	}
	dek, err := kek.Open(nil, s.WrappedDEK[:ns], s.WrappedDEK[ns:], dekAAD(team))
	if err != nil {
		return "", errors.New("data key does not open: wrong key or workspace")
	}
	d, err := newGCM(dek)
	if err != nil {
		return "", err
	}
	if len(s.Nonce) != d.NonceSize() {
		return "", errors.New("bad nonce length")
	}
	pt, err := d.Open(nil, s.Nonce, s.CT, secretAAD(team, server, field))
	if err != nil {
		return "", errors.New("secret does not open: it belongs to another workspace, server or field")
	}
	return string(pt), nil
}
