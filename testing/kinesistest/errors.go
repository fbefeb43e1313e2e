package kinesistest

import (
	"fmt"
	"net/http"
	"strings"
)

// Error codes the server returns, spelled as the service spells them so the
// SDK maps each to its typed error (types.ResourceNotFoundException, ...).
const (
	codeResourceNotFound   = "ResourceNotFoundException"
	codeResourceInUse      = "ResourceInUseException"
	codeInvalidArgument    = "InvalidArgumentException"
	codeValidation         = "ValidationException"
	codeLimitExceeded      = "LimitExceededException"
	codeThroughput         = "ProvisionedThroughputExceededException"
	codeExpiredIterator    = "ExpiredIteratorException"
	codeExpiredNextToken   = "ExpiredNextTokenException"
	codeInternalFailure    = "InternalFailureException"
	codeServiceUnavailable = "ServiceUnavailable"
	codeSerialization      = "SerializationException"
	codeUnknownOperation   = "UnknownOperationException"
	codeDryRun             = "DryRunOperationException"

	// entryInternalFailure is the per-entry PutRecords code; the whole-request
	// exception is InternalFailureException, the entry code is not.
	entryInternalFailure = "InternalFailure"
)

// apiError is an error the server sends to the client as a JSON 1.1 error
// response.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

// errorf builds an apiError with the HTTP status the service uses for code:
// 500 for InternalFailureException, 503 for ServiceUnavailable, 400 otherwise.
func errorf(code, format string, args ...any) *apiError {
	status := http.StatusBadRequest
	switch code {
	case codeInternalFailure:
		status = http.StatusInternalServerError
	case codeServiceUnavailable:
		status = http.StatusServiceUnavailable
	}
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// violations collects model-constraint violations; the service reports all of
// a request's violations together in one ValidationException.
type violations []string

// add records that value, found at member (the service's camelCase path such
// as "records.1.member.partitionKey"), breaks constraint.
func (v *violations) add(value, member, constraint string) {
	*v = append(*v, fmt.Sprintf("Value '%s' at '%s' failed to satisfy constraint: Member must %s", value, member, constraint))
}

// addNull records that the required member is missing.
func (v *violations) addNull(member string) {
	*v = append(*v, fmt.Sprintf("Value null at '%s' failed to satisfy constraint: Member must not be null", member))
}

// err returns the ValidationException for the collected violations, or nil.
func (v violations) err() error {
	switch len(v) {
	case 0:
		return nil
	case 1:
		return errorf(codeValidation, "1 validation error detected: %s", v[0])
	default:
		return errorf(codeValidation, "%d validation errors detected: %s", len(v), strings.Join(v, "; "))
	}
}
