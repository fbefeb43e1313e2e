package kinesisio

import (
	"fmt"
	"net/url"
	"regexp"
	"time"
)

// The options of the checkpoint table, for Read and ReadBounded: ReadOptions.

var tableNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// WithCheckpointTable keeps each shard's position in the DynamoDB table, laid out as a KCL
// 2.x/3.x lease table (one item per shard, keyed leaseKey = shard id) and created, on-demand,
// if missing. A position is written only after the runner has committed the bundle that
// read it (a commit step behind a fusion break writes it). A job started on the table
// resumes every shard after its committed checkpoint (shards without one start at
// WithStartingPosition; closed shards at SHARD_END are not read again), and Read reads a
// child shard only once each parent's item says SHARD_END. A job holds the leases of the
// shards it reads and renews them (see WithCheckpointTakeover for a second job on the same
// table). The region and credentials are the Kinesis client's. For pipelines that keep
// records in runner state before their sinks, add WithCommitAfterSinks.
func WithCheckpointTable(table string) ReadOption {
	return readOnly{option{name: "WithCheckpointTable", apply: func(c *config) error {
		if !tableNamePattern.MatchString(table) {
			return fmt.Errorf("table name %q is invalid: DynamoDB table names are 3 to 255 characters of a-z, A-Z, 0-9, '_', '.' and '-'", table)
		}
		c.read.checkpointTable = table
		return nil
	}}}
}

// WithCheckpointTableEndpoint sets the DynamoDB endpoint of WithCheckpointTable, e.g.
// "http://127.0.0.1:8000" for a local DynamoDB.
func WithCheckpointTableEndpoint(endpoint string) ReadOption {
	return readOnly{option{name: "WithCheckpointTableEndpoint", apply: func(c *config) error {
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("endpoint %q is not an http(s) URL like \"http://127.0.0.1:8000\"", endpoint)
		}
		c.read.checkpointEndpoint = endpoint
		return nil
	}}}
}

// WithCheckpointTakeover makes a job take over at once the leases it finds in the
// WithCheckpointTable held by another owner (another beamkinesis job, or a KCL worker), live
// owner or not: a redeployment that replaces a running job. The job that held them learns
// it at its next commit or lease renewal (every write is conditional on the lease counter
// and owner), logs it, and stops reading those shards and writing their positions. Records
// it read after its last commit are read again by the new job.
//
// Without it a job refuses to run alongside a live owner. It watches the lease's
// leaseCounter for WithCheckpointLeaseDuration; if the counter moved (the owner commits or
// renews it), the job fails with an error naming the table, the shard and the owner; if it
// stood still, the owner is dead and the lease is taken over, as the KCL takes an expired
// lease. A job started right after another one stopped therefore waits one lease duration.
func WithCheckpointTakeover() ReadOption {
	return readOnly{option{name: "WithCheckpointTakeover", apply: func(c *config) error {
		c.read.checkpointTakeover = true
		return nil
	}}}
}

// WithCheckpointLeaseDuration is how long a lease in the WithCheckpointTable lives without
// being renewed (default 10s, the KCL's failoverTimeMillis): a job renews the leases of the
// shards it reads every third of it, and a lease whose counter did not move for that long
// belongs to a dead owner. It must be at least 300ms.
func WithCheckpointLeaseDuration(d time.Duration) ReadOption {
	return readOnly{option{name: "WithCheckpointLeaseDuration", apply: func(c *config) error {
		if d < 300*time.Millisecond {
			return fmt.Errorf("lease duration %v is too short: it must be at least 300ms", d)
		}
		c.read.leaseDuration = d
		return nil
	}}}
}

// EventTimeFn assigns event times to records under WithCustomWatermarkPolicy. The watermark
// of a shard is the largest event time it has assigned, advanced to now minus the idle
// threshold while the shard is idle. Implementations are serialised with the pipeline as
// JSON, so their configuration must be in exported fields, and their type must be
// registered with beam.RegisterType.
type EventTimeFn interface {
	EventTime(r Record) time.Time
}
