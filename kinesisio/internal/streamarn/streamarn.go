// Package streamarn reads Kinesis stream ARNs, so that a stream can be addressed by name or
// by ARN (arn:aws:kinesis:us-east-1:123456789012:stream/orders) wherever the API takes
// either StreamName or StreamARN.
package streamarn

import (
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// pattern is a stream ARN in any AWS partition (aws, aws-cn, aws-us-gov, ...).
var pattern = regexp.MustCompile(`^arn:(aws[a-z-]*):kinesis:([a-z0-9]+(?:-[a-z0-9]+)+):([0-9]{12}):stream/([a-zA-Z0-9_.-]{1,128})$`)

// ARN is a parsed stream ARN.
type ARN struct {
	Partition, Region, Account, Name string
}

// Parse parses s as a stream ARN; ok is false when s is not one.
func Parse(s string) (a ARN, ok bool) {
	m := pattern.FindStringSubmatch(s)
	if m == nil {
		return ARN{}, false
	}
	return ARN{Partition: m[1], Region: m[2], Account: m[3], Name: m[4]}, true
}

// Name is the name of stream, a name or an ARN.
func Name(stream string) string {
	if a, ok := Parse(stream); ok {
		return a.Name
	}
	return stream
}

// Input returns the StreamName and StreamARN request members that address stream, a name or
// an ARN: exactly one of them is set.
func Input(stream string) (name, arn *string) {
	if _, ok := Parse(stream); ok {
		return nil, aws.String(stream)
	}
	return aws.String(stream), nil
}

// SummaryInput is the DescribeStreamSummary request for stream, a name or an ARN.
func SummaryInput(stream string) *kinesis.DescribeStreamSummaryInput {
	in := &kinesis.DescribeStreamSummaryInput{}
	in.StreamName, in.StreamARN = Input(stream)
	return in
}
