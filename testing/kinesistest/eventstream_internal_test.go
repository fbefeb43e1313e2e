package kinesistest

import (
	"encoding/hex"
	"testing"
)

// TestInitialResponseFrameMatchesVector checks the encoder against the
// initial-response message decoded with smithy-go's decoder in the protocol
// notes (§3.4): 114 bytes, prelude 00000072 00000060 ab820d9e, message CRC
// e16e66e4.
func TestInitialResponseFrameMatchesVector(t *testing.T) {
	frame, err := initialResponseFrame(codec{})
	if err != nil {
		t.Fatal(err)
	}
	if len(frame) != 114 {
		t.Fatalf("frame has %d bytes, want 114", len(frame))
	}
	if got := hex.EncodeToString(frame[:12]); got != "0000007200000060ab820d9e" {
		t.Errorf("prelude %s, want 0000007200000060ab820d9e", got)
	}
	if got := hex.EncodeToString(frame[110:]); got != "e16e66e4" {
		t.Errorf("message CRC %s, want e16e66e4", got)
	}
	if got := string(frame[108:110]); got != "{}" {
		t.Errorf("payload %q, want {}", got)
	}
}

func TestAppendFrameRefusesOversizedHeaders(t *testing.T) {
	long := make([]byte, maxHeaderValueLen+1)
	if _, err := appendFrame(nil, []frameHeader{{"x", string(long)}}, nil); err == nil {
		t.Error("a 32 KiB header value was accepted")
	}
	if _, err := appendFrame(nil, []frameHeader{{"", "v"}}, nil); err == nil {
		t.Error("an empty header name was accepted")
	}
}
