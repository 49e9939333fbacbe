package session

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// takeScript is GCRA (the generic cell rate algorithm) on Redis's clock, so
// all replicas share one budget whatever their own clocks say. KEYS = bucket;
// ARGV = emission interval µs, burst → {1, 0} admitted or {0, retry µs}.
// The stored value is the theoretical arrival time (µs); it expires once the
// bucket is full again.
var takeScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local T = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local allow_at = tat + T - burst * T
if now < allow_at then return {0, allow_at - now} end
local new_tat = tat + T
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.floor((new_tat - now) / 1000) + 1)
return {1, 0}
`)

// Take spends one token of a rate budget shared by all replicas: perMinute
// sustained, up to burst at once. ok is false when the budget is spent;
// retryAfter then says when the next token is due. Bucket names are the
// caller's, namespaced by workspace (e.g. "T123:chat.update").
func (s *Store) Take(ctx context.Context, bucket string, perMinute, burst int) (ok bool, retryAfter time.Duration, err error) {
	if bucket == "" || len(bucket) > 200 || strings.ContainsAny(bucket, "{} \t\r\n") {
		return false, 0, fmt.Errorf("session: invalid rate bucket %q", bucket)
	}
	if perMinute <= 0 {
		return false, 0, fmt.Errorf("session: rate bucket %s: perMinute must be positive", bucket)
	}
	burst = max(burst, 1)
	interval := time.Minute.Microseconds() / int64(perMinute)
	res, err := takeScript.Run(ctx, s.rdb, []string{s.k.rate(bucket)}, interval, burst).Int64Slice()
	if err != nil {
		return false, 0, s.wrap("take "+bucket, err)
	}
	if len(res) != 2 {
		return false, 0, fmt.Errorf("session: take %s: unexpected reply %v", bucket, res)
	}
	return res[0] == 1, time.Duration(res[1]) * time.Microsecond, nil
}
