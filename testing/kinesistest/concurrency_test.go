package kinesistest_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

func TestConcurrentWritersReadersAndResharding(t *testing.T) {
	e := newEnv(t)
	e.createStream("conc", 4)
	const writers, requests, perRequest = 6, 25, 40
	total := writers * requests * perRequest

	progress := make(chan struct{}, writers*requests)
	var wg sync.WaitGroup
	results := make([][]types.PutRecordsResultEntry, writers)
	errs := make(chan error, writers+4)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range requests {
				recs := make([]types.PutRecordsRequestEntry, perRequest)
				for j := range recs {
					d := fmt.Sprintf("w%d-%d-%d", w, i, j)
					recs[j] = types.PutRecordsRequestEntry{PartitionKey: aws.String(d), Data: []byte(d)}
				}
				out, err := e.kc.PutRecords(e.ctx, &kinesis.PutRecordsInput{StreamName: aws.String("conc"), Records: recs})
				if err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
				results[w] = append(results[w], out.Records...)
				progress <- struct{}{}
			}
		}()
	}
	// The resharder scales while the writers write: after every 25 requests.
	wg.Add(1)
	go func() {
		defer wg.Done()
		targets := []int32{6, 3, 5, 2, 4}
		n := 0
		for range progress {
			n++
			if n%25 == 0 && len(targets) > 0 {
				_, err := e.kc.UpdateShardCount(e.ctx, &kinesis.UpdateShardCountInput{StreamName: aws.String("conc"), TargetShardCount: aws.Int32(targets[0]), ScalingType: types.ScalingTypeUniformScaling})
				if err != nil {
					errs <- fmt.Errorf("resharder: %w", err)
					return
				}
				targets = targets[1:]
			}
			if n == writers*requests {
				return
			}
		}
	}()
	// Readers read the open shards while all this happens.
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				out, err := e.kc.ListShards(e.ctx, &kinesis.ListShardsInput{StreamName: aws.String("conc"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtLatest}})
				if err != nil {
					errs <- fmt.Errorf("reader ListShards: %w", err)
					return
				}
				for _, s := range out.Shards {
					it, err := e.kc.GetShardIterator(e.ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("conc"), ShardId: s.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
					if err != nil {
						errs <- fmt.Errorf("reader GetShardIterator: %w", err)
						return
					}
					if _, err := e.kc.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(100)}); err != nil {
						errs <- fmt.Errorf("reader GetRecords: %w", err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	stored, err := e.srv.StreamRecords("conc")
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != total {
		t.Fatalf("stored %d records, wrote %d", len(stored), total)
	}
	where := map[string]string{}
	for i, r := range stored {
		if where[string(r.Data)] != "" {
			t.Fatalf("record %s stored twice", r.Data)
		}
		where[string(r.Data)] = r.ShardID + "/" + r.SequenceNumber
		if i > 0 && stored[i-1].ShardID == r.ShardID && !seqLess(stored[i-1].SequenceNumber, r.SequenceNumber) {
			t.Fatalf("sequence numbers in %s do not grow: %s then %s", r.ShardID, stored[i-1].SequenceNumber, r.SequenceNumber)
		}
	}
	for w, res := range results {
		for k, r := range res {
			d := fmt.Sprintf("w%d-%d-%d", w, k/perRequest, k%perRequest)
			if got := where[d]; got != *r.ShardId+"/"+*r.SequenceNumber {
				t.Fatalf("record %s reported at %s/%s, stored at %s", d, *r.ShardId, *r.SequenceNumber, got)
			}
		}
	}
}
