package streamarn

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want ARN
		ok   bool
	}{
		{"arn:aws:kinesis:eu-west-1:123456789012:stream/orders", ARN{"aws", "eu-west-1", "123456789012", "orders"}, true},
		{"arn:aws-cn:kinesis:cn-north-1:210987654321:stream/a.b_c-d", ARN{"aws-cn", "cn-north-1", "210987654321", "a.b_c-d"}, true},
		{"orders", ARN{}, false},
		{"arn:aws:kinesis:eu-west-1:12345:stream/orders", ARN{}, false},                       // short account
		{"arn:aws:kinesis:eu-west-1:123456789012:stream/orders/consumer/app:1", ARN{}, false}, // a consumer ARN
		{"arn:aws:sqs:eu-west-1:123456789012:stream/orders", ARN{}, false},                    // another service
		{"arn:aws:kinesis:eu-west-1:123456789012:deliverystream/orders", ARN{}, false},        // not a stream
	} {
		got, ok := Parse(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestInputAndName(t *testing.T) {
	const arn = "arn:aws:kinesis:us-east-1:123456789012:stream/orders"
	if n, a := Input(arn); n != nil || aws.ToString(a) != arn {
		t.Errorf("Input(ARN) = %v, %v; want nil, the ARN", n, a)
	}
	if n, a := Input("orders"); aws.ToString(n) != "orders" || a != nil {
		t.Errorf("Input(name) = %v, %v; want the name, nil", n, a)
	}
	if Name(arn) != "orders" || Name("orders") != "orders" {
		t.Errorf("Name = %q, %q; want orders twice", Name(arn), Name("orders"))
	}
}
