package kinesistest

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// streamSpec is a stream WithStream or WithOnDemandStream creates.
type streamSpec struct {
	name     string
	shards   int
	onDemand bool
	strategy types.RecordDistributionStrategy
}

// WithStream makes Start create the provisioned stream name with shards shards, ACTIVE, as
// CreateStream does, before it returns. It may be given more than once.
func WithStream(name string, shards int) Option {
	return func(c *config) { c.streams = append(c.streams, streamSpec{name: name, shards: shards}) }
}

// WithOnDemandStream makes Start create the ON_DEMAND stream name with shards shards and
// the record distribution strategy (empty: the default), as CreateOnDemandStream does,
// before it returns. It may be given more than once.
func WithOnDemandStream(name string, shards int, strategy types.RecordDistributionStrategy) Option {
	return func(c *config) {
		c.streams = append(c.streams, streamSpec{name: name, shards: shards, onDemand: true, strategy: strategy})
	}
}

// create creates st on s.
func (st streamSpec) create(s *Server) error {
	var err error
	if st.onDemand {
		err = s.CreateOnDemandStream(st.name, st.shards, st.strategy)
	} else {
		err = s.CreateStream(st.name, st.shards)
	}
	if err != nil {
		return fmt.Errorf("creating stream %q with %d shards: %w", st.name, st.shards, err)
	}
	return nil
}

// TB is the part of testing.TB that StartT uses. kinesistest does not import package
// testing, because programs embed the server.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// StartT starts a server with opts for the test tb: it fails the test if the server does
// not start, and closes the server when the test ends. With WithStream the server has its
// streams when StartT returns:
//
//	srv := kinesistest.StartT(t, kinesistest.WithStream("orders", 4))
func StartT(tb TB, opts ...Option) *Server {
	tb.Helper()
	srv, err := Start(opts...)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() { srv.Close() })
	return srv
}
