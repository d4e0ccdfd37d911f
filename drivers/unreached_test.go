package drivers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

func TestUnreachedIsADialThatFailed(t *testing.T) {
	// A port nothing listens on: the kernel refuses the dial at once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var d net.Dialer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, dialErr := d.DialContext(ctx, "tcp", addr)
	if dialErr == nil {
		t.Fatalf("dialing %s, where nothing listens, succeeded", addr)
	}
	if !Unreached(fmt.Errorf("recording the work request: %w", dialErr)) {
		t.Errorf("a refused dial, wrapped: %v; want Unreached", dialErr)
	}
	// A connection lost after the statement was written: it may have been
	// applied, so it is not "unreached".
	for _, err := range []error{io.ErrUnexpectedEOF, &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")},
		&net.OpError{Op: "write", Net: "tcp", Err: errors.New("broken pipe")}, errors.New("dial tcp: connection refused (only as text)")} {
		if Unreached(err) {
			t.Errorf("%v: Unreached, want not", err)
		}
	}
}
