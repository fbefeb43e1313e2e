package kpl

import (
	"crypto/md5"
	"errors"
	"math/big"
	"math/rand"
	"strings"
	"testing"
)

func toBig(x Uint128) *big.Int {
	b := new(big.Int).SetUint64(x.Hi)
	b.Lsh(b, 64)
	return b.Or(b, new(big.Int).SetUint64(x.Lo))
}

func TestHashPartitionKeyIsMD5ReadBigEndian(t *testing.T) {
	const want = "38317986088707300215492326132921849533" // MD5("pk"), protocol notes §1.7
	if got := HashPartitionKey("pk").String(); got != want {
		t.Fatalf("HashPartitionKey(\"pk\") = %s, want %s", got, want)
	}
	rng := rand.New(rand.NewSource(1))
	for range 1000 {
		pk := randomKey(rng)
		sum := md5.Sum([]byte(pk))
		want := new(big.Int).SetBytes(sum[:])
		if got := toBig(HashPartitionKey(pk)); got.Cmp(want) != 0 {
			t.Fatalf("HashPartitionKey(%q) = %s, want %s", pk, got, want)
		}
	}
}

func TestHashPartitionKeyAcceptsKeysLongerThanTheLimit(t *testing.T) {
	pk := strings.Repeat("x", 5000)
	sum := md5.Sum([]byte(pk))
	if got, want := toBig(HashPartitionKey(pk)), new(big.Int).SetBytes(sum[:]); got.Cmp(want) != 0 {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestParseUint128AcceptsTheWholeHashKeySpace(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Uint128
	}{
		{"0", Uint128{}},
		{"1", Uint128{Lo: 1}},
		{"18446744073709551615", Uint128{Lo: 1<<64 - 1}},
		{"18446744073709551616", Uint128{Hi: 1}},
		{"10000000000000000000", Uint128{Lo: 1e19}},
		{"100000000000000000000000000000000000000", Uint128{Hi: 0x4b3b4ca85a86c47a, Lo: 0x098a224000000000}}, // 10^38
		{"340282366920938463463374607431768211455", MaxUint128},
		{"170141183460469231731687303715884105728", Uint128{Hi: 1 << 63}},
	} {
		got, err := ParseUint128(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseUint128(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if s := got.String(); s != tc.in {
			t.Errorf("%+v.String() = %q, want %q", got, s, tc.in)
		}
	}
}

func TestParseUint128RoundTripsRandomValues(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for range 10000 {
		x := Uint128{Hi: rng.Uint64() >> uint(rng.Intn(65)), Lo: rng.Uint64() >> uint(rng.Intn(65))}
		s := x.String()
		if want := toBig(x).String(); s != want {
			t.Fatalf("%+v.String() = %s, want %s", x, s, want)
		}
		y, err := ParseUint128(s)
		if err != nil || y != x {
			t.Fatalf("ParseUint128(%s) = %+v, %v; want %+v", s, y, err, x)
		}
	}
}

func TestParseUint128RejectsNonCanonicalAndOutOfRange(t *testing.T) {
	for _, tc := range []struct{ in, why string }{
		{"", "empty"},
		{"340282366920938463463374607431768211456", "greater than 2^128-1"}, // 2^128
		{"999999999999999999999999999999999999999", "greater than 2^128-1"}, // 39 nines
		{"1000000000000000000000000000000000000000", "greater than 2^128-1"},
		{"-1", "not a decimal integer"},
		{"+1", "not a decimal integer"},
		{"01", "leading zero"},
		{"00", "leading zero"},
		{"abc", "not a decimal integer"},
		{" 1", "not a decimal integer"},
		{"1 ", "not a decimal integer"},
		{"1e3", "not a decimal integer"},
		{"0x10", "not a decimal integer"},
	} {
		_, err := ParseUint128(tc.in)
		if !errors.Is(err, ErrInvalidHashKey) {
			t.Errorf("ParseUint128(%q) error = %v, want ErrInvalidHashKey", tc.in, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, `"`+tc.in+`"`) || !strings.Contains(msg, tc.why) {
			t.Errorf("ParseUint128(%q) error %q: want it to quote the value and say %q", tc.in, msg, tc.why)
		}
	}
}

func TestUint128CmpOrdersLikeIntegers(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	vals := []Uint128{{}, {Lo: 1}, {Hi: 1}, {Hi: 1, Lo: 1}, MaxUint128}
	for range 200 {
		vals = append(vals, Uint128{Hi: rng.Uint64() % 4, Lo: rng.Uint64() % 4})
	}
	for _, x := range vals {
		for _, y := range vals {
			if got, want := x.Cmp(y), toBig(x).Cmp(toBig(y)); got != want {
				t.Fatalf("%+v.Cmp(%+v) = %d, want %d", x, y, got, want)
			}
		}
	}
}

func TestValidatePartitionKeyCountsUTF16CodeUnits(t *testing.T) {
	for _, tc := range []struct {
		name string
		pk   string
		ok   bool
	}{
		{"empty", "", false},
		{"one byte", "a", true},
		{"256 ASCII", strings.Repeat("a", 256), true},
		{"257 ASCII", strings.Repeat("a", 257), false},
		{"256 two-byte characters", strings.Repeat("é", 256), true},
		{"257 two-byte characters", strings.Repeat("é", 257), false},
		{"256 three-byte characters", strings.Repeat("語", 256), true},
		{"128 emoji are 256 code units", strings.Repeat("😀", 128), true},
		{"129 emoji are 258 code units", strings.Repeat("😀", 129), false},
		{"255 ASCII and an emoji", strings.Repeat("a", 255) + "😀", false},
		{"literal U+FFFD", strings.Repeat("\uFFFD", 200), true},
		{"invalid UTF-8, short", "a\xffb", false},
		{"invalid UTF-8, long", strings.Repeat("é", 200) + "\xff", false},
	} {
		err := ValidatePartitionKey(tc.pk)
		if tc.ok && err != nil {
			t.Errorf("%s: unexpected error %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalidPartitionKey) {
			t.Errorf("%s: error = %v, want ErrInvalidPartitionKey", tc.name, err)
		}
	}
}

func TestUserRecordValidateAndHashKey(t *testing.T) {
	r := UserRecord{PartitionKey: "pk"}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if k, err := r.HashKey(); err != nil || k != HashPartitionKey("pk") {
		t.Fatalf("HashKey() = %v, %v; want MD5 of the partition key", k, err)
	}
	r.ExplicitHashKey = "42"
	if k, err := r.HashKey(); err != nil || k != (Uint128{Lo: 42}) {
		t.Fatalf("HashKey() = %v, %v; want 42", k, err)
	}
	r.ExplicitHashKey = "042"
	if err := r.Validate(); !errors.Is(err, ErrInvalidHashKey) || !strings.Contains(err.Error(), `"042"`) {
		t.Fatalf("Validate() = %v, want ErrInvalidHashKey naming \"042\"", err)
	}
	if _, err := r.HashKey(); !errors.Is(err, ErrInvalidHashKey) {
		t.Fatalf("HashKey() error = %v, want ErrInvalidHashKey", err)
	}
}

// randomKey returns a valid partition key of mixed scripts and lengths.
func randomKey(rng *rand.Rand) string {
	alphabet := []rune("abcXYZ019-_.éß語😀")
	n := 1 + rng.Intn(40)
	if rng.Intn(20) == 0 {
		n = 100 + rng.Intn(28) // near the limit, emoji counting twice
	}
	var sb strings.Builder
	for range n {
		sb.WriteRune(alphabet[rng.Intn(len(alphabet))])
	}
	return sb.String()
}
