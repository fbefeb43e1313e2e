// Package errkind holds the kinds of kinesisio's errors that a user matches with errors.Is
// (kinesisio exports them as ErrStreamNotFound, ErrAccessDenied, ...), marks an error with
// its kind without changing its message, and sorts the AWS SDK's errors into kinds.
package errkind

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
)

// The kinds. Their messages are only seen when a kind is printed by itself.
var (
	StreamNotFound = errors.New("kinesisio: stream not found")
	NoCredentials  = errors.New("kinesisio: no AWS credentials")
	AccessDenied   = errors.New("kinesisio: access denied")
	ConsumerLimit  = errors.New("kinesisio: the stream's enhanced fan-out consumer limit is reached")
	LeaseHeld      = errors.New("kinesisio: a shard's lease is held by another live owner")
	DataLoss       = errors.New("kinesisio: records lost to the stream's retention")
	NeverReached   = errors.New("kinesisio: the service was never reached")
)

// marked is an error with a kind: its message is the error's own, and errors.Is and
// errors.As see both.
type marked struct{ err, kind error }

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.err, m.kind} }

// Mark returns err marked with kind (nil for nil, err itself when it has the kind).
func Mark(kind, err error) error {
	if err == nil || errors.Is(err, kind) {
		return err
	}
	return &marked{err: err, kind: kind}
}

// accessCodes are the error codes with which AWS refuses a call for its credentials: not
// allowed, not recognised, signed wrongly (also for another region), expired, missing. The
// Security Token Service (an assumed role) spells some of them its own way.
var accessCodes = map[string]bool{
	"AccessDeniedException": true, "AccessDenied": true, "KMSAccessDeniedException": true,
	"UnrecognizedClientException": true, "InvalidClientTokenId": true, "InvalidAccessKeyId": true,
	"InvalidSignatureException": true, "SignatureDoesNotMatch": true,
	"ExpiredTokenException": true, "ExpiredToken": true, "RequestExpired": true,
	"MissingAuthenticationTokenException": true, "MissingAuthenticationToken": true,
	"IncompleteSignatureException": true, "IncompleteSignature": true,
}

// IsAccessCode reports whether code is an AWS error code refusing a call for its
// credentials.
func IsAccessCode(code string) bool { return accessCodes[code] }

// Classify marks an error of a Kinesis call with its kind: AccessDenied for a call refused
// for its credentials, StreamNotFound for a Kinesis ResourceNotFoundException when the call
// names the stream itself (streamCall: ListShards, DescribeStreamSummary, PutRecords; a
// shard or a consumer not found is another matter). Other errors are returned as they are.
func Classify(err error, streamCall bool) error {
	if err == nil {
		return nil
	}
	var api smithy.APIError
	if errors.As(err, &api) && IsAccessCode(api.ErrorCode()) {
		return Mark(AccessDenied, err)
	}
	var notFound *types.ResourceNotFoundException
	if streamCall && errors.As(err, &notFound) {
		return Mark(StreamNotFound, err)
	}
	return err
}

// Credentials marks an error of retrieving credentials: AccessDenied when the service that
// issues them refused (an assumed role the caller may not assume), NoCredentials otherwise
// (none found, or a source that did not answer).
func Credentials(err error) error {
	if err == nil {
		return nil
	}
	var api smithy.APIError
	if errors.As(err, &api) && IsAccessCode(api.ErrorCode()) {
		return Mark(AccessDenied, err)
	}
	return Mark(NoCredentials, err)
}
