package kinesisio

import (
	"fmt"

	"github.com/beamkinesis/beamkinesis/kinesisio/internal/seqnum"
)

// CompareSequenceNumbers compares two Kinesis sequence numbers numerically and returns -1, 0
// or +1. Sequence numbers are decimal strings of up to 129 digits (56 digits in practice), so
// they do not fit an int64; comparing them as plain strings is wrong when their lengths differ.
// An error names the argument that is not a canonical decimal number.
func CompareSequenceNumbers(a, b string) (int, error) {
	if err := validateSequenceNumber(a); err != nil {
		return 0, err
	}
	if err := validateSequenceNumber(b); err != nil {
		return 0, err
	}
	return seqnum.Compare(a, b), nil
}

// validateSequenceNumber checks the service's pattern 0|([1-9]\d{0,128}).
func validateSequenceNumber(s string) error {
	if s == "" {
		return fmt.Errorf("sequence number is empty")
	}
	if len(s) > 129 {
		return fmt.Errorf("sequence number %.20s... has %d digits, more than the 129 Kinesis allows", s, len(s))
	}
	if len(s) > 1 && s[0] == '0' {
		return fmt.Errorf("sequence number %q has a leading zero; Kinesis sequence numbers are canonical decimals", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return fmt.Errorf("sequence number %q is not a decimal number", s)
		}
	}
	return nil
}
