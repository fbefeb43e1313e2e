package kinesisio

import (
	"math/big"
	"math/rand"
	"strings"
	"testing"
)

func TestCompareSequenceNumbersOrdersNumericallyNotLexically(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"9", "10", -1},
		{"10", "9", 1},
		{"0", "0", 0},
		{"49590338271490256608559692538361571095921575989136588898", "49590338271490256608559692538361571095921575989136588898", 0},
		{"49590338271490256608559692538361571095921575989136588898", "49590338271490256608559692538361571095921575989136588899", -1},
		{"49590338271490256608559692538361571095921575989136588898", "9959033827149025660855969253836157109592157598913658889", 1},
	}
	for _, c := range cases {
		got, err := CompareSequenceNumbers(c.a, c.b)
		if err != nil {
			t.Fatalf("CompareSequenceNumbers(%q, %q): %v", c.a, c.b, err)
		}
		if got != c.want {
			t.Errorf("CompareSequenceNumbers(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestCompareSequenceNumbersAgreesWithBigInt(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	gen := func() string {
		n := new(big.Int).Rand(rng, new(big.Int).Lsh(big.NewInt(1), uint(1+rng.Intn(186))))
		return n.String()
	}
	for i := 0; i < 5000; i++ {
		a, b := gen(), gen()
		if i%7 == 0 {
			b = a
		}
		ba, _ := new(big.Int).SetString(a, 10)
		bb, _ := new(big.Int).SetString(b, 10)
		got, err := CompareSequenceNumbers(a, b)
		if err != nil {
			t.Fatal(err)
		}
		if want := ba.Cmp(bb); got != want {
			t.Fatalf("CompareSequenceNumbers(%s, %s) = %d, big.Int says %d", a, b, got, want)
		}
	}
}

func TestCompareSequenceNumbersRejectsNonCanonicalInput(t *testing.T) {
	for _, bad := range []string{"", "-1", "01", "12a", " 1", strings.Repeat("9", 130)} {
		if _, err := CompareSequenceNumbers(bad, "1"); err == nil {
			t.Errorf("CompareSequenceNumbers(%q, 1) returned no error", bad)
		}
		if _, err := CompareSequenceNumbers("1", bad); err == nil {
			t.Errorf("CompareSequenceNumbers(1, %q) returned no error", bad)
		}
	}
}
