package session

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// RouteRedisLogs sends go-redis's own log lines (dial failures while Redis
// is down, pool warnings) to l at warn level instead of stderr. go-redis
// keeps one process-wide logger, so this is for main to call once; no other
// package can, since session is the only importer of go-redis.
func RouteRedisLogs(l *slog.Logger) {
	redis.SetLogger(redisLogger{l})
}

type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.WarnContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}
