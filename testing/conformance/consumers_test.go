package conformance

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"
)

var consumerARNPattern = regexp.MustCompile(`^arn:aws:kinesis:us-east-1:\d{12}:stream/[^/]+/consumer/[^:]+:\d+$`)

// ownCodec gives one SubscribeToShard call an event-stream codec of its own
// (the client's codec is shared without synchronisation, aws/smithy-go#714).
func ownCodec(o *kinesis.Options) { o.Protocol = awsjson.New11(schemas.Kinesis_20131202) }

// waitConsumer polls DescribeStreamConsumer until the consumer has status
// want, or, with want "", until it is gone (ResourceNotFoundException).
func (e *env) waitConsumer(t *testing.T, arn string, want types.ConsumerStatus) *types.ConsumerDescription {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := e.c.DescribeStreamConsumer(ctx(t), &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
		switch {
		case want == "" && errorCode(err) == "ResourceNotFoundException":
			return nil
		case err != nil:
			t.Fatalf("DescribeStreamConsumer %s: %v", arn, err)
		case out.ConsumerDescription.ConsumerStatus == want:
			return out.ConsumerDescription
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer %s still %s after 30s, want %q", arn, out.ConsumerDescription.ConsumerStatus, want)
		}
		<-tick.C
	}
}

// TestStreamConsumers: RegisterStreamConsumer, DescribeStreamConsumer,
// ListStreamConsumers, DeregisterStreamConsumer, and SubscribeToShard
// delivering the shard's records in order.
func TestStreamConsumers(t *testing.T) {
	forEachTarget(t, func(t *testing.T, e *env) {
		skipGap(t, e.target, "consumers")
		name := e.newStream(t, 1)
		streamARN := e.waitActive(t, name).StreamARN

		reg, err := e.c.RegisterStreamConsumer(ctx(t), &kinesis.RegisterStreamConsumerInput{StreamARN: streamARN, ConsumerName: aws.String("app-1")})
		if err != nil {
			t.Fatalf("RegisterStreamConsumer: %v", err)
		}
		arn := aws.ToString(reg.Consumer.ConsumerARN)
		if !consumerARNPattern.MatchString(arn) || !strings.Contains(arn, "/"+name+"/consumer/app-1:") {
			t.Errorf("ConsumerARN %q, want arn:aws:kinesis:us-east-1:<account>:stream/%s/consumer/app-1:<n>", arn, name)
		}
		if st := reg.Consumer.ConsumerStatus; st != types.ConsumerStatusCreating && st != types.ConsumerStatusActive {
			t.Errorf("registered consumer status %s, want CREATING or ACTIVE", st)
		}
		d := e.waitConsumer(t, arn, types.ConsumerStatusActive)
		if aws.ToString(d.ConsumerName) != "app-1" || aws.ToString(d.StreamARN) != aws.ToString(streamARN) || aws.ToString(d.ConsumerARN) != arn {
			t.Errorf("DescribeStreamConsumer = name %q stream %q arn %q", aws.ToString(d.ConsumerName), aws.ToString(d.StreamARN), aws.ToString(d.ConsumerARN))
		}
		byName, err := e.c.DescribeStreamConsumer(ctx(t), &kinesis.DescribeStreamConsumerInput{StreamARN: streamARN, ConsumerName: aws.String("app-1")})
		if err != nil {
			t.Errorf("DescribeStreamConsumer by stream and name: %v", err)
		} else if got := aws.ToString(byName.ConsumerDescription.ConsumerARN); got != arn {
			t.Errorf("DescribeStreamConsumer by name gives ARN %q, want %q", got, arn)
		}

		_, err = e.c.RegisterStreamConsumer(ctx(t), &kinesis.RegisterStreamConsumerInput{StreamARN: streamARN, ConsumerName: aws.String("app-1")})
		if got := errorCode(err); got != "ResourceInUseException" {
			t.Errorf("registering app-1 twice: error %q, want ResourceInUseException", got)
		}
		list, err := e.c.ListStreamConsumers(ctx(t), &kinesis.ListStreamConsumersInput{StreamARN: streamARN})
		if err != nil {
			t.Fatalf("ListStreamConsumers: %v", err)
		}
		var names []string
		for _, c := range list.Consumers {
			names = append(names, aws.ToString(c.ConsumerName))
		}
		if !slices.Equal(names, []string{"app-1"}) {
			t.Errorf("ListStreamConsumers = %q, want [app-1]", names)
		}

		t.Run("SubscribeToShard", func(t *testing.T) {
			skipGap(t, e.target, "subscribeToShard")
			var want []string
			for i := range 5 {
				want = append(want, fmt.Sprintf("efo-%d", i))
			}
			var entries []types.PutRecordsRequestEntry
			for _, w := range want {
				entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(w), Data: []byte(w)})
			}
			res := e.put(t, name, entries)
			out, err := e.c.SubscribeToShard(ctx(t), &kinesis.SubscribeToShardInput{
				ConsumerARN: aws.String(arn), ShardId: aws.String("shardId-000000000000"),
				StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon},
			}, ownCodec)
			if err != nil {
				t.Fatalf("SubscribeToShard: %v", err)
			}
			es := out.GetStream()
			defer es.Close()
			var got []string
			var lastCont string
			timeout := time.After(20 * time.Second)
			for len(got) < len(want) {
				select {
				case ev, ok := <-es.Events():
					if !ok {
						t.Fatalf("event stream ended after %d records: %v", len(got), es.Err())
					}
					se, isEvent := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
					if !isEvent {
						t.Fatalf("unexpected event %T", ev)
					}
					for _, r := range se.Value.Records {
						got = append(got, string(r.Data))
					}
					lastCont = aws.ToString(se.Value.ContinuationSequenceNumber)
				case <-timeout:
					t.Fatalf("after 20s only %d of %d records arrived: %q", len(got), len(want), got)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("SubscribeToShard delivered %q, want %q", got, want)
			}
			if last := aws.ToString(res[len(res)-1].SequenceNumber); lastCont != last {
				t.Errorf("ContinuationSequenceNumber after the last record = %s, want its sequence number %s", lastCont, last)
			}
		})

		if _, err := e.c.DeregisterStreamConsumer(ctx(t), &kinesis.DeregisterStreamConsumerInput{ConsumerARN: aws.String(arn)}); err != nil {
			t.Fatalf("DeregisterStreamConsumer: %v", err)
		}
		e.waitConsumer(t, arn, "")
		_, err = e.c.DescribeStreamConsumer(ctx(t), &kinesis.DescribeStreamConsumerInput{StreamARN: streamARN, ConsumerName: aws.String("no-such-consumer")})
		if got := errorCode(err); got != "ResourceNotFoundException" {
			t.Errorf("DescribeStreamConsumer of an unknown consumer: error %q, want ResourceNotFoundException", got)
		}
	})
}
