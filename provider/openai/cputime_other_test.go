//go:build !unix

package openai

import "time"

func cpuTime() time.Duration { return 0 }
