package bot

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestSniffConnFindsSplitMarker checks the too_many_websockets marker is
// seen whatever the read boundaries, and nothing else triggers it.
func TestSniffConnFindsSplitMarker(t *testing.T) {
	frame := `{"type":"disconnect","reason":"too_many_websockets","num_connections":10}`
	other := `{"type":"disconnect","reason":"refresh_requested"} too_many_websocket`
	tests := []struct {
		name, data string
		chunk      int
		want       int
	}{
		{"whole", frame, len(frame), 1},
		{"split every byte", frame, 1, 1},
		{"split in 7s", frame, 7, 1},
		{"other reasons", other, 5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			seen := 0
			c := &sniffConn{Conn: client, onTooMany: func() { seen++ }}
			go func() {
				defer server.Close()
				for i := 0; i < len(tt.data); i += tt.chunk {
					_, _ = server.Write([]byte(tt.data[i:min(i+tt.chunk, len(tt.data))]))
				}
			}()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 3)
			for {
				if _, err := c.Read(buf); err == io.EOF {
					break
				} else if err != nil {
					t.Fatal(err)
				}
			}
			if (seen > 0) != (tt.want > 0) {
				t.Errorf("%q in chunks of %d: marker seen %d times, want %d", tt.data, tt.chunk, seen, tt.want)
			}
		})
	}
}
