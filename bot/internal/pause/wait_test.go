package pause

import (
	"context"
	"testing"
	"time"

	"github.com/bobbinbot/bobbin/internal/importcheck"
)

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep with a live context did not report the time passed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Error("Sleep on an ended context reported the time passed")
	}
}

func TestImports(t *testing.T) {
	importcheck.Forbid(t, ".", importcheck.Module, importcheck.SlackGo, importcheck.GoRedis, importcheck.MCPSDK)
}
