package kinesistest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Optional SigV4 verification. With WithCredentials the server recomputes
// each request's signature over the headers the client says it signed, and refuses requests that are unsigned, signed
// with an unknown key, signed wrongly or too far from the wall clock, as the
// service does. Temporary credentials issued by the server's STS AssumeRole
// (sts.go) are accepted with their session token until they expire.

// Error codes of the authentication checks, as the service spells them.
const (
	codeMissingAuth      = "MissingAuthenticationTokenException"
	codeIncompleteSig    = "IncompleteSignatureException"
	codeUnrecognized     = "UnrecognizedClientException"
	codeInvalidSignature = "InvalidSignatureException"
	codeExpiredToken     = "ExpiredTokenException"

	sigV4Algorithm = "AWS4-HMAC-SHA256"
	// maxClockSkew is how far X-Amz-Date may be from the server's wall clock.
	maxClockSkew = 5 * time.Minute
)

// Credential is an access key the server accepts when it checks signatures.
type Credential struct {
	AccessKeyID     string
	SecretAccessKey string
	// SessionToken, when set, makes the key temporary credentials, as an STS session's:
	// requests must carry the token (else UnrecognizedClientException), and after Expires
	// (when set) they are refused with ExpiredTokenException.
	SessionToken string
	Expires      time.Time
}

// secret is one key the server knows: a configured long-term key, or
// temporary credentials it issued.
type secret struct {
	secret  string
	token   string    // the session token temporary credentials must carry
	expires time.Time // zero for long-term keys
	roleARN string    // the role temporary credentials were issued for
	session string    // and their session name
}

// keyring holds the keys the server accepts; nil means signatures are not
// checked.
type keyring struct {
	mu   sync.RWMutex
	keys map[string]*secret
	used map[string]int // access key ID -> requests it signed that passed
}

func newKeyring(creds []Credential) *keyring {
	if creds == nil {
		return nil
	}
	k := &keyring{keys: make(map[string]*secret), used: make(map[string]int)}
	for _, c := range creds {
		k.keys[c.AccessKeyID] = &secret{secret: c.SecretAccessKey, token: c.SessionToken, expires: c.Expires}
	}
	return k
}

func (k *keyring) lookup(id string) *secret {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.keys[id]
}

func (k *keyring) countUse(id string) {
	k.mu.Lock()
	k.used[id]++
	k.mu.Unlock()
}

// issue makes temporary credentials for roleARN, valid for d.
func (k *keyring) issue(roleARN, session string, d time.Duration) (id string, sec *secret, err error) {
	id, err = randomToken("ASIA", 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
	if err != nil {
		return "", nil, err
	}
	s, err := randomToken("", 40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
	if err != nil {
		return "", nil, err
	}
	tok, err := randomToken("kinesistest/", 96, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
	if err != nil {
		return "", nil, err
	}
	sec = &secret{secret: s, token: tok, expires: time.Now().Add(d).Truncate(time.Second), roleARN: roleARN, session: session}
	if k != nil {
		k.mu.Lock()
		k.keys[id] = sec
		k.mu.Unlock()
	}
	return id, sec, nil
}

// randomToken returns prefix and n characters drawn from alphabet.
func randomToken(prefix string, n int, alphabet string) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a credential: %w", err)
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(b), nil
}

// authHeader is a parsed SigV4 Authorization header.
type authHeader struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
}

func parseAuthorization(h string) (authHeader, error) {
	var a authHeader
	alg, rest, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || alg != sigV4Algorithm {
		return a, errorf(codeIncompleteSig, "Authorization header requires the %s algorithm; got %q.", sigV4Algorithm, alg)
	}
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			scope := strings.Split(v, "/")
			if len(scope) != 5 || scope[4] != "aws4_request" {
				return a, errorf(codeIncompleteSig, "Credential %q must be AKID/date/region/service/aws4_request.", v)
			}
			a.accessKey, a.date, a.region, a.service = scope[0], scope[1], scope[2], scope[3]
		case "SignedHeaders":
			a.signedHeaders = strings.Split(v, ";")
		case "Signature":
			a.signature = v
		}
	}
	if a.accessKey == "" || len(a.signedHeaders) == 0 || a.signature == "" {
		return a, errorf(codeIncompleteSig, "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters.")
	}
	return a, nil
}

// verify checks r's signature over body for service. It returns the
// accepted access key's secret, or the *apiError to answer with.
func (k *keyring) verify(r *http.Request, body []byte, service string) (*secret, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, errorf(codeMissingAuth, "Missing Authentication Token")
	}
	a, err := parseAuthorization(h)
	if err != nil {
		return nil, err
	}
	sec := k.lookup(a.accessKey)
	if sec == nil {
		return nil, errorf(codeUnrecognized, "The security token included in the request is invalid.")
	}
	if sec.token != "" {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Amz-Security-Token")), []byte(sec.token)) != 1 {
			return nil, errorf(codeUnrecognized, "The security token included in the request is invalid.")
		}
		if !sec.expires.IsZero() && time.Now().After(sec.expires) {
			return nil, errorf(codeExpiredToken, "The security token included in the request is expired")
		}
	}
	if a.service != service {
		return nil, errorf(codeInvalidSignature, "Credential should be scoped to correct service: '%s'.", service)
	}
	amzDate := r.Header.Get("X-Amz-Date")
	signed, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil {
		return nil, errorf(codeIncompleteSig, "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
	}
	if !strings.HasPrefix(amzDate, a.date) {
		return nil, errorf(codeInvalidSignature, "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%s', from '%s'.", a.date, amzDate[:min(8, len(amzDate))], amzDate)
	}
	if now := time.Now().UTC(); signed.Before(now.Add(-maxClockSkew)) || signed.After(now.Add(maxClockSkew)) {
		return nil, errorf(codeInvalidSignature, "Signature expired: %s is now earlier than %s (%s - 5 min.)",
			amzDate, now.Add(-maxClockSkew).Format("20060102T150405Z"), now.Format("20060102T150405Z"))
	}
	want, err := expectedSignature(r, body, a, sec, signed)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(a.signature)) != 1 {
		return nil, errorf(codeInvalidSignature, "The request signature we calculated does not match the signature you provided. "+
			"Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
	}
	k.countUse(a.accessKey)
	return sec, nil
}

// expectedSignature computes the SigV4 signature of r over body as the
// client should have: the canonical request over exactly the headers the
// client says it signed, in its order. aws-sdk-go-v2's signer cannot serve
// here: it always signs "host", while the JavaScript SDK v3 over HTTP/2 signs
// the ":authority" pseudo-header instead (and no "host").
func expectedSignature(r *http.Request, body []byte, a authHeader, sec *secret, signed time.Time) (string, error) {
	var canon strings.Builder
	canon.WriteString(r.Method)
	canon.WriteByte('\n')
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	canon.WriteString(path)
	canon.WriteByte('\n')
	canon.WriteString(canonicalQuery(r.URL.Query()))
	canon.WriteByte('\n')
	for _, name := range a.signedHeaders {
		var vals []string
		switch name {
		case "host", ":authority":
			// net/http serves both HTTP/1.1's Host and HTTP/2's :authority as
			// the request's Host.
			vals = []string{r.Host}
		default:
			vals = r.Header.Values(name)
			if len(vals) == 0 && name == "content-length" {
				vals = []string{strconv.Itoa(len(body))}
			}
		}
		if len(vals) == 0 {
			return "", errorf(codeInvalidSignature, "The request signature we calculated does not match the signature you provided: signed header %q is missing.", name)
		}
		for i, v := range vals {
			vals[i] = strings.Join(strings.Fields(v), " ")
		}
		canon.WriteString(name)
		canon.WriteByte(':')
		canon.WriteString(strings.Join(vals, ","))
		canon.WriteByte('\n')
	}
	canon.WriteByte('\n')
	canon.WriteString(strings.Join(a.signedHeaders, ";"))
	canon.WriteByte('\n')
	canon.WriteString(sha256Hex(body))

	scope := strings.Join([]string{a.date, a.region, a.service, "aws4_request"}, "/")
	toSign := strings.Join([]string{sigV4Algorithm, signed.UTC().Format("20060102T150405Z"), scope, sha256Hex([]byte(canon.String()))}, "\n")
	key := hmacSHA256([]byte("AWS4"+sec.secret), a.date)
	for _, part := range []string{a.region, a.service, "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	return hex.EncodeToString(hmacSHA256(key, toSign)), nil
}

// canonicalQuery is SigV4's canonical query string: names and values
// URI-encoded, sorted by name then value.
func canonicalQuery(q url.Values) string {
	var parts []string
	for k, vs := range q {
		for _, v := range vs {
			parts = append(parts, uriEncode(k)+"="+uriEncode(v))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, "&")
}

// uriEncode encodes every byte but the unreserved characters, as SigV4 asks.
func uriEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// AccessKeyUses returns, per access key ID, how many requests signed with it
// passed verification (Kinesis and STS requests alike). It is empty unless
// the server checks signatures (WithCredentials).
func (s *Server) AccessKeyUses() map[string]int {
	out := make(map[string]int)
	if s.keys == nil {
		return out
	}
	s.keys.mu.RLock()
	defer s.keys.mu.RUnlock()
	for k, n := range s.keys.used {
		out[k] = n
	}
	return out
}
