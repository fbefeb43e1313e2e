package conformance

import (
	"path/filepath"
	"testing"

	"github.com/beamkinesis/beamkinesis/testing/components"
	"github.com/beamkinesis/beamkinesis/testing/emulators"
	"github.com/beamkinesis/beamkinesis/testing/kinesistest"
)

// The 2026 service scenario: what the service gained in 2025–2026, driven by
// boto3 and the JavaScript SDK v3 as they ship (the pinned versions have every
// operation used here). Each client creates an ON_DEMAND stream with
// RecordDistributionStrategy AUTO and a PROVISIONED one, writes keyless and
// keyed records, reads them back by GetRecords and SubscribeToShard, switches
// the strategy, tries what the service refuses, turns the account's billing
// commitment on, warms the stream, fills its consumer limit (20, then 50) and
// reads a 10 MiB record with the large-read throttle on. The server runs on a
// manual clock, so the commitment's times are known to the millisecond.

// service2026Record is a record as a client read it: key is null when the
// record came without a partition key.
type service2026Record struct {
	Data string  `json:"data"`
	Key  *string `json:"key"`
}

type service2026Warm struct {
	Target  int `json:"target"`
	Current int `json:"current"`
}

// service2026Result is what a client prints.
type service2026Result struct {
	CommitmentBefore      string `json:"commitmentBefore"`
	CreateProvisionedAuto string `json:"createProvisionedAuto"`
	AutoSummary           struct {
		Mode       string           `json:"mode"`
		Strategy   string           `json:"strategy"`
		OpenShards int              `json:"openShards"`
		Warm       *service2026Warm `json:"warm"`
	} `json:"autoSummary"`
	ProvStrategy              string                         `json:"provStrategy"`
	PutShards                 []string                       `json:"putShards"`
	SequenceNumberForOrdering string                         `json:"sequenceNumberForOrdering"`
	AutoReads                 map[string][]service2026Record `json:"autoReads"`
	Subscribed                []service2026Record            `json:"subscribed"`
	AfterSwitch               struct {
		Strategy   string `json:"strategy"`
		Keyless    string `json:"keyless"`
		KeyedShard string `json:"keyedShard"`
	} `json:"afterSwitch"`
	UpdateProvisioned     string `json:"updateProvisioned"`
	WarmWithoutCommitment string `json:"warmWithoutCommitment"`
	Consumer21            string `json:"consumer21"`
	Commitment            struct {
		Status        string `json:"status"`
		StartedMs     *int64 `json:"startedMs"`
		EarliestEndMs *int64 `json:"earliestEndMs"`
		EndedMs       *int64 `json:"endedMs"`
	} `json:"commitment"`
	WarmUpdate struct {
		Stream string           `json:"stream"`
		Warm   *service2026Warm `json:"warm"`
	} `json:"warmUpdate"`
	WarmSummary            *service2026Warm `json:"warmSummary"`
	Consumer51             string           `json:"consumer51"`
	ConsumerCount          int              `json:"consumerCount"`
	CommitmentAfterDisable string           `json:"commitmentAfterDisable"`
	LargeRecordBytes       []int            `json:"largeRecordBytes"`
	AfterLargePage         string           `json:"afterLargePage"`
}

// wantService2026 is what every client must see; prefix is its STREAM.
func wantService2026(prefix string) service2026Result {
	var w service2026Result
	w.CommitmentBefore = "DISABLED"
	w.CreateProvisionedAuto = "InvalidArgumentException"
	w.AutoSummary.Mode, w.AutoSummary.Strategy, w.AutoSummary.OpenShards = "ON_DEMAND", "AUTO", 4
	// Round robin over the four shards; the key and hash key of r5 change nothing.
	shard := func(n int) string {
		return []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002", "shardId-000000000003"}[n]
	}
	w.PutShards = []string{shard(0), shard(1), shard(2), shard(3), shard(0), shard(1), shard(2), shard(3), shard(0)}
	w.SequenceNumberForOrdering = "InvalidArgumentException"
	kept := "kept"
	keyless := func(data ...string) []service2026Record {
		out := make([]service2026Record, len(data))
		for i, d := range data {
			out[i] = service2026Record{Data: d}
		}
		return out
	}
	w.AutoReads = map[string][]service2026Record{
		shard(0): keyless("r0", "r4", "r8"),
		shard(1): {{Data: "r1"}, {Data: "r5", Key: &kept}},
		shard(2): keyless("r2", "r6"),
		shard(3): keyless("r3", "r7"),
	}
	w.Subscribed = w.AutoReads[shard(1)]
	w.AfterSwitch.Strategy, w.AfterSwitch.Keyless, w.AfterSwitch.KeyedShard = "USER_PARTITION_KEY", "ValidationException", shard(0)
	w.UpdateProvisioned = "InvalidArgumentException"
	w.WarmWithoutCommitment = "InvalidArgumentException"
	w.Consumer21 = "LimitExceededException"
	started, earliest := scenarioT0.UnixMilli(), scenarioT0.UnixMilli()+24*3600*1000
	w.Commitment.Status, w.Commitment.StartedMs, w.Commitment.EarliestEndMs = "ENABLED", &started, &earliest
	w.WarmUpdate.Stream = prefix + "-auto"
	w.WarmUpdate.Warm = &service2026Warm{Target: 100, Current: 100}
	w.WarmSummary = &service2026Warm{Target: 100, Current: 100}
	w.Consumer51 = "LimitExceededException"
	w.ConsumerCount = 50
	w.CommitmentAfterDisable = "ENABLED_UNTIL_EARLIEST_ALLOWED_END"
	w.LargeRecordBytes = []int{10 << 20}
	w.AfterLargePage = "ProvisionedThroughputExceededException"
	return w
}

// service2026Server starts the server a client's 2026 scenario runs against.
func service2026Server(t *testing.T) *kinesistest.Server {
	t.Helper()
	return kinesistest.StartT(t, kinesistest.WithClock(kinesistest.NewManualClock(scenarioT0)),
		kinesistest.WithCredentials(scenarioKey), kinesistest.WithLargeReadThrottle())
}

// checkService2026 compares a client's output with what it must see.
func checkService2026(t *testing.T, prefix string, out []byte) {
	t.Helper()
	var got service2026Result
	clientResult(t, out, &got)
	compareResults(t, got, wantService2026(prefix))
}

func TestService2026Boto3(t *testing.T) {
	py := components.PythonT(t)
	srv := service2026Server(t)
	out := runScript(t, scenarioEnv(srv.URL(), "", "boto3"), py, filepath.Join(clientsDir(t), "service2026_boto3.py"))
	checkService2026(t, "boto3", out)
}

func TestService2026JavaScriptV3(t *testing.T) {
	if _, err := emulators.PackageDir("@aws-sdk/client-kinesis"); err != nil {
		emulators.Unavailable(t, err)
	}
	node, err := emulators.Node()
	if err != nil {
		emulators.Unavailable(t, err)
	}
	srv := service2026Server(t)
	env := append(scenarioEnv(srv.URL(), "", "js"), "NODE_PATH="+filepath.Join(emulators.Dir(), "node_modules"))
	out := runScript(t, env, node, filepath.Join(clientsDir(t), "service2026_js.mjs"))
	checkService2026(t, "js", out)
}
