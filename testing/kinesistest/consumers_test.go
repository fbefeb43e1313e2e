package kinesistest_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// registerConsumer registers a consumer over HTTP and returns it.
func (e *env) registerConsumer(stream, name string) types.Consumer {
	e.t.Helper()
	out, err := e.kc.RegisterStreamConsumer(e.ctx, &kinesis.RegisterStreamConsumerInput{
		StreamARN: aws.String(e.srv.StreamARN(stream)), ConsumerName: aws.String(name),
	})
	if err != nil {
		e.t.Fatalf("RegisterStreamConsumer(%s, %s): %v", stream, name, err)
	}
	return *out.Consumer
}

func (e *env) describeConsumer(arn string) types.ConsumerDescription {
	e.t.Helper()
	out, err := e.kc.DescribeStreamConsumer(e.ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
	if err != nil {
		e.t.Fatalf("DescribeStreamConsumer(%s): %v", arn, err)
	}
	return *out.ConsumerDescription
}

func TestConsumerLifecycle(t *testing.T) {
	e := newEnv(t, kinesistest.WithConsumerActivationDelay(10*time.Second))
	e.createStream("orders", 2)
	streamARN := e.srv.StreamARN("orders")

	c := e.registerConsumer("orders", "app")
	wantARN := streamARN + "/consumer/app:" + strconv.FormatInt(t0.Unix(), 10)
	if aws.ToString(c.ConsumerARN) != wantARN || aws.ToString(c.ConsumerName) != "app" ||
		c.ConsumerStatus != types.ConsumerStatusCreating || !aws.ToTime(c.ConsumerCreationTimestamp).Equal(t0) {
		t.Fatalf("registered %+v, want CREATING consumer app with ARN %s created at %v", c, wantARN, t0)
	}

	// CREATING for the delay, on the server clock, by either address.
	byName, err := e.kc.DescribeStreamConsumer(e.ctx, &kinesis.DescribeStreamConsumerInput{
		StreamARN: aws.String(streamARN), ConsumerName: aws.String("app"),
	})
	if err != nil {
		t.Fatalf("DescribeStreamConsumer by name: %v", err)
	}
	if d := byName.ConsumerDescription; aws.ToString(d.ConsumerARN) != wantARN || d.ConsumerStatus != types.ConsumerStatusCreating ||
		aws.ToString(d.StreamARN) != streamARN {
		t.Fatalf("described by name %+v", d)
	}
	_, err = e.kc.SubscribeToShard(e.ctx, &kinesis.SubscribeToShardInput{
		ConsumerARN: aws.String(wantARN), ShardId: aws.String(sid(0)),
		StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeLatest},
	})
	wantErrorType[*types.ResourceInUseException](t, err)

	e.clock.Advance(9999 * time.Millisecond)
	if d := e.describeConsumer(wantARN); d.ConsumerStatus != types.ConsumerStatusCreating {
		t.Fatalf("status %s after 9.999 s, want CREATING", d.ConsumerStatus)
	}
	e.clock.Advance(time.Millisecond)
	if d := e.describeConsumer(wantARN); d.ConsumerStatus != types.ConsumerStatusActive {
		t.Fatalf("status %s after 10 s, want ACTIVE", d.ConsumerStatus)
	}

	// The same name twice is refused; DescribeStreamSummary counts consumers.
	_, err = e.kc.RegisterStreamConsumer(e.ctx, &kinesis.RegisterStreamConsumerInput{
		StreamARN: aws.String(streamARN), ConsumerName: aws.String("app"),
	})
	wantErrorType[*types.ResourceInUseException](t, err)
	sum, err := e.kc.DescribeStreamSummary(e.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("orders")})
	if err != nil || aws.ToInt32(sum.StreamDescriptionSummary.ConsumerCount) != 1 {
		t.Fatalf("DescribeStreamSummary: %v, ConsumerCount %v, want 1", err, sum)
	}

	// Deregistration: DELETING for the delay, then gone.
	if _, err := e.kc.DeregisterStreamConsumer(e.ctx, &kinesis.DeregisterStreamConsumerInput{ConsumerARN: aws.String(wantARN)}); err != nil {
		t.Fatalf("DeregisterStreamConsumer: %v", err)
	}
	if d := e.describeConsumer(wantARN); d.ConsumerStatus != types.ConsumerStatusDeleting {
		t.Fatalf("status %s after deregistration, want DELETING", d.ConsumerStatus)
	}
	_, err = e.kc.RegisterStreamConsumer(e.ctx, &kinesis.RegisterStreamConsumerInput{
		StreamARN: aws.String(streamARN), ConsumerName: aws.String("app"),
	})
	wantErrorType[*types.ResourceInUseException](t, err)
	e.clock.Advance(10 * time.Second)
	_, err = e.kc.DescribeStreamConsumer(e.ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(wantARN)})
	wantErrorType[*types.ResourceNotFoundException](t, err)
	if cs, err := e.srv.Consumers("orders"); err != nil || len(cs) != 0 {
		t.Fatalf("Consumers after deletion: %v, %v", cs, err)
	}

	// Registered again under the same name, it is a new consumer with a new ARN.
	again := e.registerConsumer("orders", "app")
	if aws.ToString(again.ConsumerARN) == wantARN {
		t.Fatalf("re-registered consumer kept ARN %s", wantARN)
	}
}

func TestListStreamConsumersPages(t *testing.T) {
	e := newEnv(t)
	e.createStream("orders", 1)
	e.createStream("other", 1)
	var want []string
	for i := range 5 {
		name := fmt.Sprintf("c%d", i)
		e.registerConsumer("orders", name)
		want = append(want, name)
		e.clock.Advance(time.Second)
	}
	e.registerConsumer("other", "elsewhere")

	var got []string
	in := &kinesis.ListStreamConsumersInput{StreamARN: aws.String(e.srv.StreamARN("orders")), MaxResults: aws.Int32(2)}
	pages := 0
	for {
		out, err := e.kc.ListStreamConsumers(e.ctx, in)
		if err != nil {
			t.Fatalf("ListStreamConsumers: %v", err)
		}
		pages++
		for _, c := range out.Consumers {
			if c.ConsumerStatus != types.ConsumerStatusActive {
				t.Errorf("consumer %s is %s, want ACTIVE (no activation delay)", *c.ConsumerName, c.ConsumerStatus)
			}
			got = append(got, *c.ConsumerName)
		}
		if out.NextToken == nil {
			break
		}
		in.NextToken = out.NextToken
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || pages != 3 {
		t.Fatalf("listed %v in %d pages, want %v in 3", got, pages, want)
	}

	// Tokens expire after 300 s, like ListShards'.
	out, err := e.kc.ListStreamConsumers(e.ctx, &kinesis.ListStreamConsumersInput{
		StreamARN: aws.String(e.srv.StreamARN("orders")), MaxResults: aws.Int32(1),
	})
	if err != nil || out.NextToken == nil {
		t.Fatalf("first page: %v, %+v", err, out)
	}
	e.clock.Advance(301 * time.Second)
	_, err = e.kc.ListStreamConsumers(e.ctx, &kinesis.ListStreamConsumersInput{
		StreamARN: aws.String(e.srv.StreamARN("orders")), NextToken: out.NextToken,
	})
	wantErrorType[*types.ExpiredNextTokenException](t, err)

	_, err = e.kc.ListStreamConsumers(e.ctx, &kinesis.ListStreamConsumersInput{StreamARN: aws.String(e.srv.StreamARN("nope"))})
	wantErrorType[*types.ResourceNotFoundException](t, err)
}

func TestConsumerQuotas(t *testing.T) {
	t.Run("20 per stream", func(t *testing.T) {
		e := newEnv(t)
		e.createStream("orders", 1)
		for i := range 20 {
			e.registerConsumer("orders", fmt.Sprintf("c%d", i))
		}
		_, err := e.kc.RegisterStreamConsumer(e.ctx, &kinesis.RegisterStreamConsumerInput{
			StreamARN: aws.String(e.srv.StreamARN("orders")), ConsumerName: aws.String("c20"),
		})
		wantErrorType[*types.LimitExceededException](t, err)
	})
	t.Run("5 creating", func(t *testing.T) {
		e := newEnv(t, kinesistest.WithConsumerActivationDelay(time.Minute))
		e.createStream("a", 1)
		e.createStream("b", 1)
		for i := range 5 {
			e.registerConsumer([]string{"a", "b"}[i%2], fmt.Sprintf("c%d", i))
		}
		_, err := e.kc.RegisterStreamConsumer(e.ctx, &kinesis.RegisterStreamConsumerInput{
			StreamARN: aws.String(e.srv.StreamARN("a")), ConsumerName: aws.String("c5"),
		})
		wantErrorType[*types.LimitExceededException](t, err)
		e.clock.Advance(time.Minute)
		e.registerConsumer("a", "c5")
	})
}

func TestConsumerControlPlaneRatesInLimitsMode(t *testing.T) {
	e := newEnv(t, kinesistest.WithLimits())
	e.createStream("orders", 1)
	for i := range 5 {
		e.registerConsumer("orders", fmt.Sprintf("c%d", i))
	}
	// Five registrations a second; the sixth in the same instant is refused.
	_, err := e.kc.RegisterStreamConsumer(e.ctx, &kinesis.RegisterStreamConsumerInput{
		StreamARN: aws.String(e.srv.StreamARN("orders")), ConsumerName: aws.String("c5"),
	})
	wantErrorType[*types.LimitExceededException](t, err)
	e.clock.Advance(time.Second)
	e.registerConsumer("orders", "c5")
}

func TestConsumerAddressingErrors(t *testing.T) {
	e := newEnv(t)
	e.createStream("orders", 1)
	c := e.registerConsumer("orders", "app")

	_, err := e.kc.DescribeStreamConsumer(e.ctx, &kinesis.DescribeStreamConsumerInput{ConsumerName: aws.String("app")})
	wantErrorType[*types.InvalidArgumentException](t, err)
	_, err = e.kc.DescribeStreamConsumer(e.ctx, &kinesis.DescribeStreamConsumerInput{
		ConsumerARN: c.ConsumerARN, ConsumerName: aws.String("other"),
	})
	wantErrorType[*types.InvalidArgumentException](t, err)
	_, err = e.kc.DescribeStreamConsumer(e.ctx, &kinesis.DescribeStreamConsumerInput{
		StreamARN: aws.String(e.srv.StreamARN("orders")), ConsumerName: aws.String("missing"),
	})
	wantErrorType[*types.ResourceNotFoundException](t, err)
	_, err = e.kc.DescribeStreamConsumer(e.ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String("arn:aws:kinesis:us-east-1:123456789012:stream/orders")})
	wantAPIError(t, err, "ValidationException", "")
	_, err = e.kc.RegisterStreamConsumer(e.ctx, &kinesis.RegisterStreamConsumerInput{
		StreamARN: aws.String(e.srv.StreamARN("orders")), ConsumerName: aws.String("bad name"),
	})
	wantAPIError(t, err, "ValidationException", "")

	// Deleting the stream takes its consumers with it.
	if _, err := e.kc.DeleteStream(e.ctx, &kinesis.DeleteStreamInput{StreamName: aws.String("orders")}); err != nil {
		t.Fatal(err)
	}
	e.createStream("orders", 1)
	_, err = e.kc.DescribeStreamConsumer(e.ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: c.ConsumerARN})
	wantErrorType[*types.ResourceNotFoundException](t, err)
}

func TestRegisterConsumerDirectIsActiveAtOnce(t *testing.T) {
	e := newEnv(t, kinesistest.WithConsumerActivationDelay(time.Hour))
	e.createStream("orders", 1)
	arn, err := e.srv.RegisterConsumer("orders", "direct")
	if err != nil {
		t.Fatal(err)
	}
	if d := e.describeConsumer(arn); d.ConsumerStatus != types.ConsumerStatusActive {
		t.Fatalf("status %s, want ACTIVE", d.ConsumerStatus)
	}
	cs, err := e.srv.Consumers("orders")
	if err != nil || len(cs) != 1 || cs[0].ARN != arn || cs[0].Status != "ACTIVE" {
		t.Fatalf("Consumers: %+v, %v", cs, err)
	}
	if _, err := e.srv.RegisterConsumer("orders", "direct"); err == nil {
		t.Fatal("registering the same name twice succeeded")
	}
	if _, err := e.srv.RegisterConsumer("missing", "x"); err == nil {
		t.Fatal("registering on a missing stream succeeded")
	}
}
