package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/bobbinbot/bobbin/agent/servers"
)

// Servers registered from Slack: the Manager owns their record (its JSON,
// Record) and stores it through its RegistrationStore; the bot asks for
// changes (Register, SetScope, Unregister) and never reads the record.

// Registered is one run-time registration (servers.Registration).
type Registered = servers.Registration

// StoredRegistration is a registration as a RegistrationStore keeps it:
// Record is the JSON of a Record, Secrets the header values (decrypted
// here; encrypted at rest, never logged).
type StoredRegistration struct {
	Name      string
	Record    json.RawMessage
	Secrets   map[string]string
	CreatedBy string
}

// RegistrationStore keeps the servers a workspace's admins registered at
// run time (cmd/bot adapts the session store). Its errors reach the
// Manager's callers unchanged (wrapped), so they can tell "not found" or
// "already exists" by the store's own errors.
type RegistrationStore interface {
	// Registrations lists a workspace's registrations; a record that
	// cannot be opened fails the whole call.
	Registrations(ctx context.Context, team string) ([]StoredRegistration, error)
	// Registration reads one; the store's not-found error when none.
	Registration(ctx context.Context, team, name string) (StoredRegistration, error)
	// AddRegistration creates one; the store's already-exists error when
	// the name is taken (of two concurrent adds, one wins).
	AddRegistration(ctx context.Context, team string, r StoredRegistration) error
	// UpdateRegistration replaces the record of name with what update
	// makes of it, compare-and-set: only if the record update read is
	// still the stored one (the store's conflict error otherwise; its
	// not-found error when the registration is gone, which is never
	// brought back).
	UpdateRegistration(ctx context.Context, team, name string, update func(record json.RawMessage) (json.RawMessage, error)) error
	// DeleteRegistration removes one (and its tool pins); the store's
	// not-found error when there is none.
	DeleteRegistration(ctx context.Context, team, name string) error
}

// Record is the JSON of a registration's record. It is a stored format,
// read back by every replica and by older versions: extend, never rename.
// A new record's bytes are exactly these fields in this order; SetScope
// rewrites the record as an object with sorted keys, keeping fields it
// does not know.
type Record struct {
	V   int    `json:"v"`
	URL string `json:"url"`
	// Headers are the header names, sorted; their values are the
	// registration's secrets, keyed by name.
	Headers []string `json:"headers,omitempty"`
	// Tools are the tool names the admin saw when registering.
	Tools []string `json:"tools,omitempty"`
	// Auth is "" (static headers only), AuthWorkspace or AuthUser.
	Auth string `json:"auth,omitempty"`
	// Scope is set by SetScope (absent: no restriction).
	Scope *Scope `json:"scope,omitempty"`
	// Preset names the Options.Presets entry whose OAuth client the
	// server uses (servers.PresetSlack); never the credentials.
	Preset string `json:"preset,omitempty"`
}

// EncodeRegistration is the stored form of r.
func EncodeRegistration(r Registered) (StoredRegistration, error) {
	rec := Record{V: 1, URL: r.URL, Tools: r.Tools, Auth: r.Auth, Preset: r.Preset}
	rec.Headers = slices.Sorted(maps.Keys(r.Headers))
	if !r.Scope.IsZero() {
		sc := r.Scope.Clone()
		rec.Scope = &sc
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return StoredRegistration{}, fmt.Errorf("mcp: registration %s: %w", r.Name, err)
	}
	return StoredRegistration{Name: r.Name, Record: raw, Secrets: r.Headers, CreatedBy: r.CreatedBy}, nil
}

// DecodeRegistration reads a stored registration: its URL, its headers
// (values from the secrets), OAuth mode and scope. A record that does not
// decode, has no URL or lacks a header's value is an error
// (servers.ErrBadRecord): a scope that cannot be read must not become no
// scope.
func DecodeRegistration(s StoredRegistration) (Registered, error) {
	var rec Record
	if err := json.Unmarshal(s.Record, &rec); err != nil {
		return Registered{}, fmt.Errorf("mcp: registration %s: %w: %w", s.Name, servers.ErrBadRecord, err)
	}
	if rec.URL == "" {
		return Registered{}, fmt.Errorf("mcp: registration %s has no URL: %w", s.Name, servers.ErrBadRecord)
	}
	r := Registered{Name: s.Name, URL: rec.URL, Tools: rec.Tools, Auth: rec.Auth, Preset: rec.Preset, CreatedBy: s.CreatedBy}
	if len(rec.Headers) > 0 {
		r.Headers = make(map[string]string, len(rec.Headers))
		for _, h := range rec.Headers {
			v, ok := s.Secrets[h]
			if !ok {
				return Registered{}, fmt.Errorf("mcp: registration %s: header %s has no value: %w", s.Name, h, servers.ErrBadRecord)
			}
			r.Headers[h] = v
		}
	}
	if rec.Scope != nil {
		r.Scope = *rec.Scope
	}
	return r, nil
}

// withScope is record with its "scope" replaced (nil: removed), every
// other field kept as it is.
func withScope(record json.RawMessage, s *Scope) (json.RawMessage, error) {
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(record, &rec); err != nil || rec == nil {
		return nil, fmt.Errorf("mcp: %w: %v", servers.ErrBadRecord, err)
	}
	if s == nil {
		delete(rec, "scope")
	} else {
		raw, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		rec["scope"] = raw
	}
	return json.Marshal(rec)
}

// errNoStore: the Manager has no RegistrationStore.
var errNoStore = fmt.Errorf("mcp: no registration store: servers cannot be registered at run time")

// Register stores a server registered from Slack and makes this replica
// see it at its next use (the others see the workspace's version move).
// The store's errors pass through (name taken, no key for the secrets).
func (m *Manager) Register(ctx context.Context, team string, r Registered) error {
	if m.opts.Store == nil {
		return errNoStore
	}
	s, err := EncodeRegistration(r)
	if err != nil {
		return err
	}
	if err := m.opts.Store.AddRegistration(ctx, team, s); err != nil {
		return fmt.Errorf("mcp: registering %s: %w", r.Name, err)
	}
	m.Invalidate(team)
	return nil
}

// Registered reports whether the workspace registered name from Slack:
// nil when it did, the store's error otherwise (its not-found error when
// it did not; servers of the operator's configuration are not
// registrations).
func (m *Manager) Registered(ctx context.Context, team, name string) error {
	if m.opts.Store == nil {
		return errNoStore
	}
	_, err := m.opts.Store.Registration(ctx, team, name)
	return err
}

// SetScope replaces the scope of a server registered from Slack (nil
// lifts it), compare-and-set on its record, keeping the record's other
// fields; servers.ErrBadRecord when the record does not decode, the
// store's not-found error when the registration is gone.
func (m *Manager) SetScope(ctx context.Context, team, name string, s *Scope) error {
	if m.opts.Store == nil {
		return errNoStore
	}
	err := m.opts.Store.UpdateRegistration(ctx, team, name, func(record json.RawMessage) (json.RawMessage, error) {
		return withScope(record, s)
	})
	if err != nil {
		return fmt.Errorf("mcp: scope of %s: %w", name, err)
	}
	m.Invalidate(team)
	return nil
}

// Unregister removes a server registered from Slack (and its tool pins);
// the store's not-found error when there is none.
func (m *Manager) Unregister(ctx context.Context, team, name string) error {
	if m.opts.Store == nil {
		return errNoStore
	}
	if err := m.opts.Store.DeleteRegistration(ctx, team, name); err != nil {
		return fmt.Errorf("mcp: removing %s: %w", name, err)
	}
	m.Invalidate(team)
	return nil
}

// loadRegistrations reads and decodes the workspace's registrations.
func (m *Manager) loadRegistrations(ctx context.Context, team string) ([]Registered, error) {
	rows, err := m.opts.Store.Registrations(ctx, team)
	if err != nil {
		return nil, err
	}
	out := make([]Registered, 0, len(rows))
	for _, row := range rows {
		r, err := DecodeRegistration(row)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
