package kinesistest

import "net/http"

// WithRegion makes the server answer as the regional endpoint of region does: a request
// signed for another region is refused with InvalidSignatureException ("Credential should be
// scoped to a valid region, not '<region>'."), as a regional endpoint or a VPC endpoint of
// the service refuses it. Stream ARNs name the region. Without this option the server
// answers requests signed for any region, naming that region in ARNs.
func WithRegion(region string) Option {
	return func(c *config) { c.region = region }
}

// checkRegion refuses r when the server has a region and r is signed for another.
func (s *Server) checkRegion(r *http.Request) error {
	if s.region == "" {
		return nil
	}
	if got := regionFromAuthorization(r.Header.Get("Authorization")); got != s.region {
		return errorf(codeInvalidSignature, "Credential should be scoped to a valid region, not '%s'. ", got)
	}
	return nil
}
