package kinesisio

import "github.com/beamkinesis/beamkinesis/kinesisio/internal/errkind"

// The errors of Read, ReadBounded and Write that a program can match with errors.Is, to
// tell its users what went wrong and what to do in one line. The error a read or write
// fails with keeps its own message, which names the stream, the shard or the table and the
// fix; these only say which kind of failure it is. The AWS SDK's error stays in the chain
// too, for errors.As (e.g. *types.ResourceNotFoundException or smithy.APIError and its
// code).
//
// A runner that runs the pipeline in another process (Prism, Flink, Dataflow) passes a
// failed job's error back as text: match these where kinesisio's calls run in your process
// (a DoFn's tests, a check before launching), and print the text of a job's failure.
var (
	// ErrStreamNotFound is the error of a call that named a stream that does not exist in
	// the account and region the client reached (Kinesis's ResourceNotFoundException for a
	// ListShards, DescribeStreamSummary or PutRecords call), or of a read whose stream was
	// deleted while it ran. Check the stream's name, and the region (WithRegion, AWS_REGION).
	ErrStreamNotFound = errkind.StreamNotFound

	// ErrNoCredentials is the error of a call for which no AWS credentials could be found or
	// retrieved: none in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), the
	// shared config and credentials files (AWS_PROFILE, WithProfile) or an instance or task
	// role; or a source of them that did not answer.
	ErrNoCredentials = errkind.NoCredentials

	// ErrAccessDenied is the error of a call that AWS refused for its credentials: not
	// allowed by the identity's policies (AccessDeniedException, KMSAccessDeniedException),
	// a key it does not recognise (UnrecognizedClientException), a signature for another
	// region (InvalidSignatureException), an expired session token (ExpiredTokenException),
	// or a role that may not be assumed (WithAssumeRole).
	ErrAccessDenied = errkind.AccessDenied

	// ErrConsumerLimit is the error of a read with WithEnhancedFanOut whose consumer could
	// not be registered because the stream has as many consumers as its limit allows. The
	// message says which limit and how to raise it.
	ErrConsumerLimit = errkind.ConsumerLimit

	// ErrLeaseHeld is the error of a read with WithCheckpointTable that found a shard's
	// lease held by another owner that is alive (another job on the same table), and
	// refuses to read alongside it: stop that job, or take its leases over with
	// WithCheckpointTakeover. (A lease taken over from a running read does not fail it: that
	// read stops reading the shard, says so in an error log line, and goes on with the
	// others.)
	ErrLeaseHeld = errkind.LeaseHeld

	// ErrDataLoss is the error of a read whose position was trimmed by the stream's
	// retention before it was read, or whose shard expired before the read reached its end:
	// records may have been lost. WithSkipOnDataLoss goes on instead.
	ErrDataLoss = errkind.DataLoss

	// ErrNeverReached is the error of a Read that could not once list its stream's shards
	// within WithStartupTimeout of its start: the endpoint, the region or the network is
	// most likely wrong. A read that has listed them once rides out later outages.
	ErrNeverReached = errkind.NeverReached
)
