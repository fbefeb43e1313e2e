// Package seqnum compares Kinesis sequence numbers: decimal strings of up to 129 digits that
// do not fit an int64. It is the one comparison the connector's packages share.
package seqnum

// Compare compares two canonical decimal strings (no sign, no leading zeros) numerically and
// returns -1, 0 or +1. Without leading zeros the longer string is the larger number, and
// equal lengths compare digit by digit, which is exact and allocation-free, unlike math/big.
func Compare(a, b string) int {
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
