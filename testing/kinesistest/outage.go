package kinesistest

import (
	"fmt"
	"net"
	"net/http"
)

// Outage is a whole-service failure the server can be put in, for tests of how clients ride
// out Kinesis being unreachable. Unlike Faults, which fail a share of requests, an outage
// fails every request until it ends.
type Outage int

const (
	// NoOutage is normal service.
	NoOutage Outage = iota
	// OutageRefuse stops listening on the plain port and closes every connection, open
	// SubscribeToShard streams included: clients see "connection refused" (or a reset) until
	// the outage ends, when the server listens again on the same address. The TLS port, if
	// any, is left alone.
	OutageRefuse
	// OutageUnavailable answers every Kinesis request with HTTP 503 ServiceUnavailable before
	// any work is done, and ends open SubscribeToShard streams with an
	// InternalFailureException frame. STS calls are answered as usual.
	OutageUnavailable
)

// String names the outage as the kinesis-server flags and admin endpoint do.
func (o Outage) String() string {
	switch o {
	case NoOutage:
		return "none"
	case OutageRefuse:
		return "refuse"
	case OutageUnavailable:
		return "unavailable"
	}
	return fmt.Sprintf("Outage(%d)", int(o))
}

// ParseOutage reads an outage name: "none", "refuse" or "unavailable".
func ParseOutage(name string) (Outage, error) {
	for _, o := range []Outage{NoOutage, OutageRefuse, OutageUnavailable} {
		if o.String() == name {
			return o, nil
		}
	}
	return NoOutage, fmt.Errorf("kinesistest: unknown outage %q; want none, refuse or unavailable", name)
}

// Outage returns the outage the server is in.
func (s *Server) Outage() Outage {
	s.outageMu.Lock()
	defer s.outageMu.Unlock()
	return s.outage
}

// SetOutage puts the server in outage o, or back to normal service with NoOutage. Ending
// OutageRefuse listens again on the port the server had; it fails if another process took
// the port meanwhile, and the server stays refusing then.
func (s *Server) SetOutage(o Outage) error {
	s.outageMu.Lock()
	defer s.outageMu.Unlock()
	if o == s.outage {
		return nil
	}
	select {
	case <-s.quit:
		return fmt.Errorf("kinesistest: SetOutage(%v) after Shutdown", o)
	default:
	}
	if s.outage == OutageRefuse {
		ln, err := net.Listen("tcp", s.ln.Addr().String())
		if err != nil {
			return fmt.Errorf("kinesistest: listening again on %s after the outage: %w", s.ln.Addr(), err)
		}
		s.ln, s.http = ln, s.newHTTPServer()
		go s.http.Serve(ln) //nolint:errcheck // returns ErrServerClosed on Close
	}
	s.outage = o
	switch o {
	case OutageRefuse:
		// Close ends the listener and every connection, requests in flight included.
		s.http.Close() //nolint:errcheck // the listener's close error says nothing useful
		s.endSubscriptions(nil)
	case OutageUnavailable:
		s.endSubscriptions(errorf(codeInternalFailure, "Internal service failure (kinesistest outage)."))
	}
	return nil
}

// endSubscriptions ends every open SubscribeToShard stream with reason as its last frame.
func (s *Server) endSubscriptions(reason *apiError) {
	s.consumerMu.Lock()
	defer s.consumerMu.Unlock()
	for sub := range s.subs {
		sub.end(reason)
	}
}

// unavailable answers a request during OutageUnavailable; it reports false in any other
// state.
func (s *Server) unavailable(w http.ResponseWriter, reqID, op string, c codec) bool {
	s.outageMu.Lock()
	o := s.outage
	s.outageMu.Unlock()
	if o != OutageUnavailable {
		return false
	}
	s.writeError(w, reqID, op, c, errorf(codeServiceUnavailable, "Service unavailable (kinesistest outage)."))
	return true
}
