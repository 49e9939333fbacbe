package bot

import "github.com/bobbinbot/bobbin/session"

// The session store is what cmd/bot passes as Store.
var _ Store = (*session.Store)(nil)
