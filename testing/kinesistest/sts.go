package kinesistest

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A minimal STS: AssumeRole in the query protocol (form-encoded POST, XML
// answer), on the same ports as Kinesis, so that a client's assume-role path
// (kinesisio.WithAssumeRole, AWS_ENDPOINT_URL_STS) can be proven end to end.
// Any role is assumed; the temporary credentials it returns are accepted by
// the Kinesis operations until they expire. With WithCredentials the
// AssumeRole request itself must be signed (service "sts") with a configured
// key.

const (
	stsNamespace      = "https://sts.amazonaws.com/doc/2011-06-15/"
	formContentType   = "application/x-www-form-urlencoded"
	defaultRoleTTL    = time.Hour
	minRoleTTLSeconds = 900
	maxRoleTTLSeconds = 43200
)

var (
	stsRoleARNPattern = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$`)
	stsSessionPattern = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)
	roleARNParts      = regexp.MustCompile(`:iam::(\d{12}):role/(?:.*/)?([^/]+)$`)
)

// AssumedRole is one AssumeRole call the server answered.
type AssumedRole struct {
	RoleARN     string
	SessionName string
	// AccessKeyID is the temporary access key issued; the caller's own key is
	// CallerKeyID (empty when signatures are not checked).
	AccessKeyID string
	CallerKeyID string
}

// roleLog remembers the roles assumed.
type roleLog struct {
	mu    sync.Mutex
	roles []AssumedRole
}

// AssumedRoles returns the AssumeRole calls the server answered, in order.
func (s *Server) AssumedRoles() []AssumedRole {
	s.roles.mu.Lock()
	defer s.roles.mu.Unlock()
	return append([]AssumedRole(nil), s.roles.roles...)
}

type stsCredentials struct {
	AccessKeyID     string `xml:"AccessKeyId"`
	SecretAccessKey string
	SessionToken    string
	Expiration      string
}

type assumeRoleResponse struct {
	XMLName xml.Name `xml:"AssumeRoleResponse"`
	XMLNS   string   `xml:"xmlns,attr"`
	Result  struct {
		Credentials     stsCredentials
		AssumedRoleUser struct {
			Arn           string
			AssumedRoleID string `xml:"AssumedRoleId"`
		}
	} `xml:"AssumeRoleResult"`
	RequestID string `xml:"ResponseMetadata>RequestId"`
}

type stsErrorResponse struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	XMLNS   string   `xml:"xmlns,attr"`
	Error   struct {
		Type    string
		Code    string
		Message string
	}
	RequestID string `xml:"RequestId"`
}

// isSTSRequest reports whether r is a query-protocol call (STS) rather than
// a Kinesis one.
func isSTSRequest(r *http.Request) bool {
	return r.Header.Get("X-Amz-Target") == "" && r.Method == http.MethodPost &&
		strings.HasPrefix(r.Header.Get("Content-Type"), formContentType)
}

// serveSTS answers one STS call whose body has been read.
func (s *Server) serveSTS(w http.ResponseWriter, r *http.Request, reqID string, body []byte) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		s.writeSTSError(w, reqID, http.StatusBadRequest, "MalformedQueryString", "The request body is not a form: "+err.Error())
		return
	}
	action := form.Get("Action")
	s.countCall("sts:" + action)
	var caller string
	if s.keys != nil {
		if _, err := s.keys.verify(r, body, "sts"); err != nil {
			var ae *apiError
			errors.As(err, &ae)
			code, status := stsAuthCode(ae.code)
			s.writeSTSError(w, reqID, status, code, ae.message)
			return
		}
		a, _ := parseAuthorization(r.Header.Get("Authorization"))
		caller = a.accessKey
	}
	if action != "AssumeRole" {
		s.writeSTSError(w, reqID, http.StatusBadRequest, "InvalidAction", fmt.Sprintf("Could not find operation %s for version %s; this server answers AssumeRole only.", action, form.Get("Version")))
		return
	}
	role, session := form.Get("RoleArn"), form.Get("RoleSessionName")
	if !stsRoleARNPattern.MatchString(role) {
		s.writeSTSError(w, reqID, http.StatusBadRequest, "ValidationError", fmt.Sprintf("%q is not a valid role ARN.", role))
		return
	}
	if !stsSessionPattern.MatchString(session) {
		s.writeSTSError(w, reqID, http.StatusBadRequest, "ValidationError", fmt.Sprintf("1 validation error detected: Value '%s' at 'roleSessionName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]*", session))
		return
	}
	ttl := defaultRoleTTL
	if d := form.Get("DurationSeconds"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < minRoleTTLSeconds || n > maxRoleTTLSeconds {
			s.writeSTSError(w, reqID, http.StatusBadRequest, "ValidationError", fmt.Sprintf("DurationSeconds %q must be a number from %d to %d.", d, minRoleTTLSeconds, maxRoleTTLSeconds))
			return
		}
		ttl = time.Duration(n) * time.Second
	}
	id, sec, err := s.keys.issue(role, session, ttl)
	if err != nil {
		s.writeSTSError(w, reqID, http.StatusInternalServerError, "InternalFailure", err.Error())
		return
	}
	s.roles.mu.Lock()
	s.roles.roles = append(s.roles.roles, AssumedRole{RoleARN: role, SessionName: session, AccessKeyID: id, CallerKeyID: caller})
	s.roles.mu.Unlock()
	s.logf("%s sts:AssumeRole %s as %s -> %s", reqID, role, session, id)

	var out assumeRoleResponse
	out.XMLNS = stsNamespace
	out.Result.Credentials = stsCredentials{AccessKeyID: id, SecretAccessKey: sec.secret, SessionToken: sec.token,
		Expiration: sec.expires.UTC().Format(time.RFC3339)}
	account, name := roleParts(role)
	out.Result.AssumedRoleUser.Arn = fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", account, name, session)
	out.Result.AssumedRoleUser.AssumedRoleID = "AROAKINESISTEST:" + session
	out.RequestID = reqID
	writeXML(w, http.StatusOK, out)
}

// roleParts returns the account and the role name of a role ARN.
func roleParts(arn string) (account, name string) {
	m := roleARNParts.FindStringSubmatch(arn)
	if m == nil {
		return AccountID, "role"
	}
	return m[1], m[2]
}

// stsAuthCode maps an authentication failure to STS's code and status.
func stsAuthCode(code string) (string, int) {
	switch code {
	case codeUnrecognized:
		return "InvalidClientTokenId", http.StatusForbidden
	case codeInvalidSignature:
		return "SignatureDoesNotMatch", http.StatusForbidden
	case codeMissingAuth:
		return "MissingAuthenticationToken", http.StatusForbidden
	case codeExpiredToken:
		return "ExpiredToken", http.StatusForbidden
	default:
		return "IncompleteSignature", http.StatusBadRequest
	}
}

func (s *Server) writeSTSError(w http.ResponseWriter, reqID string, status int, code, message string) {
	s.logf("%s sts -> %d %s: %s", reqID, status, code, message)
	var out stsErrorResponse
	out.XMLNS = stsNamespace
	out.Error.Type, out.Error.Code, out.Error.Message = "Sender", code, message
	if status >= 500 {
		out.Error.Type = "Receiver"
	}
	out.RequestID = reqID
	writeXML(w, status, out)
}

func writeXML(w http.ResponseWriter, status int, v any) {
	b, err := xml.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	b = append([]byte(xml.Header), b...)
	h := w.Header()
	h["Content-Type"] = []string{"text/xml"}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	w.Write(b) //nolint:errcheck // see ServeHTTP
}
