package kinesistest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
)

// Shard iterators and paging tokens are opaque to clients, as the service's
// are: base64 of a small payload sealed with an HMAC under a key made when the
// server starts, so a corrupted, hand-made or other server's token is refused.
const macSize = 12

func (s *Server) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(payload)
	return m.Sum(nil)[:macSize]
}

func (s *Server) seal(payload []byte) string {
	return base64.StdEncoding.EncodeToString(append(payload, s.mac(payload)...))
}

// open returns the payload of a sealed token, or false if it is not one.
func (s *Server) open(token string) ([]byte, bool) {
	b, err := base64.StdEncoding.DecodeString(token)
	if err != nil || len(b) <= macSize {
		return nil, false
	}
	payload, sum := b[:len(b)-macSize], b[len(b)-macSize:]
	if !hmac.Equal(sum, s.mac(payload)) {
		return nil, false
	}
	return payload, true
}

// sealJSON seals v, a paging-token payload, as a token.
func (s *Server) sealJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("kinesistest: encoding a paging token: " + err.Error()) // plain structs always encode
	}
	return s.seal(b)
}

// openJSON reads a token made by sealJSON into v.
func (s *Server) openJSON(token string, v any) bool {
	b, ok := s.open(token)
	return ok && json.Unmarshal(b, v) == nil
}
